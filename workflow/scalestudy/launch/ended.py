"""The records of points whose batch job ended without them, or ended from outside: what the
PBS status command writes once a job has finished (scheduler.pbs.status loads this module
only then, so that its every other call stays cheap), and what the workflow writes when
Snakemake's Slurm executor reports a batch job failed (TIMEOUT, CANCELLED, NODE_FAIL:
`ended_batch_job`, through plan.Plan.record_ended_batch_job).

- a point whose job ended without its metrics.json: failed, the scheduler's words for why,
  and what the site charges for the job (its request x the time it ran, estimated);
- a pack whose job ended: each point without a record is failed; one whose log the job never
  wrote never started (scheduler_error, charged nothing), the one it was running is charged
  the time the job ran beyond its finished points;
- a record the runner wrote when its job was ended from outside (`stop_signal`) takes the
  scheduler's reason, and its category where the scheduler names one (walltime, memory).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..model.metrics import WALLTIME_USED
from ..model.paths import STDOUT
from ..model.timefmt import hms_seconds
from .failures import scheduler_category
from .runner import record_lost_job, write_metrics


def ran_s(walltime_used: str | None) -> float | None:
    """How long a finished job ran (the scheduler's resources_used.walltime, H:M:S), if it says."""
    try:
        return float(hms_seconds(walltime_used)) if walltime_used else None
    except ValueError:
        return None


def with_scheduler_word(metrics_path: Path, why: str) -> bool:
    """A record the runner wrote when its job was ended from outside (`stop_signal`, category
    scheduler_error: the runner cannot tell a walltime kill from a qdel) takes the scheduler's
    word for why when that names a category (PBS Exit_status -29: walltime; -26/-27: memory).
    True when the record changed."""
    try:
        metrics = json.loads(Path(metrics_path).read_text())
    except (OSError, ValueError):
        return False
    category = scheduler_category(why)
    if not metrics.get("stop_signal") or metrics.get("category") != "scheduler_error" or category == "scheduler_error":
        return False
    metrics["category"] = category
    metrics["reason"] = f"{metrics['reason']}; the scheduler says: {why}"
    write_metrics(Path(metrics_path).parent, metrics)
    return True


def lost_point(job_id: str, job: dict[str, Any], why: str, walltime_used: str | None) -> None:
    """The failed record of a single point's job that ended without metrics.json."""
    record_lost_job(
        Path(job["metrics"]),
        job.get("point"),
        job.get("walltime_s"),
        f"batch job {job_id} ended without metrics.json: {why}",
        cluster=job.get("cluster"),
        queue=job.get("queue"),
        wall_s=ran_s(walltime_used),
    )


def ended_pack(job_id: str, job: dict[str, Any], why: str, walltime_used: str | None) -> int:
    """The records of a pack whose job ended (see the module's docstring); returns how many
    of its points had none."""
    pack, submitted = job["pack"], job.get("submitted", 0.0)

    def this_job_wrote(path: Path) -> bool:
        try:
            return path.stat().st_mtime >= submitted
        except OSError:
            return False

    lost = [entry for entry in pack if not Path(entry["metrics"]).exists()]
    spent = 0.0
    for entry in pack:
        metrics = Path(entry["metrics"])
        if entry in lost or not this_job_wrote(metrics):
            continue
        with_scheduler_word(metrics, why)
        try:
            spent += float(json.loads(metrics.read_text()).get("resources", {}).get(WALLTIME_USED.name) or 0.0)
        except (OSError, ValueError, TypeError, AttributeError):
            continue
    ran = ran_s(walltime_used)
    for entry in lost:
        metrics = Path(entry["metrics"])
        facts = {"cluster": job.get("cluster"), "queue": entry.get("queue")}
        if this_job_wrote(metrics.parent / STDOUT):
            reason = (
                f"batch job {job_id} (a pack of {len(pack)} points) ended before this point wrote metrics.json: {why}"
            )
            wall = None if ran is None else max(0.0, ran - spent)
            record_lost_job(metrics, entry.get("point"), entry.get("walltime_s"), reason, wall_s=wall, **facts)
        else:
            reason = f"never started: batch job {job_id} (a pack of {len(pack)} points) ended before its turn: {why}"
            record_lost_job(
                metrics, entry.get("point"), entry.get("walltime_s"), reason,
                category="scheduler_error", wall_s=0.0, **facts,
            )  # fmt: skip
    return len(lost)


def ended_batch_job(job_id: str, job: dict[str, Any], why: str) -> bool:
    """The records of a batch job an executor reports failed, as the PBS status command keeps
    them: `job` is a single point's (`metrics`, `point`, `walltime_s`, `queue`, `cluster`) or a
    pack's (`pack`: such entries; `cluster`), `submitted` the earliest time its job can have
    written anything. A point that wrote its record keeps it with the scheduler's word; one
    that ran without writing it becomes a failed record. False, writing nothing, when no point
    of the job started (cancelled while queued): the job then fails as Snakemake says, and its
    points run next time."""
    entries = job["pack"] if job.get("pack") else [job]
    submitted = job.get("submitted", 0.0)

    def started(entry: dict[str, Any]) -> bool:
        for written in (Path(entry["metrics"]), Path(entry["metrics"]).parent / STDOUT):
            try:
                if written.stat().st_mtime >= submitted:
                    return True
            except OSError:
                continue
        return False

    if not any(started(entry) for entry in entries):
        return False
    if job.get("pack"):
        ended_pack(job_id, job, why, None)
    elif Path(job["metrics"]).exists():
        with_scheduler_word(Path(job["metrics"]), why)
    else:
        lost_point(job_id, job, why, None)
    return True
