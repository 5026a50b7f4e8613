"""Points the tests build by hand: a LitGPT point full of hostile values, a small
ping-pong point (the cheap real MPI job), and points at a given node count as a batch
scheduler sees them (a HOOMD-blue point on whole 48-core nodes, a LitGPT one on 4 GPUs)."""

from scalestudy.config.study import load
from scalestudy.model.point import Point

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


def batch_point(nodes, *, study="hoomd-wca", app="hoomd", ranks_per_node=48, gpus_per_node=0, walltime="00:10:00",
                **more):  # fmt: skip
    return Point(
        study=study,
        app=app,
        scaling="strong",
        nodes=nodes,
        ranks_per_node=ranks_per_node,
        gpus_per_node=gpus_per_node,
        threads_per_rank=more.pop("threads_per_rank", 1),
        mpi_flag_set=more.pop("mpi_flag_set", "default"),
        nccl_env_set=more.pop("nccl_env_set", "default"),
        repeat=1,
        walltime=walltime,
        params={},
        **more,
    )


def gpu_batch_point(nodes, **more):
    more = {"ranks_per_node": 4, "gpus_per_node": 4, **more}
    return batch_point(nodes, study="litgpt-full", app="litgpt", **more)


def batch_script(path, cluster: str, clusters_dir, runs, walltime_s: int = 120, preamble: tuple[str, ...] = ()):
    """A batch script at `path` that runs each (point, run folder) of `runs` one after another
    through `run-point --cluster <cluster>` (the cluster file from `clusters_dir`), as a job runs
    its points. Returns the path."""
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    lines = ["#!/bin/bash", f"export SCALESTUDY_CLUSTERS_DIR={clusters_dir} PYTHONPATH={repo / 'workflow'}",
             *preamble]  # fmt: skip
    for point, folder in runs:
        lines.append(f"{sys.executable} -m scalestudy run-point --point '{point.to_json()}' --cluster {cluster}"
                     f" --walltime-s {walltime_s} --metrics {folder}/metrics.json")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def pack_of_node_counts(folder, cluster: str, clusters_dir, preamble: tuple[str, ...] = ()):
    """A batch script that runs ping-pong points of 2, 1 and 2 nodes one after another in one
    2-node allocation (as a pack's job does); their records in folder/point{2,3,4}/ (the 1-node
    point's in point3). Returns the script."""
    # Ping-pong needs 2 ranks: on 1 node both, on 2 nodes one each.
    runs = [(pingpong_point(study="pack", nodes=nodes, ranks_per_node=3 - nodes, repeat=i), folder / f"point{i}")
            for i, nodes in enumerate((2, 1, 2), start=2)]  # fmt: skip
    return batch_script(folder / "pack.sh", cluster, clusters_dir, runs, preamble=preamble)


def assert_pack_ran_on_its_hosts(folder, job_id: str, names: list[str]) -> None:
    """The points of `pack_of_node_counts` ended ok in the job `job_id` of hosts `names`: the 2-node
    points on both hosts in order, the 1-node point's 2 ranks on the first."""
    import json

    first, one, second = (json.loads((folder / f"point{i}/metrics.json").read_text()) for i in (2, 3, 4))
    for record in (first, one, second):
        assert record["status"] == "ok", record["reason"]
        assert record["provenance"]["job_id"] == job_id
    hosts = [[rank["host"] for rank in sorted(r["provenance"]["ranks"], key=lambda rank: rank["rank"])]
             for r in (first, one, second)]  # fmt: skip
    assert hosts == [names, [names[0]] * 2, names], hosts
    assert f"--host {names[0]}:2 " in (folder / "point3/launch.sh").read_text()
