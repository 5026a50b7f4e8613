"""Which repeats of a study with `repeats: {min, max, ci}` this invocation plans.

The sweep holds every repeat up to max (ids never change; the forecast and the budget count
them). A repeat beyond those needed now is left out of the plan: not submitted, not waited
for by the study's tables. What is needed is decided from the records already written
(model.repeats.needed): min first, then one more per point while its CI is too wide; a
repeat that has a record is always kept (nothing finished is lost). Rerunning the same
command plans the next repeats, until every point stops. Studies with a fixed number of
repeats cost nothing here (no record is read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..apps import app_for
from ..model.paths import Layout
from ..model.point import Point
from ..model.repeats import limits, needed
from .history import read


def family(point: Point) -> str:
    """What a point's repeats share: its id without the repeat."""
    return dataclasses.replace(point, repeat=1).id


def in_play(points: Iterable[Point], studies: Mapping[str, Mapping[str, Any]], layout: Layout) -> list[Point]:
    """The points this invocation plans (see the module's docstring), in the sweep's order."""
    points = list(points)
    adaptive = {name for name, study in studies.items() if limits(study["repeats"]).adaptive}
    if not adaptive:
        return points
    families: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        if point.study in adaptive:
            families.setdefault((point.study, family(point)), []).append(point)
    keep: set[tuple[str, str]] = set()
    for (study, _family), members in families.items():
        members.sort(key=lambda p: p.repeat)
        records = [read(layout.metrics(p.study, p.id))[0] for p in members]
        recorded = next((i for i, record in enumerate(records) if record is None), len(records))
        primary = app_for(members[0]).primary_metric
        values = [
            r["figures"][primary]
            for r in records[:recorded]
            if r.get("status") == "ok" and isinstance((r.get("figures") or {}).get(primary), int | float)
        ]
        count, _why = needed(limits(studies[study]["repeats"]), recorded, values)
        keep.update((p.study, p.id) for p, record in zip(members, records, strict=True)
                    if p.repeat <= count or record is not None)  # fmt: skip
    return [p for p in points if p.study not in adaptive or (p.study, p.id) in keep]
