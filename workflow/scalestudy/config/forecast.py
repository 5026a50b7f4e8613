"""What a sweep may cost before anything is submitted: the maximum service units of every
batch job (its request x its walltime, margin included, x the queue's charge rate: the
one formula, config.requests.estimated_service_units), per study and in total, and the
expected units where earlier runs of the same points measured their walltime.

The maximum is what the site may charge if every job runs to its walltime; the expected
figure prices the same requests at the walltime the points really used (the mean of their
earlier ok runs: the point itself, or another repeat of the same scale and variant). A
sweep-wide `budget_su_total` refuses, before anything is submitted, the batch jobs one
invocation would submit (packs as packs, finished points not at all) when their maximum is
over it (planning.summary.budget_problems); a report submits nothing and is never refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model.point import Point
from .clusters import Cluster
from .packing import Pack
from .requests import estimated_service_units, job_request

# How many studies the budget refusal names.
COSTLIEST = 3


def same_point(point: Point) -> tuple[str, str]:
    """The key under which earlier runs of a point are found: its study, scale and variant
    (every repeat runs the same thing)."""
    return point.study, point.id.rsplit("/", 1)[0]


def point_service_units(point: Point, cluster: Cluster, walltime_s: float | None = None) -> float | None:
    """The units of one point's batch job: at its requested walltime (margin included), or at
    `walltime_s`; None where the queue has no charge rate."""
    request = job_request(point, cluster)
    used = request.walltime_s if walltime_s is None else walltime_s
    return estimated_service_units(request.queue, request.ncpus, request.ngpus, request.mem_gib, used)


@dataclass
class Forecast:
    cluster: str
    jobs: dict[str, int] = field(default_factory=dict)  # batch jobs per study
    maximum: dict[str, float] = field(default_factory=dict)  # SU per study, at the requested walltimes
    expected: float = 0.0  # SU of the points with earlier measured runs, at their measured walltime
    expected_points: int = 0
    points: int = 0
    unpriced: list[str] = field(default_factory=list)  # studies whose queue has no charge rate

    @property
    def total(self) -> float:
        return sum(self.maximum.values())

    def costliest(self, n: int = COSTLIEST) -> list[tuple[str, float]]:
        return sorted(self.maximum.items(), key=lambda item: (-item[1], item[0]))[:n]


def forecast(
    points: Iterable[Point],
    cluster: Cluster,
    measured: Mapping[tuple[str, str], float] | None = None,
    packs: Iterable[Pack] = (),
) -> Forecast:
    """The forecast of `points` on `cluster`, one batch job each except those in `packs` (one
    job per pack: its points' walltimes summed, the margin once); `measured`: the mean
    walltime of earlier ok runs by same_point()."""
    measured = measured or {}
    result = Forecast(cluster.name)
    unpriced: dict[str, None] = {}
    pack_of = {(point.study, point.id): pack for pack in packs for point in pack.points}
    # A point's repeats ask for the same job: priced once (a 100,000-point sweep is planned
    # in seconds, not minutes).
    units_of: dict[tuple[str, str], float | None] = {}
    for point in points:
        result.points += 1
        pack = pack_of.get((point.study, point.id))
        if pack is None:
            result.jobs[point.study] = result.jobs.get(point.study, 0) + 1
            key = same_point(point)
            if key not in units_of:
                units_of[key] = point_service_units(point, cluster)
            units = units_of[key]
        elif point is pack.points[0] or point == pack.points[0]:
            result.jobs[point.study] = result.jobs.get(point.study, 0) + 1
            units = point_service_units(pack.request_point(), cluster)
        else:
            units = 0.0  # priced with its pack's first point
        if units is None:
            unpriced[point.study] = None
            continue
        result.maximum[point.study] = result.maximum.get(point.study, 0.0) + units
        walltime = measured.get(same_point(point))
        if walltime is not None:
            result.expected += point_service_units(point, cluster, walltime) or 0.0
            result.expected_points += 1
    result.unpriced = list(unpriced)
    return result


def node_hours(points: Iterable[Point], cluster: Cluster) -> float:
    """The node-hours the points' batch jobs ask for (nodes x (walltime + margin)): what an
    allocation is held for at most, whatever the site charges for it."""
    return sum(job_request(p, cluster).nodes * job_request(p, cluster).walltime_s for p in points) / 3600


def ladder_cost(points: Iterable[Point], cluster: Cluster) -> tuple[float, float | None]:
    """(node-hours, SU or None where the queue has no charge rate) of a ladder's points, each
    its own job at its requested walltime: the worst case of the rungs, as `forecast` prices it."""
    points = list(points)
    result = forecast(points, cluster)
    return node_hours(points, cluster), None if result.unpriced else result.total


def to_submit_words(jobs: int) -> str:
    """What a forecast of one invocation prices, in the lines it prints."""
    return f"the {jobs} run jobs to submit"


def su(value: float) -> str:
    return f"{value:,.1f} SU"


def forecast_lines(result: Forecast, what: str = "the sweep") -> list[str]:
    """What the dry run and `plan` print before the first submission."""
    if not result.points:
        return []
    studies = ", ".join(f"{study} {su(units)} ({result.jobs[study]} jobs)" for study, units in result.maximum.items())
    lines = [
        f"scalestudy: cost forecast for {what} on {result.cluster}, at most (request x (walltime + margin) x "
        f"charge rate): {studies or 'nothing priced'}; total {su(result.total)}"
    ]
    if result.unpriced:
        lines[0] += f"; no charge rate for {', '.join(result.unpriced)}"
    if result.expected_points:
        lines.append(
            f"scalestudy: expected from the measured walltime of earlier runs of the same points: "
            f"{su(result.expected)} for {result.expected_points} of {result.points} jobs"
        )
    return lines


def budget_problems(result: Forecast, budget_su_total: float | None, what: str = "the sweep") -> list[str]:
    """One line naming the costliest studies when the maximum of `what` (the jobs priced in
    `result`) is over the budget."""
    if budget_su_total is None or result.total <= budget_su_total:
        return []
    costliest = ", ".join(f"{study} {su(units)}" for study, units in result.costliest())
    return [
        f"budget_su_total: {what} may cost up to {su(result.total)} on {result.cluster} "
        f"(request x (walltime + margin) x charge rate), over the budget of {su(budget_su_total)}; "
        f"costliest: {costliest} "
        f"(fewer repeats, scales or variants, shorter walltimes, or a larger budget_su_total)"
    ]
