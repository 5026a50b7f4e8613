"""Verdicts that hold: the run order, repeats until the answer is clear, the statistics chosen
by the data and the checks that hold a verdict back. References: scipy's exact Mann–Whitney
test, the published order statistics of the median's CI, hand-built run tables."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from points import pingpong_point
from scalestudy import analysis
from scalestudy.model import order
from scalestudy.model.paths import Layout
from scalestudy.model.repeats import Repeats, limits, needed, relative_ci
from scalestudy.results.repeats import in_play
from scipy import stats

# ---------------------------------------------------------------- the run order


def sides(repeats=3):
    return [pingpong_point(mpi_flag_set=name, repeat=r) for r in range(1, repeats + 1) for name in ("default", "tcp")]


def test_the_order_runs_round_by_round_and_alternates_the_sides_by_the_seed():
    ordered = order.run_order(sides(4), seed=0)
    assert [p.repeat for p in ordered] == [1, 1, 2, 2, 3, 3, 4, 4]
    # The seed's shuffle: not the same side first in every round, and another seed another order.
    firsts = {seed: [p.mpi_flag_set for p in order.run_order(sides(8), seed)][::2] for seed in range(4)}
    assert all(len(set(first)) == 2 for first in firsts.values())
    assert len({tuple(first) for first in firsts.values()}) > 1


def test_a_points_place_does_not_depend_on_which_points_are_left():
    everything = order.run_order(sides(), seed=3)
    left = order.run_order(everything[2:], seed=3)
    assert left == everything[2:]
    priorities = order.priorities(everything, seed=3)
    assert sorted(priorities, key=priorities.get, reverse=True) == [(p.study, p.id) for p in everything]
    key = pytest.approx(order.order_key(everything[0], 3)[1])
    assert order.order_record(everything[0], 3) == {"seed": 3, "round": 1, "key": key}


# ---------------------------------------------------------------- repeats until clear


def test_repeats_run_min_first_then_one_more_while_the_ci_is_too_wide():
    adaptive = limits({"min": 3, "max": 5, "ci": "5%"})
    assert adaptive == Repeats(3, 5, 0.05) and adaptive.adaptive
    assert needed(adaptive, 0, [])[0] == 3
    assert needed(adaptive, 2, [1.0, 1.0])[0] == 3
    noisy = [1.0, 1.5, 0.7]
    assert needed(adaptive, 3, noisy) == (4, f"CI ±{relative_ci(noisy):.1%} > ±5%: one more")
    assert needed(adaptive, 5, [*noisy, 1.2, 0.9])[1].startswith("max 5 reached")
    assert needed(adaptive, 3, [1.0, 1.01, 0.99]) == (3, f"CI ±{relative_ci([1.0, 1.01, 0.99]):.1%} ≤ ±5%")
    assert needed(limits(4), 0, []) == (4, "fixed at 4")
    # The CI is Student t's: the same as the analysis gives the point's mean.
    summary = analysis.summarize(noisy)
    assert relative_ci(noisy) == pytest.approx(summary["ci95"] / summary["mean"])


def write_record(layout, point, value, status="ok"):
    path = layout.metrics(point.study, point.id)
    import pathlib

    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(json.dumps({"status": status, "figures": {"latency_us": value}}))


def test_a_study_plans_only_the_repeats_still_needed_and_keeps_every_recorded_one(tmp_path):
    layout = Layout(str(tmp_path))
    points = [pingpong_point(repeat=r) for r in range(1, 7)]
    studies = {points[0].study: {"repeats": {"min": 2, "max": 6, "ci": "5%"}}}
    assert [p.repeat for p in in_play(points, studies, layout)] == [1, 2]
    for p, value in zip(points[:2], (10.0, 14.0), strict=True):
        write_record(layout, p, value)
    assert [p.repeat for p in in_play(points, studies, layout)] == [1, 2, 3]
    write_record(layout, points[2], 12.0)
    write_record(layout, points[5], 12.0)  # recorded out of turn (an earlier, longer plan): kept
    assert [p.repeat for p in in_play(points, studies, layout)] == [1, 2, 3, 4, 6]
    fixed = {points[0].study: {"repeats": 6}}
    assert in_play(points, fixed, layout) == points


# ---------------------------------------------------------------- statistics fitting the data


def test_the_medians_ci_is_the_published_order_statistics():
    # n = 10: x(2) and x(9), coverage 97.9% (the sign-test table); n = 5: no 95% interval exists.
    x = np.arange(1.0, 11.0)
    assert analysis.median_ci(x) == {"median": 5.5, "median_ci_low": 2.0, "median_ci_high": 9.0}
    assert math.isnan(analysis.median_ci(np.arange(1.0, 6.0))["median_ci_low"])


@pytest.mark.parametrize("n1,n0", [(4, 4), (5, 7), (8, 8)])
def test_the_rank_ci_is_where_scipys_exact_mann_whitney_test_stops_rejecting(n1, n0):
    rng = np.random.default_rng(n1 * 10 + n0)
    a, b = rng.lognormal(0.2, 0.3, n1), rng.lognormal(0.0, 0.3, n0)
    result = analysis.rank_ratio(a, b, "rate")

    def p_value(shift):
        return stats.mannwhitneyu(np.log(a) - shift, np.log(b), method="exact").pvalue

    # Every shift inside the CI is one the exact test accepts at 5%; just outside, it rejects.
    for bound, inward in ((result["ci_low"], 1), (result["ci_high"], -1)):
        assert p_value(math.log(bound) + inward * 1e-9) > 0.05
        assert p_value(math.log(bound) - inward * 1e-9) <= 0.05 + 1e-12
    assert result["ci_low"] < result["ratio"] < result["ci_high"]


def test_three_repeats_a_side_are_too_few_for_a_rank_verdict():
    assert analysis.rank_ratio(np.array([1.0, 1.1, 1.2]), np.array([2.0, 2.1, 2.2]), "rate")["verdict"] == (
        analysis.TOO_FEW_FOR_RANKS
    )
    assert analysis.rank_ratio(np.array([1.0, 1.1, 1.2, 1.3]), np.array([2.0, 2.1, 2.2, 2.3]), "rate")["verdict"] == (
        "slower"
    )


def runs_table(default, other, start_other=0, share=(0.05, 0.05)):
    """runs.csv rows of two sides of one point (latency: lower is faster), alternating two minutes
    apart, or `other` starting `start_other` minutes later; `share`: other processes' CPU share."""
    rows = []
    for side, values, offset, other_share in (("default", default, 0, share[0]), ("x", other, start_other, share[1])):
        for i, value in enumerate(values):
            minute = offset + 2 * i + (side == "x")
            rows.append(
                {"study": "s", "app": "pingpong", "scaling": "strong", "variant": f"pp mpi-{side}",
                 "mpi_flag_set": side, "nccl_env_set": "default", "hyperthreads": False, "binding": "default",
                 "mapping": "default", "nodes": 1, "ranks_per_node": 2, "gpus_per_node": 0, "ranks": 2,
                 "repeat": i + 1, "status": "ok", "latency_us": value, "other_cpu_share": other_share,
                 "started": f"2026-11-25T10:{minute:02d}:00+00:00", "finished": f"2026-11-25T10:{minute:02d}:30+00:00"}
            )  # fmt: skip
    return pd.DataFrame(rows)


