"""The plan of one Snakemake invocation: plain data, built once from the loaded study.

    plan = load_plan(config, files=workflow_configfiles, main_process=True)   # raises SweepError
    summary.summary_lines(plan)          # the one summary line (+ packs, forecast) before any job
    run_rules.run_resources(plan, app)   # a run rule's resources: constants, or functions of a point
    start.start(plan, ...)               # what `onstart` does, step by step

`Plan` holds what is decided at load, each field made by one function below (each tested
alone): the study (`scheduler.site.load_study`: the sweep, its typed settings, the cluster,
every refusal), the repeats planned now, the files the workflow makes that points read,
the survey of what each point's run directory holds (`bookkeeping.history.survey`), the points
this invocation submits, their packs, run order and rounds. What is asked of it lives in
the modules beside this one, as functions of a plan: `summary` (the lines before the first
job, the budget), `run_rules` (the run rules' inputs, param, resources, targets), `tables`
(the tables', rounds', report's and compare's inputs and params), `start` (onstart's
steps). No Snakemake object reaches any of them (`snakemake_adapter` reads Snakemake's
state and hands it over), so the whole plan is unit-tested without a subprocess
(tests/unit/test_plan.py). `workflow/rules/common.smk` turns it into Snakemake terms.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import shlex
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bookkeeping import history, ladder, repeats
from ..config import packing
from ..config.clusters import Cluster
from ..config.study import Study, inputs_by_key, inputs_key, made_here, under_assets
from ..model import order
from ..model.errors import SweepError
from ..model.ladder import Judge
from ..model.paths import Layout
from ..model.point import Point, Sweep
from ..scheduler import scheduler_for, site

# The targets that build from what has finished and run no point.
REPORT_TARGETS = frozenset({"report", "compare"})
# What every rule asks for so that, locally, nothing runs beside a point being timed
# (profiles/local limits it to 1). Given per rule, not as the profile's default-resources,
# which would switch on Snakemake's per-job mem_mb and disk_mb defaults (computed from the
# input files' sizes: most of a large dry run's time).
LOCAL_STEP = {"measurement_slot": 1}


def shell_word(value: Any) -> str:
    """A value from config as one shell word inside a rule's shell string (braces escaped
    for Snakemake's formatting)."""
    return shlex.quote(str(value)).replace("{", "{{").replace("}", "}}")


def python_module_shell(package_dir: str, python: str, module: str) -> str:
    """The start of a job's shell command: `python -m module` with the checkout's package first
    on the path. Written into the command, not given as params: a param is a rerun trigger, so
    moving the checkout or the venv would rerun every finished point (and every param costs
    each job of a plan its evaluation)."""
    return f"PYTHONPATH={shell_word(package_dir)}${{{{PYTHONPATH:+:$PYTHONPATH}}}} {shell_word(python)} -m {module}"


def run_rule(app: str) -> str:
    """The name of `app`'s run rule (workflow/rules/run.smk makes one per registered app)."""
    return f"run_{app}"


@dataclass(frozen=True)
class Deployment:
    """How jobs get their software (Snakemake's --sdm): under conda a job runs the env's
    `python` and has its app's packages; under env-modules a site module may bring them."""

    conda: bool = False
    env_modules: bool = False

    def jobs_can_import(self, module: str | None, site_modules: Sequence[str], here: Callable[[str], bool]) -> bool:
        """Can run jobs import `module`? Under conda, or a site module under env-modules, they
        get it in the job; otherwise they run this interpreter, which is asked (`here`)."""
        if module is None or self.conda or (self.env_modules and site_modules):
            return True
        return here(module)


@dataclass(frozen=True)
class Forcing:
    """What Snakemake was told to run whatever the files say (its DAG settings, read by
    snakemake_adapter.SnakemakeRun.forcing): --forceall, --forcerun RULE|FILE..., --force (the
    targets themselves), --rerun-incomplete; and the targets asked for."""

    everything: bool = False
    rules_or_files: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset()
    targets_forced: bool = False
    incomplete: bool = False


