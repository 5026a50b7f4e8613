"""HOOMD-blue through the real workflow: the initial state is made once for every point
that shares its N (planned once; made once and read-only with a real HOOMD-blue), and the
points measure steps/s on 1 and 2 ranks. Without HOOMD-blue the real run is skipped, and
the not-installed path is covered by test_e2e."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
HOOMD = importlib.util.find_spec("hoomd") is not None
SHARED_N = 1000
STEPS = {"warmup_steps": 100, "benchmark_steps": 500, "repeat": 2}


def snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    results = workdir / "results"
    overlay = {
        "results_dir": str(results),
        "studies": {
            # Strong at 1 and 2 ranks, weak at 2 ranks x 500: three points with N = 1000.
            "md-strong": {"app": "hoomd", "nodes": [1], "ranks_per_node": [1, 2], "params": {"N": SHARED_N, **STEPS}},
            "md-weak": {
                "app": "hoomd",
                "scaling": "weak",
                "nodes": [1],
                "ranks_per_node": [2],
                "params": {"particles_per_rank": SHARED_N // 2, **STEPS},
            },
        },
    }
    (workdir / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    targets = [str(results / f"{study}/runs.csv") for study in ("md-strong", "md-weak")]
    configs = [str(REPO / "config/sweep.yaml"), str(REPO / "config/local.yaml"), str(workdir / "overlay.yaml")]
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--profile", str(REPO / "profiles/local"), *targets, *args, "--configfile", *configs]  # fmt: skip
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=900, env=env)


def job_counts(result: subprocess.CompletedProcess) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout + result.stderr, re.M))


def test_initial_state_is_planned_once_for_three_points_sharing_n(tmp_path):
    env = None
    if not HOOMD:
        # Only the plan is checked here: a stand-in `hoomd` package makes it importable.
        (tmp_path / "stand-in/hoomd").mkdir(parents=True)
        (tmp_path / "stand-in/hoomd/__init__.py").write_text("")
        env = {**os.environ, "PYTHONPATH": str(tmp_path / "stand-in")}
    dry = snakemake(tmp_path, "-n", env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = job_counts(dry)
    assert counts["hoomd_initial_state"] == "1" and counts["run_hoomd"] == "3"
    assert f"hard_sphere_{SHARED_N}_1.0_3.gsd" in dry.stdout


@pytest.mark.skipif(not HOOMD, reason="import hoomd fails: HOOMD-blue is not installed in this Python")
def test_real_hoomd_points_share_one_read_only_initial_state(tmp_path):
    run = snakemake(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.count("rule hoomd_initial_state:") == 1
    state = tmp_path / f"results/assets/hoomd-wca/hard_sphere_{SHARED_N}_1.0_3.gsd"
    assert state.is_file() and state.stat().st_mode & 0o222 == 0
    metrics = {
        path.relative_to(tmp_path / "results").parts[0] + "/" + path.parent.parts[-4]: json.loads(path.read_text())
        for path in (tmp_path / "results").glob("md-*/runs/**/metrics.json")
    }
    assert sorted(metrics) == ["md-strong/nodes1-rpn1", "md-strong/nodes1-rpn2", "md-weak/nodes1-rpn2"]
    for name, data in metrics.items():
        assert data["status"] == "ok", (name, data["reason"])
        figures = data["figures"]
        assert figures["particles"] == SHARED_N and len(figures["steps_per_s_runs"]) == 2
        assert figures["steps_per_s"] > 0
        # One rank prints no decomposition line; two split the box along z.
        assert figures.get("domain_decomposition") == (None if name.endswith("rpn1") else "1x1x2")
    assert metrics["md-weak/nodes1-rpn2"]["point"]["scaling"] == "weak"
