"""Records name the definition they measured and are never lost: planning reads what each
run directory holds (results/history.py), a changed point's old record is kept before it
reruns, and the report says a point was measured again."""

import json
import os
import time
from pathlib import Path

import pytest
from points import pingpong_point, point
from scalestudy.analysis.records import aggregate
from scalestudy.bookkeeping import history
from scalestudy.launch.runner import new_record
from scalestudy.model.paths import Layout
from scalestudy.model.record import definition, definition_changes, recorded_definition, same_definition

# ---------------------------------------------------------------- the definition a record measured


def test_a_record_names_its_definition_and_older_records_read_it_back():
    p = point()
    record = new_record(p, "gadi")
    assert record["definition"] == definition(p, "gadi") and record["definition"]["cluster"] == "gadi"
    older = {key: value for key, value in record.items() if key != "definition"}
    # A record written before `definition` existed: the same facts, read back exactly.
    assert recorded_definition(older) == definition(p)
    assert same_definition(recorded_definition(older), definition(p, "gadi"))
    assert recorded_definition({"status": "failed", "figures": {}}) is None


def test_what_counts_as_a_changed_definition():
    p = pingpong_point()
    changed = pingpong_point(params={**p.params, "iterations": 100})
    assert not same_definition(definition(p, "local"), definition(changed, "local"))
    assert not same_definition(definition(p, "local"), definition(p, "gadi"))
    # The walltime and queue say how a point runs, not what it measures.
    assert same_definition(definition(p, "local"), definition(pingpong_point(walltime="02:00:00"), "local"))
    # Unknown is not different: nothing reruns on a guess.
    assert same_definition(None, definition(p))
    assert definition_changes(definition(p), definition(changed)) == ["params.iterations: 50 → 100"]


# ---------------------------------------------------------------- planning reads the results


def write_record(layout: Layout, p, cluster="local", **changes) -> Path:
    path = Path(layout.metrics(p.study, p.id))
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**new_record(p, cluster), "status": "ok", "figures": {"latency_us": 1.0}}
    record.update({"started": "2026-01-02T03:04:05+00:00", **changes})
    path.write_text(json.dumps(record))
    (path.parent / "stdout.log").write_text("the old run's output\n")
    return path


def test_a_study_never_run_costs_no_look_at_its_points(tmp_path, monkeypatch):
    layout = Layout(str(tmp_path / "results"))
    points = [pingpong_point(study="pp", repeat=r) for r in range(1, 101)]
    looked = []
    monkeypatch.setattr(history, "survey_point", lambda *args: looked.append(args))
    found = history.survey(points, layout, "local")
    assert looked == [] and found.counts == {"new": 100} and found.to_run == 100
    assert found.first_missing == {"pp": layout.metrics("pp", points[0].id)}
    assert history.summary_line(found) == (
        "scalestudy: 100 points (pp 100); 100 run jobs to submit (100 not run yet); `report` alone submits none"
    )


def test_planning_sorts_points_by_what_their_run_directories_hold(tmp_path):
    layout = Layout(str(tmp_path / "results"))
    finished, changed, failed, new = (pingpong_point(study="pp", repeat=r) for r in (1, 2, 3, 4))
    write_record(layout, finished)
    write_record(layout, pingpong_point(study="pp", repeat=2, params={**changed.params, "iterations": 100}))
    write_record(layout, failed, status="failed", figures={})
    found = history.survey([finished, changed, failed, new], layout, "local", retry_failed=True)
    assert found.counts == {"new": 1, "changed": 1, "retry": 1}
    assert found.state("pp", finished.id) == history.FINISHED
    state = found.state("pp", changed.id)
    assert state.reason == "changed" and state.keep == state.kept[0]
    # history/<when the old record started>-<digest of what it measured>/metrics.json
    assert state.keep.startswith(layout.history("pp", changed.id) + "/2026-01-02T03-04-05-00-00-")
    assert state.keep.endswith("/definition.json")
    assert found.to_keep[0] == state.keep and found.keeping[0] == layout.metrics("pp", changed.id)
    retried = found.state("pp", failed.id)
    assert retried.retry == 1 and layout.metrics("pp", failed.id) in found.retry_archives
    # A retried record is kept by the keep job too: it reruns without metadata.
    assert retried.keep and found.to_keep[1] == retried.keep and found.keeping[1] == layout.metrics("pp", failed.id)
    assert found.first_missing == {"pp": layout.metrics("pp", new.id)}
    assert history.summary_line(found).startswith(
        "scalestudy: 4 points (pp 4); 3 run jobs to submit (1 not run yet, 1 definition changed, 1 to retry)"
    )
    # Without the switch a failed point is finished too.
    assert history.survey([failed], layout, "local").to_run == 0


def test_an_input_made_again_after_the_record_counts_as_a_rerun(tmp_path):
    layout = Layout(str(tmp_path / "results"))
    p = pingpong_point(study="pp")
    path = write_record(layout, p)
    asset = tmp_path / "asset"
    asset.write_text("x")
    os.utime(path, (time.time() - 60, time.time() - 60))
    found = history.survey([p], layout, "local", made_inputs=lambda _point: [str(asset)])
    assert found.counts == {"inputs": 1}
    missing = history.survey([p], layout, "local", made_inputs=lambda _point: [str(tmp_path / "gone")])
    assert missing.to_run == 0  # a missing asset is made again only for a point that runs anyway