def verdict_of(runs):
    table = analysis.variants(analysis.scaling(runs), runs=runs)
    return table[table["primary"]].iloc[0]


def test_a_clear_difference_between_interleaved_sides_under_like_conditions_is_a_verdict():
    row = verdict_of(runs_table([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2]))
    assert row["verdict"] == "faster" and row["interleaved"] and row["method"] == analysis.METHOD_NAMES["welch"]
    assert row["runs_compared"] == ""  # interleaved: every run compared


def test_sides_measured_apart_are_not_compared():
    row = verdict_of(runs_table([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2], start_other=30))
    assert row["statistical_verdict"] == "faster"
    assert row["verdict"].startswith("not interleaved: the baseline ran 2026-11-25 10:00–10:06 UTC")


def test_sides_under_clearly_different_conditions_are_not_compared():
    row = verdict_of(runs_table([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2], share=(0.61, 0.04)))
    assert row["verdict"] == (
        "conditions differed: other processes used 61% of the CPUs during default's runs, 4% during x's"
    )
    # Within the gap (OTHER_CPU_GAP) they are alike.
    assert verdict_of(runs_table([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2], share=(0.3, 0.1)))["verdict"] == (
        "faster"
    )


def test_repeats_with_an_outlier_are_compared_by_ranks():
    row = verdict_of(runs_table([10.0, 10.1, 10.0, 10.1, 10.05], [8.0, 8.1, 2.0, 8.2, 8.1]))
    assert row["method"] == analysis.METHOD_NAMES["ranks"] and row["verdict"] == "faster"


