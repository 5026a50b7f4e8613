"""The Slurm backend (scheduler.slurm.Slurm) against a real Slurm with two nodes
(tests/support/local_slurm.py), each answer held to Slurm's own: the sbatch line the dry plan
prints (`submit_line`) is one Slurm runs as asked (its hosts: `scontrol show hostnames` inside
the job), and the cost of an ended job (`cost`: the workflow prices each job the plugin reports
ended at it) is the time the job ran, done or cancelled. Submitting, polling and cancelling the
workflow's jobs is Snakemake's Slurm plugin's (tests/integration/test_scheduler_integration.py).

Skips, saying why, where Slurm cannot run here."""

import os
import subprocess
import time
from pathlib import Path

import pytest
from scalestudy.config import clusters
from scalestudy.config.requests import job_request
from scalestudy.model.point import Point
from scalestudy.scheduler import scheduler_for

pytestmark = pytest.mark.e2e

CLUSTER = {"name": "slurm-test", "scheduler": "slurm", "cores_per_node": 2, "mem_per_node_gib": 1, "charge_rate": 1.0}


def point(nodes: int) -> Point:
    return Point(study="pp", app="pingpong", scaling="strong", nodes=nodes, ranks_per_node=1, gpus_per_node=0,
                 threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                 walltime="00:01:00", params={})  # fmt: skip


def submitted(slurm, scheduler, nodes: int, body: str, tmp_path: Path) -> str:
    """The job id of the dry plan's sbatch line for a point of `nodes`, its script `body`."""
    script = tmp_path / f"job-{nodes}.sh"
    script.write_text(f"#!/bin/bash\n{body}\n")
    argv = scheduler.submit_line(job_request(point(nodes), scheduler.cluster), log_path=str(tmp_path / "batch.log"),
                                 jobscript=str(script))  # fmt: skip
    done = subprocess.run(argv, env={**os.environ, **slurm.env}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def cost_once_ended(scheduler, job_id: str, timeout: float = 120) -> float | None:
    deadline = time.monotonic() + timeout
    while (seconds := scheduler.cost(job_id)) is None and time.monotonic() < deadline:
        time.sleep(1)
    return seconds


def test_the_slurm_backends_sbatch_line_runs_as_asked_and_its_cost_is_the_time_the_job_ran(
    slurm, tmp_path, monkeypatch
):
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    scheduler = scheduler_for(clusters.from_mapping(CLUSTER))
    # A 2-node point: Slurm gives it both nodes; it slept 2 s, Slurm's Elapsed says so.
    hosts = tmp_path / "hosts"
    job_id = submitted(slurm, scheduler, 2, f"scontrol show hostnames \"$SLURM_JOB_NODELIST\" | paste -sd' ' > {hosts}"
                                            "\nsleep 2", tmp_path)  # fmt: skip
    assert job_id.isdigit()
    assert 2.0 <= cost_once_ended(scheduler, job_id) < 30.0, slurm.log_tail()
    assert hosts.read_text().split() == ["n1", "n2"]
    # A job cancelled while it runs: no cost while it runs, then what it ran.
    job_id = submitted(slurm, scheduler, 1, "sleep 300", tmp_path)
    deadline = time.monotonic() + 60
    while "RUNNING" not in slurm.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout and time.monotonic() < deadline:
        time.sleep(0.5)
    assert scheduler.cost(job_id) is None
    slurm.run("scancel", job_id)
    assert cost_once_ended(scheduler, job_id) < 60.0
    assert scheduler.cost("999999") is None  # unknown to Slurm
