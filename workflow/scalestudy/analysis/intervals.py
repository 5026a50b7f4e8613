"""Calibrated prediction intervals of a scaling model (analysis.pmnf) at scales not measured, and
the one scale whose measurement most narrows the interval at a target.

Why the bootstrap of analysis.pmnf is not enough: it spreads the repeats' noise and the in-sample
residuals of a few smooth points, but past the largest measured scale what dominates is the error
of the model's form (a rate that saturates, communication that grows): on published series the
bootstrap's 95% intervals held about a third of the held-out points. So an interval here is, in
log space (a time's interval is exactly the inverse of the rate's, and never reaches zero):

    log f(p) ± [ w(p) + c · d(p) ],   d(p) = max(0, log2(p / largest measured scale))

- w(p): the bootstrap's half-width (pmnf.draws, in log space): the noise and the choice of model;
- c: the distance term, per doubling beyond the largest measured scale: the larger of
  - `Calibration.slope[level]`: the conformal quantile of (|log(published/predicted)| − w) / d
    over leave-future-out backtests of the calibration half of the published series
    (benchmarks/data/published_strong_scaling.csv; fit on the first k scales, predict the rest),
    written by benchmarks/calibrate_intervals.py into CALIBRATION_FILE (nothing typed by hand);
  - the study's own leave-future-out backtest (`own_slope`): the same score on its measured
    scales (fit on the first k, predict k+1..n), where it has more than pmnf.MIN_SCALES scales.
That is the interval of a figure not of strong scaling. For strong scaling (the published
series' kind) the first doubling beyond the largest measured scale is sharper (issue 47): with
d1 = min(d, 1) and d2 = max(d − 1, 0),

    [ log f(p) + b·d1 − w − c_low·d1 − c·d2 ,  log f(p) + b·d1 + w + c_high·d1 + c·d2 ]

- b (`Calibration.lean`): the calibration half's lean (below 0: the models promise more than was
  published): the median of log(published/predicted)/d over its backtest predictions, shrunk
  toward 0 by a factor in [0, 1] chosen leave-one-series-out on that half alone (its 5 series,
  not its predictions, are the independent units; benchmarks/calibrate_intervals.py,
  `lean_shrinkage`, says how);
- c_low, c_high (`Calibration.low`, `.high`): split conformal terms on each side of that corrected
  centre, each backtest prediction weighing 1, the interval allowed to miss ⌊N − L(N + 1)⌋ of the
  N predictions, half on each side (equal tails), each the larger of the calibrated one and the
  study's own backtest's (`own_terms`);
- c: the symmetric term above, for each doubling past the first (the per-doubling terms come
  from all distances, mostly of misses past 2×; beyond it the conservative term is kept).
The model is fitted to the figure as a rate (a time is inverted first: `orient`), so that the
rate's and the time's answers are one answer. Where the interval spans more than USEFUL_SPAN
(high/low), there is no useful prediction: `Interval.reasons` says why in words.

Numpy and analysis.pmnf only (the bottom of the scaling models, in the analysis: numpy is the report side's).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import pmnf

CALIBRATION_FILE = Path(__file__).with_name("interval_calibration.json")
# The levels the calibration holds (nominal coverage of a two-sided interval).
LEVELS = (0.80, 0.95)
# An interval whose high/low is above this says too little to spend an allocation on: words instead.
USEFUL_SPAN = 2.0
# Repeats whose relative standard deviation at one scale exceeds this disagree too much for a model.
WILD_SPREAD = 0.5
# The kinds of figure an interval is made for (a rate rises with p, a time falls); others: none.
KINDS = ("rate", "time")


@dataclass(frozen=True)
class Calibration:
    """The distance terms per level (log units per doubling) and where they came from: `slope`,
    symmetric (a figure not of strong scaling); `lean`, `low` and `high` (strong scaling: the
    centre's correction per doubling, and the terms below and above it: see `interval`)."""

    slope: dict[float, float]
    series: tuple[str, ...] = ()
    points: int = 0
    made_by: str = ""
    lean: float = 0.0
    low: dict[float, float] = field(default_factory=dict)
    high: dict[float, float] = field(default_factory=dict)

    def at(self, level: float, table: dict[float, float] | None = None) -> float:
        table = self.slope if table is None else table
        if level in table:
            return table[level]
        raise ValueError(f"level {level}: not calibrated (calibrated: {', '.join(f'{v:g}' for v in table)})")


@functools.lru_cache(maxsize=1)
def calibration() -> Calibration:
    """CALIBRATION_FILE, as benchmarks/calibrate_intervals.py wrote it."""
    data = json.loads(CALIBRATION_FILE.read_text())
    strong = data.get("strong", {})
    return Calibration(
        slope={float(k): float(v) for k, v in data["slope"].items()},
        series=tuple(data.get("series", ())),
        points=int(data.get("points", 0)),
        made_by=str(data.get("made_by", "")),
        lean=float(strong.get("lean", 0.0)),
        low={float(k): float(v) for k, v in strong.get("low", {}).items()},
        high={float(k): float(v) for k, v in strong.get("high", {}).items()},
    )


def distance(at, largest: float) -> np.ndarray:
    """Doublings beyond the largest measured scale (0 inside the measured range)."""
    return np.fmax(np.log2(np.asarray(at, dtype=float) / float(largest)), 0.0)


def orient(y, kind: str) -> np.ndarray:
    """The figure as a rate (higher is better; a time inverted). Tried the other way (a rate
    inverted to a time, Amdahl's c + a/p being a PMNF form): the time models of the published
    series' first scales went to or below zero past the measured range in 92 of 169
    leave-future-out predictions (`backtest`, all 11 series), where a rate's stay above it."""
    y = np.asarray(y, dtype=float)
    return 1.0 / y if kind == "time" else y


def tail(level: float) -> float:
    return (1 - level) / 2 * 100


def bootstrap_halfwidth(found: pmnf.Fit, at: np.ndarray, se: np.ndarray | None, level: float) -> np.ndarray:
    """The bootstrap interval of pmnf.draws as a half-width in log space around the best model
    (inf where its low end reaches zero: the model's own noise allows no positive figure)."""
    value = found.best(at)
    sample = pmnf.draws(found, at, se)
    low, high = np.percentile(sample, [tail(level), 100 - tail(level)], axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.log(np.fmax(high, value) / value)
        down = np.where(low > 0, np.log(value / np.fmin(low, value)), np.inf)
    return np.where(value > 0, np.fmax(up, down), np.inf)


def backtest(p, rate, se=None, level: float = pmnf.CONFIDENCE) -> list[tuple[float, float]]:
    """Leave-future-out on measured scales (a figure as a rate: `orient`): for each k from
    MIN_SCALES to n − 1, the model of the first k scales predicts each later one: (doublings,
    what the symmetric distance term must be per doubling to hold it; inf where the model
    predicts no positive figure) per prediction, from `misses`."""
    return [(m.doublings, (abs(m.error) - m.halfwidth) / m.doublings) for m in misses(p, rate, se, level)]


@dataclass(frozen=True)
class Miss:
    """One leave-future-out prediction of a rate: its doublings beyond the fitted scales, its error
    log(published / predicted) (below 0: the model promised more than was published), and the
    bootstrap's half-width there."""

    doublings: float
    error: float
    halfwidth: float

    def high_score(self, lean: float) -> float:
        """The term per doubling above the lean-corrected centre that holds this point."""
        return (self.error - lean * self.doublings - self.halfwidth) / self.doublings

    def low_score(self, lean: float) -> float:
        """The term per doubling below the lean-corrected centre that holds this point."""
        return (lean * self.doublings - self.error - self.halfwidth) / self.doublings


def misses(p, rate, se=None, level: float = pmnf.CONFIDENCE) -> list[Miss]:
    """`backtest`'s predictions with their signed errors (-inf where the model predicts no positive
    figure: no term holds it). Cached: the interval's terms and own_slope share one backtest."""
    key = (tuple(np.asarray(p, float)), tuple(np.asarray(rate, float)))
    return list(cached_misses(*key, None if se is None else tuple(np.asarray(se, float)), level))


@functools.lru_cache(maxsize=4096)
def cached_misses(p: tuple, rate: tuple, se: tuple | None, level: float) -> tuple[Miss, ...]:
    p, rate = np.asarray(p, dtype=float), np.asarray(rate, dtype=float)
    se = None if se is None else np.asarray(se, dtype=float)
    out = []
    for k in range(pmnf.MIN_SCALES, len(p)):
        found = pmnf.fit(p[:k], rate[:k])
        if found.best is None:
            continue
        later = p[k:]
        w = bootstrap_halfwidth(found, later, None if se is None else se[:k], level)
        predicted = found.best(later)
        for j, at in enumerate(later):
            if not rate[k + j] > 0:
                continue
            error = math.log(rate[k + j] / predicted[j]) if predicted[j] > 0 else -math.inf
            out.append(Miss(float(distance(at, p[k - 1])), error, float(w[j])))
    return tuple(out)


def own_terms(p, rate, se=None, level: float = pmnf.CONFIDENCE, lean: float = 0.0) -> tuple[float, float]:
    """The largest terms below and above the lean-corrected centre that the study's own
    leave-future-out backtest asks for ((0, 0) where it has too few scales to test one). Cached:
    the page, the plot and the table ask for one curve's interval several times."""
    key = (tuple(np.asarray(p, float)), tuple(np.asarray(rate, float)))
    return cached_own_terms(*key, None if se is None else tuple(np.asarray(se, float)), level, lean)


@functools.lru_cache(maxsize=4096)
def cached_own_terms(p: tuple, rate: tuple, se: tuple | None, level: float, lean: float) -> tuple[float, float]:
    found = misses(p, rate, None if se is None else np.asarray(se), level)
    low = max([0.0, *(m.low_score(lean) for m in found)])
    high = max([0.0, *(m.high_score(lean) for m in found)])
    return low, high


def own_slope(p, rate, se=None, level: float = pmnf.CONFIDENCE) -> float:
    """The largest distance term the study's own leave-future-out backtest asks for (0 where it
    has too few scales to test one). Cached: the page, the plot and the table ask for one curve's
    interval several times."""
    key = (tuple(np.asarray(p, float)), tuple(np.asarray(rate, float)))
    return cached_own_slope(*key, None if se is None else tuple(np.asarray(se, float)), level)


def cached_own_slope(p: tuple, rate: tuple, se: tuple | None, level: float) -> float:
    """`backtest`'s largest score, from the shared backtest (`cached_misses`)."""
    scores = [(abs(m.error) - m.halfwidth) / m.doublings for m in cached_misses(p, rate, se, level)]
    return max([0.0, *scores])


@dataclass
class Interval:
    """A calibrated prediction at `at` (the figure as measured: a time stays a time)."""

    at: np.ndarray
    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    doublings: np.ndarray
    slope: float = 0.0  # the larger distance term in force (log units per doubling)
    reasons: list[str] = field(default_factory=list)  # per `at`: '' where the interval is useful
    lean: float = 0.0  # the centre's correction per doubling beyond the largest measured scale (log units)

    @property
    def span(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.low > 0, self.high / self.low, np.inf)

    def useful(self) -> np.ndarray:
        return np.array([not r for r in self.reasons], dtype=bool)

    def plus_minus(self) -> np.ndarray:
        """The interval's half-width as a fraction of the value (in log space: (high/low)^(1/2) − 1)."""
        return np.sqrt(self.span) - 1


def nothing(at: np.ndarray, level: float, reason: str) -> Interval:
    empty = np.full(at.shape, np.nan)
    return Interval(at, empty, empty, empty, level, np.full(at.shape, np.nan), reasons=[reason] * len(at))


def data_problem(p, y, spread=None) -> str:
    """Why these measurements support no model ('' where they do): too few scales, a figure not
    above zero, repeats that disagree wildly."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    scales = len(np.unique(p))
    if scales < pmnf.MIN_SCALES:
        return pmnf.too_few(scales) + ": no prediction"
    if not (np.isfinite(y).all() and (y > 0).all()):
        return "a measured mean is zero, negative or missing: no prediction in log space"
    if spread is not None:
        spread = np.asarray(spread, dtype=float)
        wild = np.nonzero(np.nan_to_num(spread, nan=0.0) > WILD_SPREAD)[0]
        if wild.size:
            k = wild[0]
            return (
                f"the repeats at p = {p[k]:g} disagree wildly (standard deviation {spread[k]:.0%} of their mean,"
                f" above {WILD_SPREAD:.0%}): no prediction until they are measured again"
            )
    return ""


def interval(
    p: Sequence[float],
    y: Sequence[float],
    at: Sequence[float],
    kind: str,
    se: Sequence[float] | None = None,
    spread: Sequence[float] | None = None,
    level: float = pmnf.CONFIDENCE,
    calibrated: Calibration | None = None,
    scaling: str = "strong",
) -> Interval:
    """The calibrated interval of figure y (a 'rate' or a 'time', one mean per scale p; se: the
    standard error of each mean; spread: the repeats' relative standard deviation) at `at`, for a
    study of `scaling` ('strong': the lean-corrected centre and its own terms below and above it,
    where the calibration has them; else the symmetric term)."""
    at = np.atleast_1d(np.asarray(at, dtype=float))
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: an interval is made for a rate or a time")
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    order = np.argsort(p)
    p, y = p[order], y[order]
    problem = data_problem(p, y, None if spread is None else np.asarray(spread, dtype=float)[order])
    if problem:
        return nothing(at, level, problem)
    rate = orient(y, kind)
    rate_se = None
    if se is not None:
        se = np.asarray(se, dtype=float)[order]
        rate_se = se / y**2 if kind == "time" else se
    found = pmnf.fit(p, rate)
    if found.best is None:
        return nothing(at, level, found.reason)
    calibrated = calibrated or calibration()
    doublings = distance(at, p.max())
    model = found.best(at)
    w = bootstrap_halfwidth(found, at, rate_se, level)
    strong = scaling == "strong" and level in calibrated.low and level in calibrated.high
    if strong:
        # The first doubling: the centre corrected for the calibration series' lean, its own terms
        # below and above; each further doubling: the symmetric term (see the module's docstring).
        lean = calibrated.lean
        own_low, own_high = own_terms(p, rate, rate_se, level, lean)
        below = max(calibrated.at(level, calibrated.low), own_low)
        above = max(calibrated.at(level, calibrated.high), own_high)
        wide = max(calibrated.at(level), own_slope(p, rate, rate_se, level))
        first, further = np.fmin(doublings, 1.0), np.fmax(doublings - 1.0, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            centre = np.log(model) + lean * first
        up = centre + w + above * first + wide * further
        down = centre - w - below * first - wide * further
        slope = max(below, above, wide if (doublings > 1).any() else 0.0)
    else:
        lean, slope = 0.0, max(calibrated.at(level), own_slope(p, rate, rate_se, level))
        with np.errstate(divide="ignore", invalid="ignore"):
            centre = np.log(model)
        up, down = centre + w + slope * doublings, centre - w - slope * doublings
    with np.errstate(over="ignore", invalid="ignore"):
        center, low, high = np.exp(centre), np.exp(down), np.exp(up)
    if kind == "time":  # the time's interval is the rate's, inverted
        with np.errstate(divide="ignore"):
            center, low, high = 1 / center, 1 / high, 1 / low
    reasons = []
    for k in range(len(at)):
        if not model[k] > 0:
            reasons.append("the model leaves the figure's range here (at or below zero): no prediction")
            continue
        log_span = float(up[k] - down[k])
        span = math.exp(log_span) if math.isfinite(log_span) else math.inf
        if span > USEFUL_SPAN:
            reasons.append(span_reason(span, float(doublings[k]), float(w[k]), slope, level))
        else:
            reasons.append("")
    return Interval(at, center, low, high, level, doublings, slope, reasons, lean)


def span_reason(span: float, doublings: float, w: float, slope: float, level: float) -> str:
    """Why an interval spanning more than USEFUL_SPAN is not given as a number."""
    size = "without bound" if math.isinf(span) else f"{span:.1f}×"
    if doublings > 0 and slope * doublings >= w:
        why = (
            f"{doublings:.1f} doublings beyond the largest measured scale, and models of this form missed"
            f" held-out published points by up to ×{math.exp(slope):.2f} per doubling (on one side)"
        )
    else:
        why = "the measured scales leave the model itself uncertain (noisy repeats or several forms fit alike)"
    return f"no useful prediction: the {level:.0%} interval spans {size} (more than ×{USEFUL_SPAN:g}): {why}"


# ---------------------------------------------------------------- where to measure next


def target_problem(target: float, largest: float, beyond: float) -> str:
    """Why a target scale cannot be predicted ('' where it can): measured already, or past
    predict_up_to times the largest measured scale."""
    if not (math.isfinite(target) and target > 0):
        return f"target scale {target:g}: use a number of ranks above 0"
    if target <= largest:
        return f"target scale {target:g}: measured range already reaches p = {largest:g}; use a larger scale"
    if target > largest * beyond + 1e-9:
        return (
            f"target scale {target:g}: beyond predict_up_to ({beyond:g}× the largest measured scale,"
            f" p = {largest * beyond:g}); use a smaller target or raise predict_up_to"
        )
    return ""


@dataclass
class NextScale:
    """The measurement that most narrows the interval at `target`, and what the others would do."""

    target: float
    before: Interval
    scale: float  # the one to measure (nan: none helps)
    after: Interval | None  # the expected interval at target once it is measured
    widths: dict[float, float]  # each candidate's expected span (high/low) at target


def candidates(largest: float, target: float, step: float = 1.0) -> np.ndarray:
    """The scales a sweep would add between the largest measured and the target: 1.5x, 2x, 3x,
    4x, 6x, ... the largest, in whole multiples of `step` (ranks per node: whole nodes)."""
    out = set()
    factor = 1.0
    while largest * factor < target:
        for m in (1.5, 2.0):
            value = round(largest * factor * m / step) * step
            if largest < value < target:
                out.add(value)
        factor *= 2
    return np.array(sorted(out), dtype=float)


def measure_next(
    p: Sequence[float],
    y: Sequence[float],
    kind: str,
    target: float,
    se: Sequence[float] | None = None,
    choices: Sequence[float] | None = None,
    level: float = pmnf.CONFIDENCE,
    calibrated: Calibration | None = None,
    scaling: str = "strong",
) -> NextScale:
    """For each candidate scale (`choices`, default `candidates`), the interval at `target` after
    measuring it, the measurement taken as the model expects it there (its standard error as the
    largest measured scale's, relative): the candidate with the narrowest expected interval."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    before = interval(p, y, [target], kind, se, level=level, calibrated=calibrated, scaling=scaling)
    choices = candidates(p.max(), target) if choices is None else np.asarray(choices, dtype=float)
    widths: dict[float, float] = {}
    best, best_after = math.nan, None
    if not np.isfinite(before.value).all():
        return NextScale(target, before, best, None, widths)
    rate = orient(y, kind)
    found = pmnf.fit(p, rate)
    relative_se = None
    if se is not None:
        se = np.asarray(se, dtype=float)
        relative_se = float(np.nan_to_num(se[np.argmax(p)] / y[np.argmax(p)], nan=0.0))
    for choice in choices:
        expected_rate = float(found.best(np.array([choice]))[0])
        if not expected_rate > 0:
            continue
        expected = 1 / expected_rate if kind == "time" else expected_rate
        more_se = None if se is None else np.append(se, expected * relative_se)
        after = interval(np.append(p, choice), np.append(y, expected), [target], kind, more_se, level=level,
                         calibrated=calibrated, scaling=scaling)  # fmt: skip
        widths[float(choice)] = float(after.span[0])
        if best_after is None or after.span[0] < best_after.span[0]:
            best, best_after = float(choice), after
    return NextScale(target, before, best, best_after, widths)
