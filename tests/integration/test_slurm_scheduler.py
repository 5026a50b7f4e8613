"""The Slurm backend's operations (scheduler.slurm.Slurm: submit, status, cost, cancel, hosts)
against a real Slurm with two nodes (tests/support/local_slurm.py), each answer held to
Slurm's own: the hosts to `scontrol show hostnames` inside the job, the states to what sacct
and scontrol say, the cost to the time the job slept.

Skips, saying why, where Slurm cannot run here."""

import json
import sys
import time
from pathlib import Path

import pytest
from scalestudy.config import clusters
from scalestudy.model.point import Point
from scalestudy.scheduler import scheduler_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

CLUSTER = {"name": "slurm-test", "scheduler": "slurm", "cores_per_node": 2, "mem_per_node_gib": 1, "charge_rate": 1.0}


def jobscript(path: Path, properties: dict, body: str) -> Path:
    path.write_text(f"#!/bin/bash\n# properties = {json.dumps(properties)}\n{body}\n")
    return path


def until_ended(scheduler, job_id: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while (word := scheduler.status(job_id)) == "running" and time.monotonic() < deadline:
        time.sleep(1)
    return word


def test_the_slurm_backend_submits_follows_prices_cancels_and_reads_hosts(slurm, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    scheduler = scheduler_for(clusters.from_mapping(CLUSTER))
    # A 2-node point: its job reads its hosts with the backend and with Slurm's own expansion.
    point = Point(study="pp", app="pingpong", scaling="strong", nodes=2, ranks_per_node=1, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                  walltime="00:01:00", params={})  # fmt: skip
    run_dir = tmp_path / "runs/p1"
    properties = {"rule": "run_pingpong", "params": {"point": point.to_json()},
                  "resources": {"walltime_s": 60, "queue": ""}, "output": [str(run_dir / "metrics.json")]}  # fmt: skip
    hosts = "from scalestudy.scheduler.slurm import Slurm; print(' '.join(Slurm().hosts()))"
    body = (
        f'PYTHONPATH={REPO / "workflow"} {sys.executable} -c "{hosts}" > {tmp_path / "ours"}\n'
        f"scontrol show hostnames \"$SLURM_JOB_NODELIST\" | paste -sd' ' > {tmp_path / 'slurms'}\nsleep 2"
    )
    job_id = scheduler.submit(jobscript(tmp_path / "point.sh", properties, body))
    assert job_id.isdigit()
    assert until_ended(scheduler, job_id) == "success", slurm.log_tail()
    assert (tmp_path / "ours").read_text().split() == (tmp_path / "slurms").read_text().split() == ["n1", "n2"]
    assert (run_dir / "batch.log").exists()
    assert 2.0 <= scheduler.cost(job_id) < 30.0  # the job slept 2 s: Slurm's Elapsed
    # A job cancelled while it runs: failed, as the plugin reports it, and priced at what it ran.
    long = {"rule": "long", "threads": 1, "resources": {"runtime": 5}, "output": [str(tmp_path / "long/out")]}
    job_id = scheduler.submit(jobscript(tmp_path / "long.sh", long, "sleep 300"))
    deadline = time.monotonic() + 60
    while "RUNNING" not in slurm.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout and time.monotonic() < deadline:
        time.sleep(0.5)
    assert scheduler.status(job_id) == "running" and scheduler.cost(job_id) is None
    scheduler.cancel([job_id])
    assert until_ended(scheduler, job_id) == "failed"
    assert scheduler.cost(job_id) is not None
    assert scheduler.status("999999") == "running"  # unknown to Slurm: not yet in its accounting
