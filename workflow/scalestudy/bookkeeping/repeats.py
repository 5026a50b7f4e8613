"""Which repeats of a study with `repeats: {min, max, ci}` run, round by round.

The sweep holds every repeat up to max (ids never change; the forecast and the budget count
them). A repeat beyond those needed now is left out of the plan: not submitted, not waited
for by the study's tables. What is needed is decided from the records already written
(model.repeats.needed): min first, then one more per point while its CI is too wide; a
repeat that has a record is always kept (nothing finished is lost). The plan at load is
round 1 (`in_play`); after each round a checkpoint asks `next_round` which points run next,
from the records made so far, until none: one invocation goes on until every point stops.
Studies with a fixed number of repeats cost nothing here (no record is read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from ..apps.registry import app_for
from ..model.paths import Layout
from ..model.point import Point
from ..model.repeats import needed
from ..model.settings import StudySettings
from .history import read


def family(point: Point) -> str:
    """What a point's repeats share: its id without the repeat."""
    return dataclasses.replace(point, repeat=1).id


def adaptive_studies(studies: Mapping[str, StudySettings]) -> set[str]:
    """The studies whose repeats go on until clear (`repeats: {min, max, ci}`)."""
    return {name for name, study in studies.items() if study.repeat_limits.adaptive}


def in_play(points: Iterable[Point], studies: Mapping[str, StudySettings], layout: Layout) -> list[Point]:
    """The points needed now, from the records on disk (see the module's docstring), in the
    sweep's order."""
    return decide(points, studies, layout)[0]


def decide(
    points: Iterable[Point], studies: Mapping[str, StudySettings], layout: Layout
) -> tuple[list[Point], dict[str, str], set[tuple[str, str]]]:
    """(the points needed now, why each family of an adaptive study stops or goes on, which of
    the needed points have a record)."""
    points = list(points)
    adaptive = adaptive_studies(studies)
    if not adaptive:
        return points, {}, set()
    families: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        if point.study in adaptive:
            families.setdefault((point.study, family(point)), []).append(point)
    keep: set[tuple[str, str]] = set()
    recorded_ids: set[tuple[str, str]] = set()
    why: dict[str, str] = {}
    for (study, family_id), members in families.items():
        members.sort(key=lambda p: p.repeat)
        records = [read(layout.metrics(p.study, p.id))[0] for p in members]
        recorded = next((i for i, record in enumerate(records) if record is None), len(records))
        primary = app_for(members[0]).primary_metric
        values = [
            r["figures"][primary]
            for r in records[:recorded]
            if r.get("status") == "ok" and isinstance((r.get("figures") or {}).get(primary), int | float)
        ]
        count, why[family_id] = needed(studies[study].repeat_limits, recorded, values)
        keep.update((p.study, p.id) for p, record in zip(members, records, strict=True)
                    if p.repeat <= count or record is not None)  # fmt: skip
        recorded_ids.update((p.study, p.id) for p, record in zip(members, records, strict=True) if record is not None)
    return [p for p in points if p.study not in adaptive or (p.study, p.id) in keep], why, recorded_ids


def next_round(
    points: Iterable[Point], studies: Mapping[str, StudySettings], layout: Layout
) -> tuple[list[Point], dict[str, str]]:
    """After a round: the points of one adaptive study's next round (needed, no record yet; none
    when every point has stopped), and why each of its families stops or goes on."""
    planned, why, recorded = decide(points, studies, layout)
    return [p for p in planned if (p.study, p.id) not in recorded], why
