"""Coverage of the speedup and efficiency intervals (analysis.statistics.ratio_ci: Fieller's interval
with Welch–Satterthwaite degrees of freedom), held to a truth the code does not know: repeats drawn
from known distributions at a baseline scale and a larger one, so the true speedup (the ratio of
the true means) is known; the 95% interval must hold it about 95% of the time.

    python benchmarks/ratio_intervals.py [--small] [--sims N]

Per scenario (repeats n per scale, the repeats' coefficient of variation at each scale, normal or
lognormal repeats, a time or a rate): how often the interval holds the true speedup among the
draws that have one, and how often it has none (unbounded: the divisor's mean within its own CI
of zero, said in words on the page). Beside it, for contrast, the delta-method interval a quick
calculation gives (ratio × (1 ± t·√(cv_a² + cv_b²)), t at the smaller n − 1): what an interval
that ignores the divisor's own uncertainty in its shape holds. Seeded (SEED): the same numbers
every run.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.analysis.statistics import CONFIDENCE, RATIO_CI_METHOD, ratio_ci  # noqa: E402
from scalestudy.model import scaling_figures as figures  # noqa: E402

SEED = 47
# (baseline mean, mean at the larger scale) of a time in s: true speedup 10/6 = 1.67 (efficiency
# 0.83 at q = 2); a rate's are the inverse figures (tokens/s), so the same speedup.
TIME_MEANS = (10.0, 6.0)
REPEATS = (2, 3, 5, 10)
SPREADS = ((0.02, 0.02), (0.10, 0.10), (0.05, 0.30), (0.30, 0.30))
SHAPES = ("normal", "lognormal")


def draw(rng: np.random.Generator, mean: float, cv: float, n: int, shape: str) -> np.ndarray:
    """n repeats whose true mean is `mean` and true standard deviation cv × mean."""
    if shape == "normal":
        return rng.normal(mean, cv * mean, n)
    sigma = math.sqrt(math.log1p(cv**2))
    return rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, n)


def delta_interval(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    ratio = a.mean() / b.mean()
    rel = math.sqrt(a.var(ddof=1) / a.size / a.mean() ** 2 + b.var(ddof=1) / b.size / b.mean() ** 2)
    t = stats.t.ppf(0.5 + CONFIDENCE / 2, min(a.size, b.size) - 1)
    return ratio * (1 - t * rel), ratio * (1 + t * rel)


def scenario(rng, n: int, cv0: float, cv1: float, shape: str, kind: str, sims: int) -> dict:
    """Draw `sims` studies of two scales; count the intervals that hold the true speedup."""
    base_mean, mean = TIME_MEANS if kind == "time" else (1 / TIME_MEANS[0], 1 / TIME_MEANS[1])
    truth = figures.speedup(base_mean, mean, kind)
    held = bounded = delta_held = 0
    for _ in range(sims):
        base, here = draw(rng, base_mean, cv0, n, shape), draw(rng, mean, cv1, n, shape)
        a, b = figures.ratio_order(base, here, kind)
        low, high, _why = ratio_ci(a.mean(), a.std(ddof=1), n, b.mean(), b.std(ddof=1), n)
        if not math.isnan(low):
            bounded += 1
            held += low <= truth <= high
        d_low, d_high = delta_interval(a, b)
        delta_held += d_low <= truth <= d_high
    return {"held": held, "bounded": bounded, "sims": sims, "delta_held": delta_held}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=4000, help="simulated studies per scenario")
    parser.add_argument("--small", action="store_true", help="200 per scenario (the test's size)")
    args = parser.parse_args()
    sims = 200 if args.small else args.sims
    rng = np.random.default_rng(SEED)
    print(f"{RATIO_CI_METHOD}, {CONFIDENCE:.0%}; true speedup {TIME_MEANS[0] / TIME_MEANS[1]:.4g}; seed {SEED}")
    print(f"{'kind':5} {'shape':9} {'n':>3} {'cv p0':>6} {'cv p':>6} {'held/bounded':>14} {'coverage':>9}"
          f" {'unbounded':>9} {'delta':>7}")  # fmt: skip
    totals = {"held": 0, "bounded": 0, "sims": 0, "delta_held": 0}
    normal = {"held": 0, "bounded": 0}
    for kind in ("time", "rate"):
        for shape in SHAPES:
            for n in REPEATS:
                for cv0, cv1 in SPREADS:
                    found = scenario(rng, n, cv0, cv1, shape, kind, sims)
                    for key in totals:
                        totals[key] += found[key]
                    if shape == "normal":
                        normal["held"] += found["held"]
                        normal["bounded"] += found["bounded"]
                    coverage = found["held"] / found["bounded"] if found["bounded"] else math.nan
                    unbounded, delta = 1 - found["bounded"] / sims, found["delta_held"] / sims
                    print(f"{kind:5} {shape:9} {n:3d} {cv0:6.0%} {cv1:6.0%} {found['held']:>6}/{found['bounded']:<7}"
                          f" {coverage:9.3f} {unbounded:9.3f} {delta:7.3f}")  # fmt: skip
    print(f"TOTAL normal repeats: coverage {normal['held'] / normal['bounded']:.4f} of {normal['bounded']} bounded"
          f" intervals (target {CONFIDENCE:.2f})")  # fmt: skip
    print(f"TOTAL all: coverage {totals['held'] / totals['bounded']:.4f} of {totals['bounded']} bounded intervals,"
          f" {totals['sims'] - totals['bounded']} of {totals['sims']} unbounded; delta method"
          f" {totals['delta_held'] / totals['sims']:.4f} of {totals['sims']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
