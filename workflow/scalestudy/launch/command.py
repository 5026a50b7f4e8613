"""The launcher command of a point, built as an argument list.

Nothing here goes through a shell: values from the sweep file become single
arguments. launch.sh is written from the same list with shlex quoting, so it
is both the record of what ran and a way to rerun it by hand.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ..config import placement
from ..config.clusters import MpiLauncher
from ..model.paths import PBS_NODEFILE_COPY, REPO_ROOT
from ..model.point import Point


def allocated_hosts(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Hosts the scheduler gave this job, in order, once each: PBS's node file, else Slurm's
    host list. The runner's way: it runs inside the job, below the scheduler backends, and
    the environment says which scheduler gave it (mpirun reads the same allocation)."""
    nodefile = environ.get("PBS_NODEFILE")
    return nodefile_hosts(environ) if nodefile and Path(nodefile).is_file() else nodelist_hosts(environ)


def nodefile_hosts(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The hosts of $PBS_NODEFILE (a host once per mpiproc or per core), in order, once each."""
    nodefile = environ.get("PBS_NODEFILE")
    if nodefile and Path(nodefile).is_file():
        hosts = [line.strip() for line in Path(nodefile).read_text().splitlines() if line.strip()]
        return list(dict.fromkeys(hosts))
    return []


def nodelist_hosts(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The hosts of $SLURM_JOB_NODELIST (a compressed list such as n[1-2]), in order, once each."""
    nodelist = environ.get("SLURM_JOB_NODELIST")
    if nodelist:
        return list(dict.fromkeys(expand_hostlist(nodelist)))
    return []


def pbs_slots(point: Point, run_dir: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Slots from the point, where PBS's node file gives fewer.

    Open MPI's PBS support (ras pbs) takes its slots from $PBS_NODEFILE, which lists a host
    once per mpiproc of its chunk: a request without `mpiprocs` (Gadi's `-l ncpus=` totals
    on a stock PBS, whose chunk then has mpiprocs=1) gives one slot per node, and `--map-by
    ppr:2:node` fails ("Procs mapped: 1 ... PPR: 2:node", exit 213) whatever `--host` says.
    Gadi lists a host once per CPU; the select dialect says mpiprocs. Where a host of the
    point's is listed fewer than ranks_per_node times, a node file listing each of the
    point's hosts ranks_per_node times is written into the run directory and replaces
    $PBS_NODEFILE for the launcher (MPICH's Hydra takes -hosts and needs none of this)."""
    nodefile = environ.get("PBS_NODEFILE")
    if not nodefile or not Path(nodefile).is_file():
        return {}
    listed = [line.strip() for line in Path(nodefile).read_text().splitlines() if line.strip()]
    hosts = list(dict.fromkeys(listed))[: point.nodes]
    if all(listed.count(host) >= point.ranks_per_node for host in hosts):
        return {}
    own = run_dir / PBS_NODEFILE_COPY
    own.write_text("".join(f"{host}\n" * point.ranks_per_node for host in hosts))
    return {"PBS_NODEFILE": str(own)}


def slurm_allocation(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The Slurm allocation variables mpirun needs, when the environment lost them.

    Snakemake's Slurm job step removes SLURM_* variables other than the job's identity
    (SLURM_JOB_ID, SLURM_JOBID, ...) before it runs a job (so that nested `srun` calls do not
    inherit step settings); Open MPI's mpirun then cannot find the allocation ("unable to find
    SLURM_NODELIST"). They are read back from the controller, once per point: the host list,
    the number of nodes, the tasks per node and the job id under both its names."""
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id or environ.get("SLURM_JOB_NODELIST"):
        return {}
    try:
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return allocation_of_job(out, job_id, environ)


def allocation_of_job(scontrol_line: str, job_id: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """slurm_allocation's variables from `scontrol show job -o <job_id>`'s line."""
    fields = dict(re.findall(r"(\w+)=(\S*)", scontrol_line))
    # NumNodes may be a range ("1-1") in some Slurm versions' output.
    nodes_field = (fields.get("NumNodes") or "0").split("-")[0]
    nodelist, tasks = fields.get("NodeList"), fields.get("NumTasks")
    nodes = int(nodes_field) if nodes_field.isdigit() else 0
    if not nodelist or not nodes:
        return {}
    restored = {"SLURM_JOB_NODELIST": nodelist, "SLURM_NODELIST": nodelist}
    # Open MPI's Slurm support (PRRTE's ras and plm) looks for SLURM_JOBID, not SLURM_JOB_ID:
    # without it mpirun starts the other nodes' daemons over ssh ("Host key verification failed").
    restored["SLURM_JOBID"] = environ.get("SLURM_JOBID") or job_id
    restored["SLURM_JOB_NUM_NODES"] = restored["SLURM_NNODES"] = str(nodes)
    if tasks and tasks.isdigit() and int(tasks) % nodes == 0:
        restored["SLURM_TASKS_PER_NODE"] = f"{int(tasks) // nodes}(x{nodes})"
    return restored


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list: 'gpu[01-03,07],login1' -> gpu01 gpu02 gpu03 gpu07 login1."""
    hosts = []
    for prefix, ranges, suffix, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]([^,]*)|([^,\[\]]+)", text):
        if plain:
            hosts.append(plain)
            continue
        for part in ranges.split(","):
            first, _, last = part.partition("-")
            for number in range(int(first), int(last or first) + 1):
                hosts.append(f"{prefix}{number:0{len(first)}d}{suffix}")
    return hosts


def host_slots(point: Point, hosts: list[str]) -> str:
    """`host:slots,...` for the point's nodes: the host list both Open MPI (--host) and
    Hydra (-hosts) take, ranks_per_node slots on each of the first `nodes` hosts."""
    return ",".join(f"{host}:{point.ranks_per_node}" for host in hosts[: point.nodes])


# Variables of the launcher's own environment that every rank needs and that an ssh launch does
# not carry to the other nodes (Open MPI starts its daemon there, and so the ranks, from a login
# of their own): the Python packages a site module or a conda env put on PYTHONPATH in the job's
# shell (HOOMD-blue's). srun, PBS's tm and MPICH's Hydra carry the whole environment; naming the
# variable there changes nothing.
FORWARDED_FROM_LAUNCHER = ("PYTHONPATH",)


def forwarded_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """Those of FORWARDED_FROM_LAUNCHER that the launcher's environment sets, for every rank."""
    return {name: environ[name] for name in FORWARDED_FROM_LAUNCHER if environ.get(name)}


def mpirun_command(
    point: Point,
    rank_argv: list[str],
    rank_env: Mapping[str, str],
    mpi: MpiLauncher,
    hosts: list[str] | None = None,
) -> list[str]:
    """The launch command in the launcher's own dialect (Open MPI's mpirun or MPICH's Hydra mpiexec)."""
    if mpi.flavour == "mpich":
        return hydra_command(point, rank_argv, rank_env, mpi, hosts)
    # --map-by (ppr:R:node unless the point maps otherwise), --bind-to, --use-hwthread-cpus.
    argv = [mpi.launcher, "-np", str(point.ranks), *placement.openmpi_args(point)]
    if hosts:
        argv += ["--host", host_slots(point, hosts)]
    if mpi.oversubscribe:
        argv.append("--oversubscribe")
    if mpi.allow_run_as_root:
        argv.append("--allow-run-as-root")
    for name, value in point.mpi_flags.items():
        argv += ["--mca", name, value]
    for name, value in {**rank_env, **point.nccl_env}.items():
        argv += ["-x", f"{name}={value}"]
    argv += list(mpi.extra_args)
    return argv + list(rank_argv)


def hydra_command(
    point: Point,
    rank_argv: list[str],
    rank_env: Mapping[str, str],
    mpi: MpiLauncher,
    hosts: list[str] | None = None,
) -> list[str]:
    """MPICH: an MPI flag set is environment variables (MPIR_CVAR_...), passed like every other
    variable with -genv so that launch.sh shows them. Hydra needs no root or oversubscribe switch.
    A 1-node point's proxy is forked (`-launcher fork`): inside a Slurm job Hydra would start
    it with an `srun` of its own, which waits for ever for the CPUs that the `srun -n1` step
    running a 1-rank point holds (scheduler.slurm.mpi_launcher)."""
    argv = [mpi.launcher, "-n", str(point.ranks), "-ppn", str(point.ranks_per_node)]
    if point.nodes == 1:
        argv += ["-launcher", "fork"]
    if hosts:
        argv += ["-hosts", host_slots(point, hosts)]
    argv += placement.hydra_args(point)  # -bind-to (core:T for threads), -map-by
    for name, value in {**rank_env, **point.mpi_flags, **point.nccl_env}.items():
        argv += ["-genv", name, value]
    argv += list(mpi.extra_args)
    return argv + list(rank_argv)


def resolve_launcher(launcher: str, path: str) -> str:
    """An absolute path for launch.sh. A name is looked up on PATH (a site module puts it there);
    a relative path with a '/' is the repository's (e.g. the LAMMPS venv's MPICH mpiexec)."""
    if "/" in launcher:
        return str((REPO_ROOT / launcher).resolve()) if not os.path.isabs(launcher) else launcher
    return shutil.which(launcher, path=path) or launcher


def launch_script(argv: list[str]) -> str:
    return (
        "#!/usr/bin/env bash\n# Written by scalestudy: the exact command this point ran.\nexec "
        + shlex.join(argv)
        + "\n"
    )
