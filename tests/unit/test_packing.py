"""Packing (config/packing.py): points with the same batch request in one batch job, one
after another, repeats and variants interleaved; the walltime summed plus the margin once;
`plan` and the forecast count packs as jobs; the submit command turns a group job's one
command into one per point; the report names the points that shared a batch job."""

import json

import pandas as pd
import pytest
import yaml
from scalestudy.analysis.records import run_row
from scalestudy.config.forecast import forecast
from scalestudy.config.packing import packs
from scalestudy.model.errors import SweepError
from scalestudy.model.order import run_order
from scalestudy.planning import dry_plan
from scalestudy.presentation import runs_section
from scalestudy.scheduler import site
from scalestudy.scheduler.pbs import submit


@pytest.fixture
def shipped(repo, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    return yaml.safe_load((repo / "config/sweep.yaml").read_text())


def hoomd_packed(shipped, pack="scale"):
    config = {**shipped, "cluster": "gadi"}
    config["studies"] = {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "pack": pack}}
    return site.load_study(config)


def test_the_shipped_hoomd_strong_study_packs_18_points_into_3_jobs(shipped):
    study = hoomd_packed(shipped)
    found = packs(study.points, study.cluster, study.sweep.studies)
    assert len(study.points) == 18 and [len(p.points) for p in found] == [6, 6, 6]
    assert [p.name for p in found] == ["hoomd-wca.n1r48.pack1", "hoomd-wca.n2r48.pack1", "hoomd-wca.n4r48.pack1"]
    # Round by round, both variants in every round, in the sweep's seeded run order.
    ran = found[0].points
    assert [p.repeat for p in ran] == [1, 1, 2, 2, 3, 3]
    assert all({p.mpi_flag_set for p in ran[i : i + 2]} == {"default", "no-ucx-hcoll"} for i in (0, 2, 4))
    assert list(ran) == run_order(ran, study.settings.order_seed)
    # 6 x 30 min one after another, the 5 min margin once.
    assert found[0].walltime_s(study.cluster) == 6 * 1800 + 300


def test_points_whose_requests_differ_only_in_hardware_threads_are_packed_apart(shipped):
    # One rank on one core either way: only `other=hyperthread` tells the two requests apart.
    config = {**shipped, "cluster": "gadi"}
    config["studies"] = {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "nodes": [1], "ranks_per_node": [1],
                                       "hyperthreads": [False, True], "pack": "scale"}}  # fmt: skip
    study = site.load_study(config)
    found = packs(study.points, study.cluster, study.sweep.studies)
    assert [len(p.points) for p in found] == [6, 6]
    assert [{point.hyperthreads for point in p.points} for p in found] == [{False}, {True}]


def test_no_variant_always_runs_first_in_a_packs_rounds(shipped):
    # A B A B would give the second variant every round's warmer machine; the seeded shuffle
    # puts each first in some round, under some seed, and a seed's order is the same every time.
    config = {**shipped, "cluster": "gadi"}
    settings = {**shipped["studies"]["hoomd-wca"], "pack": "scale", "nodes": [1], "repeats": 8}
    firsts = set()
    for seed in (0, 1, 2):
        study = site.load_study({**config, "order_seed": seed, "studies": {"hoomd-wca": settings}})
        (pack,) = packs(study.points, study.cluster, study.sweep.studies, study.settings.order_seed)
        assert (
            pack.points == packs(study.points, study.cluster, study.sweep.studies, study.settings.order_seed)[0].points
        )
        firsts |= {pack.points[i].mpi_flag_set for i in range(0, len(pack.points), 2)}
    assert firsts == {"default", "no-ucx-hcoll"}


def test_a_number_is_points_per_job(shipped):
    study = hoomd_packed(shipped, 4)
    assert [len(p.points) for p in packs(study.points, study.cluster, study.sweep.studies)] == [4, 2] * 3


def test_pack_one_is_no_packing_and_a_bad_value_is_one_line(shipped):
    study = hoomd_packed(shipped, 1)
    assert packs(study.points, study.cluster, study.sweep.studies) == []
    with pytest.raises(SweepError) as refused:
        hoomd_packed(shipped, "scales")
    assert refused.value.problems == [
        "studies.hoomd-wca.pack: 'scales' is not allowed; use scale (one batch job per scale) or a number of "
        "points per batch job, e.g. 6"
    ]


def test_plan_and_the_forecast_count_a_pack_as_one_job(shipped, repo, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)
    config = {**shipped, "studies": {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "pack": "scale"}}}
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(config))
    lines = dry_plan.plan(repo / "profiles/gadi", [str(sweep)])
    assert "# scalestudy: hoomd-wca: 18 points in 3 batch jobs (pack: scale)" in lines
    qsubs = [line for line in lines if line.startswith("qsub")]
    assert len(qsubs) == 3 and "walltime=03:05:00" in qsubs[0] and " -N hoomd-wca.n1r48.pack1 " in qsubs[0]
    study = hoomd_packed(shipped)
    packed = forecast(study.points, study.cluster, packs=packs(study.points, study.cluster, study.sweep.studies))
    unpacked = forecast(study.points, study.cluster)
    # The same requests; five margins fewer per pack (rate 2 x (48 + 96 + 192) cores x 5 x 5 min).
    assert packed.jobs == {"hoomd-wca": 3} and unpacked.jobs == {"hoomd-wca": 18}
    assert unpacked.total - packed.total == pytest.approx(2 * (48 + 96 + 192) * 5 * 5 / 60)