def round_points(decision: str) -> list[str]:
    """The point ids a round's decision (Layout.round_file, tables.write_next_round) runs next."""
    return json.loads(Path(decision).read_text())["next"]


@dataclass(frozen=True)
class PackPlace:
    """Where a point runs in a pack: the pack's name (the run rules' `group:`) and whether it is
    the pack's first point (the one that asks for the cluster's walltime margin)."""

    name: str
    first: bool


def round_packs(layout: Layout, study: str) -> dict[str, PackPlace]:
    """{point id: its place} of the points that the rounds of `study` decided so far pack
    (tables.write_next_round writes each round's packs beside its points), read from the
    decisions on disk: round 1, 2, ... while there is one. A point takes its place from the
    first round that packs it: rounds up to the one deciding a point are this invocation's
    (each is decided before the next), those after it may be an earlier invocation's."""
    decisions = []
    for round_number in itertools.count(1):
        try:
            decisions.append((path := layout.round_file(study, round_number), os.stat(path).st_mtime_ns))
        except FileNotFoundError:
            break
    return packs_decided(tuple(decisions))


@functools.lru_cache(maxsize=64)
def packs_decided(decisions: tuple[tuple[str, int], ...]) -> dict[str, PackPlace]:
    """round_packs of decisions as (path, when written): each read once per version."""
    places: dict[str, PackPlace] = {}
    for path, _written in decisions:
        for name, ids in json.loads(Path(path).read_text()).get("packs", {}).items():
            for index, point_id in enumerate(ids):
                places.setdefault(point_id, PackPlace(name, index == 0))
    return places


@dataclass(frozen=True)
class Plan:
    """What one invocation plans, decided once at load (see the module's docstring). Built by
    `build_plan` (or `load_plan`); nothing here reads the disk or changes after that."""

    # The study as planned now: for repeats until clear, only the repeats needed now (round 1).
    study: Study
    # Is this Snakemake the one that submits (not a batch job's own)?
    main_process: bool
    # Every point of the sweep, planned now or not: a later round's points are looked up here.
    all_points: Mapping[tuple[str, str], Point]
    # Repeats up to a study's `repeats: {max}` not planned now: priced by the forecast all the same.
    later_repeats: list[Point]
    # The files the workflow makes that points read, per inputs key (App.inputs_key).
    made_inputs_by_key: Mapping[Hashable, list[str]]
    # Inputs no rule makes that are missing (a real checkpoint, a dataset): checked once per
    # study, not made DAG edges of every job. A dry run only warns; a real run stops at start.
    missing_inputs: list[str]
    # What each point's run directory holds, read once (reads only); empty inside a batch job.
    survey: history.Survey
    # The points this invocation submits, packed, priced by the forecast.
    to_submit: list[Point]
    packs: list[packing.Pack]
    # Each packed point's pack name (the run rules' `group:`).
    pack_of: Mapping[tuple[str, str], str]
    # The points after a pack's first: Snakemake sums a group's runtimes, so these ask for no
    # margin of their own (run_rules.batch_walltime_s).
    later_in_pack: frozenset[tuple[str, str]]
    # The run order (model.order: round by round, seeded shuffle within): Snakemake starts
    # the ready job of highest priority first.
    priority_of: Mapping[tuple[str, str], int]
    # The studies whose repeats (or node ladders) go on round by round in this invocation (rule
    # repeats_round).
    rounds: frozenset[str]
    # The rungs of node ladders not planned now (model.ladder): priced by the forecast (the worst
    # case), submitted only once the ladder climbs to them.
    later_rungs: list[Point] = dataclasses.field(default_factory=list)
    # Each ladder's state at load (bookkeeping.ladder.Climb), by (study, ladder).
    climbs: Mapping[tuple[str, str], ladder.Climb] = dataclasses.field(default_factory=dict)
    # How a ladder's finished rungs are judged (analysis.ladder.judge, handed down from above).
    judge: Judge | None = None

    @property
    def sweep(self) -> Sweep:
        return self.study.sweep

    @property
    def cluster(self) -> Cluster:
        return self.study.cluster

    @property
    def layout(self) -> Layout:
        return self.study.layout

    @property
    def studies(self) -> list[str]:
        return list(self.study.settings.studies)

    def point(self, study: str, point_id: str) -> Point:
        return self.all_points[(study, point_id)]

    def point_made_inputs(self, point: Point) -> list[str]:
        """The files the workflow makes that `point` reads (its app's inputs under the assets)."""
        return self.made_inputs_by_key[inputs_key(point)]

    @functools.cached_property
    def packed_later(self) -> frozenset[tuple[str, str]]:
        """The points a later round may pack (a later repeat or rung of a study with rounds in this
        invocation that packs): their packs are that round's decision (`pack_place`)."""
        packing_rounds = {s for s in self.rounds if self.study.settings.studies[s].pack != 1}
        later = [*self.later_repeats, *self.later_rungs]
        return frozenset((p.study, p.id) for p in later if p.study in packing_rounds)

    def pack_place(self, study: str, point_id: str) -> PackPlace | None:
        """Where a point runs in a pack, None where it is a batch job of its own: a point planned
        now as `packs` packed it; one a later round runs as that round's decision packed it (the
        decision of this invocation: it is written before its points are planned)."""
        key = (study, point_id)
        if key in self.pack_of:
            return PackPlace(self.pack_of[key], key not in self.later_in_pack)
        if key in self.packed_later:
            return round_packs(self.layout, study).get(point_id)
        return None


