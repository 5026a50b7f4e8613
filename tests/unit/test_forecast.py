"""The cost forecast before the first submission (config/forecast.py): the maximum service
units per study and in total from each point's request (the one formula,
estimated_service_units), the expected units from measured walltimes of earlier runs, and
`budget_su_total` refusing, before anything is submitted, the jobs one invocation would submit
(packs as packs, finished points not at all; never a report) with one line naming the
costliest studies."""

import json
from pathlib import Path

import pytest
from scalestudy.apps.registry import APPS
from scalestudy.bookkeeping.history import survey
from scalestudy.config import clusters
from scalestudy.config.files import load_files
from scalestudy.config.forecast import budget_problems, forecast, forecast_lines, point_service_units
from scalestudy.config.requests import job_request
from scalestudy.model.errors import SweepError
from scalestudy.model.paths import Layout
from scalestudy.model.record import definition
from scalestudy.planning import summary
from scalestudy.planning.plan import Forcing, Plan, load_plan
from scalestudy.scheduler import site

# What Snakemake asked for when only the report is a target (snakemake_adapter.SnakemakeRun.forcing).
REPORT = Forcing(targets=frozenset({"report"}))


@pytest.fixture
def shipped(repo, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    # As profiles/gadi reads it: with config/v100.yaml (no bfloat16 on gpuvolta's V100s).
    return load_files(str(repo / "config/sweep.yaml"), str(repo / "config/v100.yaml"))


def test_the_shipped_sweep_on_gadi_per_study_and_in_total(shipped):
    study = site.load_study({**shipped, "cluster": "gadi"})
    result = forecast(study.points, study.cluster)
    # LitGPT on gpuvolta: rate 3 x 48 cores x (1 h + 5 min margin), 4 one-node and 4 two-node jobs.
    assert result.maximum["litgpt-full"] == pytest.approx(4 * 3 * 48 * 65 / 60 + 4 * 3 * 96 * 65 / 60)
    # HOOMD-blue strong: 2 flag sets x 3 repeats at 1, 2, 4 whole nodes, rate 2, 35 min each.
    assert result.maximum["hoomd-wca"] == pytest.approx(6 * 2 * (48 + 96 + 192) * 35 / 60)
    # torch-parallel on gpuvolta: 12 model x strategy points x 3 repeats at 1 and 2 nodes of 48 cores, 25 min.
    assert result.maximum["torch-parallel"] == pytest.approx(36 * 3 * (48 + 96) * 25 / 60)
    # collectives on normal: 2 operations x 2 backends x 3 flag sets x 3 repeats less the allreduce
    # algorithms' sets with gloo or alltoall (exclude: 6 x 3), 2 cores, rate 2, 15 min.
    assert result.maximum["collectives"] == pytest.approx(18 * 2 * 2 * 15 / 60)
    assert result.total == pytest.approx(sum(result.maximum.values())) == pytest.approx(16122.0)
    assert result.jobs["hoomd-wca"] == 18 and result.expected_points == 0
    (line,) = forecast_lines(result)
    assert line.startswith("scalestudy: cost forecast for the sweep on gadi, at most (request x (walltime + margin)")
    assert "hoomd-wca 2,352.0 SU (18 jobs)" in line and line.endswith("total 16,122.0 SU")


def test_a_points_maximum_is_its_request_at_the_batch_walltime(shipped):
    study = site.load_study({**shipped, "cluster": "aspire2a"})
    point = study.points[0]
    request = job_request(point, study.cluster)
    assert request.walltime_s == point.walltime_seconds + study.cluster.walltime_margin_s
    # GPU-hours on ASPIRE 2A: 4 GPUs x 65 min.
    assert point_service_units(point, study.cluster) == pytest.approx(4 * 65 / 60)


def test_expected_units_come_from_the_measured_walltime_of_earlier_runs(shipped, tmp_path):
    study = site.load_study({**shipped, "cluster": "gadi", "results_dir": str(tmp_path)})
    layout = Layout(str(tmp_path))
    hoomd = [p for p in study.points if p.study == "hoomd-wca" and p.nodes == 1 and p.mpi_flag_set == "default"]
    done = hoomd[0]
    record = {"status": "ok", "resources": {"walltime_used_s": 600.0}}
    path = tmp_path / layout.metrics(done.study, done.id).removeprefix(f"{tmp_path}/")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    found = survey(study.points, layout, "gadi")
    to_submit = found.to_submit(study.points)
    assert done not in to_submit and len(to_submit) == len(study.points) - 1
    result = forecast(to_submit, study.cluster, found.measured())
    # The other two repeats of that scale and variant: 48 cores x rate 2 x 10 minutes each.
    assert result.expected_points == 2 and result.expected == pytest.approx(2 * 2 * 48 * 600 / 3600)
    assert forecast_lines(result)[1] == (
        "scalestudy: expected from the measured walltime of earlier runs of the same points: 32.0 SU for 2 of 150 jobs"
    )


def test_a_record_of_another_definition_says_nothing_of_the_walltime(shipped, tmp_path):
    # The local study's results in the same directory: a point of the same id measured on the
    # local cluster is to run again on gadi, and its walltime is no forecast of gadi's.
    study = site.load_study({**shipped, "cluster": "gadi", "results_dir": str(tmp_path)})
    layout = Layout(str(tmp_path))
    done = study.points[0]
    local = json.loads(done.to_json())
    record = {"status": "ok", "resources": {"walltime_used_s": 600.0}, "definition": {**local, "cluster": "local"}}
    path = tmp_path / layout.metrics(done.study, done.id).removeprefix(f"{tmp_path}/")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    found = survey(study.points, layout, "gadi")
    assert done in found.to_submit(study.points) and found.measured() == {}
    # The same record measured on gadi is finished, and its walltime counts.
    path.write_text(json.dumps({**record, "definition": {**local, "cluster": "gadi"}}))
    found = survey(study.points, layout, "gadi")
    assert done not in found.to_submit(study.points) and list(found.measured().values()) == [600.0]


def gadi_plan(shipped, tmp_path, **settings) -> Plan:
    return load_plan({**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "results"), **settings})