GROUP_SCRIPT = """#!/bin/bash
# properties = {{}}
cd /w && /v/python -m snakemake --snakefile /w/Snakefile --target-jobs 'run_hoomd:study=hoomd-wca,point={b}' \
run_hoomd:study=hoomd-wca,point={a} --allowed-rules run_hoomd --cores all --mode remote && exit 0 || exit 1
"""


def test_a_group_jobs_command_becomes_one_per_point_in_the_packs_order(shipped):
    study = hoomd_packed(shipped)
    first, second = packs(study.points, study.cluster, study.sweep.studies)[0].points[:2]
    script = GROUP_SCRIPT.format(a=first.id, b=second.id)
    lines = submit.one_after_another(script, [first, second]).splitlines()
    assert lines[2].endswith(f"--target-jobs run_hoomd:study=hoomd-wca,point={first.id} --allowed-rules run_hoomd "
                             "--cores all --mode remote || scalestudy_failed=1")  # fmt: skip
    assert f"--target-jobs 'run_hoomd:study=hoomd-wca,point={second.id}' --allowed" in lines[3]
    assert lines[3].endswith("|| scalestudy_failed=1") and lines[4] == "exit ${scalestudy_failed:-0}"


def test_the_report_names_the_points_that_shared_a_batch_job():
    def record(point, job, started):
        return {"point": {"study": "pp", "point": point}, "status": "ok", "started": started,
                "provenance": {"job_id": job}}  # fmt: skip

    runs = pd.DataFrame(
        [run_row(record(p, j, t)) for p, j, t in
         [("a/rep1", "48.vm", "1"), ("b/rep1", "48.vm", "2"), ("a/rep2", "48.vm", "3"), ("c/rep1", "49.vm", "1")]]
    )  # fmt: skip
    assert runs_section.shared_batch_jobs(runs) == {"48.vm": ["a/rep1", "b/rep1", "a/rep2"]}
    text = json.dumps([str(block) for block in runs_section.run_blocks(runs)])
    assert "Packed (3 runs in 1 batch jobs)" in text and "batch job 48.vm: a/rep1, b/rep1, a/rep2" in text


def test_a_pack_over_the_queues_walltime_limit_is_refused_before_submission(shipped, repo, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)
    config = {**shipped, "studies": {"hoomd-wca": {**shipped["studies"]["hoomd-wca"], "pack": "scale",
                                                   "walltime": "09:00:00"}}}  # fmt: skip
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(config))
    with pytest.raises(SweepError) as refused:
        dry_plan.plan(repo / "profiles/gadi", [str(sweep)])
    assert refused.value.problems[0] == (
        "studies.hoomd-wca.walltime: 54:05:00 (the point's 54:00:00 + margin 00:05:00) is over queue normal's "
        "limit 48:00:00 for 48 ncpus (pack: the walltimes of its 6 points summed in hoomd-wca.n1r48.pack1; "
        "use a smaller pack)"
    )
    config["studies"]["hoomd-wca"]["pack"] = 5  # 5 x 9 h + 5 min fits
    sweep.write_text(yaml.safe_dump(config))
    assert len([line for line in dry_plan.plan(repo / "profiles/gadi", [str(sweep)]) if line.startswith("qsub")]) == 6


def test_the_dry_modes_budget_refusal_is_the_snakefiles_word_for_word(shipped, repo, tmp_path, monkeypatch):
    """Packed points with repeats up to a max: the dry mode prices what a run would submit as
    the Snakefile does (the repeats needed now, packed; those up to max that later runs may
    add), because it asks the Snakefile's own plan."""
    from scalestudy.planning.plan import load_plan
    from scalestudy.planning.summary import budget_problems

    monkeypatch.chdir(repo)
    hoomd = {**shipped["studies"]["hoomd-wca"], "pack": "scale", "repeats": {"min": 2, "max": 5, "ci": "5%"}}
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({**shipped, "budget_su_total": 10, "studies": {"hoomd-wca": hoomd}}))
    profile = repo / "profiles/gadi"
    with pytest.raises(SweepError) as refused:
        dry_plan.plan(profile, [str(sweep)])
    snakefiles = budget_problems(load_plan(dry_plan.workflow_config(profile, [str(sweep)]), files=[str(sweep)]))
    assert refused.value.problems == snakefiles
    assert "and the 18 repeats up to max that later rounds may add" in snakefiles[0]