# ---------------------------------------------------------------------- the builders


def planned_now(
    study: Study, main_process: bool, judge: Judge | None = None
) -> tuple[Study, list[Point], list[Point], dict[tuple[str, str], ladder.Climb]]:
    """(the study with only the points needed now, the later repeats, the later rungs, each
    ladder's climb): repeats until the answer is clear plan those the records call for, node
    ladders the rungs their records have climbed to (bookkeeping.ladder.decide: round 1); the others
    come in later rounds. A batch job's own Snakemake plans every point."""
    if not main_process:
        return study, [], [], {}
    planned, climbs = ladder.decide(study.points, study.settings.studies, study.layout, judge)
    if len(planned) == len(study.points):
        return study, [], [], climbs
    kept = {(p.study, p.id) for p in planned}
    rungs_in_play = {(p.study, p.nodes, ladder.ladder_of(p)) for p in planned}
    later, later_rungs = [], []
    for p in study.points:
        if (p.study, p.id) in kept:
            continue
        laddered = study.settings.studies[p.study].ladder is not None
        is_rung = laddered and (p.study, p.nodes, ladder.ladder_of(p)) not in rungs_in_play
        (later_rungs if is_rung else later).append(p)
    sweep = dataclasses.replace(study.sweep, points=tuple(planned))
    return dataclasses.replace(study, sweep=sweep), later, later_rungs, climbs


def made_inputs(point: Point, inputs: Mapping[str, str], layout: Layout) -> list[str]:
    """Only inputs a rule makes are dependencies (study.made_here); the rest were checked at
    load. They are spelled from the assets directory, as the rules' outputs are (a relative
    path in the sweep still matches an absolute results_dir)."""
    return [under_assets(p, layout.assets) for p in inputs.values() if made_here(p, point, layout)]


def made_inputs_of(points: Iterable[Point], layout: Layout) -> dict[Hashable, list[str]]:
    """The made inputs of each inputs key of `points` (one app call per key, not per point)."""
    return {key: made_inputs(point, inputs, layout) for key, (point, inputs) in inputs_by_key(points, layout).items()}


