"""Verdicts that hold: the run order, repeats until the answer is clear, the statistics chosen
by the data and the checks that hold a verdict back. References: scipy's exact Mann–Whitney
test, the published order statistics of the median's CI, hand-built run tables."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from points import pingpong_point
from scalestudy.analysis.records import run_row
from scalestudy.analysis.scaling import scaling
from scalestudy.analysis.statistics import median_ci, summarize
from scalestudy.analysis.verdicts import (
    MEASURE_AGAIN,
    METHOD_NAMES,
    TOO_FEW_FOR_RANKS,
    Sides,
    rank_ratio,
    side_runs,
    times,
    variants,
)
from scalestudy.bookkeeping.repeats import in_play
from scalestudy.model import order
from scalestudy.model.contention import OLDER_RULE
from scalestudy.model.paths import Layout
from scalestudy.model.repeats import Repeats, limits, needed, relative_ci
from scalestudy.model.settings import StudySettings
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
    summary = summarize(noisy)
    assert relative_ci(noisy) == pytest.approx(summary["ci95"] / summary["mean"])


def write_record(layout, point, value, status="ok"):
    path = layout.metrics(point.study, point.id)
    import pathlib

    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(json.dumps({"status": status, "figures": {"latency_us": value}}))


def study_settings(name, repeats):
    """A ping-pong study's typed settings (model.settings) with `repeats`."""
    return StudySettings(name=name, app="pingpong", repeats=repeats, pack=1, budget_su=None, estimator="mean",
                         efficiency_threshold=0.5, predict_up_to=4)  # fmt: skip


def test_a_study_plans_only_the_repeats_still_needed_and_keeps_every_recorded_one(tmp_path):
    layout = Layout(str(tmp_path))
    points = [pingpong_point(repeat=r) for r in range(1, 7)]
    studies = {points[0].study: study_settings(points[0].study, {"min": 2, "max": 6, "ci": "5%"})}
    assert [p.repeat for p in in_play(points, studies, layout)] == [1, 2]
    for p, value in zip(points[:2], (10.0, 14.0), strict=True):
        write_record(layout, p, value)
    assert [p.repeat for p in in_play(points, studies, layout)] == [1, 2, 3]
    write_record(layout, points[2], 12.0)
    write_record(layout, points[5], 12.0)  # recorded out of turn (an earlier, longer plan): kept
    assert [p.repeat for p in in_play(points, studies, layout)] == [1, 2, 3, 4, 6]
    fixed = {points[0].study: study_settings(points[0].study, 6)}
    assert in_play(points, fixed, layout) == points


# ---------------------------------------------------------------- statistics fitting the data


def test_the_medians_ci_is_the_published_order_statistics():
    # n = 10: x(2) and x(9), coverage 97.9% (the sign-test table); n = 5: no 95% interval exists.
    x = np.arange(1.0, 11.0)
    assert median_ci(x) == {"median": 5.5, "median_ci_low": 2.0, "median_ci_high": 9.0}
    assert math.isnan(median_ci(np.arange(1.0, 6.0))["median_ci_low"])


@pytest.mark.parametrize("n1,n0", [(4, 4), (5, 7), (8, 8)])
def test_the_rank_ci_is_where_scipys_exact_mann_whitney_test_stops_rejecting(n1, n0):
    rng = np.random.default_rng(n1 * 10 + n0)
    a, b = rng.lognormal(0.2, 0.3, n1), rng.lognormal(0.0, 0.3, n0)
    result = rank_ratio(a, b, "rate")

    def p_value(shift):
        return stats.mannwhitneyu(np.log(a) - shift, np.log(b), method="exact").pvalue

    # Every shift inside the CI is one the exact test accepts at 5%; just outside, it rejects.
    for bound, inward in ((result["ci_low"], 1), (result["ci_high"], -1)):
        assert p_value(math.log(bound) + inward * 1e-9) > 0.05
        assert p_value(math.log(bound) - inward * 1e-9) <= 0.05 + 1e-12
    assert result["ci_low"] < result["ratio"] < result["ci_high"]


