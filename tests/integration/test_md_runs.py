"""MD points run by the runner."""

import importlib.util
import json

from points import hoomd_points
from scalestudy.config.clusters import Cluster, MpiLauncher
from scalestudy.launch.runner import run_point

REAL_FIND = importlib.util.find_spec


def test_without_hoomd_a_point_fails_at_once_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hoomd" else REAL_FIND(name))
    ran = tmp_path / "ran"
    launcher = tmp_path / "mpirun"
    launcher.write_text(f"#!/bin/sh\ntouch {ran}\n")
    launcher.chmod(0o755)
    cluster = Cluster("test", "none", 2, 0, 8.0, None, MpiLauncher(launcher=str(launcher)))
    metrics = run_point(hoomd_points()[0], tmp_path / "run", cluster)
    assert metrics["status"] == "failed"
    assert metrics["reason"] == "hoomd not installed (use --sdm conda or a site module)"
    assert metrics["category"] == "dependency_missing"
    assert json.loads((tmp_path / "run/metrics.json").read_text())["reason"] == metrics["reason"]
    assert not ran.exists()
