"""The sidecar: deletes this run's unfinished jobs when Snakemake stops on an interrupt.

Snakemake's remote executors take the active jobs out of their list for the length of
each status round; a Ctrl-C inside that window called the cancel command with no job at
all, and the jobs kept running (and charging). The workflow now hands the cancel command
that round's jobs too (planning.snakemake_adapter); the sidecar is the net for whatever a
cancel missed (a qdel that failed, a cancel command that did nothing): Snakemake
starts it once per run, hands the first line it prints (a run id) to every submit call
in $SNAKEMAKE_CLUSTER_SIDECAR_VARS, and terminates it on shutdown. Then it deletes the
run's jobs that have no metrics.json yet. After a normal end every job has its record,
so nothing is deleted.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

from . import cache
from .cancel import delete
from .status import FINISHED_STATES

# How the run id reaches the submit command, which registers each job under it.
SIDECAR_VARS = "SNAKEMAKE_CLUSTER_SIDECAR_VARS"


def unfinished_jobs(directory: Path, run: str) -> list[str]:
    """This run's jobs that may still be queued or running: no metrics.json, not seen
    finished by the status command, not already passed to qdel."""
    cancelled = cache.cancelled(directory)
    seen = cache.load_states(directory)["jobs"]
    return [
        job_id
        for job_id, job in cache.registry(directory).items()
        if job.get("run") == run
        and job_id not in cancelled
        and seen.get(job_id, {}).get("state") not in FINISHED_STATES
        and not written(job)
    ]


def written(job: dict) -> bool:
    """Has the job written its records: its point's, or every point's of its pack? (A job
    that is no point's has none: it may still be running.)"""
    records = [entry["metrics"] for entry in job["pack"]] if job.get("pack") else [job.get("metrics")]
    return all(records) and all(Path(record).exists() for record in records)


def sidecar(directory: Path, qdel: str = "qdel", poll_s: float = 5.0) -> int:
    """Print a run id, wait for Snakemake to terminate us, then delete the run's unfinished jobs."""
    directory.mkdir(parents=True, exist_ok=True)
    run = uuid.uuid4().hex
    # Ctrl-C reaches the whole foreground process group; Snakemake decides what happens
    # and then terminates this process, which is the moment to act.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    print(run, flush=True)
    parent = os.getppid()
    while signal.sigtimedwait({signal.SIGTERM}, poll_s) is None:
        if os.getppid() != parent:
            return 0  # Snakemake was killed outright: leave its jobs alone
    # Snakemake waits for its sidecar to end: qdel runs to its end here, not detached.
    delete(directory, unfinished_jobs(directory, run), qdel, by="sidecar", wait=True)
    return 0