def test_three_repeats_a_side_are_too_few_for_a_rank_verdict():
    assert rank_ratio(np.array([1.0, 1.1, 1.2]), np.array([2.0, 2.1, 2.2]), "rate")["verdict"] == TOO_FEW_FOR_RANKS
    assert rank_ratio(np.array([1.0, 1.1, 1.2, 1.3]), np.array([2.0, 2.1, 2.2, 2.3]), "rate")["verdict"] == "slower"


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
    table = variants(scaling(runs), runs=runs)
    return table[table["primary"]].iloc[0]


def test_a_clear_difference_between_interleaved_sides_under_like_conditions_is_a_verdict():
    row = verdict_of(runs_table([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2]))
    assert row["verdict"] == "faster" and row["interleaved"] and row["method"] == METHOD_NAMES["welch"]
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
    assert row["method"] == METHOD_NAMES["ranks"] and row["verdict"] == "faster"


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


def test_runs_that_started_in_the_same_second_keep_their_rounds_order():
    # The A/A test's grown sweep as recorded (starts to the second): each side's first 4 alone, then
    # rounds 5-8 interleaved, two runs of a round or of two rounds starting in the same second.
    runs = runs_table([12.0, 12.1, 11.9, 12.2, 10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2, 10.1, 10.0, 10.2, 9.9])
    second = {"default": [18, 19, 20, 20, 32, 34, 35, 35], "x": [25, 26, 27, 27, 31, 33, 34, 36]}
    for side, seconds in second.items():
        rows = runs["mpi_flag_set"] == side
        runs.loc[rows, "started"] = [f"2026-11-26T15:17:{s:02d}+00:00" for s in seconds]
        runs.loc[rows, "finished"] = [f"2026-11-26T15:17:{s:02d}+00:00" for s in seconds]
    row = verdict_of(runs)
    assert row["runs_compared"] == "4 / 4 measured together"
    assert row["interleaved"] and row["verdict"] == "no measurable difference"


def test_sides_measured_apart_say_so_also_where_the_method_gives_no_verdict():
    row = verdict_of(runs_table([10.0, 10.1, 3.0], [8.0, 8.1, 7.9], start_other=30))
    assert row["method"] == METHOD_NAMES["ranks"] and row["statistical_verdict"] == TOO_FEW_FOR_RANKS
    assert row["verdict"].startswith("not interleaved: the baseline ran 2026-11-25 10:00")
    assert row["verdict"].endswith(f"; {TOO_FEW_FOR_RANKS}")


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


# ---------------------------------------------------------------- contended runs, two runs a side


def test_a_run_is_contended_when_others_took_more_cpus_than_it_left_free():
    from scalestudy.model.contention import CONTENDED_SLACK_CPUS, contended, contention

    # docs/report.md's collectives study: 2 ranks on this 2-CPU machine, others at 76%: 1.52 CPUs taken.
    assert contention(0.76, 0.0, 2, 2) == pytest.approx(1.52) and contended(0.76, 0.0, 2, 2)
    # The same share on a 128-CPU node where the run's 4 ranks leave 124 free: not contended.
    assert not contended(0.76, 0.0, 128, 4)
    assert contended(0.98, 0.0, 128, 4)  # 125.4 CPUs taken > 124 free
    # The machine's own daemons (a few percent of a CPU) do not mark a run that uses every CPU.
    assert not contended(CONTENDED_SLACK_CPUS / 2 / 2, 0.0, 2, 2)
    # Steal counts as others' use: 1 rank of 2 CPUs, 30% others + 30% stolen = 1.2 CPUs > 1 free.
    assert contended(0.3, 0.3, 2, 1) and not contended(0.3, 0.0, 2, 1)
    assert contention(None, 0.0, 2, 2) is None and not contended(float("nan"), 0.0, 2, 2)


def test_a_record_says_whether_its_run_was_contended():
    from scalestudy.launch.conditions import Snapshot, conditions

    before = Snapshot(taken_s=0.0, busy_s=100.0, steal_s=0.0, cpus=2, own_s=0.0)
    after = Snapshot(taken_s=10.0, busy_s=115.0, steal_s=0.0, cpus=2, own_s=5.0)  # others: 10 of 20 CPU-s
    assert conditions(before, after, cpus_needed=2) | {} == {
        "other_cpu_share": 0.5, "steal_share": 0.0, "own_cpu_share": 0.25, "machine_cpus": 2, "cpus_needed": 2,
        "contended": True, "contention_rule": OLDER_RULE,
    }  # fmt: skip
    assert conditions(before, after, cpus_needed=1)["contended"] is False  # 1 CPU taken, 1 left free
    # runs.csv has it too, from the record's conditions and the point's ranks per node.
    point = {"ranks_per_node": 2, "threads_per_rank": 1, "ranks": 2, "nodes": 1}
    measured = {"other_cpu_share": 0.76, "steal_share": 0.0, "machine_cpus": 2}
    row = run_row({"point": point, "status": "ok", "conditions": measured})
    assert row["contended"] is True and row["contended_cpus"] == pytest.approx(1.52)


