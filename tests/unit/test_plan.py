"""The plan (scalestudy/planning/: plan, summary, run_rules, tables, start): everything the
rules need, built from a config in this process, no Snakemake: the summary line, the targets,
the run rules' inputs, params and resources, packs, and what happens before the first job."""

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from scalestudy.apps.registry import APPS
from scalestudy.config.requests import job_request
from scalestudy.model.errors import SweepError
from scalestudy.model.record import definition
from scalestudy.model.scaling_figures import EFFICIENCY_THRESHOLD
from scalestudy.planning import run_rules, summary, tables
from scalestudy.planning import start as start_module
from scalestudy.planning.plan import Deployment, Forcing, Plan, load_plan, python_module_shell, run_rule
from sweeps import sweep

PINGPONG = APPS["pingpong"]


def pingpong_config(tmp_path: Path, **settings) -> dict:
    """Ping-pong, default and tcp flag sets, 2 repeats: 4 points."""
    config = sweep("pingpong-tcp", results_dir=str(tmp_path / "results"), **settings)
    config["studies"]["pp"]["repeats"] = 2
    return config


def pingpong_plan(tmp_path: Path, **settings) -> Plan:
    return load_plan(pingpong_config(tmp_path, **settings))


def write_record(plan: Plan, point, **changes) -> str:
    """An ok record of `point` as the runner writes it (its definition, a figure)."""
    record = {
        "status": "ok",
        "definition": {**definition(point, plan.cluster.name), **changes},
        "figures": {PINGPONG.primary_metric: 1.0},
        "resources": {"walltime_used_s": 12.0},
        "started": "2026-01-01T00:00:00+00:00",
    }
    path = Path(plan.layout.metrics(point.study, point.id))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return str(path)


def test_a_new_study_plans_every_point_and_says_so_in_one_line(tmp_path):
    plan = pingpong_plan(tmp_path)
    assert summary.summary_lines(plan) == [
        "scalestudy: 4 points (pp 4); 4 run jobs to submit (4 not run yet); `report` alone submits none"
    ]
    # The default target: the report and one missing record per study (the rest follow it).
    first = plan.layout.metrics("pp", plan.study.points[0].id)
    assert run_rules.targets(plan, report_only=False) == [plan.layout.report_html, first]
    assert run_rules.targets(plan, report_only=True) == [plan.layout.report_html]
    assert plan.pack_of == {} and plan.packs == []


def test_report_and_compare_alone_run_no_point(tmp_path):
    plan = pingpong_plan(tmp_path)
    # Asked for the report alone, the summary says it runs nothing (the targets, known while the
    # Snakefile is read, through the adapter's Forcing).
    assert summary.summary_lines(plan, Forcing(targets=frozenset({"report"}))) == [
        "scalestudy: 4 points (pp 4); report from the finished runs only: 0 run jobs (4 not run yet)"
    ]
    assert summary.report_only(plan, {"report"}) and summary.report_only(plan, {"compare", "report"})
    assert (
        not summary.report_only(plan, set())
        and not summary.report_only(plan, {"all"})
        and not summary.report_only(plan, {"report", "all"})
    )
    assert summary.report_only(pingpong_plan(tmp_path, partial=True), {"all"})
    point = plan.study.points[0]
    # A table built from what has finished reads no record as an input (no run job enters the DAG).
    assert tables.aggregate_inputs(plan, "pp", report_only=True) == []
    assert tables.aggregate_inputs(plan, "pp", report_only=False)[0] == plan.layout.metrics("pp", point.id)
    assert tables.finished_fingerprint(plan, "pp", report_only=False) == ""
    assert tables.finished_fingerprint(plan, "pp", report_only=True) == []
    path = write_record(plan, point)
    assert tables.finished_fingerprint(plan, "pp", report_only=True)[0].startswith(f"{path}@")


