"""A site as the PBS tests submit to it (a real OpenPBS, one host or the multi-host bed): the
site's own cluster files from the shipped ones, a sweep, the PBS profile with absolute paths, the
environment Snakemake runs with as the ordinary user who submits, and the records it makes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from sweeps import merge

REPO = Path(__file__).resolve().parents[2]
# Where OpenPBS is installed (its INSTALL's prefix; the default of SETUP).
PBS_EXEC = Path("/opt/pbs")
# The project's script that configures an installed OpenPBS for the tests (queues, site
# resources, the walltime fault queue, USER); docs/profiles.md says how to build OpenPBS.
SETUP = "tests/support/openpbs/setup.sh"
# The ordinary user who submits (PBS runs no job as root), made by SETUP.
USER = "scaleuser"
# Running a command as USER, with its own uid, gid and groups (user= alone would keep root's
# groups): subprocess's arguments, and the argv prefix where it passes through `ip netns exec`
# (which must start as root).
AS_USER = {"user": USER, "group": USER, "extra_groups": []}
SETPRIV = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups"]


def user_workdir(prefix: str):
    """A folder the submitting user owns (pytest's tmp_path is root's alone), removed after: a
    fixture's body (`yield from`)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    shutil.chown(folder, USER, USER)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def python_problem(python: str, as_user: dict) -> str | None:
    """Why the submitting user cannot run the venv's Python (None when it can): a Python it
    may not execute at all (a venv made from a Python under /root) is refused by exec before
    any exit code, as a PermissionError."""
    try:
        probe = subprocess.run([python, "-c", "import snakemake, mpi4py"], **as_user, capture_output=True)
    except OSError as error:
        return f"{as_user['user']} cannot run {python} ({error.strerror}: a venv made from a Python under /root?)"
    if probe.returncode != 0:
        return f"{as_user['user']} cannot run {python} (a venv made from a Python under /root?)"
    return None


# MPICH's own flag set: its ranks on one host meet over the network, not shared memory.
MPI_FLAG_SETS = {"default": {}, "mpich-nolocal": {"flavour": "mpich", "MPIR_CVAR_NOLOCAL": 1}}


def setup(
    workdir: Path, cluster: str, studies: dict, site: dict | None = None, nccl_env_sets: dict | None = None
) -> list[str]:
    """The site's cluster file (the shipped one, with this machine's MPI and no modules, `site`
    merged over it), the sweep, and the profile with absolute paths; returns the
    snakemake command."""
    folder = workdir / "site"
    folder.mkdir()
    data = yaml.safe_load((REPO / f"config/clusters/{cluster}.yaml").read_text())
    data.update(modules=[], project="ab12", walltime_margin="00:01:00")
    merge(data, site or {})
    data["mpi"]["source"] = "python_env"
    data["mpi"]["mpich"]["launcher"] = str((REPO / ".venv-lammps/bin/mpiexec").resolve())
    (folder / f"{cluster}.yaml").write_text(yaml.safe_dump(data))
    sweep = {"mpi_flag_sets": MPI_FLAG_SETS, "nccl_env_sets": {"default": {}, **(nccl_env_sets or {})},
             "studies": studies}  # fmt: skip
    (workdir / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    profile = yaml.safe_load((REPO / f"profiles/{cluster}/config.v8+.yaml").read_text())
    scripts = REPO / "profiles/pbs"
    for key in ("cluster-generic-submit-cmd", "cluster-generic-status-cmd", "cluster-generic-cancel-cmd",
                "cluster-generic-sidecar-cmd", "jobscript"):  # fmt: skip
        profile[key] = profile[key].replace("profiles/pbs/", f"{scripts}/")
    profile.update({"seconds-between-status-checks": 3, "latency-wait": 5})
    profile.pop("configfiles"), profile.pop("config")
    (workdir / "profile").mkdir()
    (workdir / "profile/config.v8+.yaml").write_text(yaml.safe_dump(profile))
    for path in workdir.rglob("*"):
        shutil.chown(path, USER, USER)
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
            "--profile", str(workdir / "profile"), "--configfile", str(workdir / "sweep.yaml"),
            "--config", f"cluster={cluster}", f"results_dir={workdir / 'results'}"]  # fmt: skip


def environment(workdir: Path, pbs_bin: list[Path]) -> dict[str, str]:
    """What Snakemake runs with: PBS's commands from `pbs_bin` (first to last), the venv's."""
    return {
        "PATH": ":".join([*map(str, pbs_bin), str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "HOME": str(workdir),
        "PYTHONPATH": str(REPO / "workflow"),
        "SCALESTUDY_CLUSTERS_DIR": str(workdir / "site"),
        "SCALESTUDY_PYTHON": sys.executable,
        "PROJECT": "ab12",
        "HF_HUB_OFFLINE": "1",
    }


def records(workdir: Path) -> dict[str, dict]:
    results = workdir / "results"
    found = sorted(results.rglob("runs/**/metrics.json"))
    return {str(p.relative_to(results)): json.loads(p.read_text()) for p in found}
