"""Scaling maths on known numbers."""

import pandas as pd
import pytest
from scalestudy.analysis.scaling import scaling


def runs(values, metric="training_time_s", scaling_kind="strong", status=None):
    rows = []
    for i, (ranks, value) in enumerate(values):
        rows.append(
            {
                "study": "s", "app": "litgpt", "scaling": scaling_kind, "variant": "mpi-default/nccl-default",
                "mpi_flag_set": "default", "nccl_env_set": "default", "nodes": ranks, "ranks_per_node": 1,
                "gpus_per_node": 0, "ranks": ranks, "repeat": 1,
                "status": (status or {}).get(i, "ok"), metric: value,
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def table(frame, metric):
    return scaling(frame).query("metric == @metric").set_index("ranks")


def test_strong_scaling_of_a_time():
    t = table(runs([(1, 100.0), (2, 50.0), (4, 30.0), (4, 30.0)]), "training_time_s")
    assert list(t["speedup"]) == pytest.approx([1.0, 2.0, 100 / 30])
    assert list(t["parallel_efficiency"]) == pytest.approx([1.0, 1.0, 100 / 30 / 4])
    # Karp-Flatt at p=4: (1/S - 1/4) / (1 - 1/4) = (0.3 - 0.25) / 0.75
    assert t.loc[4, "karp_flatt_serial_fraction"] == pytest.approx(0.05 / 0.75)
    assert pd.isna(t.loc[1, "karp_flatt_serial_fraction"])
    assert t.loc[4, "n"] == 2 and t.loc[4, "std"] == 0


def test_strong_scaling_of_a_rate_goes_the_other_way():
    t = table(runs([(1, 1000.0), (2, 1500.0)], metric="tokens_per_s"), "tokens_per_s")
    assert t.loc[2, "speedup"] == pytest.approx(1.5)
    assert t.loc[2, "parallel_efficiency"] == pytest.approx(0.75)


def test_baseline_is_the_smallest_scale_that_succeeded():
    frame = runs([(1, 100.0), (2, 60.0), (4, 40.0)], status={0: "failed"})
    frame.loc[0, "training_time_s"] = float("nan")
    t = table(frame, "training_time_s")
    assert t.loc[1, "n"] == 0 and t.loc[1, "n_failed"] == 1
    assert t.loc[4, "p0"] == 2
    assert t.loc[4, "speedup"] == pytest.approx(1.5)
    assert t.loc[4, "parallel_efficiency"] == pytest.approx(0.75)


def test_weak_scaling_efficiency():
    t = table(runs([(1, 10.0), (4, 12.5)], scaling_kind="weak"), "training_time_s")
    assert t.loc[4, "weak_efficiency"] == pytest.approx(0.8)
    assert t.loc[4, "scaled_speedup"] == pytest.approx(3.2)
    r = table(runs([(1, 100.0), (4, 360.0)], metric="tokens_per_s", scaling_kind="weak"), "tokens_per_s")
    assert r.loc[4, "weak_efficiency"] == pytest.approx(0.9)


def test_every_run_failed_gives_no_speedup_and_no_crash():
    frame = runs([(1, float("nan")), (2, float("nan"))], status={0: "failed", 1: "failed"})
    assert scaling(frame).empty


def test_an_unreadable_metrics_file_is_a_failed_row_that_keeps_its_name(tmp_path):
    from scalestudy.analysis.records import aggregate

    good = tmp_path / "results/s/runs/nodes1-rpn1/mpi-default/nccl-default/rep1/metrics.json"
    bad = tmp_path / "results/s/runs/nodes1-rpn2/mpi-default/nccl-default/rep1/metrics.json"
    for path in (good, bad):
        path.parent.mkdir(parents=True)
    frame = runs([(1, 10.0)]).iloc[0].to_dict()
    good.write_text('{"status": "ok", "point": ' + pd.Series(frame).drop(["status", "training_time_s"]).to_json()
                    + ', "figures": {"training_time_s": 10.0}}')  # fmt: skip
    bad.write_text('{"status": "ok", "poi')  # cut off mid-write
    table = aggregate([good, bad])
    failed = table[table["status"] == "failed"].iloc[0]
    assert failed["study"] == "s" and failed["point"] == "nodes1-rpn2/mpi-default/nccl-default/rep1"
    assert failed["reason"].startswith("metrics.json unreadable")
    assert scaling(table)["n"].tolist() == [1]


# ---------------------------------------------------------------- repeats


def test_confidence_interval_is_student_t_of_the_mean():
    from scalestudy.analysis.statistics import summarize

    s = summarize([1.0, 2.0, 3.0])
    # t(0.975, 2 dof) = 4.3027; std = 1; half-width = 4.3027 / sqrt(3)
    assert s["n"] == 3 and s["mean"] == 2.0 and s["std"] == pytest.approx(1.0)
    assert s["ci95"] == pytest.approx(4.302653 / 3**0.5, rel=1e-5)
    assert summarize([5.0])["ci95"] != summarize([5.0])["ci95"]  # NaN: one run has no interval
    assert summarize([])["n"] == 0


def test_an_outlier_among_repeats_is_flagged_not_dropped():
    frame = runs([(1, 100.0), (1, 101.0), (1, 99.0), (1, 160.0)])
    frame["repeat"] = [1, 2, 3, 4]
    t = table(frame, "training_time_s")
    assert t.loc[1, "n"] == 4 and t.loc[1, "n_outliers"] == 1 and t.loc[1, "outlier_repeats"] == "rep4"
    assert t.loc[1, "mean"] == pytest.approx(115.0)
    calm = table(runs([(1, 100.0), (1, 101.0), (1, 99.0)]), "training_time_s")
    assert calm.loc[1, "n_outliers"] == 0


def test_two_nearly_equal_repeats_do_not_make_the_third_an_outlier():
    # MAD of 10.00, 10.01, 10.4 is 0.01: without the 1%-of-median floor 10.4 scores 26.
    assert table(runs([(1, 10.00), (1, 10.01), (1, 10.4)]), "training_time_s").loc[1, "n_outliers"] == 0
    assert table(runs([(1, 10.00), (1, 10.01), (1, 12.0)]), "training_time_s").loc[1, "n_outliers"] == 1


# ---------------------------------------------------------------- scaling laws


def test_amdahl_fit_recovers_a_known_serial_fraction():
    from scalestudy.analysis.scaling import amdahl_fit

    q = [1, 2, 4, 8, 16]
    serial, ceiling = amdahl_fit(q, [1 / (0.1 + 0.9 / x) for x in q])
    assert serial == pytest.approx(0.1) and ceiling == pytest.approx(10.0)
    t = table(runs([(1, 100.0), (2, 55.0), (4, 32.5), (8, 21.25)]), "training_time_s")
    assert t["amdahl_serial_fraction"].iloc[0] == pytest.approx(0.1)
    assert list(t["karp_flatt_serial_fraction"].dropna()) == pytest.approx([0.1, 0.1, 0.1])


def test_speedup_per_core_is_kept_apart_from_parallel_efficiency():
    frame = runs([(1, 100.0), (2, 50.0)])
    frame["cores_allocated"] = [48, 96]
    t = table(frame, "training_time_s")
    assert t.loc[2, "parallel_efficiency"] == pytest.approx(1.0)
    assert t.loc[2, "speedup_per_core"] == pytest.approx(2 / 96)


# ---------------------------------------------------------------- variants


def variant_runs(default, other, name="no-ucx", ranks=1):
    rows = runs([(ranks, v) for v in default + other], metric="tokens_per_s")
    rows["repeat"] = list(range(1, len(default) + 1)) + list(range(1, len(other) + 1))
    rows.loc[len(default) :, "mpi_flag_set"] = name
    rows.loc[len(default) :, "variant"] = f"mpi-{name}/nccl-default"
    return rows


def test_a_variant_is_faster_only_when_the_ci_excludes_one():
    from scalestudy.analysis.verdicts import variants

    clear = variants(scaling(variant_runs([100.0, 101.0, 99.0], [120.0, 121.0, 119.0])))
    row = clear.query("metric == 'tokens_per_s'").iloc[0]
    assert row["set"] == "no-ucx" and row["axis"] == "MPI flag set"
    assert row["ratio"] == pytest.approx(1.2) and row["ci_low"] > 1 and row["verdict"] == "faster"
    noisy = variants(scaling(variant_runs([100.0, 130.0, 80.0], [105.0, 70.0, 125.0]))).iloc[0]
    assert noisy["ci_low"] < 1 < noisy["ci_high"] and noisy["verdict"] == "no measurable difference"
    slow = variants(scaling(variant_runs([100.0, 101.0, 99.0], [80.0, 81.0, 79.0]))).iloc[0]
    assert slow["verdict"] == "slower"
    single = variants(scaling(variant_runs([100.0], [120.0]))).iloc[0]
    assert single["ratio"] == pytest.approx(1.2) and single["verdict"].startswith("too few repeats")


def test_a_faster_time_is_a_ratio_above_one():
    from scalestudy.analysis.verdicts import variants

    frame = variant_runs([10.0, 10.1, 9.9], [5.0, 5.1, 4.9])
    frame = frame.rename(columns={"tokens_per_s": "training_time_s"})
    row = variants(scaling(frame)).iloc[0]
    assert row["ratio"] == pytest.approx(2.0) and row["verdict"] == "faster"


# ---------------------------------------------------------------- cost


def test_cost_optimal_scale_and_fastest_within_budget():
    frame = runs([(1, 100.0), (2, 150.0), (4, 180.0)], metric="tokens_per_s")
    frame["service_units"] = [10.0, 12.0, 20.0]
    frame["walltime_used_s"] = [3600.0, 1800.0, 900.0]
    t = scaling(frame, budget_su=15.0).query("metric == 'tokens_per_s'").set_index("ranks")
    assert t["cost_optimal"].tolist() == [True, False, False]
    assert t["fastest_within_budget"].tolist() == [False, True, False]
    # 12 SU per 0.5 h job = 24 SU/h; 1e6 tokens at 150 tok/s take 1e6 / 150 / 3600 h
    assert t.loc[2, "su_per_million"] == pytest.approx(24 * 1e6 / 150 / 3600)
    free = runs([(1, 100.0), (2, 60.0)])
    free["service_units"] = 0.0  # a machine with no charge rate: no cost figures, no choice
    t = scaling(free)
    assert t["su_per_run"].isna().all() and not t["cost_optimal"].any()


def test_pending_points_are_counted_not_dropped(tmp_path):
    from scalestudy.analysis.records import aggregate

    record = runs([(2, 1.0)]).iloc[0].drop(["status", "training_time_s"]).to_dict()
    frame = aggregate([], expected=[(record, tmp_path / "missing/metrics.json")])
    assert frame["status"].tolist() == ["pending"] and frame["reason"].tolist() == ["not run yet"]


# ---------------------------------------------------------------- a published table


def test_the_published_gadi_hoomd_table_is_regenerated(data_dir):
    from scalestudy.presentation import published

    record = published.read_record(data_dir / "gadi-2024-hoomd-wca-strong.csv")
    compared = published.comparison(record, published.record_scaling(record))
    # As published: wall-time speedups and their "efficiency" S/cores.
    assert [round(s, 2) for s in compared["walltime_speedup"]] == [1.00, 2.04, 3.06, 3.67, 3.93, 3.93]
    assert round(compared["walltime_speedup_per_core"].iloc[0], 3) == 0.021
    assert round(compared["walltime_speedup_per_core"].iloc[-1], 3) == 0.003
    # What the benchmark's own steps/s say.
    assert compared["rate_speedup"].iloc[-1] == pytest.approx(15.2, abs=0.01)
    assert compared["rate_parallel_efficiency"].iloc[-1] == pytest.approx(0.475, abs=0.001)
    notes = " ".join(published.why_they_disagree(compared))
    assert "10,000/320,000 at 32 node(s)" in notes
    # Its walltimes are minutes:seconds (one H:M:S reading everywhere): 0:55 is 55 s, and the
    # record contradicts itself instead of explaining the gap away.
    assert compared["walltime_used_s"].iloc[0] == 55
    assert not compared["consistent"].any()
    assert "120,000 steps at 423 steps/s take 284 s, more than the 55 s of walltime used" in notes
    assert "contradicts itself at 6 of 6 scales" in notes and "not time-stepping" not in notes


def test_a_consistent_record_is_explained_by_its_start_up(tmp_path):
    from scalestudy.presentation import published

    record = tmp_path / "consistent.csv"
    record.write_text(
        "nodes,cores_per_node,warmup_steps,benchmark_steps,steps_per_s,walltime_used\n"
        "1,48,40000,80000,423,10:00\n2,48,40000,80000,1058,04:00\n"
    )
    runs = published.read_record(record)
    compared = published.comparison(runs, published.record_scaling(runs))
    assert compared["consistent"].all() and compared["walltime_used_s"].tolist() == [600, 240]
    notes = " ".join(published.why_they_disagree(compared))
    assert "not time-stepping" in notes and "284 s of 600 s (47%)" in notes and "contradicts" not in notes


def test_the_sites_usage_record_replaces_the_estimated_cost(tmp_path, data_dir):
    from scalestudy.analysis.records import aggregate
    from scalestudy.model.paths import BATCH_LOG

    run_dir = tmp_path / "results/s/runs/nodes12-rpn48/mpi-default/nccl-default/rep1"
    run_dir.mkdir(parents=True)
    record = runs([(12, 1.0)]).iloc[0].drop(["status", "training_time_s"]).to_dict()
    resources = {"service_units": 99.0, "service_units_source": "estimated", "memory_requested_gb": 2283.0}
    metrics = {"status": "ok", "point": record, "figures": {"training_time_s": 1.0}, "resources": resources}
    (run_dir / "metrics.json").write_text(pd.Series(metrics).to_json())
    estimated = aggregate([run_dir / "metrics.json"]).iloc[0]
    assert (estimated["service_units"], estimated["service_units_source"]) == (99.0, "estimated")
    (run_dir / BATCH_LOG).write_text((data_dir / "pbs/gadi-resource-usage-576cpu.log").read_text())
    row = aggregate([run_dir / "metrics.json"]).iloc[0]
    assert (row["service_units"], row["service_units_source"]) == (12.8, "site")
    assert row["memory_used_gb"] == 201.4877  # the block's 187.65 (2^30 bytes) in GB of 10^9 bytes