def test_resources_equal_for_every_point_are_constants_and_the_rest_functions_of_the_point(tmp_path):
    plan = pingpong_plan(tmp_path)
    resources = run_rules.run_resources(plan, PINGPONG)
    assert resources["nodes"] == 1 and resources["tasks"] == 2
    assert "mpi" not in resources  # the Slurm plugin's alone (scheduler.slurm.Slurm.job_resources)
    assert resources["runtime"] == 1 and resources["walltime_s"] == 60
    assert resources["planned_cluster"] == "local" and resources["measurement_slot"] == 1
    # A second study with another walltime: walltime_s differs between the app's points.
    config = pingpong_config(tmp_path)
    config["studies"]["pp2"] = {**config["studies"]["pp"], "walltime": "00:02:00"}
    plan = load_plan(config)
    resources = run_rules.run_resources(plan, PINGPONG)
    assert resources["tasks"] == 2 and callable(resources["walltime_s"]) and callable(resources["runtime"])
    walltimes = {(p.study, resources["walltime_s"](p.study, p.id), resources["runtime"](p.study, p.id))
                 for p in plan.study.points}  # fmt: skip
    assert walltimes == {("pp", 60, 1), ("pp2", 120, 2)}


def test_batch_jobs_ask_for_the_walltime_with_the_margin_once_per_pack_and_the_requests_memory(
    repo, tmp_path, monkeypatch
):
    """Slurm's time limit (runtime, minutes) is the point's walltime and the cluster's margin,
    the margin once per pack (Snakemake sums a group's runtimes); its memory (mem_mb, which the
    Slurm plugin writes as --mem in MiB) is the request's per node, the record's figure."""
    monkeypatch.setenv("PROJECT", "ab12")
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    studies = {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "pack": "scale"}}
    plan = load_plan({**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "results"), "studies": studies})
    resources = run_rules.point_resources(plan)
    runtime, mem_mb = resources["runtime"], resources["mem_mb"]
    margin = plan.cluster.walltime_margin_s
    assert margin == 300 and plan.packs
    for pack in plan.packs:
        first, *later = pack.points
        assert runtime(first) == -(-(first.walltime_seconds + margin) // 60)
        assert all(runtime(point) == -(-point.walltime_seconds // 60) for point in later)
        assert sum(map(runtime, pack.points)) * 60 == pack.walltime_s(plan.cluster)
    for point in plan.study.points:
        request = job_request(point, plan.cluster)
        assert mem_mb(point) == request.mem_per_node_gib * 1024  # Gadi's 190 GB nodes: 194560 MiB each
        assert mem_mb(point) * point.nodes * 2**20 == request.mem_gib * 2**30


def test_a_changed_point_is_kept_before_it_reruns_and_a_finished_one_is_not_planned(tmp_path):
    plan = pingpong_plan(tmp_path)
    finished, changed = plan.study.points[0], plan.study.points[1]
    write_record(plan, finished)
    write_record(plan, changed, params={**changed.params, "iterations": 1})
    plan = pingpong_plan(tmp_path)
    line = summary.summary_lines(plan)[0]
    assert "3 run jobs to submit (2 not run yet, 1 definition changed)" in line
    assert [(p.study, p.id) for p in plan.to_submit if p.id in (finished.id, changed.id)] == [("pp", changed.id)]
    # The kept record is a target (it makes the point rerun) and an input of that point only.
    [keep] = plan.survey.to_keep
    assert keep in run_rules.targets(plan, report_only=False) and "/history/" in keep
    inputs = run_rules.run_inputs(plan, PINGPONG)
    assert callable(inputs)
    assert inputs("pp", changed.id) == [keep] and inputs("pp", finished.id) == []


def test_a_failed_point_retried_gets_a_retry_number_and_an_ok_point_never(tmp_path):
    plan = pingpong_plan(tmp_path)
    ok, failed = plan.study.points[0], plan.study.points[1]
    write_record(plan, ok)
    path = Path(write_record(plan, failed))
    path.write_text(json.dumps({**json.loads(path.read_text()), "status": "failed", "reason": "boom"}))
    plan = pingpong_plan(tmp_path, retry_failed=True)
    assert json.loads(run_rules.point_json(plan, "pp", failed.id))["retry"] == 1
    assert run_rules.point_json(plan, "pp", ok.id) == ok.to_json()
    assert "1 to retry" in summary.summary_lines(plan)[0]


def test_before_the_first_job_the_lock_is_taken_and_records_to_rerun_are_kept(tmp_path):
    plan = pingpong_plan(tmp_path)
    point = plan.study.points[0]
    metrics = write_record(plan, point)
    plan = pingpong_plan(tmp_path)
    held = start_module.start(plan, start_module.Start(lock=True, reruns={metrics: "forced"}))
    assert len(held) == 1 and Path(plan.layout.lock).exists()
    kept = list(Path(metrics).parent.glob("history/*-rerun/definition.json"))
    assert len(kept) == 1 and "rerun by Snakemake: forced" in kept[0].read_text()
    for handle in held:
        handle.close()


def test_missing_inputs_warn_at_planning_and_stop_the_first_job(tmp_path, repo, monkeypatch):
    assert pingpong_plan(tmp_path).missing_inputs == []
    monkeypatch.setenv("PROJECT", "ab12")
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    config = {**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "results")}
    config["studies"] = {"litgpt-lora": {**shipped["studies"]["litgpt-lora"]}}
    config["studies"]["litgpt-lora"]["params"]["data_path"] = str(tmp_path / "no-such.json")
    config["studies"]["litgpt-lora"]["params"]["precision"] = "16-true"  # config/v100.yaml: gadi has no bf16
    plan = load_plan(config)
    assert f"studies.litgpt-lora.params.data_path: {tmp_path}/no-such.json does not exist" in plan.missing_inputs
    with pytest.raises(SweepError) as stopped:
        start_module.start(plan, start_module.Start(lock=False, reruns={}))
    assert stopped.value.problems == plan.missing_inputs


def test_inside_a_batch_job_nothing_is_surveyed_or_packed(tmp_path):
    plan = load_plan(pingpong_config(tmp_path), main_process=False)
    assert plan.to_submit == [] and plan.packs == [] and plan.survey.to_run == 0
    assert tables.aggregate_inputs(plan, "pp", report_only=False) == []


def test_a_packed_study_on_a_pbs_site_is_one_group_per_pack_and_priced(tmp_path, repo, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    config = {**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "results")}
    config["studies"] = {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "pack": "scale"}}
    plan = load_plan(config)
    assert len(plan.packs) == 3 and len(plan.pack_of) == 18
    assert {run_rules.pack_group(plan, "hoomd-wca", p.id) for p in plan.study.points} == {
        pack.name for pack in plan.packs
    }
    lines = summary.summary_lines(plan)
    assert lines[1].startswith("scalestudy: packed 18 points into 3 batch jobs (hoomd-wca.n1r48.pack1, ")
    assert lines[2].startswith("scalestudy: cost forecast for the 18 run jobs to submit")
    submitted = start_module.packs_for_submit(plan)
    assert [len(points) for points in submitted.values()] == [6, 6, 6]
    assert set(submitted["hoomd-wca.n1r48.pack1"][0]) == {"metrics", "point", "walltime_s", "queue"}


def test_a_pack_the_queue_would_refuse_stops_planning(tmp_path, repo, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    config = {**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "results")}
    config["studies"] = {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "pack": "scale", "walltime": "09:00:00"}}
    with pytest.raises(SweepError) as refused:
        load_plan(config)
    assert "use a smaller pack" in refused.value.problems[0]


