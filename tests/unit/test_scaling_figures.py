"""Each scaling figure (model.scaling_figures) held to a published value it did not make: Karp and
Flatt's serial fraction against Quinn's worked examples, speedup and efficiency against Amdahl's
law and Quinn's table, the weak-scaling figures against Gustafson's scaled speedup, and the
threshold at its boundary; the schema's default threshold is the module's."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scalestudy.analysis.scaling import efficiency_threshold
from scalestudy.config.sweep import defaults
from scalestudy.model import scaling_figures as figures
from scalestudy.presentation.scaling_section import summary_sentence

# M. J. Quinn, Parallel Programming in C with MPI and OpenMP (McGraw-Hill, 2004), section 7.5,
# examples 1 and 2: speedups on 2..8 processors (two decimals) and the experimentally determined
# serial fraction e of each (Karp & Flatt, CACM 33(5), 1990: e = (1/S − 1/p)/(1 − 1/p)).
QUINN_P = (2, 3, 4, 5, 6, 7, 8)
QUINN_1_SPEEDUP = (1.82, 2.50, 3.08, 3.57, 4.00, 4.38, 4.71)
QUINN_1_E = (0.10,) * 7  # constant e: the limited parallelism, not an overhead, bounds the speedup
QUINN_2_SPEEDUP = (1.87, 2.61, 3.23, 3.73, 4.14, 4.46, 4.71)
QUINN_2_E = (0.070, 0.075, 0.080, 0.085, 0.090, 0.095, 0.100)  # e grows with p: parallel overhead
# The speedups are rounded to two decimals, so e is known to about ±0.0015 (∂e/∂S · 0.005 at p = 2).
E_ROUNDING = 0.002


def amdahl_time(t1: float, serial: float, p: float) -> float:
    """Amdahl (1967): a run of serial fraction f on p processors takes T(1)·(f + (1 − f)/p)."""
    return t1 * (serial + (1 - serial) / p)


@pytest.mark.parametrize(("speedups", "serial"), [(QUINN_1_SPEEDUP, QUINN_1_E), (QUINN_2_SPEEDUP, QUINN_2_E)])
def test_karp_flatt_gives_quinns_serial_fractions(speedups, serial):
    found = [figures.karp_flatt(s, p) for s, p in zip(speedups, QUINN_P, strict=True)]
    assert found == pytest.approx(serial, abs=E_ROUNDING)


def test_karp_flatt_is_undefined_at_one_scale_and_recovers_amdahls_fraction():
    assert math.isnan(figures.karp_flatt(1.0, 1))
    # On a run that follows Amdahl's law exactly, e is its serial fraction at every p (Karp & Flatt's point).
    for p in (2, 4, 64, 1024):
        speedup = figures.speedup(100.0, amdahl_time(100.0, 0.05, p), "time")
        assert figures.karp_flatt(speedup, p) == pytest.approx(0.05, rel=1e-12)
    # Arrays (the scaling table's columns) elementwise, as the floats.
    speedups, q = np.array(QUINN_1_SPEEDUP), np.array(QUINN_P, dtype=float)
    assert figures.karp_flatt(speedups, q) == pytest.approx(QUINN_1_E, abs=E_ROUNDING)


def test_speedup_and_efficiency_follow_amdahls_law():
    # Amdahl with f = 0.1 on 8 processors: S = 1/(0.1 + 0.9/8) = 4.706 (Quinn's example 1: 4.71).
    time_at_8 = amdahl_time(60.0, 0.1, 8)
    speedup = figures.speedup(60.0, time_at_8, "time")
    assert speedup == pytest.approx(1 / (0.1 + 0.9 / 8), rel=1e-12) and round(speedup, 2) == 4.71
    # A rate (work per second) speeds up by the same factor, read the other way round.
    assert figures.speedup(1 / 60.0, 1 / time_at_8, "rate") == pytest.approx(speedup, rel=1e-12)
    # Parallel efficiency E = S/p: 4.71/8 = 0.59 in Quinn's table.
    assert figures.parallel_efficiency(speedup, 8) == pytest.approx(4.71 / 8, abs=0.001)
    # Against p0 rather than one processor: q = p/p0 (a curve starting at 48 ranks).
    assert figures.parallel_efficiency(figures.speedup(10.0, 5.0, "time"), 96 / 48) == 1.0


def test_csc_s_doubling_criterion_is_75_percent_efficiency_and_holds_the_default():
    # CSC (Sisu): doubling the cores must cut the wall time by a factor of 1.5.
    efficiency = figures.parallel_efficiency(figures.speedup(300.0, 200.0, "time"), 2)
    assert efficiency == 0.75
    assert not figures.falls_below(efficiency)


def test_weak_scaling_figures_give_gustafsons_scaled_speedup():
    # Gustafson (CACM 31(5), 1988): with serial fraction s of the parallel run's time, p processors
    # do p + (1 − p)·s times the work in the same time. As a rate of work (extensive) at fixed time:
    serial, p = 0.004, 1024
    work_rate = lambda processors: (serial + (1 - serial) * processors) / 10.0  # noqa: E731
    efficiency = figures.weak_efficiency(work_rate(1), work_rate(p), "rate", p, extensive=True)
    assert figures.scaled_speedup(efficiency, p) == pytest.approx(p + (1 - p) * serial, rel=1e-12)
    assert efficiency == pytest.approx((p + (1 - p) * serial) / p, rel=1e-12)
    # A time per step of fixed work per rank: T(p0)/T(p); a per-step rate (steps/s) as is.
    assert figures.weak_efficiency(10.0, 12.5, "time", 8) == 0.8
    assert figures.weak_efficiency(100.0, 80.0, "rate", 8, extensive=False) == 0.8


def test_a_zero_or_missing_figure_gives_inf_or_nan_not_an_error():
    assert figures.speedup(10.0, 0.0, "time") == math.inf
    assert math.isnan(figures.speedup(0.0, 0.0, "time"))
    assert math.isnan(figures.speedup(10.0, float("nan"), "rate"))


@pytest.mark.parametrize(
    ("efficiency", "below"),
    [(0.7, False), (0.7000001, False), (0.6999999, True), (0.0, True), (float("nan"), False)],
)
def test_the_threshold_at_its_boundary(efficiency, below):
    # At the threshold a scale holds it; a missing efficiency is not judged below it.
    assert figures.EFFICIENCY_THRESHOLD == 0.7
    assert figures.falls_below(efficiency) is below
    assert bool(figures.falls_below(np.array([efficiency]))[0]) is below


def test_the_schema_default_is_the_one_threshold():
    assert defaults()["study"]["efficiency_threshold"] == figures.EFFICIENCY_THRESHOLD


def boundary_table(efficiencies, threshold=None, spread=0.0) -> pd.DataFrame:
    """Efficiencies whose CIs are ± `spread` around them (0: the repeats agreed exactly)."""
    table = pd.DataFrame(
        {
            "study": "s", "variant": "v", "scaling": "strong", "metric": "rate", "metric_label": "steps/s",
            "unit": "steps/s", "kind": "rate", "nodes": [1, 2, 4], "ranks": [4, 8, 16], "n": 3, "mean": 1.0,
            "parallel_efficiency": efficiencies, "speedup": [1.0, 1.5, 2.0],
            "parallel_efficiency_ci_low": [e - spread for e in efficiencies],
            "parallel_efficiency_ci_high": [e + spread for e in efficiencies],
        }
    )  # fmt: skip
    if threshold is not None:
        table["efficiency_threshold"] = threshold
    return table


def test_the_summary_judges_against_the_studys_threshold_at_the_boundary():
    # The default where a table records none (an older scaling.csv, a published record).
    assert efficiency_threshold(boundary_table([1.0, 0.7, 0.69])) == figures.EFFICIENCY_THRESHOLD
    assert "holds ≥ 70% efficiency up to 2 nodes (p = 8)" in summary_sentence(boundary_table([1.0, 0.7, 0.69]))
    # The study's own threshold, as scaling.csv records it: 0.69 holds 0.69 to the largest scale.
    assert "holds ≥ 69% efficiency up to 4 nodes (p = 16)" in summary_sentence(boundary_table([1.0, 0.7, 0.69], 0.69))
    assert "falls below 80% efficiency already at 2 nodes (p = 8)" in summary_sentence(
        boundary_table([1.0, 0.7, 0.69], 0.8)
    )


def test_the_summary_judges_the_threshold_only_where_the_interval_is_on_one_side():
    # 0.75 [0.72–0.78] holds; 0.69 [0.66–0.72] straddles 0.7: no verdict, the interval and n said.
    sentence = summary_sentence(boundary_table([1.0, 0.75, 0.69], spread=0.03))
    assert "holds ≥ 70% efficiency up to 2 nodes (p = 8); cannot tell with n = 3 whether it holds ≥ 70%" in sentence
    assert "at 4 nodes (p = 16): efficiency 0.69 [0.66–0.72] (95% CI); raise repeats" in sentence
    assert "falls below" not in sentence
    # The same means with ± 0.005: 0.69 [0.685–0.695] is wholly below.
    sentence = summary_sentence(boundary_table([1.0, 0.75, 0.69], spread=0.005))
    assert "up to 2 nodes (p = 8); falls below 70% efficiency at 4 nodes (p = 16)" in sentence
    # No interval (a table without them, one repeat): nothing judged, and said why.
    table = boundary_table([1.0, 0.9, 0.8]).drop(columns=["parallel_efficiency_ci_low", "parallel_efficiency_ci_high"])
    sentence = summary_sentence(table)
    assert "cannot tell with n = 3 whether it holds ≥ 70% efficiency at 2 nodes (p = 8)" in sentence
    assert "holds ≥ 70% efficiency up to" not in sentence


def test_judge_by_the_interval():
    assert figures.judge(0.7, 0.9) == figures.HOLDS  # at the threshold holds it, as falls_below says
    assert figures.judge(0.5, 0.69) == figures.BELOW
    assert figures.judge(0.6, 0.8) == figures.UNDECIDED
    assert figures.judge(float("nan"), float("nan")) == figures.UNDECIDED
