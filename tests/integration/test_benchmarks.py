"""Every benchmark still runs on a fresh clone (one broke silently once when apps were
added): each is run small here, and must print its figure and its ratio."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def benchmark(name: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "benchmarks" / name), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_planning_overhead_runs_and_prints_its_ratio():
    run = benchmark("overhead.py", "--only", "b", "--points", "200", "--repeats", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "dry run of 200 points" in run.stdout
    assert "(b) wall ratio " in run.stdout and "(b) CPU ratio " in run.stdout


def test_qstat_per_round_runs_and_prints_its_ratio():
    run = benchmark("qstat_per_round.py", "--jobs", "5", "--rounds", "2", "--seconds-between-rounds", "2.5")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "worst round: 1 qstat" in run.stdout and "ratio to the default" in run.stdout


def test_hoomd_reference_ratio_starts():
    # It needs HOOMD-blue and the reference harness to measure; its imports and options must hold.
    run = benchmark("hoomd_reference_ratio.py", "--help")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "--harness-dir" in run.stdout


def test_report_of_many_runs_runs_and_prints_its_ratios():
    run = benchmark("report_10k.py", "--runs", "200")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "report of 200 runs:" in run.stdout and "(target 15 s; ratio " in run.stdout
    assert "index.html:" in run.stdout and "(target 5 MB; ratio " in run.stdout


def test_torch_memory_model_runs_and_prints_its_ratio():
    run = benchmark("torch_memory_model.py", "--scale", "0.125", "--models", "mlp", "--strategies", "ddp")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "mlp ddp 2 " in run.stdout and "ratio measured/predicted: min " in run.stdout


def test_verdicts_benchmark_runs_and_prints_its_rates():
    run = benchmark("verdicts.py", "--rounds", "4", "--load-on", "0.5", "--load-off", "0.5")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "false-verdict rate: " in run.stdout and "(target <= 5%; ratio " in run.stdout
    assert "detection rate: " in run.stdout and "(target >= 80%; ratio " in run.stdout