def test_the_keep_job_copies_the_old_record_and_names_what_it_measured(tmp_path):
    layout = Layout(str(tmp_path / "results"))
    old = pingpong_point(study="pp")
    now = pingpong_point(study="pp", params={**old.params, "iterations": 100})
    path = write_record(layout, old)
    (path.parent / "launch.sh").write_text("mpirun ...\n")
    before = path.read_text()
    found = history.survey([now], layout, "local")
    keep = found.state("pp", now.id).keep
    history.keep(keep, now, "local")
    kept = Path(keep).parent
    assert (kept / "metrics.json").read_text() == before and path.read_text() == before
    assert (kept / "stdout.log").read_text() == "the old run's output\n"
    assert (kept / "launch.sh").is_file()
    note = json.loads(Path(keep).read_text())
    assert note["definition"]["params"]["iterations"] == 50 and note["replaced_by"]["params"]["iterations"] == 100
    assert note["changes"] == ["params.iterations: 50 → 100"]
    # The note is newer than the record it keeps: the point reruns after it, with or without metadata.
    assert Path(keep).stat().st_mtime >= path.stat().st_mtime
    with pytest.raises(FileExistsError):
        history.keep(keep, now, "local")
    # Kept records stay inputs of the point's run job (its input set must not shrink).
    assert history.survey([now], layout, "local").state("pp", now.id).kept == (keep,)


def test_the_keep_job_refuses_a_record_it_was_not_planned_for(tmp_path):
    layout = Layout(str(tmp_path / "results"))
    old = pingpong_point(study="pp")
    now = pingpong_point(study="pp", params={**old.params, "iterations": 100})
    write_record(layout, old)
    keep = history.survey([now], layout, "local").state("pp", now.id).keep
    write_record(layout, old, started="2026-02-02T00:00:00+00:00")  # replaced meanwhile
    with pytest.raises(RuntimeError, match="not the record planned to be kept"):
        history.keep(keep, now, "local")
    assert not Path(keep).exists()


def test_a_rerun_snakemake_chose_keeps_its_record_outside_the_inputs(tmp_path):
    layout = Layout(str(tmp_path / "results"))
    p, planned = pingpong_point(study="pp"), pingpong_point(study="pp", repeat=2)
    path, other = write_record(layout, p), write_record(layout, planned)
    written = history.keep_before_rerun(
        {str(path): "Forced execution", str(other): "Params have changed"}, [str(other)]
    )
    assert len(written) == 1 and written[0].endswith("-rerun")
    note = json.loads((Path(written[0]) / "definition.json").read_text())
    assert note["why"] == "rerun by Snakemake: Forced execution"
    assert history.survey([p], layout, "local").state("pp", p.id) == history.FINISHED
    assert history.keep_before_rerun({str(path): "again"}) == []  # the same record is kept once


def test_the_runs_table_and_report_say_a_point_was_measured_again(tmp_path):
    from scalestudy.presentation.page import to_html
    from scalestudy.presentation.runs_section import run_blocks

    layout = Layout(str(tmp_path / "results"))
    old = pingpong_point(study="pp")
    now = pingpong_point(study="pp", params={**old.params, "iterations": 100})
    write_record(layout, old)
    history.keep(history.survey([now], layout, "local").state("pp", now.id).keep, now, "local")
    path = write_record(layout, now, started="2026-03-01T00:00:00+00:00")
    runs = aggregate([], expected=[(now.as_record(), path)])
    assert runs.iloc[0]["kept_records"] == 1 and runs.iloc[0]["remeasured"] == "params.iterations: 50 → 100"
    page = to_html(run_blocks(runs))
    assert "Re-measured (1)" in page and "params.iterations: 50 → 100 (1 kept)" in page


def test_the_stand_in_model_settings_are_a_canonical_param():
    import yaml
    from scalestudy.apps.litgpt.assets import settings_param
    from scalestudy.model.paths import REPO_ROOT

    shipped = yaml.safe_load((REPO_ROOT / "config/local.yaml").read_text())["assets"]["litgpt_tiny"]
    resorted = dict(sorted(shipped.items()))
    assert list(resorted) != list(shipped)
    # Params are compared as text: the same settings in another order are the same param,
    # and the shipped order is kept (what Snakemake recorded before still matches).
    assert repr(settings_param(resorted)) == repr(settings_param(shipped)) == repr(shipped)
    assert list(settings_param({"zeta": 1, "seed": 0, "alpha": 2})) == ["seed", "alpha", "zeta"]


def test_an_interrupted_keep_is_made_again_and_an_interrupted_rerun_completes(tmp_path):
    layout = Layout(str(tmp_path / "results"))
    old = pingpong_point(study="pp")
    now = pingpong_point(study="pp", params={**old.params, "iterations": 100})
    path = write_record(layout, old)
    keep = history.survey([now], layout, "local").state("pp", now.id).keep
    Path(keep).parent.mkdir(parents=True)
    (Path(keep).parent / "stdout.log").write_text("half")  # a copy cut off before definition.json
    history.keep(keep, now, "local")
    assert (Path(keep).parent / "stdout.log").read_text() == "the old run's output\n"
    # The keep ran, the rerun did not (Ctrl-C): the note is newer than the record, so the point
    # still runs, whatever the definition says by then.
    os.utime(path, (time.time() - 60, time.time() - 60))
    assert history.survey([old], layout, "local").counts == {"inputs": 1}
