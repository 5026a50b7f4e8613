"""Packing on a node ladder (`pack:` with `nodes: {from, up_to}`): each rung a round climbs to is
packed as the first rung is (one batch job per request, the margin once), sized for its own
nodes; a rung above whose pack the site would refuse is refused at load, before anything runs. The
plan and the rounds' decisions in this process, as test_ladder.py's round by round."""

import json
from pathlib import Path

import pytest
import yaml
from scalestudy.analysis.ladder import judge
from scalestudy.apps.registry import APPS
from scalestudy.config import packing
from scalestudy.model.errors import SweepError
from scalestudy.planning import run_rules, summary, tables
from scalestudy.planning import start as start_module
from scalestudy.planning.plan import load_plan

STUDY = "hoomd-wca"


def ladder_plan(tmp_path: Path, repo: Path, cluster: str = "gadi", **changes):
    """The shipped HOOMD-blue strong study (48 ranks per node, 30 min) as a ladder 1-8 nodes,
    2 repeats, packed per scale."""
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    config = {**shipped, "cluster": cluster, "results_dir": str(tmp_path / "results")}
    study = {**shipped["studies"][STUDY], "nodes": {"from": 1, "up_to": 8}, "mpi_flags": ["default"], "repeats": 2,
             "pack": "scale", **changes}  # fmt: skip
    config["studies"] = {STUDY: study}
    return load_plan(config, judge=judge)


def record(plan, point, value: float) -> None:
    path = Path(plan.layout.metrics(point.study, point.id))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"status": "ok", "figures": {"steps_per_s": value}}))


def resource(resources: dict, name: str, point):
    value = resources[name]
    return value(point.study, point.id) if callable(value) else value


