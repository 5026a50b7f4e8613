"""The status command: exactly one word (running|success|failed) per call, as Snakemake's
cluster-generic executor wants, for a job id.

The executor calls it once per active job per polling round. One `qstat -x -f -F json` for
all active jobs answers a whole round: the first call of a round refreshes the shared
states (cache.STATES) under a lock, the others read them. A job that ended without its
metrics.json (killed by PBS, node lost, job script error) is recorded as a failed point.

Every call pays this module's start-up: standard library and `cache` only; the runner is
imported only for a job that ended without metrics.json.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cache import load_states, locked, registry, save_states

# job_state of a job that has ended (PBS Pro F/X; Torque and its wrappers C).
FINISHED_STATES = ("F", "X", "C")


@dataclass
class JobState:
    job_id: str
    state: str  # PBS job_state: Q, H, W, T, S, R, E, B, M, F, X (Torque: C for completed)
    exit_status: int | None = None
    comment: str = ""
    resources_used: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    def verdict(self) -> tuple[str, str]:
        """(one of running|success|failed, why)."""
        if not self.finished:
            return "running", f"job_state {self.state}"
        if self.exit_status is None:
            return "success", "finished (this qstat gives no exit status)"
        if self.exit_status == 0:
            return "success", "Exit_status 0"
        if self.exit_status < 0:
            # PBS itself ended the job (e.g. -29 walltime, -27 memory) or could not start it.
            why = PBS_EXIT_CODES.get(self.exit_status, "killed or not started by PBS")
        elif self.exit_status > 256:
            why = f"killed by signal {self.exit_status - 256}"
        else:
            why = "the job script failed"
        return "failed", f"Exit_status {self.exit_status}: {why}" + (f" ({self.comment})" if self.comment else "")


# PBS Pro's JOB_EXEC_* codes (pbs_error.h) that a scaling study meets.
PBS_EXIT_CODES = {
    -1: "job exec failed, before files, no retry",
    -2: "job exec failed, after files, no retry",
    -3: "job exec failed, will retry",
    -4: "job aborted on MoM initialization",
    -10: "job did not run: files could not be staged in",
    -11: "killed: ncpus sum over the limit",
    -23: "killed: ncpus burst over the limit",
    -24: "killed: vmem over the limit",
    -25: "killed: pmem over the limit",
    -27: "killed: mem over the limit",
    -28: "killed: cput over the limit",
    -29: "killed: walltime over the limit",
}


def states_from_json(text: str) -> dict[str, JobState]:
    """`qstat -x -f -F json` (PBS Pro)."""
    jobs = json.loads(text).get("Jobs") or {}
    states = {}
    for job_id, attrs in jobs.items():
        exit_status = attrs.get("Exit_status")
        states[job_id] = JobState(
            job_id=job_id,
            state=str(attrs.get("job_state", "?")),
            exit_status=None if exit_status is None else int(exit_status),
            comment=str(attrs.get("comment", "")),
            resources_used={k: str(v) for k, v in (attrs.get("resources_used") or {}).items()},
        )
    return states


def states_from_text(text: str) -> dict[str, JobState]:
    """`qstat -f` text (PBS Pro without JSON, Torque, Slurm's torque wrappers)."""
    states: dict[str, JobState] = {}
    current: JobState | None = None
    for line in text.splitlines():
        header = re.match(r"^Job Id:\s*(\S+)", line)
        if header:
            current = states.setdefault(header.group(1), JobState(header.group(1), "?"))
            continue
        pair = re.match(r"^\s+([\w.]+)\s*=\s*(.*)$", line)
        if current is None or not pair:
            continue
        key, value = pair.group(1), pair.group(2).strip()
        if key == "job_state":
            current.state = value
        elif key.lower() == "exit_status":
            current.exit_status = int(value)
        elif key == "comment":
            current.comment = value
        elif key.startswith("resources_used."):
            current.resources_used[key.split(".", 1)[1]] = value
    return states


UNKNOWN_JOB = re.compile(r"Unknown Job Id:?\s*(\S+)", re.IGNORECASE)


def query(job_ids: list[str], qstat: str = "qstat") -> tuple[dict[str, JobState], set[str]]:
    """One qstat for all jobs: (states, ids the server says it does not know).
    Raises OSError/CalledProcessError/ValueError on a failed query (the caller retries later)."""
    result = subprocess.run([qstat, "-x", "-f", "-F", "json", *job_ids], capture_output=True, text=True, timeout=60)
    if result.stdout.lstrip().startswith("{"):
        states = states_from_json(result.stdout)
    elif "Unknown option" in result.stderr or "invalid option" in result.stderr.lower():
        # Not PBS Pro (no -x / -F json): the plain full listing.
        result = subprocess.run([qstat, "-f", *job_ids], capture_output=True, text=True, timeout=60)
        states = states_from_text(result.stdout)
    else:
        states = {}
    unknown = {m.group(1) for m in UNKNOWN_JOB.finditer(result.stderr)}
    if result.returncode != 0 and not states and not unknown:
        raise subprocess.CalledProcessError(result.returncode, qstat, result.stdout, result.stderr)
    return states, unknown


# A status call is the start of a new polling round when the job it asks about was
# already answered from the cache: then ONE qstat refreshes every active job, and the
# other calls of that round read the cache. These bound it in time as well.
MIN_REFRESH_S = 2.0
MAX_CACHE_AGE_S = 120.0
# A job qstat does not know (history expired, or never reached the server) is given up
# after this long.
UNKNOWN_GRACE_S = 300.0


def refresh(cache: dict[str, Any], job_ids: Iterable[str], qstat: str, log) -> None:
    ids = sorted(set(job_ids))
    cache["refreshed"] = time.time()
    try:
        states, unknown = query(ids, qstat)
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        # A transient server problem must not abort a study: answer "running" and retry next round.
        log(f"scalestudy pbs status: qstat failed ({error!r}); jobs stay 'running' until it answers")
        return
    for job_id in ids:
        if job_id in states:
            state = states[job_id]
            cache["jobs"][job_id] = {
                "state": state.state,
                "exit_status": state.exit_status,
                "comment": state.comment,
                "served": False,
            }
        elif job_id in unknown:
            cache["jobs"][job_id] = {"state": "unknown", "served": False}


def status(job_id: str, directory: Path, qstat: str = "qstat", log=lambda msg: print(msg, file=sys.stderr)) -> str:
    """Exactly one of running|success|failed for `job_id`; never raises."""
    try:
        with locked(directory):
            cache = load_states(directory)
            entry = cache["jobs"].get(job_id)
            age = time.time() - cache.get("refreshed", 0.0)
            stale = entry is None or age > MAX_CACHE_AGE_S or (entry.get("served") and age >= MIN_REFRESH_S)
            # The registry grows with every submission: it is read once per round (to find jobs
            # not yet polled) and for jobs that ended, not on every call of a round.
            jobs = registry(directory) if stale else None
            if stale:
                active = [
                    known for known, cached in cache["jobs"].items() if cached.get("state") not in FINISHED_STATES
                ]
                unseen = [known for known in jobs if known not in cache["jobs"]]
                refresh(cache, [*active, *unseen, job_id], qstat, log)
            entry = cache["jobs"].get(job_id)
            if entry is not None:
                entry["served"] = True
            save_states(directory, cache)
            ended = entry is not None and entry["state"] in (*FINISHED_STATES, "unknown")
            job = (jobs if jobs is not None else registry(directory)).get(job_id) if ended else None
        return answer(job_id, entry, job, log)
    except Exception as error:  # a bug here must not abort the user's whole study
        log(f"scalestudy pbs status: {error!r}; answering 'running'")
        return "running"


def answer(job_id: str, entry: dict[str, Any] | None, job: dict[str, Any] | None, log) -> str:
    if entry is None:
        return "running"
    if entry["state"] == "unknown":
        submitted = (job or {}).get("submitted", 0.0)
        if time.time() - submitted < UNKNOWN_GRACE_S:
            return "running"
        verdict, why = "failed", "the PBS server no longer knows the job (history expired or deleted)"
    else:
        state = JobState(job_id, entry["state"], entry.get("exit_status"), entry.get("comment", ""))
        verdict, why = state.verdict()
    if verdict == "running":
        return verdict
    metrics = Path(job["metrics"]) if job and job.get("metrics") else None
    if metrics is None:
        return verdict
    if metrics.exists():
        # The point wrote its own record (ok or failed): that is the result, whatever the job's exit.
        return "success"
    # The job ended without a record (killed by PBS, node lost, job script error): the
    # point becomes failed data instead of a lost result.
    from ...launch.runner import record_lost_job

    record_lost_job(
        metrics, job.get("point"), job.get("walltime_s"), f"batch job {job_id} ended without metrics.json: {why}"
    )
    log(f"scalestudy pbs status: {job_id}: {why}; recorded as a failed point in {metrics}")
    return "success"