def test_the_compare_target_needs_a_baseline_named_in_one_line(tmp_path):
    plan = pingpong_plan(tmp_path)
    with pytest.raises(SweepError) as refused:
        tables.compare_baseline(plan, studies_of=lambda path: [])
    assert refused.value.problems == [
        "compare_baseline: not given; the compare target needs --config compare_baseline=PATH (a results directory)"
    ]
    (tmp_path / "base/pp").mkdir(parents=True)
    (tmp_path / "base/pp/runs.csv").write_text("x\n")
    assert tables.compare_inputs(plan, str(tmp_path / "base")) == [
        plan.layout.table("pp", "runs"),
        plan.layout.table("pp", "scaling"),
        str(tmp_path / "base/pp/runs.csv"),
    ]


def test_job_commands_quote_every_path_and_jobs_import_what_their_deployment_gives():
    shell = python_module_shell("/a dir/{x}", "/venv/bin/python", "scalestudy run-point")
    assert shell == "PYTHONPATH='/a dir/{{x}}'${{PYTHONPATH:+:$PYTHONPATH}} /venv/bin/python -m scalestudy run-point"
    assert run_rule("pingpong") == "run_pingpong"
    nothing_here = lambda module: False  # noqa: E731
    assert not Deployment().jobs_can_import("hoomd", [], nothing_here)
    assert Deployment(conda=True).jobs_can_import("hoomd", [], nothing_here)
    assert Deployment(env_modules=True).jobs_can_import("hoomd", ["hoomd/4.8"], nothing_here)
    assert not Deployment(env_modules=True).jobs_can_import("hoomd", [], nothing_here)
    assert Deployment().jobs_can_import(None, [], nothing_here)


