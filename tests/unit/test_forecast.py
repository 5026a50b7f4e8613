"""The cost forecast before the first submission (config/forecast.py): the maximum service
units per study and in total from each point's request (the one formula,
estimated_service_units), the expected units from measured walltimes of earlier runs, and
`budget_su_total` refusing a sweep at load with one line naming the costliest studies."""

import json

import pytest
import yaml
from scalestudy.config import clusters
from scalestudy.config.forecast import budget_problems, forecast, forecast_lines, point_service_units
from scalestudy.config.requests import job_request
from scalestudy.model.errors import SweepError
from scalestudy.model.paths import Layout
from scalestudy.results.history import survey
from scalestudy.scheduler import site


@pytest.fixture
def shipped(repo, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    return yaml.safe_load((repo / "config/sweep.yaml").read_text())


def test_the_shipped_sweep_on_gadi_per_study_and_in_total(shipped):
    study = site.load_study({**shipped, "cluster": "gadi"})
    result = forecast(study.points, study.cluster)
    # LitGPT on gpuvolta: rate 3 x 48 cores x (1 h + 5 min margin), 4 one-node and 4 two-node jobs.
    assert result.maximum["litgpt-full"] == pytest.approx(4 * 3 * 48 * 65 / 60 + 4 * 3 * 96 * 65 / 60)
    # HOOMD-blue strong: 2 flag sets x 3 repeats at 1, 2, 4 whole nodes, rate 2, 35 min each.
    assert result.maximum["hoomd-wca"] == pytest.approx(6 * 2 * (48 + 96 + 192) * 35 / 60)
    # torch-parallel on gpuvolta: 12 model x strategy points x 3 repeats at 1 and 2 nodes of 48 cores, 25 min.
    assert result.maximum["torch-parallel"] == pytest.approx(36 * 3 * (48 + 96) * 25 / 60)
    # collectives on normal: 2 operations x 2 backends x 3 flag sets x 3 repeats, 2 cores, rate 2, 15 min.
    assert result.maximum["collectives"] == pytest.approx(36 * 2 * 2 * 15 / 60)
    assert result.total == pytest.approx(sum(result.maximum.values())) == pytest.approx(16140.0)
    assert result.jobs["hoomd-wca"] == 18 and result.expected_points == 0
    (line,) = forecast_lines(result)
    assert line.startswith("scalestudy: cost forecast for the sweep on gadi, at most (request x (walltime + margin)")
    assert "hoomd-wca 2,352.0 SU (18 jobs)" in line and line.endswith("total 16,140.0 SU")


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
        "scalestudy: expected from the measured walltime of earlier runs of the same points: 32.0 SU for 2 of 168 jobs"
    )


def test_a_sweep_over_its_budget_is_refused_at_load_naming_the_costliest_studies(shipped):
    with pytest.raises(SweepError) as refused:
        site.load_study({**shipped, "cluster": "gadi", "budget_su_total": 5000})
    assert refused.value.problems == [
        "budget_su_total: the sweep may cost up to 16,140.0 SU on gadi (request x (walltime + margin) x charge rate), "
        "over the budget of 5,000.0 SU; costliest: torch-parallel 6,480.0 SU, hoomd-wca 2,352.0 SU, lammps-wca "
        "2,352.0 SU (fewer repeats, scales or variants, shorter walltimes, or a larger budget_su_total)"
    ]
    assert site.load_study({**shipped, "cluster": "gadi", "budget_su_total": 16140}).cluster.name == "gadi"


@pytest.mark.parametrize("budget", [0, -5, "abc"])
def test_budget_su_total_must_be_a_positive_number(shipped, budget):
    with pytest.raises(SweepError) as refused:
        site.load_study({**shipped, "cluster": "gadi", "budget_su_total": budget})
    assert refused.value.problems[0].startswith("budget_su_total: ")


def test_no_budget_no_refusal():
    result = forecast([], clusters.load("gadi"))
    assert budget_problems(result, None) == [] and forecast_lines(result) == []