@pytest.mark.parametrize("cluster", ["gadi", "aspire2a", "slurm"])
def test_each_rung_a_round_climbs_to_is_packed_as_the_first_rung_is_and_asks_for_its_own_nodes(
    tmp_path, repo, monkeypatch, cluster
):
    monkeypatch.setenv("PROJECT", "ab12")
    monkeypatch.setenv("SCALESTUDY_PBS_CACHE", str(tmp_path / "cache"))
    plan = ladder_plan(tmp_path, repo, cluster)
    [first] = plan.packs
    assert first.name == f"{STUDY}.n1r48.pack1" and [p.nodes for p in first.points] == [1, 1]
    assert run_rules.packs_any(plan) and plan.packed_later == {(p.study, p.id) for p in plan.later_rungs}
    start_module.save_packs(plan, None, [])  # onstart: the packs planned at load, for PBS's submit command

    # Round 1 (rung 1's pack) done: the ladder climbs, and round 2's rung is one pack of its own.
    for point in plan.to_submit:
        record(plan, point, 100.0 + point.repeat)
    lines = tables.write_next_round(plan, STUDY, 1, plan.layout.round_file(STUDY, 1))
    name = f"{STUDY}.n2r48.pack1.r2"
    assert lines[-2:] == [f"{STUDY}: round 1 done; round 2 runs 2 more points",
                          f"{STUDY}: round 2 packs 2 points into 1 batch jobs ({name})"]  # fmt: skip
    rung_two = [p for p in plan.all_points.values() if p.nodes == 2]
    # A round 2 an earlier invocation decided, still on disk, packs rung 2 otherwise: not read for it.
    stale = {"study": STUDY, "round": 2, "next": [p.id for p in rung_two], "why": {},
             "packs": {"old.pack": [p.id for p in reversed(rung_two)]}}  # fmt: skip
    Path(plan.layout.round_file(STUDY, 2)).write_text(json.dumps(stale))
    assert {run_rules.pack_group(plan, STUDY, p.id) for p in rung_two} == {name}
    # Each job of it asks for 2 nodes (not the first rung's 1, the only rung planned at load) ...
    resources = run_rules.run_resources(plan, APPS["hoomd"])
    assert {resource(resources, "nodes", p) for p in rung_two} == {2}
    assert {resource(resources, "tasks", p) for p in rung_two} == {2 * 48}
    # ... and the pack's time limit is its points' walltimes summed plus the margin once (Snakemake
    # sums a group's runtimes), in the round's order.
    [pack] = packing.packs(rung_two, plan.cluster, plan.study.settings.studies, plan.study.settings.order_seed)
    runtimes = [resource(resources, "runtime", p) for p in pack.points]
    margin = plan.cluster.walltime_margin_s
    assert runtimes == [-(-(1800 + margin) // 60), 30] and sum(runtimes) * 60 == pack.walltime_s(plan.cluster)
    # The first rung's pack, whichever repeat runs first in it, asks for the margin once too.
    assert sorted(resource(resources, "runtime", p) for p in first.points) == sorted(runtimes)
    if cluster != "slurm":  # PBS's submit command reads each group job's points from the saved packs
        saved = json.loads((tmp_path / "cache/packs.json").read_text())
        assert {pack_name: len(entries) for pack_name, entries in saved.items()} == {first.name: 2, name: 2}
        assert [entry["metrics"] for entry in saved[name]] == [plan.layout.metrics(STUDY, p.id) for p in pack.points]

    # Round 2 (rung 2) done: the ladder stops there; nothing further is packed.
    for point in rung_two:
        record(plan, point, 100.0 + point.repeat / 10)  # efficiency 0.5 at 2 nodes
    stopped = tables.write_next_round(plan, STUDY, 2, plan.layout.round_file(STUDY, 2))
    assert stopped[-1] == f"{STUDY}: round 2 done; every ladder has stopped"
    assert json.loads(Path(plan.layout.round_file(STUDY, 2)).read_text())["packs"] == {}


def test_a_point_planned_at_load_keeps_its_load_time_pack_whatever_an_older_rounds_decision_says(
    tmp_path, repo, monkeypatch
):
    """A resumed ladder plans its next rung at load and packs it then; a round file an earlier
    (interrupted) invocation left names other packs, and is not read for those points."""
    monkeypatch.setenv("PROJECT", "ab12")
    plan = ladder_plan(tmp_path, repo)
    for point in plan.to_submit:
        record(plan, point, 100.0 + point.repeat)
    tables.write_next_round(plan, STUDY, 1, plan.layout.round_file(STUDY, 1))  # then interrupted
    resumed = ladder_plan(tmp_path, repo)
    assert {p.nodes for p in resumed.to_submit} == {2} and not resumed.rounds - {STUDY}
    assert {run_rules.pack_group(resumed, STUDY, p.id) for p in resumed.to_submit} == {f"{STUDY}.n2r48.pack1"}
    assert summary.summary_lines(resumed)[2] == f"scalestudy: packed 2 points into 1 batch jobs ({STUDY}.n2r48.pack1)"


def test_a_rung_above_whose_pack_the_queue_would_refuse_is_refused_before_anything_runs(tmp_path, repo, monkeypatch):
    """Gadi's normal queue: 48 h up to 672 ncpus, 10 h up to 2,976. Two 9-hour repeats packed fit
    at 1 node (48 ncpus) but not at 32 (1,536): refused at load in one line, though only the
    first rung would be submitted now (each rung alone, 9 h + the margin, fits)."""
    monkeypatch.setenv("PROJECT", "ab12")
    with pytest.raises(SweepError) as refused:
        ladder_plan(tmp_path, repo, nodes={"from": 1, "up_to": 32}, walltime="09:00:00")
    assert refused.value.problems == [
        "studies.hoomd-wca.walltime: 18:05:00 (the point's 18:00:00 + margin 00:05:00) is over queue normal's "
        "limit 10:00:00 for 1536 ncpus (pack: the walltimes of its 2 points summed in "
        "hoomd-wca.n32r48.pack1.later-rung; use a smaller pack)"
    ]
    assert ladder_plan(tmp_path, repo, nodes={"from": 1, "up_to": 32}, walltime="09:00:00", pack=1).to_submit


@pytest.mark.parametrize(
    ("profile", "rung_two"),
    [("gadi", "-l ncpus=96,mem=380GB,walltime=02:05:00,"), ("aspire2a", "-l select=2:ncpus=48:mpiprocs=48:")],
)
def test_the_dry_plan_lists_each_rungs_pack_in_the_pbs_dialects_words(tmp_path, repo, monkeypatch, profile, rung_two):
    """`python -m scalestudy plan --profile profiles/<PBS site>` on a packed ladder: every rung's one
    qsub line (its 2 repeats' hour each, the margin once), the ones above the first submitted only
    as the ladder climbs, as its lines say."""
    from scalestudy.planning import dry_plan

    monkeypatch.chdir(repo)
    monkeypatch.setenv("PROJECT", "ab12")
    study = {"app": "pingpong", "nodes": {"from": 1, "up_to": 8}, "ranks_per_node": [48], "repeats": 2,
             "pack": "scale"}  # fmt: skip
    sweep = tmp_path / "ladder.yaml"
    sweep.write_text(yaml.safe_dump({"results_dir": str(tmp_path / "results"), "studies": {"pp": study}}))
    lines = dry_plan.plan(repo / "profiles" / profile, [str(sweep)], [f"cluster={profile}"], judge=judge)
    qsub = [line for line in lines if line.startswith("qsub ")]
    assert [line.split(" -N ")[1].split()[0] for line in qsub] == [f"pp.n{n}r48.pack1" for n in (1, 2, 4, 8)]
    assert all("walltime=02:05:00" in line for line in qsub) and rung_two in qsub[1], qsub
    assert "# scalestudy: pp: 8 points in 4 batch jobs (pack: scale)" in lines
    assert any(line.startswith("# scalestudy: pp: node ladder 1, 2, 4, 8 nodes") for line in lines)
