"""A node ladder run for real (tests/sweeps/ladder-amdahl.yaml): local Snakemake on a cluster
file of 8 nodes, mpirun on this machine. Interrupted while its second rung runs, then resumed
(`retry_failed=true` measures the interrupted point again): the first rung is never rerun, the
ladder climbs to 4 nodes, stops there (efficiency below 0.7 with 95% confidence) and never
submits 8 nodes; the report says why and what that did not spend."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from sweeps import sweep, write

REPO = Path(__file__).resolve().parents[2]


def test_a_ladder_stops_where_efficiency_falls_and_a_resumed_ladder_reruns_no_rung(tmp_path):
    local = yaml.safe_load((REPO / "config/clusters/local.yaml").read_text())
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "rehearsal.yaml").write_text(yaml.safe_dump({**local, "name": "rehearsal", "nodes": 8}))
    results = tmp_path / "results"
    sweep_file = write(sweep("ladder-amdahl", results_dir=str(results)), tmp_path / "sweep.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(REPO / "profiles/local"), "--configfile", str(sweep_file)]  # fmt: skip
    env = {**os.environ, "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    runs = results / "amdahl" / "runs"

    dry = subprocess.run([*command, "-n"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "scalestudy: amdahl: node ladder 1, 2, 4, 8 nodes, stops below efficiency 0.7" in dry.stdout
    assert "worst case, every rung: 0.50 node-hours" in dry.stdout and "now: runs at 1 node" in dry.stdout

    # Interrupted (the group's SIGTERM, as a closed terminal or a killed session sends) while rung 2 runs.
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while not list(runs.glob("nodes2-*/**/stdout.log")) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.3)
    assert list(runs.glob("nodes2-*/**/stdout.log")), first.communicate(timeout=60)[0][-3000:]
    time.sleep(1)
    os.killpg(first.pid, signal.SIGTERM)
    output, _ = first.communicate(timeout=120)
    rung_one = {p: (p.stat().st_mtime_ns, p.read_text()) for p in runs.glob("nodes1-*/*/*/*/*/metrics.json")}
    assert len(rung_one) == 2, output[-3000:]
    assert not list(runs.glob("nodes4-*")) and not list(runs.glob("nodes8-*")), output[-3000:]

    resumed = subprocess.run([*command, "--config", "retry_failed=true"], capture_output=True, text=True,
                             timeout=600, cwd=tmp_path, env=env)  # fmt: skip
    said = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, said[-3000:]
    assert {path: (path.stat().st_mtime_ns, path.read_text()) for path in rung_one} == rung_one  # never rerun
    assert "now: runs at 2 nodes (1 node: efficiency 1.00 [1.00–1.00], not below 0.7: climbs to 2 nodes)" in said
    assert "climbs to 4 nodes" in said and "stopped at 4 nodes (efficiency at 4 nodes 0.4" in said, said[-3000:]
    assert "amdahl: round " in said and "every ladder has stopped" in said
    records = sorted(runs.glob("*/*/*/*/rep*/metrics.json"))  # the points' own (attempts/ keeps the interrupted one)
    finished = [p.relative_to(runs).parts[0] for p in records]
    assert finished == ["nodes1-rpn1"] * 2 + ["nodes2-rpn1"] * 2 + ["nodes4-rpn1"] * 2, finished
    statuses = [json.loads(p.read_text())["status"] for p in records]
    assert statuses == ["ok"] * 6
    assert not list(runs.glob("nodes8-*"))

    [entry] = json.loads((results / "amdahl" / "ladder.json").read_text())["ladders"]
    assert entry["step"]["reason"] == "measured below" and entry["not_run"] == [8]
    assert entry["node_hours"]["not_spent"] / entry["node_hours"]["full"] == 8 / 15
    page = (results / "report" / "index.md").read_text()
    assert "### Node ladder" in page and "stopped at 4 nodes: efficiency at 4 nodes 0.4" in page
    assert "Not run: 8 nodes; 0.27 of the full ladder's 0.50 node-hours (53%) not spent" in page