def test_repeats_until_clear_plan_min_first_and_the_forecast_prices_max(tmp_path, repo, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    config = {**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "results")}
    study = {**shipped["studies"]["hoomd-wca"], "nodes": [1], "repeats": {"min": 2, "max": 5, "ci": "5%"}}
    config["studies"] = {"hoomd-wca": study}
    plan = load_plan(config)
    sets = len(study["mpi_flags"])
    assert sorted({p.repeat for p in plan.to_submit}) == [1, 2] and len(plan.to_submit) == 2 * sets
    assert sorted({p.repeat for p in plan.later_repeats}) == [3, 4, 5] and len(plan.later_repeats) == 3 * sets
    assert summary.summary_lines(plan)[1].startswith(
        f"scalestudy: cost forecast for the {2 * sets} run jobs to submit and the {3 * sets} repeats up to max"
    )
    # The points' order: round by round, the first to run the highest priority.
    priority = run_rules.run_priority(plan)
    assert priority("hoomd-wca", plan.to_submit[0].id) > 0
    assert min(priority("hoomd-wca", p.id) for p in plan.to_submit if p.repeat == 1) > max(
        priority("hoomd-wca", p.id) for p in plan.to_submit if p.repeat == 2
    )


def test_repeats_until_clear_go_round_by_round_and_the_table_waits_for_the_round_that_adds_none(
    tmp_path, repo, monkeypatch
):
    monkeypatch.setenv("PROJECT", "ab12")
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    config = {**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "results")}
    study = {**shipped["studies"]["hoomd-wca"], "nodes": [1], "mpi_flags": ["default"]}
    config["studies"] = {"hoomd-wca": {**study, "repeats": {"min": 2, "max": 4, "ci": "5%"}}}
    plan = load_plan(config)
    assert plan.rounds == {"hoomd-wca"}
    round_one = tables.round_inputs(plan, "hoomd-wca", 1, round_output=None)
    assert [path.split("/")[-2] for path in round_one] == ["rep1", "rep2"]

    decisions = {}

    def round_output(n):  # Snakemake's checkpoint: raises until the round has run
        if n not in decisions:
            raise LookupError(f"round {n} not run")
        return decisions[n]

    def run_round(n, values):
        inputs = tables.round_inputs(plan, "hoomd-wca", n, round_output) if n > 1 else round_one
        for path, value in zip([p for p in inputs if p.endswith("metrics.json")], values, strict=True):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps({"status": "ok", "figures": {"steps_per_s": value}}))
        decisions[n] = plan.layout.round_file("hoomd-wca", n)
        return tables.write_next_round(plan, "hoomd-wca", n, decisions[n])

    with pytest.raises(LookupError, match="round 1"):
        tables.aggregate_inputs(plan, "hoomd-wca", False, round_output)
    assert "round 2 runs 1 more repeat" in run_round(1, [100.0, 150.0])[0]
    with pytest.raises(LookupError, match="round 2"):  # the table waits for round 2's decision
        tables.aggregate_inputs(plan, "hoomd-wca", False, round_output)
    assert [p.split("/")[-2] for p in tables.round_inputs(plan, "hoomd-wca", 2, round_output)[1:]] == ["rep3"]
    # rep3 does not settle it (the CI of 100, 150, 125 is ±50%): round 3 runs rep4, the last (max 4).
    assert "round 3 runs 1 more repeat" in run_round(2, [125.0])[0]
    assert run_round(3, [125.0])[0].endswith("every point has stopped (0 at their CI target, 1 at max)")
    table_inputs = tables.aggregate_inputs(plan, "hoomd-wca", False, round_output)
    assert [p.split("/")[-2] for p in table_inputs] == ["rep1", "rep2", "rep3", "rep4"]
    assert [record["repeat"] for record, _ in tables.expected_runs(plan, "hoomd-wca")] == [1, 2, 3, 4]
    # A fixed number of repeats has no rounds: the table waits for the records alone.
    config["studies"] = {"hoomd-wca": {**study, "repeats": 2}}
    fixed = load_plan({**config, "results_dir": str(tmp_path / "fixed")})
    assert fixed.rounds == set()
    assert len(tables.aggregate_inputs(fixed, "hoomd-wca", False, round_output)) == 2


