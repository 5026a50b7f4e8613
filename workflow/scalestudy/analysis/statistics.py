"""Statistics of a point's repeats: the mean with its Student-t confidence interval (or the
trimmed mean, a study's `estimator: trimmed_mean`), the median with its distribution-free
interval, outliers by modified z-score, whether repeats look near-normal, and the exact
Mann–Whitney distribution the rank-based verdicts use (scalestudy.analysis.verdicts).

- repeats: mean, sample standard deviation, 95% confidence interval of the
  mean (Student t, n - 1 degrees of freedom), n = successful repeats; with a
  study's `estimator: trimmed_mean` (MLPerf's rule) the fastest and the slowest
  run are dropped first (n >= 3) and the statistics are those of the rest; a run is
  flagged as an outlier when its modified z-score |0.6745 (x - median) / MAD|
  exceeds 3.5 (Iglewicz & Hoaglin; needs n >= 3), with the MAD taken as at
  least 1% of the median. Outliers are flagged, not dropped.
- a ratio of two points' means (speedup, efficiency: the baseline scale's repeats and this
  scale's, independent): Fieller's interval with the Welch–Satterthwaite degrees of freedom
  (`ratio_ci`, RATIO_CI_METHOD), none where either side has fewer than 2 repeats.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy import stats

from ..model.repeats import t_half_width

CONFIDENCE = 0.95
OUTLIER_Z = 3.5
# With 3 repeats, two that nearly coincide make the MAD tiny and any third one an
# "outlier" (10.00, 10.01, 10.4 s scored 26). Run-to-run noise of timings on shared
# machines is rarely below 1%, so a smaller spread is not a yardstick.
MAD_FLOOR = 0.01
# How a point's repeats become its figure (a study's `estimator:`; the schema holds the default).
MEAN, TRIMMED_MEAN = "mean", "trimmed_mean"
ESTIMATOR_NAMES = {MEAN: "mean", TRIMMED_MEAN: "trimmed mean (MLPerf: fastest and slowest run dropped)"}
# Near-normal: no outlier among the repeats and Shapiro–Wilk on their logs not rejected at 5%.
NORMALITY_ALPHA = 0.05
# How the interval of a ratio of two means (speedup, efficiency) is made: `ratio_ci`.
RATIO_CI_METHOD = "Fieller's interval with Welch–Satterthwaite degrees of freedom"

DEFINITIONS = {
    "mean ± CI (n)": "mean of the n successful repeats ± half-width of its 95% confidence interval (Student t)",
    "trimmed mean": (
        "estimator: trimmed_mean (MLPerf's rule): the fastest and the slowest successful run dropped (n ≥ 3), "
        "the mean ± 95% CI of the rest; n counts every successful repeat"
    ),
    "outlier": (
        "modified z-score |0.6745 (x − median)/MAD| > 3.5 among the repeats (n ≥ 3; MAD ≥ 1% of the median); "
        "flagged, kept"
    ),
    "ratio CI": (
        f"the {CONFIDENCE:.0%} CI of a ratio of two means (speedup, efficiency: the repeats at p0 and at p,"
        f" independent): {RATIO_CI_METHOD}, all θ with (a − θ·b)² ≤ t²·(se_a² + θ²·se_b²), t at"
        " ν = (se_a² + θ̂²se_b²)²/(se_a⁴/(n_a − 1) + θ̂⁴se_b⁴/(n_b − 1)); none with one repeat at either scale"
        " (no spread), unbounded where b's own CI reaches zero"
    ),
    "median": "median of the successful repeats with its distribution-free 95% CI: the order statistics"
    " x(k), x(n+1−k) of the largest k with binomial(n, ½) coverage ≥ 95% (none below n = 6)",
}


def summarize(values: Iterable[float], confidence: float = CONFIDENCE, estimator: str = MEAN) -> dict:
    """n, mean, sample std and the Student-t confidence interval of the mean. With
    `trimmed_mean` (n >= 3) the lowest and highest value are dropped first: mean, std and CI
    are those of the rest, whose count is `n_used` (n stays the successful repeats)."""
    x = np.sort(np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float))
    n = int(x.size)
    if estimator == TRIMMED_MEAN and n >= 3:
        x = x[1:-1]
    used = int(x.size)
    out = {"n": n, "n_used": used, "mean": np.nan, "std": np.nan, "ci95": np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "median": np.nan, "median_ci_low": np.nan, "median_ci_high": np.nan}  # fmt: skip
    if used == 0:
        return out
    out["mean"] = float(x.mean())
    out.update(median_ci(x, confidence))
    if used > 1:
        out["std"] = float(x.std(ddof=1))
        half = t_half_width(out["std"], used, confidence)
        out.update(ci95=half, ci_low=out["mean"] - half, ci_high=out["mean"] + half)
    return out


def median_ci(sorted_values: np.ndarray, confidence: float = CONFIDENCE) -> dict:
    """The median and its distribution-free confidence interval: the order statistics
    x(k), x(n+1-k) with the largest k whose binomial(n, 1/2) coverage is at least `confidence`
    (no assumption about the shape of the repeats; needs n >= 6 for 95%, else no interval)."""
    x = sorted_values
    n = int(x.size)
    out = {"median": float(np.median(x)) if n else np.nan, "median_ci_low": np.nan, "median_ci_high": np.nan}
    best = median_rank(n, confidence)
    if best:
        out.update(median_ci_low=float(x[best - 1]), median_ci_high=float(x[n - best]))
    return out


@functools.cache
def median_rank(n: int, confidence: float) -> int:
    """The largest k whose order statistics x(k), x(n+1-k) cover the median with `confidence`
    (0: none); the same for every point of n repeats, so found once per n."""
    # P(x(k) <= median < x(n+1-k)) = 1 - 2 P(B <= k-1), B ~ binomial(n, 1/2)
    best = 0
    for k in range(1, n // 2 + 1):
        if 1 - 2 * stats.binom.cdf(k - 1, n, 0.5) >= confidence:
            best = k
    return best


def outlier_mask(values: pd.Series) -> pd.Series:
    """Modified z-score > 3.5 (median/MAD: with 3 repeats a mean/std rule can never fire)."""
    x = values.astype(float)
    if x.notna().sum() < 3:
        return pd.Series(False, index=values.index)
    median = x.median()
    mad = max((x - median).abs().median(), MAD_FLOOR * abs(median))
    if mad == 0:
        # All at zero, or half the repeats or more identical at zero: no yardstick.
        return pd.Series(False, index=values.index)
    return (0.6745 * (x - median) / mad).abs() > OUTLIER_Z


def near_normal(values: np.ndarray) -> bool:
    """Do these repeats fit a comparison that assumes normal (log) values? No outlier (modified
    z-score) and Shapiro–Wilk on the logs not rejected; fewer than 3 cannot tell (Welch)."""
    x = np.asarray(values, dtype=float)
    return near_normal_values(tuple(x[np.isfinite(x) & (x > 0)]))


@functools.lru_cache(maxsize=4096)
def near_normal_values(kept: tuple[float, ...]) -> bool:
    """near_normal of the finite, positive values, once per set of them (a baseline's repeats
    are checked in every comparison it is part of)."""
    x = np.asarray(kept, dtype=float)
    if x.size < 3:
        return True
    if outlier_mask(pd.Series(x)).any():
        return False
    logs = np.log(x)
    if np.ptp(logs) == 0:
        return True
    return bool(stats.shapiro(logs).pvalue >= NORMALITY_ALPHA)


@functools.cache
def mann_whitney_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) rankings give each value of U (exact, no ties)."""
    if m == 0 or n == 0:
        return (1,)
    a, b = mann_whitney_counts(m - 1, n), mann_whitney_counts(m, n - 1)
    counts = [0] * (m * n + 1)
    for u, c in enumerate(a):
        counts[u + n] += c
    for u, c in enumerate(b):
        counts[u] += c
    return tuple(counts)