def test_jobs_to_submit_over_the_budget_are_refused_naming_the_costliest_studies(shipped, tmp_path):
    plan = gadi_plan(shipped, tmp_path, budget_su_total=5000)
    assert summary.budget_problems(plan) == [
        "budget_su_total: the 151 run jobs to submit may cost up to 16,122.0 SU on gadi (request x (walltime + "
        "margin) x charge rate), over the budget of 5,000.0 SU; costliest: torch-parallel 6,480.0 SU, hoomd-wca "
        "2,352.0 SU, lammps-wca 2,352.0 SU (fewer repeats, scales or variants, shorter walltimes, or a larger "
        "budget_su_total)"
    ]
    assert summary.budget_problems(gadi_plan(shipped, tmp_path, budget_su_total=16122)) == []


def test_the_budget_never_blocks_a_report_and_a_report_prints_no_forecast(shipped, tmp_path):
    # Loading is no refusal: the study loads whatever its budget (the report target reads it).
    plan = gadi_plan(shipped, tmp_path, budget_su_total=1)
    assert summary.budget_problems(plan, REPORT) == []
    assert not any("cost forecast" in line for line in summary.summary_lines(plan, REPORT))
    assert any("cost forecast for the 151 run jobs to submit" in line for line in summary.summary_lines(plan))
    # A batch job's own Snakemake submits nothing.
    inside = load_plan({**shipped, "cluster": "gadi", "budget_su_total": 1}, main_process=False)
    assert summary.budget_problems(inside) == []


def finish(plan: Plan, points) -> None:
    for point in points:
        path = Path(plan.layout.metrics(point.study, point.id))
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"status": "ok", "definition": definition(point, plan.cluster.name)}
        path.write_text(json.dumps({**record, "figures": {APPS[point.app].primary_metric: 1.0}}))


