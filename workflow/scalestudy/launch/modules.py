"""The site's module system (Lmod, or Environment Modules): which modules exist, which are
loaded, and the environment `module load` gives.

A site's MPI comes as a module (Gadi: HPC-X's `hpcx-ompi`; ASPIRE 2A: `openmpi/4.1.2-hpe`): its
`mpirun`, its `libmpi` and what was built against it are on PATH and LD_LIBRARY_PATH only once it
is loaded. The batch job script loads the cluster file's `modules` (scheduler.pbs.submit); where
nothing did (a point run by the local profile, or `run-point` by hand, on a site's node), the
runner loads them itself (`load`), the way a login shell would. `module` is a shell function
that a login shell defines (from $MODULESHOME/init/bash): every command here runs in bash,
which sources it, with the module names as arguments, never as text of the script.

Lmod and Environment Modules both keep the loaded modules in LOADEDMODULES (what `module list`
lists) and their home in MODULESHOME; `module is-avail NAME` answers by its exit status (Lmod
8, Environment Modules 4.4).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..model.paths import cluster_file

# How long one call of the module system may take (Lmod reads its cache, or walks MODULEPATH).
MODULE_TIMEOUT_S = 120
# The script every call runs: the system's `module` function, the cluster file's module_paths
# (`module use`; given in MODULE_PATHS_VARIABLE, ':'-separated), then the words of the call.
MODULE_PATHS_VARIABLE = "SCALESTUDY_MODULE_PATHS"
INIT = (
    'source "$MODULESHOME/init/bash" >/dev/null 2>&1 || exit 97\n'
    f'IFS=: read -ra paths <<< "${{{MODULE_PATHS_VARIABLE}:-}}"\n'
    '[ ${#paths[@]} -eq 0 ] || module use "${paths[@]}" || exit 96\n'
)
# Each name after the script is one argument ("$@"): a name from a cluster file is no shell text.
LOAD_AND_PRINT = INIT + 'module load "$@" 1>&2 || exit 98\nenv -0\n'
UNKNOWN = INIT + 'for name in "$@"; do module is-avail "$name" >/dev/null 2>&1 || printf "%s\\n" "$name"; done\n'


class ModuleError(Exception):
    """A module could not be loaded: one line, in the module system's words."""


def module_home(environ: Mapping[str, str] = os.environ) -> str | None:
    """The module system's home ($MODULESHOME with its init/bash), None where there is none."""
    home = environ.get("MODULESHOME")
    if home and (Path(home) / "init" / "bash").is_file():
        return home
    return None


def loaded(environ: Mapping[str, str] = os.environ) -> list[str] | None:
    """The modules loaded in `environ` (`module list`), None where there is no module system."""
    if "LOADEDMODULES" not in environ and module_home(environ) is None:
        return None
    return [name for name in environ.get("LOADEDMODULES", "").split(":") if name]


def is_loaded(name: str, names: Sequence[str]) -> bool:
    """`name` (openmpi, or openmpi/4.1.4) among the loaded `names` (always name/version)."""
    return any(item == name or item.split("/", 1)[0] == name for item in names)


def not_loaded(wanted: Sequence[str], environ: Mapping[str, str] = os.environ) -> list[str]:
    names = loaded(environ) or []
    return [name for name in wanted if not is_loaded(name, names)]


def bash(
    script: str, names: Sequence[str], environ: Mapping[str, str], paths: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script, "bash", *names],
        capture_output=True,
        env={**environ, MODULE_PATHS_VARIABLE: ":".join(paths)},
        timeout=MODULE_TIMEOUT_S,
        check=False,
    )


