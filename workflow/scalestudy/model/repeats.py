"""How many repeats a point runs: a fixed number, or until its answer is clear.

`repeats: 3` runs every point three times. `repeats: {min: 3, max: 10, ci: 5%}` runs min
repeats first, then one more per point while the 95% confidence interval of the mean of its
primary figure is wider than ± ci of the mean and max is not reached: a quiet machine spends
less, a noisy one more. The decision is made round by round from the repeats that have
finished (`needed`; bookkeeping.repeats, a checkpoint per round in the workflow). Every
repeat up to max is a point of the sweep (its id never changes), so the forecast and
budget_su_total count max.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Repeats:
    min: int
    max: int
    ci: float | None = None  # half-width of the 95% CI as a share of the mean; None: fixed

    @property
    def adaptive(self) -> bool:
        return self.ci is not None and self.max > self.min


def limits(setting: Any) -> Repeats:
    """A study's `repeats` (as the schema filled it) as limits."""
    if isinstance(setting, Mapping):
        return Repeats(int(setting["min"]), int(setting["max"]), float(str(setting["ci"]).rstrip("%")) / 100)
    return Repeats(int(setting), int(setting))


# A CI target is a half-width as a share of the mean: 0% is never met (every point would run
# max, which `repeats: max` says plainly) and 100% or more admits an interval reaching zero.
CI_TARGET_RANGE = "above 0% and below 100% (± that share of the mean), e.g. 5%"


def problems(setting: Any, where: str) -> list[str]:
    """What the schema cannot say: min above max, a CI target that is no target."""
    if not isinstance(setting, Mapping):
        return []
    found = []
    if int(setting["min"]) > int(setting["max"]):
        found.append(f"{where}.repeats: min {setting['min']} is above max {setting['max']}; use min <= max")
    target = float(str(setting["ci"]).rstrip("%")) / 100
    if not 0 < target < 1:
        found.append(f"{where}.repeats.ci: {setting['ci']} is not a CI target; use one {CI_TARGET_RANGE}")
    return found


def t_half_width(std: float, n: int, confidence: float = CONFIDENCE) -> float:
    """Half-width of the Student-t confidence interval of a mean of n values (n >= 2)."""
    # Imported here: planning loads this module, and scipy costs a second of every dry run.
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, n - 1) * std / math.sqrt(n))


def relative_ci(values: Iterable[float]) -> float:
    """The 95% CI's half-width as a share of the mean (inf with fewer than 2 values)."""
    x = [float(v) for v in values]
    if len(x) < 2:
        return math.inf
    mean = sum(x) / len(x)
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / (len(x) - 1))
    return t_half_width(std, len(x)) / abs(mean) if mean else math.inf


MAX_REACHED = "max"  # how `needed` says a point stopped at max, not at its CI target


def stopped_at_max(reason: str) -> bool:
    """Did `needed`'s reason say the point stopped at max (not at its CI target)?"""
    return reason.startswith(f"{MAX_REACHED} ")


def needed(repeats: Repeats, recorded: int, values: Iterable[float]) -> tuple[int, str]:
    """How many repeats of a point are to exist after this invocation, and why it stops there:
    `recorded` repeats (1..recorded) have a record, `values` the primary figure of the ok ones."""
    if not repeats.adaptive:
        return repeats.max, f"fixed at {repeats.max}"
    if recorded < repeats.min:
        return repeats.min, f"min {repeats.min} first"
    width = relative_ci(values)
    shown = "no CI" if math.isinf(width) else f"CI ±{width:.1%}"
    if width <= repeats.ci:
        return recorded, f"{shown} ≤ ±{repeats.ci:.0%}"
    if recorded >= repeats.max:
        return recorded, f"{MAX_REACHED} {repeats.max} reached ({shown})"
    return recorded + 1, f"{shown} > ±{repeats.ci:.0%}: one more"
