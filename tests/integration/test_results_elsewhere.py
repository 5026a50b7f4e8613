"""A results directory outside the checkout (Gadi users keep results on /scratch): the
shipped local sweep plans every input there, and real points run and report there."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import sweeps

REPO = Path(__file__).resolve().parents[2]


def snakemake(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def test_the_shipped_local_sweep_plans_every_input_under_results_elsewhere(tmp_path):
    results = tmp_path / "scratch" / "results"
    # Where jobs can import hoomd (a site module, --sdm conda), the initial states are jobs:
    # a stand-in package on PYTHONPATH answers the planner's question.
    fake = tmp_path / "site"
    (fake / "hoomd").mkdir(parents=True)
    (fake / "hoomd" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    dry = snakemake(
        "--profile", "profiles/local", "-n", "--directory", str(tmp_path / "work"),
        "--config", f"results_dir={results}", cwd=REPO, env=env,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-3000:]
    # The one line the shipped sweep says at load, once per HOOMD-blue study: its memory is not predicted.
    said = [line for line in dry.stderr.splitlines() if line.startswith("sweep ")]
    assert [line.split(":")[1] for line in said] == [" studies.hoomd-wca", " studies.hoomd-wca-weak"], said
    assert all("memory per rank not predicted (HOOMD-blue's" in line for line in said), said
    outputs = re.findall(r"^\s+output: (.+)$", dry.stdout, re.M)
    assert outputs and all(path.startswith(str(results)) for line in outputs for path in line.split(", "))
    states = {f"{results}/assets/hoomd-wca/hard_sphere_{n}_1.0_3.gsd" for n in (2000, 4000)}
    assert states <= {path for line in outputs for path in line.split(", ")}
    assert f"{results}/assets/litgpt-tiny/checkpoint/lit_model.pth" in dry.stdout
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert jobs["hoomd_initial_state"] == "2" and jobs["run_hoomd"] == "8" and jobs["litgpt_tiny_assets"] == "1"


def test_real_points_run_and_report_in_results_elsewhere(tmp_path):
    results = tmp_path / "scratch" / "results"
    sweeps.write(sweeps.sweep("pingpong-tcp", "lammps-tiny", results_dir=str(results)), tmp_path / "sweep.yaml")
    work = tmp_path / "work"
    run = snakemake(
        "--profile", str(REPO / "profiles/local"), "--directory", str(work),
        "--configfile", str(tmp_path / "sweep.yaml"), cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(results.glob("*/runs/**/metrics.json"))]
    assert [(r["point"]["study"], r["status"]) for r in records] == [("md", "ok"), ("pp", "ok"), ("pp", "ok")]
    assert (results / "report" / "index.html").is_file()
    assert not (work / "results").exists() and not (REPO / "results" / "pp").exists()
    # The scaling rule adds the scaling models' columns: one scale, so no model and why.
    scaling = (results / "md" / "scaling.csv").read_text()
    assert "model_status" in scaling.splitlines()[0] and "1 scale: too few to tell p from p log p" in scaling
    assert (results / "report" / "plots" / "md.models.png").is_file()
