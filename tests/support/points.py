"""Points the tests build by hand: a LitGPT point full of hostile values, and a small
ping-pong point (the cheap real MPI job)."""

from scalestudy.model.point import Point
from scalestudy.study import load

HOSTILE = "'; rm -rf ~"


def point(**changes):
    values = dict(
        study="s",
        app="litgpt",
        scaling="strong",
        nodes=2,
        ranks_per_node=4,
        gpus_per_node=4,
        threads_per_rank=1,
        mpi_flag_set="hostile",
        nccl_env_set="no-ib",
        repeat=1,
        walltime="00:10:00",
        params={
            "method": "full",
            "checkpoint_dir": "/ckpt",
            "data_path": "/d.json",
            "max_steps": 20,
            "global_batch_size": 16,
            "micro_batch_size": 2,
        },
        mpi_flags={"btl": "^ucx", "coll_hcoll_enable": HOSTILE},
        nccl_env={"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "$(touch /tmp/pwned)"},
    )
    values.update(changes)
    return Point(**values)


def pingpong_point(**changes):
    values = dict(
        app="pingpong",
        nodes=1,
        ranks_per_node=2,
        gpus_per_node=0,
        mpi_flag_set="tcp",
        nccl_env_set="no-ib",
        walltime="00:01:00",
        params={"iterations": 50, "warmup": 10, "max_bytes": 4096},
        mpi_flags={"btl": "self,tcp"},
        nccl_env={"NCCL_IB_DISABLE": "1"},
    )
    values.update(changes)
    return point(**values)


def md_config(app="lammps", scaling="strong", **params):
    """A one-study sweep of an MD app (LAMMPS by default) on 1-2 nodes x 1-2 ranks, on a
    cluster of several nodes (Slurm's example file)."""
    params = params or {"N": 4000}
    return {
        "cluster": "slurm",
        "mpi_flag_sets": {
            "default": {},
            "no-ucx": {"btl": "^ucx"},
            "nolocal": {"flavour": "mpich", "MPIR_CVAR_NOLOCAL": 1},
        },
        "studies": {
            "md": {
                "app": app,
                "scaling": scaling,
                "nodes": [1, 2],
                "ranks_per_node": [1, 2],
                "mpi_flags": ["default"],
                "params": params,
            }
        },
    }


def hoomd_points(**params):
    return load(md_config(app="hoomd", **(params or {"N": 4000}))).points