def test_proc_stat_is_read_as_busy_and_stolen_seconds_and_cpus():
    from scalestudy.launch.conditions import cpu_times

    text = "cpu  100 20 30 400 50 6 4 10 0 0\ncpu0 50 10 15 200 25 3 2 5 0 0\ncpu1 50 10 15 200 25 3 2 5 0 0\nintr 1\n"
    ticks = __import__("os").sysconf("SC_CLK_TCK")
    assert cpu_times(text) == ((100 + 20 + 30 + 6 + 4) / ticks, 10 / ticks, 2)


def test_a_grown_sweep_is_compared_on_the_repeats_measured_together_once_its_repeats_are_raised():
    # The baseline's first 4 repeats ran alone an hour before (under other load: 20% slower);
    # then repeats were raised and both sides ran 4 more (repeats 5-8), interleaved, alike:
    # the baseline's 5th starts next to its 4th, and is the 5th round's all the same.
    early = runs_table([12.0, 12.1, 11.9, 12.2], [], start_other=0)
    together = runs_table([10.0, 10.2, 9.9, 10.1], [10.1, 10.0, 10.2, 9.9])
    together["started"] = together["started"].str.replace("T10:", "T11:")
    together["finished"] = together["finished"].str.replace("T10:", "T11:")
    together["repeat"] += 4
    row = verdict_of(pd.concat([early, together], ignore_index=True))
    assert row["runs_compared"] == "4 / 4 measured together"
    assert row["interleaved"] and row["verdict"] == "no measurable difference"
    assert 0.97 < row["ratio"] < 1.03  # against all 8 baseline runs it would be about 1.1


def at_hour(runs, hour):
    for column in ("started", "finished"):
        runs[column] = runs[column].str.replace("T10:", f"T{hour:02d}:")
    return runs


def test_a_set_added_later_is_compared_on_neither_side_s_runs_measured_alone():
    # The sweep as users grow it: the baseline's 4 repeats ran alone under load at 09:00 (20%
    # slower); the invocation that added `x` ran x's 4 alone at 10:00 on a quiet machine; then
    # the repeats were raised to 8 and both sides ran 4 more, interleaved, at 11:00.
    early = at_hour(runs_table([12.0, 12.1, 11.9, 12.2], []), 9)
    added = runs_table([], [8.0, 8.1, 7.9, 8.2])
    together = at_hour(runs_table([10.0, 10.2, 9.9, 10.1], [10.1, 10.0, 10.2, 9.9]), 11)
    together["repeat"] += 4
    row = verdict_of(pd.concat([early, added, together], ignore_index=True))
    assert row["runs_compared"] == "4 / 4 measured together"
    assert row["interleaved"] and row["verdict"] == "no measurable difference"
    assert 0.97 < row["ratio"] < 1.03


def test_interleaved_rounds_whose_shuffle_puts_a_side_twice_in_a_row_are_all_compared():
    runs = runs_table([10.0, 10.2, 9.9, 10.1], [10.1, 10.0, 10.2, 9.9])
    # Rounds shuffled: default x | x default | default x | x default: "x x" and "default default" meet.
    minutes = {("default", 1): 0, ("x", 1): 1, ("x", 2): 2, ("default", 2): 3,
               ("default", 3): 4, ("x", 3): 5, ("x", 4): 6, ("default", 4): 7}  # fmt: skip
    runs["started"] = [f"2026-11-25T10:{minutes[(side, repeat)]:02d}:00+00:00"
                       for side, repeat in zip(runs["mpi_flag_set"], runs["repeat"], strict=True)]  # fmt: skip
    assert verdict_of(runs)["runs_compared"] == ""


def test_runs_started_in_the_same_second_end_the_search_for_runs_apart():
    runs = runs_table([10.0, 10.2, 9.9, 10.1], [10.1, 10.0, 10.2, 9.9])
    runs.loc[runs["mpi_flag_set"] == "default", "started"] = "2026-11-25T09:00:00+00:00"
    assert verdict_of(runs)["runs_compared"] == ""