def test_finished_points_are_not_priced(shipped, tmp_path):
    plan = gadi_plan(shipped, tmp_path)
    torch_points = [p for p in plan.study.points if p.study == "torch-parallel"]
    finish(plan, torch_points)
    again = gadi_plan(shipped, tmp_path, budget_su_total=16122 - 6480)
    assert len(again.to_submit) == 151 - 72 and "torch-parallel" not in summary.submit_forecast(again).maximum
    assert summary.submit_forecast(again).total == pytest.approx(16122 - 6480)
    assert summary.budget_problems(again) == []
    over = gadi_plan(shipped, tmp_path, budget_su_total=16122 - 6480 - 1)
    assert summary.budget_problems(over)[0].startswith(
        "budget_su_total: the 79 run jobs to submit may cost up to 9,642.0 SU on gadi"
    )


def test_a_packed_study_is_priced_as_its_packs(shipped, tmp_path):
    """hoomd-wca packed by scale: 3 jobs of 6 points, each the pack's walltimes summed and the
    margin once (5 min, not 6 x 5 min), instead of 18 jobs."""
    studies = {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "pack": "scale"}}
    packed = gadi_plan({**shipped, "studies": studies}, tmp_path)
    alone = gadi_plan({**shipped, "studies": {"hoomd-wca": shipped["studies"]["hoomd-wca"]}}, tmp_path)
    assert summary.submit_forecast(packed).jobs == {"hoomd-wca": 3} and summary.submit_forecast(alone).jobs == {
        "hoomd-wca": 18
    }
    # Rate 2 x cores x (6 x 30 min + 5 min) per pack, at 1, 2 and 4 nodes of 48 cores.
    assert summary.submit_forecast(packed).total == pytest.approx(2 * (48 + 96 + 192) * (6 * 30 + 5) / 60)
    assert summary.submit_forecast(alone).total == pytest.approx(2352.0)
    budget = summary.submit_forecast(packed).total
    assert summary.budget_problems(gadi_plan({**shipped, "studies": studies}, tmp_path, budget_su_total=budget)) == []


@pytest.mark.parametrize("budget", [0, -5, "abc"])
def test_budget_su_total_must_be_a_positive_number(shipped, budget):
    with pytest.raises(SweepError) as refused:
        site.load_study({**shipped, "cluster": "gadi", "budget_su_total": budget})
    assert refused.value.problems[0].startswith("budget_su_total: ")


def test_no_budget_no_refusal():
    result = forecast([], clusters.load("gadi"))
    assert budget_problems(result, None) == [] and forecast_lines(result) == []


def test_the_opening_line_forecast_and_budget_count_what_the_targets_run(shipped, tmp_path):
    """`snakemake ... -- <results>/hoomd-wca/runs.csv` under budget_su_total 3000: the sweep would
    cost 16,122 SU, hoomd-wca alone 2,352 SU; the line and the forecast name hoomd-wca's 18 jobs."""
    plan = gadi_plan(shipped, tmp_path, budget_su_total=3000)
    assert summary.budget_problems(plan, Forcing()) != []  # the whole sweep
    runs_csv = Forcing(targets=frozenset({str(tmp_path / "results/hoomd-wca/runs.csv")}))
    assert summary.budget_problems(plan, runs_csv) == []
    line, *forecast_line = summary.summary_lines(plan, runs_csv)
    assert line.startswith("scalestudy: 18 points (hoomd-wca 18); 18 run jobs to submit")
    assert "hoomd-wca 2,352.0 SU (18 jobs); total 2,352.0 SU" in forecast_line[0]
    two = Forcing(targets=frozenset({str(tmp_path / f"results/{s}/runs.csv") for s in ("hoomd-wca", "collectives")}))
    assert summary.summary_lines(plan, two)[0].startswith(
        "scalestudy: 36 points (hoomd-wca 18, collectives 18; 18 left out by exclude/zip)"
    )
    point = next(p for p in plan.study.points if p.study == "lammps-wca")
    one = Forcing(targets=frozenset({plan.layout.metrics(point.study, point.id)}))
    assert summary.summary_lines(plan, one)[0].startswith("scalestudy: 1 points (lammps-wca 1); 1 run jobs to submit")
    # The report, or anything else, needs every point.
    assert summary.summary_lines(plan, Forcing(targets=frozenset({"all"})))[0].startswith("scalestudy: 151 points")
