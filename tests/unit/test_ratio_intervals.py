"""The speedup and efficiency intervals (analysis.statistics.ratio_ci, Fieller's interval with
Welch–Satterthwaite degrees of freedom) against references the code does not compute: scipy's
Student-t interval where one side has no spread (Fieller's interval then reduces to it exactly),
and the known true ratio of simulated repeats (benchmarks/ratio_intervals.py, small); then
scaling.csv's columns and their notes."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scalestudy.analysis.scaling import scaling
from scalestudy.analysis.statistics import UNBOUNDED, ratio_ci
from scipy import stats

REPO = Path(__file__).resolve().parents[2]


def test_a_divisor_without_spread_gives_scipys_t_interval_of_the_numerator_divided():
    a = np.array([13.0, 14.6, 12.9, 14.1])
    low, high, why = ratio_ci(a.mean(), a.std(ddof=1), a.size, 9.79, 0.0, 3)
    reference = stats.t.interval(0.95, a.size - 1, loc=a.mean(), scale=stats.sem(a))
    assert why == "" and low == pytest.approx(reference[0] / 9.79) and high == pytest.approx(reference[1] / 9.79)


def test_a_numerator_without_spread_gives_it_over_scipys_t_interval_of_the_divisor():
    b = np.array([9.5, 10.2, 9.9])
    low, high, _ = ratio_ci(13.8, 0.0, 2, b.mean(), b.std(ddof=1), b.size)
    b_low, b_high = stats.t.interval(0.95, b.size - 1, loc=b.mean(), scale=stats.sem(b))
    assert b_low > 0  # else the set is unbounded (below)
    assert low == pytest.approx(13.8 / b_high) and high == pytest.approx(13.8 / b_low)


def test_one_repeat_or_a_divisor_near_zero_gives_no_interval_and_says_why():
    assert ratio_ci(13.8, math.nan, 1, 9.8, 1.0, 3)[2] == "one repeat has no spread"
    # 9.8 ± 56 s (n = 2): the divisor's own interval reaches zero; any ratio above 0.2 fits.
    low, high, why = ratio_ci(13.8, 1.13, 2, 9.8, 6.22, 2)
    assert math.isnan(low) and math.isnan(high) and "unbounded" in why


def test_the_interval_holds_a_known_ratio_at_the_nominal_rate():
    spec = importlib.util.spec_from_file_location("ratio_intervals", REPO / "benchmarks/ratio_intervals.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(bench.SEED)
    found = [bench.scenario(rng, n, 0.1, 0.1, "normal", kind, 300) for n in (3, 5) for kind in ("time", "rate")]
    held, bounded = sum(f["held"] for f in found), sum(f["bounded"] for f in found)
    # 1,200 draws: 95% ± 3 binomial standard deviations (0.6 points each).
    assert bounded == 1200 and 0.93 <= held / bounded <= 0.97


def two_scales(base, here, kind_metric="training_time_s"):
    rows = []
    for ranks, values in ((1, base), (2, here)):
        for r, v in enumerate(values):
            rows.append({"study": "s", "app": "litgpt", "scaling": "strong", "variant": "v", "mpi_flag_set": "default",
                         "nccl_env_set": "default", "nodes": 1, "ranks_per_node": ranks, "gpus_per_node": 0,
                         "ranks": ranks, "status": "ok", "repeat": r, kind_metric: v})  # fmt: skip
    table = scaling(pd.DataFrame(rows))
    return table[table["metric"] == kind_metric].set_index("ranks")


@pytest.mark.parametrize(("metric", "base", "here"), [
    ("training_time_s", [10.0, 10.4, 9.7], [6.1, 5.8, 6.4]),  # a time: T(p0)/T(p)
    ("tokens_per_s", [100.0, 104.0, 97.0], [161.0, 158.0, 170.0]),  # a rate: R(p)/R(p0)
])  # fmt: skip
def test_scaling_csv_carries_the_interval_of_speedup_and_efficiency(metric, base, here):
    row = two_scales(base, here, metric).loc[2]
    a, b = (np.array(base), np.array(here)) if metric == "training_time_s" else (np.array(here), np.array(base))
    low, high, _ = ratio_ci(a.mean(), a.std(ddof=1), 3, b.mean(), b.std(ddof=1), 3)
    assert row["speedup_ci_low"] == pytest.approx(low) and row["speedup_ci_high"] == pytest.approx(high)
    assert row["speedup_ci_low"] < row["speedup"] < row["speedup_ci_high"]
    assert row["parallel_efficiency_ci_low"] == pytest.approx(low / 2)
    assert row["parallel_efficiency_ci_high"] == pytest.approx(high / 2)
    assert row["ratio_ci_note"] == ""


def test_one_repeat_at_a_scale_gives_no_interval_and_the_note_names_the_scale():
    table = two_scales([10.0, 10.4, 9.7], [6.1])
    assert math.isnan(table.loc[2, "parallel_efficiency_ci_low"])
    assert table.loc[2, "ratio_ci_note"] == "fewer than 2 repeats at p = 2: one repeat has no spread"
    assert table.loc[1, "speedup_ci_low"] == table.loc[1, "speedup_ci_high"] == 1.0


def test_the_efficiency_plot_draws_the_interval_as_error_bars_and_none_where_one_repeat():
    from scalestudy.presentation.plots import ci_bars

    two = two_scales([10.0, 10.4, 9.7], [6.1, 5.8, 6.4]).reset_index()
    bars = ci_bars(two, "parallel_efficiency")
    row = two.iloc[1]
    assert bars[:, 1] == pytest.approx(
        [row["parallel_efficiency"] - row["parallel_efficiency_ci_low"],
         row["parallel_efficiency_ci_high"] - row["parallel_efficiency"]]
    )  # fmt: skip
    assert (bars[:, 1] > 0).all() and (bars[:, 0] == 0).all()  # p0: 1 by definition
    assert (ci_bars(two_scales([10.0, 10.4], [6.1]).reset_index(), "parallel_efficiency") == 0).all()


def test_the_compare_page_shows_each_sides_efficiency_with_its_interval():
    from scalestudy.presentation.comparison import efficiency_cell

    row = {"parallel_efficiency_baseline": 0.702, "parallel_efficiency_ci_low_baseline": 0.41,
           "parallel_efficiency_ci_high_baseline": 1.18, "parallel_efficiency_candidate": 0.8}  # fmt: skip
    assert efficiency_cell(row, "parallel_efficiency", "baseline") == "0.702 [0.41–1.18]"
    assert efficiency_cell(row, "parallel_efficiency", "candidate") == "0.8"


def test_a_figure_zero_at_every_repeat_has_the_ratio_zero_not_a_division_by_zero():
    # Seen in the local study's torch-parallel scaling rule: a figure 0 at every repeat over a
    # divisor with spread. Fieller's set is {0} where b's own interval misses zero; Welch's df is b's n − 1.
    assert ratio_ci(0.0, 0.0, 2, 9.8, 1.0, 3) == (0.0, 0.0, "")
    assert ratio_ci(0.0, 0.0, 2, 0.5, 1.0, 3)[2] == UNBOUNDED
    # One side without spread, the other with: the same interval as the formula's limit, finite.
    low, high, why = ratio_ci(13.8, 0.0, 2, 9.8, 1e-160, 3)
    assert why == "" and low == pytest.approx(13.8 / 9.8) and high == pytest.approx(13.8 / 9.8)


def test_an_interval_that_reaches_below_zero_is_cut_at_zero_where_a_time_or_rate_cannot_go():
    base, here = [1.0, 20.0], [6.1, 5.8, 6.4]  # the baseline's two repeats far apart
    a, b = np.array(base), np.array(here)
    low, high, _ = ratio_ci(a.mean(), a.std(ddof=1), 2, b.mean(), b.std(ddof=1), 3)
    assert low < 0  # Fieller's set itself
    row = two_scales(base, here).loc[2]
    assert row["speedup_ci_low"] == 0.0 and row["parallel_efficiency_ci_low"] == 0.0
    assert row["speedup_ci_high"] == pytest.approx(high) and row["speedup"] > 0