def rank_cut(m: int, n: int, confidence: float = CONFIDENCE) -> int:
    """C: the CI of the Hodges–Lehmann shift is the C-th smallest and largest of the m·n
    pairwise differences, C the largest with P(U < C) <= (1 - confidence)/2 (0: none exists)."""
    alpha = (1 - confidence) / 2
    if m * n > 2500:  # the normal approximation of U
        z = stats.norm.ppf(1 - alpha)
        return max(0, int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12))))
    counts = mann_whitney_counts(m, n)
    total, below, cut = sum(counts), 0, 0
    for u, c in enumerate(counts):
        if (below + c) / total > alpha:
            break
        below += c
        cut = u + 1
    return cut


# Why a ratio has no interval (ratio_ci's note; '' where it has one).
ONE_REPEAT = "one repeat has no spread"
UNBOUNDED = "the divisor's mean is within its own CI of zero: the ratio's interval is unbounded"


def ratio_ci(
    a: float, sd_a: float, n_a: int, b: float, sd_b: float, n_b: int, confidence: float = CONFIDENCE
) -> tuple[float, float, str]:
    """The `confidence` interval of a/b, a and b the means of n_a and n_b independent repeats
    with sample standard deviations sd_a, sd_b: Fieller's (1954) set of θ whose
    (a − θb)/√(se_a² + θ²se_b²) is within Student's t, with the Welch–Satterthwaite degrees of
    freedom at θ = a/b (Fieller's interval for heteroscedastic samples). Returns (low, high,
    why none): nan, nan and the reason where either side has fewer than 2 repeats, or b's own
    interval reaches zero (the set is then unbounded)."""
    if n_a < 2 or n_b < 2 or any(v is None or not math.isfinite(v) for v in (a, sd_a, b, sd_b)):
        return math.nan, math.nan, ONE_REPEAT
    if b == 0:
        return math.nan, math.nan, UNBOUNDED
    ratio = a / b
    var_a, var_b = sd_a**2 / n_a, sd_b**2 / n_b
    if var_a == 0 and var_b == 0:  # identical repeats on both sides: no spread, the ratio is all there is
        return ratio, ratio, ""
    # Welch–Satterthwaite's df over the two terms, each scaled by the larger: a side without spread (a
    # figure 0 at every repeat) gives the other side's n − 1, the formula's limit, instead of 0/0.
    u, v = var_a, ratio**2 * var_b
    scale = max(u, v)
    if scale == 0:  # a is 0 at every repeat: only b's spread is left
        df = n_b - 1
    else:
        u, v = u / scale, v / scale
        df = (u + v) ** 2 / (u**2 / (n_a - 1) + v**2 / (n_b - 1))
    t = float(stats.t.ppf(0.5 + confidence / 2, df))
    g = t**2 * var_b / b**2
    if g >= 1:
        return math.nan, math.nan, UNBOUNDED
    half = t / abs(b) * math.sqrt(var_a + ratio**2 * var_b - g * var_a)
    return (ratio - half) / (1 - g), (ratio + half) / (1 - g), ""