def surveyed(study: Study, main_process: bool, made: Callable[[Point], Sequence[str]]) -> history.Survey:
    """What each planned point's run directory holds (bookkeeping.history.survey); a job run in a
    process of its own (a batch job) needs none of it."""
    if not main_process:
        return history.Survey()
    return history.survey(study.points, study.layout, study.cluster.name, study.settings.retry_failed, made)


def points_to_submit(study: Study, survey: history.Survey, main_process: bool) -> list[Point]:
    """The points this invocation submits: none inside a batch job or for a partial report."""
    return survey.to_submit(study.points) if main_process and not study.settings.partial else []


def packs_of(study: Study, to_submit: Sequence[Point], later_rungs: Sequence[Point] = ()) -> list[packing.Pack]:
    """The packs of the points to submit (config.packing); a site that cannot run one raises,
    as it raises for a pack of a ladder's rung above (`later_rungs`: each rung as its first
    round would pack it, bookkeeping.repeats's repeats at it), before anything runs."""
    seed = study.settings.order_seed
    packs = packing.packs(to_submit, study.cluster, study.settings.studies, seed)
    first_rounds = repeats.in_play(later_rungs, study.settings.studies, study.layout) if later_rungs else []
    rungs_above = packing.packs(first_rounds, study.cluster, study.settings.studies, seed, tag=".later-rung")
    problems = scheduler_for(study.cluster).pack_problems([*packs, *rungs_above])
    if problems:
        raise SweepError(problems)
    return packs


def round_studies(study: Study, to_submit: Iterable[Point]) -> frozenset[str]:
    """The studies whose repeats or node ladders go on round by round in this invocation (a
    checkpoint per round): an adaptive or laddered study with a point to run now. A study whose
    every point has stopped has no rounds, so a finished study plans nothing."""
    by_rounds = repeats.adaptive_studies(study.settings.studies) | ladder.ladder_studies(study.settings.studies)
    return frozenset(p.study for p in to_submit if p.study in by_rounds)


def build_plan(loaded: Study, main_process: bool = True, judge: Judge | None = None) -> Plan:
    """The plan of `loaded` (a study as scheduler.site.load_study returns it); `judge`: how a
    node ladder's rungs are judged (analysis.ladder.judge; needed where a study has a ladder)."""
    study, later, later_rungs, climbs = planned_now(loaded, main_process, judge)
    made = made_inputs_of(loaded.points, loaded.layout)
    survey = surveyed(study, main_process, lambda p: made[inputs_key(p)])
    to_submit = points_to_submit(study, survey, main_process)
    packs = packs_of(study, to_submit, later_rungs)
    return Plan(
        study=study,
        main_process=main_process,
        all_points=loaded.points_by_id,
        later_repeats=later,
        made_inputs_by_key=made,
        missing_inputs=study.missing_inputs() if main_process else [],
        survey=survey,
        to_submit=to_submit,
        packs=packs,
        pack_of={(point.study, point.id): pack.name for pack in packs for point in pack.points},
        later_in_pack=frozenset((point.study, point.id) for pack in packs for point in pack.points[1:]),
        priority_of=order.priorities(to_submit, study.settings.order_seed),
        rounds=round_studies(study, to_submit),
        later_rungs=later_rungs,
        climbs=climbs,
        judge=judge,
    )


def load_plan(
    config: Mapping[str, Any],
    files: Iterable[str | os.PathLike[str]] = (),
    main_process: bool = True,
    judge: Judge | None = None,
) -> Plan:
    """The study as the site takes it (the same loader as `python -m scalestudy plan`), planned;
    raises SweepError, every problem one line. Inside a batch job (not the main process)
    nothing is submitted: no project is needed there, and the memory check (which may load
    torch to count a model) was done where the job was submitted."""
    study = site.load_study(config, files=files, submits=main_process, check_memory=main_process)
    return build_plan(study, main_process, judge)
