"""Scaling maths on known numbers."""

import pandas as pd
import pytest
from scalestudy.analysis import scaling


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
    from scalestudy.analysis import aggregate

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
