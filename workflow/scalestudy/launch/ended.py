"""The records of points whose batch job ended without them, or ended from outside: what the
PBS status command writes once a job has finished (scheduler.pbs.status loads this module
only then, so that its every other call stays cheap), and what the workflow writes when
Snakemake's Slurm executor reports a batch job ended (done, or failed: TIMEOUT, CANCELLED,
NODE_FAIL; `ended_batch_job`, through planning.run_rules.record_ended_batch_job).

- a point whose job ended without its metrics.json: failed, the scheduler's words for why,
  and what the site charges for the job (its request x the time it ran, estimated);
- a pack whose job ended: each point without a record is failed; one whose log the job never
  wrote never started (scheduler_error, charged nothing), the one it was running is charged
  the time the job ran beyond its finished points;
- a record the runner wrote when its job was ended from outside (`stop_signal`) takes the
  scheduler's reason, and its category where the scheduler names one (walltime, memory);
- every point's cost is what the scheduler charges (`with_scheduler_charge`): the time the
  job ran as the scheduler says it (`ran`, seconds: PBS's resources_used.walltime, `ran_s`;
  Slurm's Elapsed, scheduler.slurm.job_elapsed) x the charge rate of its request, the launch's
  own time and estimate kept beside it; a pack's time is split between the points it ran by
  their share of it (`pack_shares`), so that the points' times add up to the pack's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import clusters
from ..model.errors import SweepError
from ..model.metrics import WALLTIME_USED
from ..model.paths import STDOUT
from ..model.point import Point
from ..model.timefmt import hms_seconds
from .failures import scheduler_category
from .runner import record_lost_job, resources, write_metrics

# The source of a cost priced from the scheduler's own record of the job's time.
SCHEDULER_SOURCE = "scheduler"
# Where the charged time goes in a record's resources (the key accounting.site_resources
# gives the site's own usage block).
BATCH_WALLTIME = "batch_walltime_used_s"


def ran_s(walltime_used: str | None) -> float | None:
    """How long a finished job ran (the scheduler's resources_used.walltime, H:M:S), if it says."""
    try:
        return float(hms_seconds(walltime_used)) if walltime_used else None
    except ValueError:
        return None


def with_scheduler_word(metrics_path: Path, why: str) -> bool:
    """A record the runner wrote when its job was ended from outside (`stop_signal`, category
    scheduler_error: the runner cannot tell a walltime kill from a qdel) takes the scheduler's
    word for why in its reason (PBS Exit_status 271: deleted or SIGTERM), and its category where
    that names one (PBS Exit_status -29: walltime; -26/-27: memory). True when it changed."""
    try:
        metrics = json.loads(Path(metrics_path).read_text())
    except (OSError, ValueError):
        return False
    said = "; the scheduler says: "
    if not metrics.get("stop_signal") or metrics.get("category") != "scheduler_error" or said in metrics["reason"]:
        return False
    # The category where PBS names one; PBS's word in the reason whatever it is (271: qdel).
    metrics["category"] = scheduler_category(why)
    metrics["reason"] = f"{metrics['reason']}{said}{why}"
    write_metrics(Path(metrics_path).parent, metrics)
    return True


def charged(point_json: str | None, walltime_s: int | None, queue: str | None, cluster: str | None, wall: float):
    """`resources` keys of what the scheduler charges for `wall` seconds of the point's request:
    the job's time, and its service units where the cluster file prices the queue."""
    found: dict[str, Any] = {BATCH_WALLTIME: round(wall, 6)}
    if not (point_json and cluster):
        return found
    try:
        point = Point.from_json(point_json, int(walltime_s or 0), queue or None)
        priced = resources(point, clusters.load(cluster), wall)
    except (SweepError, ValueError, KeyError, TypeError):
        return found  # the cluster file changed or went: the time is still the scheduler's
    if "service_units" in priced:
        found.update(service_units=priced["service_units"], service_units_source=SCHEDULER_SOURCE)
    return found


def with_scheduler_charge(metrics_path: Path, facts: dict[str, Any], wall: float, launched: bool = True) -> bool:
    """The point's record priced at what the scheduler charges for `wall` seconds of its
    request (`charged`); the launch's own estimate stays beside it (service_units_launch) where
    the point `launched` (a record written for a lost point has none). `facts`: the point's
    registry entry (point, walltime_s, queue, cluster). Idempotent; True when it changed."""
    path = Path(metrics_path)
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    used = metrics.setdefault("resources", {}) or {}
    found = charged(facts.get("point"), facts.get("walltime_s"), facts.get("queue"), facts.get("cluster"), wall)
    if all(used.get(key) == value for key, value in found.items()):
        return False
    if launched and used.get("service_units_source") != SCHEDULER_SOURCE and "service_units" in used:
        used["service_units_launch"] = used["service_units"]
    used.update(found)
    metrics["resources"] = used
    write_metrics(path.parent, metrics)
    return True


def pack_shares(walls: dict[str, float], ran: float) -> dict[str, float]:
    """The pack's time (`ran`, the scheduler's) split between the points it ran in proportion to
    each one's own time (`walls`): they add up to `ran`. Points that took no time share it
    equally where none did."""
    total = sum(walls.values())
    if total > 0:
        return {key: ran * wall / total for key, wall in walls.items()}
    return {key: ran / len(walls) for key in walls} if walls else {}


def lost_point(job_id: str, job: dict[str, Any], why: str, ran: float | None) -> None:
    """The failed record of a single point's job that ended without metrics.json, after `ran`
    seconds (None: the scheduler did not say)."""
    record_lost_job(
        Path(job["metrics"]),
        job.get("point"),
        job.get("walltime_s"),
        f"batch job {job_id} ended without metrics.json: {why}",
        cluster=job.get("cluster"),
        queue=job.get("queue"),
        wall_s=ran,
    )
    if ran is not None:
        with_scheduler_charge(Path(job["metrics"]), job, ran, launched=False)


def ended_job(job: dict[str, Any], ran: float | None) -> bool:
    """A single point's job that ended with the point's own record: priced at the job's time."""
    return ran is not None and with_scheduler_charge(Path(job["metrics"]), job, ran)


def ended_pack(job_id: str, job: dict[str, Any], why: str, ran: float | None) -> int:
    """The records of a pack whose job ended after `ran` seconds (see the module's docstring);
    returns how many of its points had none."""
    pack, submitted = job["pack"], job.get("submitted", 0.0)

    def this_job_wrote(path: Path) -> bool:
        try:
            return path.stat().st_mtime >= submitted
        except OSError:
            return False

    lost = [entry for entry in pack if not Path(entry["metrics"]).exists()]
    spent = 0.0
    walls: dict[str, float] = {}  # the launch's own time of each point this job ran
    for entry in pack:
        metrics = Path(entry["metrics"])
        if entry in lost or not this_job_wrote(metrics):
            continue
        with_scheduler_word(metrics, why)
        try:
            wall = float(json.loads(metrics.read_text()).get("resources", {}).get(WALLTIME_USED.name) or 0.0)
        except (OSError, ValueError, TypeError, AttributeError):
            wall = 0.0
        walls[entry["metrics"]] = wall
        spent += wall
    for entry in lost:
        metrics = Path(entry["metrics"])
        facts = {"cluster": job.get("cluster"), "queue": entry.get("queue")}
        if this_job_wrote(metrics.parent / STDOUT):
            reason = (
                f"batch job {job_id} (a pack of {len(pack)} points) ended before this point wrote metrics.json: {why}"
            )
            wall = None if ran is None else max(0.0, ran - spent)
            record_lost_job(metrics, entry.get("point"), entry.get("walltime_s"), reason, wall_s=wall, **facts)
            if wall is not None:
                walls[entry["metrics"]] = wall
        else:
            reason = f"never started: batch job {job_id} (a pack of {len(pack)} points) ended before its turn: {why}"
            record_lost_job(
                metrics, entry.get("point"), entry.get("walltime_s"), reason,
                category="scheduler_error", wall_s=0.0, **facts,
            )  # fmt: skip
    if ran is not None:
        by_path = {entry["metrics"]: entry for entry in pack}
        lost_paths = {entry["metrics"] for entry in lost}
        for path, share in pack_shares(walls, ran).items():
            facts = {**by_path[path], "cluster": job.get("cluster")}
            with_scheduler_charge(Path(path), facts, share, launched=path not in lost_paths)
    return len(lost)


def ended_batch_job(job_id: str, job: dict[str, Any], why: str, ran: Callable[[], float | None] | None = None) -> bool:
    """The records of a batch job an executor reports ended (done or failed), as the PBS status
    command keeps them: `job` is a single point's (`metrics`, `point`, `walltime_s`, `queue`,
    `cluster`) or a pack's (`pack`: such entries; `cluster`), `submitted` the earliest time its
    job can have written anything, `ran` what asks the scheduler for the seconds it charges for
    the job (asked only where a point started; None, or its answer None: the launch's own
    estimate stays). A point that wrote its record keeps it with the scheduler's word; one that
    ran without writing it becomes a failed record; each is priced at its share of the job's
    time. False, writing nothing, when no point of the job started (cancelled while queued): the
    job then fails as Snakemake says, and its points run next time."""
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
    seconds = ran() if ran is not None else None
    if job.get("pack"):
        ended_pack(job_id, job, why, seconds)
    elif Path(job["metrics"]).exists():
        with_scheduler_word(Path(job["metrics"]), why)
        ended_job(job, seconds)
    else:
        lost_point(job_id, job, why, seconds)
    return True
