"""Which rungs of a node ladder (model.ladder) are in play, from the records on disk.

Every rung is a point of the sweep (ids never change; the forecast and the budget count every
rung and intermediate rung). A ladder is one curve of its study: the points that differ only in
nodes and repeat. Its rungs are walked from the bottom: a rung is in play; once every repeat it
needs has a record (bookkeeping.repeats for repeats until clear) the judge (model.ladder.Judge,
handed down by the caller) decides from the finished rungs which rung comes into play next (the
next doubling, or an intermediate rung) or that the ladder stops. A scale not climbed that has a
record is kept (nothing finished is lost); the others are left out of the plan: never
submitted. The same walk makes the plan at load (resume goes on where the records stop) and each
round's decision (rule repeats_round): one mechanism for rounds of repeats and rungs. Studies
without a ladder read no record here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..apps.registry import app_for
from ..model.ladder import Judge, RungRuns, Step, settle
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
    has finished), the finished rungs' figures, the rung whose runs are still to come (None once
    the ladder has stopped) and every step decided so far, in order (which rung came next, why)."""

    in_play: list[Point]
    step: Step | None
    measured: list[RungRuns]
    waiting_on: int | None
    steps: tuple[Step, ...] = ()


def primary_values(records: Iterable[dict | None], primary: str) -> tuple[float, ...]:
    return tuple(
        float(r["figures"][primary])
        for r in records
        if r is not None and r.get("status") == "ok" and isinstance((r.get("figures") or {}).get(primary), int | float)
    )


def climb(members: list[Point], settings: StudySettings, layout: Layout, judge: Judge) -> Climb:
    """Walk one ladder (`members`: every point of it, every rung, intermediate rung and repeat)
    from its first rung to the rung each step chooses (model.ladder.step; a candidate measured
    already is read first: model.ladder.settle)."""
    ladder = settings.ladder
    assert ladder is not None
    by_rung: dict[int, list[Point]] = {}
    for point in members:
        by_rung.setdefault(point.nodes, []).append(point)
    app = app_for(members[0])
    primary = app.primary_metric
    kind = app.metric(primary).kind
    settings_of = {settings.name: settings}

    def needed(nodes: int) -> list[Point]:
        return repeats.in_play(by_rung[nodes], settings_of, layout)

    # Each rung's records are read once per walk: a candidate is read to settle a step and again
    # when the walk reaches it, and the stop keeps the other scales' records (nothing changes them
    # meanwhile: the walk only reads).
    read_rungs: dict[int, dict[str, dict | None]] = {}

    def records(nodes: int) -> dict[str, dict | None]:
        if nodes not in read_rungs:
            read_rungs[nodes] = {p.id: read(layout.metrics(p.study, p.id))[0] for p in by_rung[nodes]}
        return read_rungs[nodes]

    def finished(nodes: int) -> bool:
        found = records(nodes)
        return all(found[p.id] is not None for p in needed(nodes))

    planned: list[Point] = []
    measured: list[RungRuns] = []
    steps: list[Step] = []
    step: Step | None = None
    scales = [nodes for nodes in ladder.scales() if nodes in by_rung]
    nodes = scales[0]
    while True:
        now = needed(nodes)
        planned += now
        found = records(nodes)
        if any(found[p.id] is None for p in now):
            return Climb(planned, step, measured, nodes, tuple(steps))
        measured.append(RungRuns(nodes, by_rung[nodes][0].ranks, primary_values(found.values(), primary)))
        step = judge(ladder, kind, settings.estimator, measured)
        if step.climbs:
            step = settle(step, ladder, {n for n in ladder.candidates(step.top) if n in by_rung and finished(n)})
        steps.append(step)
        if not step.climbs:
            # Scales not climbed that have a record (run before, e.g. as a list of nodes) stay.
            walked = {rung.nodes for rung in measured}
            for other in scales:
                if other not in walked:
                    planned += [p for p in by_rung[other] if records(other)[p.id] is not None]
            return Climb(planned, step, measured, None, tuple(steps))
        assert step.next_nodes in by_rung, f"a ladder's next rung {step.next_nodes} is a point of its study"
        nodes = step.next_nodes


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
