"""The scaling figures, each defined once: speedup, parallel efficiency (strong and weak), the
Karp–Flatt serial fraction, and the efficiency threshold with the one rule that judges a scale
against it. The tables (analysis.scaling), the scaling models (analysis.scaling_models), the
plots and the page compute and judge them here; the glossary's texts (analysis.scaling's
DEFINITIONS) say the same in words.

p: total ranks at a scale; p0: the smallest scale of the curve with a successful run;
q = p/p0; a figure is a time T (lower is better) or a rate R (higher is better).

- speedup S(p) = T(p0)/T(p) for a time, R(p)/R(p0) for a rate;
- strong-scaling (parallel) efficiency E(p) = S(p)/q;
- weak-scaling efficiency (the work per rank held fixed): T(p0)/T(p) for a time, and for a rate
  that does not grow with the work (an MD run's time steps per second) R(p)/R(p0) as is; a rate
  that does (tokens/s, atom-steps/s: `Metric.extensive`) is divided by q first, (R(p)/p)/(R(p0)/p0);
  the scaled speedup is that efficiency × q (Gustafson);
- Karp–Flatt serial fraction e(p) = (1/S − 1/q)/(1 − 1/q) (Karp & Flatt, CACM 33(5), 1990),
  undefined at q = 1;
- a scale falls below the efficiency threshold where its efficiency < the threshold (a scale at
  the threshold holds it; a missing efficiency is not judged); judged with its uncertainty
  (`judge`), a scale holds it where its efficiency's whole confidence interval does, is below it
  where the whole interval is, and cannot be told otherwise. The default, EFFICIENCY_THRESHOLD,
  is the schema's default of a study's `efficiency_threshold` (a test holds them equal).

Pure Python: each function takes floats, or anything whose arithmetic is elementwise (a numpy
array, a pandas Series: the analysis passes its columns as they are), and imports no numpy (the
model layer is stdlib only at import).
"""

from __future__ import annotations

import math

# Below this parallel (or weak) efficiency a scale wastes more of its allocation than a centre
# accepts: NCI (Gadi's operator) asks for about 75% as a reasonable minimum of parallel use, CSC
# asks that doubling the cores cut the wall time by 1.5x (75% per doubling); docs/report.md.
EFFICIENCY_THRESHOLD = 0.7

# The glossary's text of each figure (the report's definitions, analysis.scaling.DEFINITIONS).
DEFINITIONS = {
    "speedup": "S(p) = T(p0)/T(p) (times) or R(p)/R(p0) (rates), p0 = smallest successful scale",
    "parallel_efficiency": "E(p) = S(p) · p0/p",
    "karp_flatt": "e(p) = (1/S − 1/q)/(1 − 1/q), q = p/p0",
    "weak_efficiency": "T(p0)/T(p) (times) or (R(p)/p)/(R(p0)/p0) (rates)",
    "scaled_speedup": "weak efficiency · p/p0",
}


def divide(numerator, denominator):
    """numerator/denominator, a zero denominator giving ±inf or nan (IEEE 754, as numpy and pandas
    divide) instead of raising: a failed scale's zero figure is a figure, not a crash."""
    try:
        return numerator / denominator
    except ZeroDivisionError:
        if numerator == 0 or math.isnan(numerator):
            return math.nan
        return math.copysign(math.inf, numerator) * math.copysign(1.0, denominator)


def speedup(base, value, kind: str):
    """S(p) = T(p0)/T(p) for a time (`kind` 'time'), R(p)/R(p0) for a rate: > 1 is faster.
    `base`: the figure at p0; `value`: at p."""
    return divide(base, value) if kind == "time" else divide(value, base)


def parallel_efficiency(speedup_at_p, q):
    """Strong scaling: E(p) = S(p)/q, q = p/p0 (1 at p0; 1 throughout is ideal)."""
    return divide(speedup_at_p, q)


def weak_efficiency(base, value, kind: str, q, extensive: bool = True):
    """Weak scaling (work per rank fixed): T(p0)/T(p) for a time; for a rate R(p)/R(p0) where it
    does not grow with the work (time steps/s), else (R(p)/p)/(R(p0)/p0) = (R(p)/R(p0))/q."""
    return weak_efficiency_of(speedup(base, value, kind), kind, q, extensive)


def weak_efficiency_of(ratio, kind: str, q, extensive: bool = True):
    """The weak efficiency of a ratio `speedup` gives (or of either end of its interval)."""
    return ratio if kind == "time" or not extensive else divide(ratio, q)


def ratio_order(base, value, kind: str):
    """(numerator, denominator) of `speedup`: (base, value) for a time, (value, base) for a rate:
    what an interval of the ratio is made from (analysis.statistics.ratio_ci)."""
    return (base, value) if kind == "time" else (value, base)


def scaled_speedup(weak_efficiency_at_p, q):
    """Gustafson's scaled speedup of a weak-scaling curve: its weak efficiency × q."""
    return weak_efficiency_at_p * q


def karp_flatt(speedup_at_p, q):
    """The experimentally determined serial fraction e = (1/S − 1/q)/(1 − 1/q) (Karp & Flatt 1990):
    0 for ideal speedup, 1 for none. Undefined at q = 1: nan for a float (an array's caller masks
    q ≤ 1, where this divides by zero)."""
    if isinstance(q, int | float) and q <= 1:
        return math.nan
    return divide(divide(1, speedup_at_p) - divide(1, q), 1 - divide(1, q))


# A scale judged against the threshold by its efficiency's interval (`judge`).
HOLDS, BELOW, UNDECIDED = "holds", "below", "cannot tell"


def judge(low, high, threshold: float = EFFICIENCY_THRESHOLD) -> str:
    """A scale's efficiency judged by its confidence interval [low, high]: HOLDS where the whole
    interval is at or above the threshold, BELOW where it is wholly below (falls_below), else
    UNDECIDED (the interval straddles it, or there is none: one repeat, an unbounded ratio)."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return UNDECIDED
    if not falls_below(low, threshold):
        return HOLDS
    return BELOW if falls_below(high, threshold) else UNDECIDED


def falls_below(efficiency, threshold: float = EFFICIENCY_THRESHOLD):
    """Whether a scale's parallel (or weak) efficiency falls below the threshold: efficiency <
    threshold. At the threshold a scale holds it; nan (no efficiency) is not below."""
    return efficiency < threshold