def contended_runs(runs, contended_repeats):
    runs["contended"] = runs["repeat"].isin(contended_repeats)
    return runs


def test_the_readme_case_both_sides_contended_gives_no_verdict():
    # collectives alltoall, default against a no-op set, both sides' runs contended (76% and 83%):
    # the CI alone says faster, and the old check found the two sides' conditions alike.
    runs = contended_runs(runs_table([5759.0, 1430.0, 4000.0, 3100.0], [1.9, 3.8, 2.5, 3.0], share=(0.76, 0.83)),
                          [1, 2, 3, 4])  # fmt: skip
    row = verdict_of(runs)
    assert row["statistical_verdict"] == "faster" and row["conditions"] == ""
    assert row["verdict"].startswith(
        "contended: other processes held the CPUs the ranks needed in 4 of 4 runs of default and 4 of 4 of x "
        f"(mean share of the CPUs 76% and 83%; 8 by {OLDER_RULE}); raise repeats"
    )
    assert (row["contended_runs"], row["contended_runs_baseline"]) == (4, 4)
    scaled = scaling(runs)
    assert set(scaled.loc[scaled["metric"] == "latency_us", "n_contended"]) == {4}


def test_only_the_uncontended_runs_are_compared_where_each_side_has_two():
    runs = runs_table([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2])
    runs.loc[runs["repeat"].isin([1, 2]) & (runs["mpi_flag_set"] == "x"), "latency_us"] = [300.0, 2.0]
    row = verdict_of(contended_runs(runs, [1, 2]))
    assert row["runs_compared"] == "2 / 2 uncontended" and row["contended"] == ""
    assert row["verdict"] == "faster" and row["ratio"] == pytest.approx(10.0 / 8.05)
    # Two runs a side: the verdict says why it may stand on two.
    assert row["justification"].startswith("n = 2 / 2: the two runs of a side agree within 10% (")


def test_runs_measured_together_are_counted_before_the_contended_are_left_out():
    # The grown sweep of the A/A test: the baseline's first 4 ran alone an hour before; 4 and 4 ran
    # together after the repeats were raised, 2 of each contended. 4 / 4 were measured together,
    # 2 / 2 of those are compared.
    early = runs_table([12.0, 12.1, 11.9, 12.2], [], start_other=0)
    together = at_hour(runs_table([10.0, 10.2, 9.9, 10.1], [10.1, 10.0, 10.2, 9.9]), 11)
    together["repeat"] += 4
    row = verdict_of(contended_runs(pd.concat([early, together], ignore_index=True), [5, 6]))
    assert row["runs_compared"] == "4 / 4 measured together; 2 / 2 uncontended"
    assert (row["contended_runs"], row["contended_runs_baseline"]) == (2, 2)


def test_two_runs_a_side_far_apart_wait_for_more_repeats():
    # docs/report.md's numbers, with no conditions recorded: Welch's CI on n = 2 excludes 1.
    row = verdict_of(runs_table([5759.0, 1430.0], [1.9, 3.8]))
    assert row["statistical_verdict"] == "faster"
    assert row["verdict"] == (
        "waits for more repeats: n = 2 / 2, and two runs of a side 100.0% and 302.7% apart (> 10%): raise repeats to "
        "3 or more"
    )
    close = verdict_of(runs_table([10.0, 10.2], [5.0, 5.1]))
    assert close["verdict"] == "faster"
    assert close["justification"] == "n = 2 / 2: the two runs of a side agree within 10% (2.0% and 2.0%)"
    # Three or more a side: near_normal can check their shape; no justification needed.
    assert verdict_of(runs_table([10.0, 10.2, 9.9], [8.0, 8.1, 7.9]))["justification"] == ""


