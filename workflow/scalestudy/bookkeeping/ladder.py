"""Which rungs of a node ladder (model.ladder) are in play, from the records on disk.

Every rung is a point of the sweep (ids never change; the forecast and the budget count every
rung). A ladder is one curve of its study: the points that differ only in nodes and repeat. Its
rungs are walked from the bottom: a rung is in play; once every repeat it needs has a record
(bookkeeping.repeats for repeats until clear) the judge (model.ladder.Judge, handed down by the
caller) decides from the finished rungs whether the next rung comes into play or the ladder
stops. A rung above the stop that has a record is kept (nothing finished is lost); the others
are left out of the plan: never submitted. The same walk makes the plan at load (resume goes on
where the records stop) and each round's decision (rule repeats_round): one mechanism for rounds
of repeats and rungs. Studies without a ladder read no record here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..apps.registry import app_for
from ..model.ladder import Judge, RungRuns, Step
from ..model.paths import Layout
from ..model.point import Point
from ..model.settings import StudySettings
from . import repeats
from .history import read


def ladder_of(point: Point) -> str:
    """What names a point's ladder: its id without the nodes and the repeat, e.g.
    'rpn1/mpi-default/nccl-default'."""
    scale = f"nodes{point.nodes}-"
    return "/".join(part.removeprefix(scale) for part in point.id.split("/")[:-1])


@dataclass(frozen=True)
class Climb:
    """One ladder's state: the points in play, the last step decided (None before the first rung
    has finished), the finished rungs' figures and the rung whose runs are still to come (None
    once the ladder has stopped)."""

    in_play: list[Point]
    step: Step | None
    measured: list[RungRuns]
    waiting_on: int | None


def primary_values(records: Iterable[dict | None], primary: str) -> tuple[float, ...]:
    return tuple(
        float(r["figures"][primary])
        for r in records
        if r is not None and r.get("status") == "ok" and isinstance((r.get("figures") or {}).get(primary), int | float)
    )


def climb(members: list[Point], settings: StudySettings, layout: Layout, judge: Judge) -> Climb:
    """Walk one ladder's rungs (`members`: every point of it, every rung and repeat)."""
    ladder = settings.ladder
    assert ladder is not None
    by_rung: dict[int, list[Point]] = {}
    for point in members:
        by_rung.setdefault(point.nodes, []).append(point)
    app = app_for(members[0])
    primary = app.primary_metric
    kind = app.metric(primary).kind
    planned: list[Point] = []
    measured: list[RungRuns] = []
    step: Step | None = None
    rungs = [nodes for nodes in ladder.rungs() if nodes in by_rung]
    for k, nodes in enumerate(rungs):
        needed = repeats.in_play(by_rung[nodes], {settings.name: settings}, layout)
        planned += needed
        records = {p.id: read(layout.metrics(p.study, p.id))[0] for p in by_rung[nodes]}
        if any(records[p.id] is None for p in needed):
            return Climb(planned, step, measured, nodes)
        ranks = by_rung[nodes][0].ranks
        measured.append(RungRuns(nodes, ranks, primary_values(records.values(), primary)))
        step = judge(ladder, kind, settings.estimator, measured)
        if not step.climbs:
            # Rungs above the stop with a record (run before, e.g. as a list of nodes) stay.
            for above in rungs[k + 1 :]:
                planned += [p for p in by_rung[above] if read(layout.metrics(p.study, p.id))[0] is not None]
            return Climb(planned, step, measured, None)
    raise AssertionError("a ladder's last rung stops it")  # model.ladder.step: TOP


def ladder_studies(studies: Mapping[str, StudySettings]) -> set[str]:
    return {name for name, study in studies.items() if study.ladder is not None}


def climbs(points: Iterable[Point], studies: Mapping[str, StudySettings], layout: Layout,
           judge: Judge | None) -> dict[tuple[str, str], Climb]:  # fmt: skip
    """Each ladder's Climb, by (study, ladder_of)."""
    families: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        settings = studies.get(point.study)
        if settings is not None and settings.ladder is not None:
            families.setdefault((point.study, ladder_of(point)), []).append(point)
    if families and judge is None:
        raise ValueError("a study with a node ladder needs a judge (analysis.ladder.judge)")
    return {key: climb(members, studies[key[0]], layout, judge) for key, members in families.items()}


def decide(
    points: Iterable[Point], studies: Mapping[str, StudySettings], layout: Layout, judge: Judge | None = None
) -> tuple[list[Point], dict[tuple[str, str], Climb]]:
    """(the points in play now, in the sweep's order: a ladder's rungs as its climb leaves them,
    the repeats of every point as bookkeeping.repeats decides; each ladder's climb)."""
    points = list(points)
    laddered = ladder_studies(studies)
    if not laddered:
        return repeats.in_play(points, studies, layout), {}
    found = climbs(points, studies, layout, judge)
    kept = {(p.study, p.id) for c in found.values() for p in c.in_play}
    others = repeats.in_play([p for p in points if p.study not in laddered], studies, layout)
    kept |= {(p.study, p.id) for p in others}
    return [p for p in points if (p.study, p.id) in kept], found


def in_play(
    points: Iterable[Point], studies: Mapping[str, StudySettings], layout: Layout, judge: Judge | None = None
) -> list[Point]:
    return decide(points, studies, layout, judge)[0]