def one_line(text: str) -> str:
    """The module system's message as one line (Lmod frames it with blank lines and advice)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(("Please check", "It is also", "$ module", "Also make"))]
    return " ".join(said[:3]) or "no message"


def load(names: Sequence[str], environ: Mapping[str, str] = os.environ, paths: Sequence[str] = ()) -> dict[str, str]:
    """`environ` after `module use paths` and `module load names` (nothing to load: `environ` as
    it is). Raises ModuleError where there is no module system or a module does not load."""
    if not names:
        return dict(environ)
    if module_home(environ) is None:
        raise ModuleError(f"no module system here to load {' '.join(names)} (MODULESHOME is not set)")
    try:
        done = bash(LOAD_AND_PRINT, names, environ, paths)
    except (OSError, subprocess.SubprocessError) as error:
        raise ModuleError(f"module load {' '.join(names)}: {error}") from error
    if done.returncode != 0:
        message = one_line(done.stderr.decode(errors="replace"))
        raise ModuleError(f"module load {' '.join(names)} failed: {message}")
    entries = done.stdout.split(b"\0")
    loaded_env = dict(entry.decode(errors="replace").split("=", 1) for entry in entries if b"=" in entry)
    loaded_env.pop(MODULE_PATHS_VARIABLE, None)
    return loaded_env


def unknown(names: Sequence[str], environ: Mapping[str, str] = os.environ, paths: Sequence[str] = ()) -> list[str]:
    """Those of `names` the module system does not have (`module is-avail`); all of them where
    there is no module system. One call for all."""
    if not names:
        return []
    if module_home(environ) is None:
        return list(names)
    done = bash(UNKNOWN, names, environ, paths)
    if done.returncode != 0:
        return list(names)
    return [line for line in done.stdout.decode(errors="replace").splitlines() if line]


def site_problems(
    cluster, launchers: Sequence, app_modules: Sequence[str] = (), environ: Mapping[str, str] = os.environ
) -> list[str]:
    """Before any job is submitted: one line for each module the cluster file names (`modules`,
    and the `app_modules` of the apps to run) that this machine's module system does not have,
    for the want of a module system where one is needed, and for a launcher of the site's MPI
    (`launchers`: those whose `source` is the site) that the modules do not put on PATH."""
    site = [launcher for launcher in launchers if not launcher.from_python_env]
    names = list(dict.fromkeys([*cluster.modules, *app_modules]))
    if not site and not app_modules:
        return []
    where = cluster_file(cluster.name)
    wanted = not_loaded(names, environ)
    if wanted and module_home(environ) is None:
        return [
            f"{where} modules: {' '.join(wanted)} cannot be loaded: this machine has no module system "
            "(MODULESHOME is not set: `module` is defined by a site's login shell); run from the site's "
            "login shell, or, without the site's MPI, set mpi.source: python_env"
        ]
    problems = [
        f"{where} modules: {name!r} is not a module here (`module is-avail {name}` says no); "
        "allowed: a name `module avail` lists"
        for name in unknown(wanted, environ, cluster.module_paths)
    ]
    if problems or not site or not wanted:
        return problems  # nothing to load: the launcher is the shell's (the runner says if it is missing)
    try:
        loaded_env = load(wanted, environ, cluster.module_paths)
    except ModuleError as error:
        return [f"{where} modules: {error}"]
    # The jobs load these modules (the cluster file's, and under env-modules the apps'): the
    # launcher must be one they bring. A machine's own /usr/bin/mpirun found beside modules that
    # load no MPI is not the site's MPI they name; a path (absolute, or the repository's, with a
    # '/') is no module's to bring.
    before = set(environ.get("PATH", "").split(os.pathsep))
    added = os.pathsep.join(d for d in loaded_env.get("PATH", "").split(os.pathsep) if d and d not in before)
    return [
        f"{where} mpi.launcher: {launcher.launcher!r} ({launcher.flavour}) is not on the PATH that "
        f"{' '.join(wanted)} give; allowed: modules that load the site's {launcher.flavour} (its "
        f"{launcher.launcher}), or a launcher's path"
        for launcher in dict.fromkeys(site)
        if "/" not in launcher.launcher and not shutil.which(launcher.launcher, path=added)
    ]