def test_compare_holds_back_two_wide_runs_and_contended_figures():
    from scalestudy.presentation.comparison import held_back

    wide = {"mean": 3594.5, "std": 3061.1, "n": 2, "n_used": 2}
    narrow = {"mean": 2.85, "std": 1.3435, "n": 2, "n_used": 2}
    out = held_back({"verdict": "faster"}, {"baseline": wide, "candidate": narrow})
    assert out["statistical_verdict"] == "faster" and out["verdict"].startswith("waits for more repeats: n = 2 / 2")
    busy = {"mean": 10.0, "std": 0.1, "n": 4, "n_used": 4, "n_contended": 1}
    out = held_back({"verdict": "slower"}, {"baseline": busy, "candidate": {**busy, "n_contended": 0}})
    assert out["verdict"].startswith("contended: 1 of the baseline's runs and 0 of the candidate's")
    quiet = {**busy, "n_contended": 0}
    assert held_back({"verdict": "slower"}, {"baseline": quiet, "candidate": quiet})["verdict"] == "slower"


def test_the_report_counts_contended_runs_and_says_how_to_measure_them_again():
    from scalestudy.presentation.runs_section import contended_line
    from scalestudy.presentation.scaling_section import notes_of

    runs = contended_runs(runs_table([10.0, 10.2, 9.9], [8.0, 8.1, 7.9], share=(0.76, 0.05)), [])
    assert contended_line(runs) == ""
    runs["contended"] = runs["mpi_flag_set"] == "default"
    assert contended_line(runs) == (
        "3 of the 6 successful runs were contended: other processes held the CPUs their ranks needed (their share "
        f"of the CPUs 76%–76%, by {OLDER_RULE}). The tables mark figures that rest on them and no verdict rests on "
        f"them; to measure them again, {MEASURE_AGAIN}."
    )
    assert notes_of({"n": 3, "n_contended": 3}) == "3 of 3 contended"


def test_the_summary_sentence_says_when_its_figures_rest_on_contended_runs():
    from scalestudy.presentation.scaling_section import summary_sentence

    runs = runs_table([10.0, 10.2, 9.9], [8.0, 8.1, 7.9])
    runs = runs[runs["mpi_flag_set"] == "default"]
    wider = runs.assign(nodes=2, ranks=4, ranks_per_node=2, latency_us=runs["latency_us"] / 1.8)
    both = contended_runs(pd.concat([runs, wider], ignore_index=True), [1])
    table = scaling(both)
    table = table[table["primary"]]
    assert summary_sentence(table).endswith("(on 2 contended runs of 6: see the notes).")
    assert "contended" not in summary_sentence(scaling(contended_runs(both, []))[lambda t: t["primary"]])


def test_each_side_is_found_once_and_as_a_search_of_the_whole_table_finds_it():
    # variants looks each side up in Sides (grouped once) instead of searching the runs per comparison:
    # the same runs, in the same order, for every row; a failed run, another study, a run of another
    # scale and one whose scale is missing are never a side's.
    runs = runs_table([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2])
    extra = [{**runs.iloc[0], "status": "failed", "latency_us": 9.0}, {**runs.iloc[1], "study": "t"},
             {**runs.iloc[2], "ranks": 4, "nodes": 2}, {**runs.iloc[3], "ranks": np.nan}]  # fmt: skip
    runs = pd.concat([runs, pd.DataFrame(extra)], ignore_index=True).sample(frac=1, random_state=1)
    table = scaling(runs)
    found = Sides(runs)
    for _, row in table.iterrows():
        for metric in ("latency_us", "walltime_used_s"):
            pd.testing.assert_frame_equal(found.of(row, metric), side_runs(runs, row, metric))
    assert found.of({**table.iloc[0], "ranks": np.nan}, "latency_us").empty
    texts = pd.Series(
        ["2026-11-25T10:00:00+00:00", "not a time", None, "2026-11-25T10:02:00+00:00"], index=[4, 2, 7, 1]
    )
    pd.testing.assert_series_equal(times(texts), pd.to_datetime(texts, utc=True, errors="coerce"))
    pd.testing.assert_series_equal(times(texts.iloc[::-1]), pd.to_datetime(texts.iloc[::-1], utc=True, errors="coerce"))