def test_the_study_is_loaded_once_into_typed_settings_that_the_rules_read(tmp_path, repo):
    """The loader reads the config's keys once (model.settings); after it, the plan, the rules
    and the tables read attributes, never the raw dict (a key is one field, with its default)."""
    from scalestudy.model.settings import Settings, StudySettings

    config = pingpong_config(tmp_path, compare_baseline="elsewhere", predict_from="measured", budget_su_total=9)
    config["studies"]["pp"]["repeats"] = {"max": 4, "min": 2, "ci": "5%"}
    plan = load_plan(config)
    settings = plan.study.settings
    assert isinstance(settings, Settings) and isinstance(settings.studies["pp"], StudySettings)
    assert (settings.compare_baseline, settings.predict_from, settings.budget_su_total) == ("elsewhere", "measured", 9)
    assert (settings.partial, settings.retry_failed, settings.order_seed) == (False, False, 0)  # the schema's defaults
    pp = settings.studies["pp"]
    assert (pp.app, pp.pack, pp.estimator, pp.budget_su) == ("pingpong", 1, "mean", None)
    assert pp.efficiency_threshold == EFFICIENCY_THRESHOLD
    assert pp.repeats_text == '{"ci": "5%", "max": 4, "min": 2}' and pp.repeat_limits.max == 4
    assert plan.sweep.studies is settings.studies  # one value: the sweep's studies are the typed ones
    # After loading, no rule reads `config` (the loader's argument) by key.
    rules = "\n".join(path.read_text() for path in (repo / "workflow/rules").glob("*.smk"))
    assert not re.search(r"\bconfig(\.get\(|\[)", rules)


def test_onstart_is_a_list_of_steps_each_with_one_owner(tmp_path):
    """start runs its steps in order; a step stops the rest (missing inputs before the lock)."""
    plan = pingpong_plan(tmp_path)
    assert [step.__name__ for step in start_module.STEPS] == [
        "stop_on_missing_inputs", "check_site_modules", "check_site_mpi", "say_uncounted_reruns", "take_lock",
        "archive_retries", "keep_before_rerun", "resubmit_never_ran", "save_packs",
    ]  # fmt: skip
    said = []
    held = start_module.start(plan, start_module.Start(lock=False, reruns={}, say=said.append))
    assert held == [] and said == [] and not Path(plan.layout.lock).exists()
    missing = dataclasses.replace(plan, missing_inputs=["studies.pp.params.x: /nowhere does not exist"])
    with pytest.raises(SweepError):
        start_module.start(missing, start_module.Start(lock=True, reruns={}))
    assert not Path(plan.layout.lock).exists()  # stopped before the lock was taken


def test_the_batch_jobs_snakemake_would_resume_are_asked_for_only_on_a_pbs_cluster(tmp_path, repo, monkeypatch):
    """The PBS step of onstart is start's own (no PBS branch in common.smk): elsewhere Snakemake
    is not asked which jobs it would resume."""
    asked = []

    def resumed():
        asked.append(True)
        return {}

    start_module.start(pingpong_plan(tmp_path), start_module.Start(lock=False, reruns={}, resumed=resumed))
    assert asked == []  # the local cluster: never asked
    monkeypatch.setenv("PROJECT", "ab12")
    # The shell that runs it loaded Gadi's MPI module (check_site_modules asks for it).
    monkeypatch.setenv("LOADEDMODULES", "openmpi/4.1.5")
    # The site MPI's check asks the launcher and mpi4py (processes: tests/integration/test_site_mpi.py).
    monkeypatch.setattr(start_module.site_mpi, "problems", lambda *args, **kwargs: [])
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    config = {**shipped, "cluster": "gadi", "results_dir": str(tmp_path / "gadi")}
    config["studies"] = {"hoomd-wca": shipped["studies"]["hoomd-wca"]}
    start_module.start(load_plan(config), start_module.Start(lock=False, reruns={}, resumed=resumed))
    assert asked == [True]
