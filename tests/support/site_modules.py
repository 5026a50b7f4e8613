"""A site's MPIs as a cluster presents them: Debian's Open MPI 4.1 and MPICH 4.0 (openmpi-bin,
mpich) as Lmod modules `openmpi/<version>` and `mpich/<version>` in a modulefile tree of their
own, each with a prefix whose bin/ holds only that MPI's commands (Debian's are under
/usr/bin with a suffix: mpirun.openmpi, mpiexec.mpich, ...), as `module load openmpi/4.1.5` on
Gadi or ASPIRE 2A puts that MPI first on PATH.

    python tests/support/site_modules.py <tree>      # write it; prints the module names

scripts/test.sh writes the tree, then builds the site's Python environment under it
(scripts/setup.sh with SCALESTUDY_MPI=site); the tests of tests/integration/test_site_mpi.py
load its modules through Lmod. Standard library only.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# Debian's Lmod: the shell function `module` is defined by sourcing this.
LMOD_INIT = "/usr/share/lmod/lmod/init/bash"
# What each MPI's bin/ gets, as the command names a site's module gives them, and Debian's file.
COMMANDS = {
    "openmpi": {
        "mpirun": "mpirun.openmpi",
        "mpiexec": "mpiexec.openmpi",
        "mpicc": "mpicc.openmpi",
        "ompi_info": "ompi_info",
        "orted": "orted",
        "orterun": "orterun",
    },
    "mpich": {
        "mpiexec": "mpiexec.mpich",
        "mpiexec.hydra": "mpiexec.hydra",  # what the shipped cluster files name: only MPICH has it
        "mpirun": "mpirun.mpich",
        "mpicc": "mpicc.mpich",
        "mpichversion": "mpichversion",
        "hydra_pmi_proxy": "hydra_pmi_proxy",
    },
}
# Debian's commands, looked up there alone: a venv's pip MPI may come first on PATH.
DEBIAN_BIN = "/usr/bin"
VERSION_COMMAND = {"openmpi": ["mpirun.openmpi", "--version"], "mpich": ["mpichversion"]}
VERSION = {"openmpi": re.compile(r"\((?:Open MPI|OpenRTE)\)\s+(\S+)"), "mpich": re.compile(r"MPICH Version:\s+(\S+)")}
# The library folders each compiler wrapper links with (`--showme:libdirs`, MPICH's `-show`).
LIBDIRS = {
    "openmpi": [f"{DEBIAN_BIN}/mpicc.openmpi", "--showme:libdirs"],
    "mpich": [f"{DEBIAN_BIN}/mpicc.mpich", "-show"],
}


def installed_version(flavour: str) -> str | None:
    """The version of Debian's `flavour` MPI, from its own command; None where it is not installed."""
    command = shutil.which(VERSION_COMMAND[flavour][0], path=DEBIAN_BIN)
    if not command:
        return None
    out = subprocess.run([command, *VERSION_COMMAND[flavour][1:]], capture_output=True, text=True, timeout=30)
    found = VERSION[flavour].search(out.stdout + out.stderr)
    return found.group(1) if found else None


def loader_default_dirs() -> set[str]:
    """The folders the dynamic loader searches without being told (ld.so.conf and its own)."""
    listed = {"/lib", "/usr/lib", "/lib64", "/usr/lib64"}
    for conf in Path("/etc/ld.so.conf.d").glob("*.conf"):
        listed |= {line.strip() for line in conf.read_text().splitlines() if line.strip().startswith("/")}
    return {os.path.realpath(folder) for folder in listed}


def library_dirs(flavour: str) -> list[str]:
    """The MPI's own library folders a module prepends to LD_LIBRARY_PATH: never one the loader
    searches anyway (Debian's MPICH is in /usr/lib/<arch>), whose every library would then come
    first, e.g. Debian's libpython before a pyenv Python's own (it broke that Python's ssl)."""
    out = subprocess.run(LIBDIRS[flavour], capture_output=True, text=True, timeout=30, check=False).stdout
    if flavour == "openmpi":
        found = out.split()
    else:
        found = [word[2:] for word in out.split() if word.startswith("-L")]
    defaults = loader_default_dirs()
    return [folder for folder in found if os.path.realpath(folder) not in defaults]


def modulefile(flavour: str, version: str, prefix: Path) -> str:
    lines = [
        f"-- Debian's {flavour} {version} as a site's module (tests/support/site_modules.py).",
        f'whatis("{flavour} {version}: Debian\'s package, presented as a site module")',
        'family("mpi")',
        f'prepend_path("PATH", "{prefix / "bin"}")',
        *(f'prepend_path("LD_LIBRARY_PATH", "{d}")' for d in library_dirs(flavour)),
        f'setenv("MPI_HOME", "{prefix}")',
        f'setenv("MPICC", "{prefix / "bin" / "mpicc"}")',
    ]
    return "\n".join(lines) + "\n"


def shell_environment(env: dict[str, str], module_paths=(), load=(), **run) -> dict[str, str]:
    """`env` as a site's login shell has it: Lmod started (MODULESHOME, `module`), `module use` of
    `module_paths`, `module load` of `load` (`run`: subprocess.run's, e.g. the user to be)."""
    # Paths and names quoted, one word each (shlex.join): no shell text.
    steps = [f"source {shlex.quote(LMOD_INIT)}"]
    steps += [shlex.join(["module", "use", *map(str, module_paths)])] if module_paths else []
    steps += [shlex.join(["module", "load", *load])] if load else []
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "; ".join([*steps, "env -0"])],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
        **run,
    )
    return dict(e.decode().split("=", 1) for e in done.stdout.split(b"\0") if b"=" in e)


def write_tree(tree: Path) -> dict[str, str]:
    """Write the modulefile tree (and each MPI's prefix under tree/.prefix); returns flavour ->
    module name of each MPI installed here."""
    tree = Path(tree).resolve()
    written = {}
    for flavour, commands in COMMANDS.items():
        version = installed_version(flavour)
        if version is None:
            continue
        prefix = tree / ".prefix" / f"{flavour}-{version}"
        (prefix / "bin").mkdir(parents=True, exist_ok=True)
        for name, debian in commands.items():
            target = shutil.which(debian, path=DEBIAN_BIN)
            link = prefix / "bin" / name
            if target and not link.is_symlink():
                link.symlink_to(target)
        (tree / flavour).mkdir(parents=True, exist_ok=True)
        (tree / flavour / f"{version}.lua").write_text(modulefile(flavour, version, prefix))
        written[flavour] = f"{flavour}/{version}"
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python {sys.argv[0]} <modulefile tree>")
    for name in write_tree(Path(sys.argv[1])).values():
        print(name)
