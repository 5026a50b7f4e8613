"""A record is checked against the record schema when it is read: an ok metrics.json without
its app's primary figure is a failed run that names the file, in runs.csv and the report."""

import json

import pandas as pd
import pytest
from points import pingpong_point
from scalestudy.analysis.records import read_metrics, write_runs_table
from scalestudy.launch.runner import new_record

INVALID_RECORD = "invalid_record"


def test_an_ok_record_without_its_primary_figure_is_a_failed_run_that_names_the_file(tmp_path):
    p = pingpong_point(study="pp")
    path = tmp_path / "results/pp/runs" / p.id / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"status": "ok"}')
    record = read_metrics(path, p.as_record())
    assert record["status"] == "failed" and record["category"] == INVALID_RECORD
    assert record["reason"] == f"metrics.json at {path} lacks figure latency_us"
    assert (record["point"]["study"], record["point"]["point"]) == ("pp", p.id)


def test_the_runs_table_and_the_report_count_it_as_failed(tmp_path):
    from scalestudy.presentation.page import to_html
    from scalestudy.presentation.report import study_blocks

    good = [pingpong_point(study="pp", repeat=r) for r in (1, 2, 3)]
    bad = pingpong_point(study="pp", repeat=4)
    expected = []
    for p in [*good, bad]:
        path = tmp_path / "results/pp/runs" / p.id / "metrics.json"
        path.parent.mkdir(parents=True)
        record = {**new_record(p), "status": "ok", "figures": {"latency_us": 10.0 + p.repeat}}
        path.write_text(json.dumps({"status": "ok"} if p is bad else record))
        expected.append((p.as_record(), path))
    out = tmp_path / "runs.csv"
    write_runs_table(expected, out)
    runs = pd.read_csv(out)
    assert sorted(runs["status"]) == ["failed", "ok", "ok", "ok"]
    row = runs[runs["status"] == "failed"].iloc[0]
    assert (row["study"], row["point"], row["repeat"], row["category"]) == ("pp", bad.id, 4, INVALID_RECORD)
    assert row["reason"].endswith("lacks figure latency_us")
    page = to_html(study_blocks("pp", runs, pd.DataFrame(), pd.DataFrame(), []))
    assert "4 runs: 3 succeeded, 1 failed." in page and "Failed runs (1)" in page and "lacks figure latency_us" in page


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ([], "is not a JSON object but list"),
        ({"status": "done"}, "has status 'done', not one of ok, failed"),
        ({"status": "ok", "figures": {"latency_us": True}}, "lacks figure latency_us"),
        ({"status": "ok", "figures": {"latency_us": float("nan")}}, "lacks figure latency_us"),
        ({"status": "ok", "figures": [1]}, "has 'figures' that is not an object"),
        ({"status": "failed", "figures": {}}, None),
        ({"status": "ok", "figures": {"latency_us": 3}}, None),
    ],
)
def test_the_record_schema(record, problem):
    from scalestudy.model.record import record_problems

    assert record_problems(record, "latency_us") == ([problem] if problem else [])


def test_a_retry_counts_an_ok_record_without_figures_as_failed(tmp_path):
    from scalestudy.bookkeeping.retry import planned_retry

    path = tmp_path / "metrics.json"
    path.write_text('{"status": "ok", "started": "2026-01-01T00:00:00+00:00"}')
    number, failed = planned_retry(path, True, primary="latency_us")
    assert number == 1 and failed["status"] == "ok"
