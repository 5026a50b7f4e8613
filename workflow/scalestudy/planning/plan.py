"""Everything the rules need, built once from the config and the files Snakemake read.

    plan = Plan.load(config, files=workflow_configfiles, main_process=True)   # raises SweepError
    plan.summary_lines(report_only)  # the one summary line (+ packs, forecast) before any job
    plan.budget_problems(report_only)  # budget_su_total over the jobs to submit (one line)
    plan.run_resources(app)          # a run rule's resources: constants, or functions of a point
    plan.point_json("study", "id")   # a run rule's one param

The study (`scheduler.site.load_study`: the sweep, the cluster, every refusal), the survey
of what each point's run directory holds (`results.history.survey`), the points this
invocation submits, their packs and each point's pack, every input and resource of the run
rules and the lines printed before the first job. Plain values in, plain values out: no
Snakemake object reaches this module (`scalestudy.planning.snakemake_adapter` reads Snakemake's
state and hands it over), so the whole plan is unit-tested without a subprocess
(tests/unit/test_plan.py). `workflow/rules/common.smk` turns it into Snakemake terms.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shlex
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..apps import APPS
from ..apps.base import App
from ..config import forecast, packing
from ..config.requests import job_request
from ..config.study import Study, made_here, under_assets
from ..model import order
from ..model.errors import SweepError
from ..model.paths import RUNS_SEGMENT
from ..model.point import Point, first_repeats
from ..model.repeats import stopped_at_max
from ..model.units import GIB, MIB
from ..results import history, locking, repeats, retry
from ..scheduler import site
from ..scheduler.pbs import cache as pbs_cache
from ..scheduler.pbs import resume as pbs_resume

# The targets that build from what has finished and run no point.
REPORT_TARGETS = frozenset({"report", "compare"})
# What every rule asks for so that, locally, nothing runs beside a point being timed
# (profiles/local limits it to 1). Given per rule, not as the profile's default-resources,
# which would switch on Snakemake's per-job mem_mb and disk_mb defaults (computed from the
# input files' sizes: most of a large dry run's time).
LOCAL_STEP = {"measurement_slot": 1}

# A value of a run rule's directive that depends on the point: a function of (study, point id).
OfPoint = Callable[[str, str], Any]


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


def slurm_mpi(point: Point) -> str | None:
    """Slurm plugin: a multi-rank point runs mpirun itself in the allocation (no srun -n1
    wrapper, which would hold the CPUs mpirun's daemons need). The plugin refuses `mpi` with
    one task, so a 1-rank point runs inside `srun -n1`: its launcher then starts no srun of
    its own (MPICH's Hydra forks a 1-node point's proxy, launch.command.hydra_command)."""
    return "mpirun" if point.ranks > 1 else None


def minutes(seconds: int) -> int:
    """Snakemake's `runtime` resource (minutes, which the Slurm plugin passes as `-t`), rounded up."""
    return max(1, -(-seconds // 60))


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
    """The point ids a round's decision (Layout.round_file, Plan.write_next_round) runs next."""
    return json.loads(Path(decision).read_text())["next"]


class Plan:
    """The plan of one Snakemake invocation (see the module's docstring)."""

    def __init__(self, study: Study, main_process: bool = True) -> None:
        # Repeats until the answer is clear: only those needed now are planned (results/repeats.py);
        # the others up to max are priced by the forecast all the same.
        self.later_repeats: list[Point] = []
        # Every point of the sweep, planned now or not: a later round's points are looked up here.
        self.all_points = study.points_by_id
        if main_process:
            planned = repeats.in_play(study.points, study.sweep.studies, study.layout)
            if len(planned) < len(study.points):
                kept = {(p.study, p.id) for p in planned}
                self.later_repeats = [p for p in study.points if (p.study, p.id) not in kept]
                study = dataclasses.replace(study, sweep=dataclasses.replace(study.sweep, points=tuple(planned)))
        self.study = study
        self.main_process = main_process
        self.sweep, self.cluster, self.layout = study.sweep, study.cluster, study.layout
        self.studies = list(self.sweep.studies)
        # Inputs that no rule makes (a real checkpoint, a dataset) are checked once per study,
        # not made DAG edges of every job. A dry run only warns; a real run stops in `start`.
        self.missing_inputs = study.missing_inputs() if main_process else []
        self._made_inputs: dict[tuple[str, Any], list[str]] = {}
        # What each point's run directory holds, read once: not run yet, changed, to retry, kept
        # records. Reads only. A job run in a process of its own (a batch job) needs none of it.
        self.survey = (
            history.survey(study.points, self.layout, self.cluster.name, study.retry_failed, self.point_made_inputs)
            if main_process
            else history.Survey()
        )
        # The points this invocation submits, once: packed here, priced by the forecast.
        self.to_submit = self.survey.to_submit(study.points) if main_process and not study.partial else []
        self.packs = packing.packs(self.to_submit, self.cluster, self.sweep.studies, study.order_seed)
        if self.cluster.scheduler != "none":
            problems = site.pack_problems(self.packs, self.cluster)
            if problems:
                raise SweepError(problems)
        self.pack_of = {(point.study, point.id): pack.name for pack in self.packs for point in pack.points}
        # A pack's batch walltime is its points' summed plus the cluster's margin once
        # (packing.Pack.walltime_s): Snakemake sums the runtimes of a group's points, so the
        # points after a pack's first ask for no margin of their own (batch_walltime_s).
        self.later_in_pack = {(point.study, point.id) for pack in self.packs for point in pack.points[1:]}
        # The order the points to submit run in (model.order: round by round, seeded shuffle
        # within): Snakemake starts the ready job of highest priority first.
        self.priority_of = order.priorities(self.to_submit, study.order_seed)
        # The studies whose repeats go on round by round in this invocation (a checkpoint per
        # round, rule repeats_round): an adaptive study with a point to run now. A study whose
        # every point has stopped has no rounds, so a finished study plans nothing.
        adaptive = repeats.adaptive_studies(self.sweep.studies)
        self.rounds = {p.study for p in self.to_submit if p.study in adaptive}

    @classmethod
    def load(cls, config: Mapping[str, Any], files: Iterable[str | os.PathLike[str]] = (), main_process: bool = True):
        """The study as the site takes it (the same loader as `python -m scalestudy.scheduler.pbs
        plan`); raises SweepError, every problem one line. Inside a batch job (not the main
        process) nothing is submitted: no project is needed there, and the memory check (which
        may load torch to count a model) was done where the job was submitted."""
        return cls(site.load_study(config, files=files, submits=main_process, check_memory=main_process), main_process)

    # ------------------------------------------------------------------ before the first job

    def warnings(self) -> list[str]:
        """What is printed as `sweep warning:` lines at load and does not stop planning: inputs
        no rule makes that are not there yet (a real run stops at its start), points that may
        not fit in memory."""
        return [f"{problem} (a real run stops here)" for problem in self.missing_inputs] + list(self.study.warnings)

    def report_only(self, targets: Iterable[str]) -> bool:
        """`report` or `compare` (or `--config partial=true`): the report (or the comparison)
        from the runs that have finished; no point runs."""
        targets = set(targets)
        return self.study.partial or (bool(targets) and targets <= REPORT_TARGETS)

    def forced_points(self, forcing: Forcing | None) -> list[Point]:
        """The points that run only because Snakemake was told to (finished, unchanged): every
        point of the DAG under --forceall, those of a run rule or a metrics.json named by
        --forcerun, the metrics.json targets under --force. The DAG holds every point, except
        where every target is a point's metrics.json; a report alone holds none."""
        if forcing is None or self.report_only(forcing.targets):
            return []
        if not (forcing.everything or forcing.rules_or_files or forcing.targets_forced):
            return []  # the usual case: no path of a 100,000-point plan is spelt out
        by_metrics = {os.path.abspath(self.layout.metrics(p.study, p.id)): p for p in self.study.points}
        targets = {os.path.abspath(target) for target in forcing.targets}
        in_dag = [by_metrics[t] for t in targets] if targets and targets <= by_metrics.keys() else self.study.points
        named = {os.path.abspath(name) for name in forcing.rules_or_files}
        planned = {(p.study, p.id) for p in self.to_submit}

        def forced(point: Point) -> bool:
            metrics = os.path.abspath(self.layout.metrics(point.study, point.id))
            return (
                forcing.everything
                or run_rule(point.app) in forcing.rules_or_files
                or metrics in named
                or (forcing.targets_forced and metrics in targets)
            )

        return [p for p in in_dag if (p.study, p.id) not in planned and forced(p)]

    def asks_report_only(self, forcing: Forcing | None) -> bool:
        """Only a report (or compare) is asked for, as far as is known while the Snakefile is read
        (`forcing` None: no DAG is being set up, e.g. --lint)."""
        return self.report_only(forcing.targets) if forcing is not None else self.study.partial

    def asked(self, forcing: Forcing | None) -> Callable[[Point], bool] | None:
        """Which points the given targets need, where every target is a study's file
        (`<results>/<study>/runs.csv`, its plots...: that study's points) or a point's
        (`<results>/<study>/runs/<id>/...`: that point); None where all of them are (no target,
        the report, a rule's name, anything else)."""
        if forcing is None or not forcing.targets:
            return None
        results = os.path.abspath(self.layout.results)
        studies, points = set(), set()
        for target in forcing.targets:
            relative = os.path.relpath(os.path.abspath(target), results).split(os.sep)
            if relative[0] not in self.sweep.studies:
                return None
            if len(relative) > 2 and relative[1] == RUNS_SEGMENT:
                points.add((relative[0], "/".join(relative[2:-1])))
            else:
                studies.add(relative[0])
        return lambda point: point.study in studies or (point.study, point.id) in points

    def narrowed(self, forcing: Forcing | None) -> tuple[history.Survey, list[Point], list[Point], list]:
        """(the survey, the points to submit, the later repeats, the packs) of what the given
        targets need: what the opening line, the forecast and the budget count."""
        keep = self.asked(forcing)
        if keep is None:
            return self.survey, self.to_submit, self.later_repeats, self.packs
        packs = [pack for pack in self.packs if any(keep(point) for point in pack.points)]
        return (
            self.survey.only(p for p in self.study.points if keep(p)),
            [p for p in self.to_submit if keep(p)],
            [p for p in self.later_repeats if keep(p)],
            packs,
        )

    def summary_lines(self, forcing: Forcing | None = None) -> list[str]:
        """Printed once, before Snakemake's own output: the points per study and the run jobs to
        submit and why (`forcing`: what Snakemake was told to run again, and the targets: only
        what they need is counted); the packs; what the jobs to submit may cost (on a cluster;
        not for a report, which submits none)."""
        forced = self.forced_points(forcing)
        report_only = self.asks_report_only(forcing)
        survey, _, _, packs = self.narrowed(forcing)
        excluded = sum(n for study, n in self.study.sweep.excluded.items() if study in survey.points)
        lines = [history.summary_line(survey, report_only, len(forced), excluded)]
        if packs and not report_only:
            packed = sum(len(pack.points) for pack in packs)
            names = ", ".join(pack.name for pack in packs)
            lines.append(f"scalestudy: packed {packed} points into {len(packs)} batch jobs ({names})")
        if forcing is not None and forcing.incomplete and not self.report_only(forcing.targets):
            lines.append(
                "scalestudy: --rerun-incomplete: points an interrupted run left incomplete run again too; "
                "the count is given when the run starts"
            )
        to_run = survey.to_run + len(forced)
        if self.cluster.scheduler != "none" and not self.asks_report_only(forcing) and to_run:
            lines += forecast.forecast_lines(self.submit_forecast(forced, forcing), self.submit_words(to_run, forcing))
        elif to_run and not report_only and (later := self.narrowed(forcing)[2]):
            lines.append(
                f"scalestudy: later rounds may add up to {len(later)} repeats (up to max), "
                "while a point's CI is wider than its target"
            )
        return lines

    def submit_forecast(self, forced: Sequence[Point] = (), forcing: Forcing | None = None) -> forecast.Forecast:
        """What the batch jobs this invocation submits may cost: the points to submit that the
        targets need (none that finished, unless forced), a pack priced as one job, and the
        repeats up to a study's `repeats: {max: ...}` that later rounds may add (the most it may
        cost)."""
        survey, to_submit, later, packs = self.narrowed(forcing)
        return forecast.forecast([*to_submit, *forced, *later], self.cluster, survey.measured(), packs)

    def submit_words(self, to_run: int, forcing: Forcing | None = None) -> str:
        """What a forecast of this invocation prices, in words."""
        words = forecast.to_submit_words(to_run)
        later = self.narrowed(forcing)[2]
        if later:
            words += f" and the {len(later)} repeats up to max that later rounds may add"
        return words

    def budget_problems(self, forcing: Forcing | None = None) -> list[str]:
        """Nothing spent by surprise: one line when the jobs to submit may cost more than
        `budget_su_total`. A report (or compare, or a partial report) submits nothing and is
        never refused; a batch job's own Snakemake submits nothing either."""
        budget = self.study.budget_su_total
        forced = self.forced_points(forcing)
        to_run = self.narrowed(forcing)[0].to_run + len(forced)
        if budget is None or self.asks_report_only(forcing) or not self.main_process or not to_run:
            return []
        return forecast.budget_problems(
            self.submit_forecast(forced, forcing), budget, self.submit_words(to_run, forcing)
        )

    def rerun_line(self, reruns: Mapping[str, str], forcing: Forcing | None) -> str | None:
        """At the start of a run, once Snakemake's DAG exists: when it runs run jobs the summary
        did not count (`reruns`: metrics.json -> Snakemake's reason, of every run job it runs;
        e.g. the points an interrupted run left incomplete, under --rerun-incomplete), the
        true count and Snakemake's reasons for the others, in one line; else None."""
        counted_points = [*self.to_submit, *self.forced_points(forcing)]
        if len(reruns) <= len(counted_points):
            return None  # the summary's count holds
        counted = {os.path.abspath(self.layout.metrics(p.study, p.id)) for p in counted_points}
        others = [why for metrics, why in reruns.items() if os.path.abspath(metrics) not in counted]
        if not others:
            return None
        reasons = "; ".join(f"{n} {why}" for why, n in sorted(Counter(others).items()))
        # Snakemake gives an incomplete output rerun under --rerun-incomplete as "forced".
        cause = " (--rerun-incomplete: left incomplete by an interrupted run)" if forcing and forcing.incomplete else ""
        return (
            f"scalestudy: Snakemake runs {len(reruns)} run jobs, {len(others)} more than counted above, for its "
            f"own reasons: {reasons}{cause}"
        )

    def start(
        self,
        lock: bool,
        reruns: Mapping[str, str],
        resumed: Mapping[str, str],
        forget: Callable[[str], None],
        forcing: Forcing | None = None,
        say: Callable[[str], None] = print,
    ) -> list:
        """Before the first job of a run (not a report): stop on missing inputs; take the results
        lock (`lock`: Snakemake's own is asked for); archive the failed records to retry; keep
        the record of every finished point Snakemake is about to rerun (`reruns`: metrics.json
        -> why); forget the resumed batch jobs that never ran (`resumed`: metrics.json -> the id
        of the batch job Snakemake would resume; PBS only) so they are submitted again; write
        the packs for the submit command. Returns the held lock (keep it as long as the
        workflow runs). Says first how many run jobs Snakemake runs where the summary line
        counted fewer (`rerun_line`; `forcing`: what Snakemake was told). Raises SweepError or
        ResultsBusy."""
        if self.missing_inputs:
            raise SweepError(self.missing_inputs)
        uncounted = self.rerun_line(reruns, forcing)
        if uncounted:
            say(uncounted)
        held = [locking.hold(self.layout.results)] if lock else []
        retry.archive(self.survey.retry_archives)
        history.keep_before_rerun(reruns, planned=self.survey.keeping)
        if self.cluster.scheduler == "pbspro":
            for metrics in pbs_resume.never_ran(resumed):
                say(f"scalestudy: {metrics}: its batch job was deleted before it ran; submitted again")
                forget(metrics)
            if self.packs:
                pbs_cache.save_packs(pbs_cache.cache_dir(), self.packs_for_submit())
        return held

    def packs_for_submit(self) -> dict[str, list[dict[str, Any]]]:
        """For the PBS submit command: which points each group job runs (scheduler/pbs/cache.py)."""
        return {
            pack.name: [
                {"metrics": self.layout.metrics(p.study, p.id), "point": p.to_json(), "walltime_s": p.walltime_seconds,
                 "queue": p.queue}
                for p in pack.points
            ]
            for pack in self.packs
        }  # fmt: skip

    # ------------------------------------------------------------------ targets and run rules

    def point(self, study: str, point_id: str) -> Point:
        return self.all_points[(study, point_id)]

    def targets(self, report_only: bool) -> list[str]:
        """The default target: the report, after every point not run yet and every record to keep.
        Snakemake 9 does not rerun a finished table for a missing input (a new repeat, a new
        study) when it has no metadata, e.g. in a fresh clone; asked for by name, the missing
        record makes its run job run, then its study's table, whose other missing records
        follow: one per study is enough (each target file costs planning time). Every record to
        keep is asked for: it makes its point rerun."""
        if report_only:
            return [self.layout.report_html]
        return [self.layout.report_html, *self.survey.first_missing.values(), *self.survey.to_keep]

    def study_pattern(self, app: App) -> str:
        """Wildcard constraint: only the studies of `app` match that app's run rule."""
        names = self.sweep.studies_of_app(app.name)
        return "|".join(map(re.escape, names)) if names else "(?!)"

    def made_inputs(self, point: Point, inputs: Mapping[str, str]) -> list[str]:
        """Only inputs a rule makes are dependencies (study.made_here); the rest were checked at
        load. They are spelled from the assets directory, as the rules' outputs are (a relative
        path in the sweep still matches an absolute results_dir)."""
        assets = self.layout.assets
        return [under_assets(p, assets) for p in inputs.values() if made_here(p, point, self.layout)]

    def point_made_inputs(self, point: Point) -> list[str]:
        """The files the workflow makes that `point` reads (its app's inputs under the assets)."""
        app = APPS[point.app]
        key = (point.app, app.inputs_key(point))
        if key not in self._made_inputs:
            self._made_inputs[key] = self.made_inputs(point, app.inputs(point, self.layout))
        return self._made_inputs[key]

    def run_inputs(self, app: App) -> list[str] | OfPoint:
        """The input directive of `app`'s run rule: the made files its points read, and each
        point's kept records (results/history.py). Planning cost grows with every input file and
        every function Snakemake calls per job, so when all points of the app read the same
        made files and none has a kept record (the usual case) this is a plain list, else a
        function of the point."""
        by_key = self.study.inputs_by_key(app.name)
        shared = {tuple(self.made_inputs(point, inputs)) for point, inputs in by_key.values()}
        kept = {
            key: state.kept
            for key, state in self.survey.states.items()
            if state.kept and self.point(*key).app == app.name
        }
        if len(shared) <= 1:
            made = list(shared.pop()) if shared else []
            if not kept:
                return made
            return lambda study, point_id: [*made, *kept.get((study, point_id), ())]

        def inputs_of(study: str, point_id: str) -> list[str]:
            point = self.point(study, point_id)
            return [
                *self.made_inputs(*by_key[(app.name, app.inputs_key(point))]),
                *kept.get((study, point_id), ()),
            ]

        return inputs_of

    def point_json(self, study: str, point_id: str) -> str:
        """Everything that defines a point; a change reruns it (rerun-trigger params). Under
        `--config retry_failed=true` a failed point gains a retry number, so it reruns
        (results/retry.py); an ok point never changes."""
        return retry.with_retry(self.point(study, point_id).to_json(), self.survey.state(study, point_id).retry)

    @property
    def prices_ended_batch_jobs(self) -> bool:
        """Does the workflow price each ended batch job at what the scheduler charges? Under
        Slurm (its executor reports each job done or failed: record_ended_batch_job); the PBS
        profiles' status command prices theirs itself (scheduler.pbs.status)."""
        return self.cluster.scheduler == "slurm"

    def record_ended_batch_job(
        self, points: Sequence[tuple[str, str]], job_id: str, why: str, since: float, priced: bool = True
    ) -> bool:
        """The records of a batch job of `points` ((study, point id): one, or a pack's) that the
        executor reports ended, done or failed (Slurm: COMPLETED; TIMEOUT, CANCELLED, ...):
        kept, or written as failed, and priced at the job's Elapsed (scheduler.slurm; where
        `priced` and prices_ended_batch_jobs), as the PBS status command does
        (launch.ended.ended_batch_job). True when the job's points have their records
        (Snakemake then takes a failed job as done and keeps them), False when none of them
        started after `since` (this run's start)."""
        from ..launch.ended import ended_batch_job
        from ..scheduler.slurm import job_elapsed

        of_point = self.point_resources
        entries = []
        for study, point_id in points:
            point = self.point(study, point_id)
            entries.append({
                "metrics": self.layout.metrics(study, point_id),
                "point": self.point_json(study, point_id),
                "walltime_s": of_point["walltime_s"](point),
                "queue": of_point["queue"](point),
            })  # fmt: skip
        job = {"pack": entries} if len(entries) > 1 else entries[0]
        ran = functools.partial(job_elapsed, job_id) if priced and self.prices_ended_batch_jobs else None
        return ended_batch_job(job_id, {**job, "cluster": self.cluster.name, "submitted": since}, why, ran)

    def run_priority(self) -> int | OfPoint:
        """The run rules' `priority:`: each point's place in the run order, the first the
        highest (model.order). A constant where at most one point is to run: a function costs
        a call per job planned."""
        if len(self.priority_of) <= 1:
            return 0
        return lambda study, point_id: self.priority_of.get((study, point_id), 0)

    def pack_group(self, study: str, point_id: str) -> str | None:
        """The run rules' `group:` (None: the point is a batch job of its own)."""
        return self.pack_of.get((study, point_id))

    @functools.cached_property
    def point_resources(self) -> dict[str, Callable[[Point], Any]]:
        """What every app's run job asks of a batch system, as functions of its point; the PBS
        submit command and the Slurm plugin size each batch job from them."""
        return {
            "nodes": lambda point: point.nodes,
            "ranks_per_node": lambda point: point.ranks_per_node,
            "gpus_per_node": lambda point: point.gpus_per_node,
            "tasks": lambda point: point.ranks,
            "cpus_per_task": lambda point: point.threads_per_rank,
            "mpi": slurm_mpi,
            "queue": lambda point: self.cluster.queue_name(point.gpus_per_node, point.queue),
            # The batch job's time limit: the point's walltime and the cluster's margin
            # (config.requests.job_request), so that the runner's own timer stops the point and
            # writes its record before the scheduler kills the job.
            "runtime": lambda point: minutes(self.batch_walltime_s(point)),
            # Memory per node as the request says (the record's memory_requested_gb over its
            # nodes), in the unit of Slurm's `--mem` that the plugin writes it as: MiB.
            "mem_mb": lambda point: job_request(point, self.cluster).mem_per_node_gib * GIB // MIB,
            "walltime_s": lambda point: point.walltime_seconds,
        }

    def batch_walltime_s(self, point: Point) -> int:
        """The time limit a point's batch job asks for: its walltime plus the cluster's margin
        (job_request), the margin once per pack (on the pack's first point)."""
        if (point.study, point.id) in self.later_in_pack:
            return point.walltime_seconds
        return job_request(point, self.cluster).walltime_s

    def run_resources(self, app: App) -> dict[str, Any]:
        """The resources of `app`'s run rule. A resource that is the same for every point of the
        app (the walltime of its studies, often the queue and threads) is a constant; only the
        others are functions of (study, point id), which Snakemake calls for every job it lists
        or submits."""
        points = [point for point in first_repeats(self.study.points) if point.app == app.name]
        resources: dict[str, Any] = {}
        for name, of_point in self.point_resources.items():
            values = {of_point(point) for point in points}
            if len(values) == 1:
                resources[name] = values.pop()
            else:
                resources[name] = lambda study, point_id, of_point=of_point: of_point(self.point(study, point_id))
        # The cluster the job was planned for: the PBS submit command refuses a job planned for
        # another. A resource, not a param (params are rerun triggers); not named `cluster`,
        # which Snakemake's Slurm plugin passes to sbatch as --clusters.
        return {**resources, **LOCAL_STEP, "planned_cluster": self.cluster.name}

    # ------------------------------------------------------------------ tables, report, compare

    def run_metrics(self, study: str) -> list[str]:
        return [self.layout.metrics(p.study, p.id) for p in self.sweep.points_of(study)]

    def all_points_of(self, study: str) -> list[Point]:
        """Every point of `study` in the sweep, up to a `repeats: {max}`, planned now or not."""
        return [p for p in self.all_points.values() if p.study == study]

    def points_now(self, study: str) -> list[Point]:
        """The points of `study` as the records on disk leave it: every point, or for repeats
        until clear those needed so far (results.repeats.in_play), after the last round too."""
        return repeats.in_play(self.all_points_of(study), {study: self.sweep.studies[study]}, self.layout)

    def expected_runs(self, study: str) -> list[tuple[dict[str, Any], str]]:
        """(point record, metrics.json path) of every point of `study`, finished or not."""
        return [(p.as_record(), self.layout.metrics(p.study, p.id)) for p in self.points_now(study)]

    def aggregate_inputs(
        self, study: str, report_only: bool, round_output: Callable[[int], str] | None = None
    ) -> list[str]:
        """The study's records, except for a report from what has finished: then none (no run job
        enters the DAG) and `finished_fingerprint` rebuilds the tables as results come in. A
        table job run in a process of its own does not know the targets; it reads the records
        itself, and the main process has planned them. A study with rounds waits for the round
        that adds none: `round_output(n)` is round n's decision, and raises (Snakemake's
        checkpoint) until that round has run, which puts the round in the DAG."""
        if report_only or not self.main_process:
            return []
        if study in self.rounds and round_output is not None:
            round_number = 1
            while round_points(round_output(round_number)):
                round_number += 1
            return [self.layout.metrics(p.study, p.id) for p in self.points_now(study)]
        return self.run_metrics(study)

    def round_inputs(self, study: str, round_number: int, round_output: Callable[[int], str]) -> list[str]:
        """What round `round_number` of a study's repeats waits for: round 1, the points planned
        at load; a later round, the points the round before it chose (and its decision). A
        round's job run in a process of its own reads the records itself (as a table's does)."""
        if not self.main_process:
            return []
        if round_number == 1:
            return self.run_metrics(study)
        previous = round_output(round_number - 1)
        return [previous, *(self.layout.metrics(study, point_id) for point_id in round_points(previous))]

    def write_next_round(self, study: str, round_number: int, path: str, log: str | None = None) -> list[str]:
        """Decide round `round_number + 1` from the records made so far (results.repeats.next_round)
        and write it to `path`: the ids of its points (none: every point has stopped) and why
        each point goes on or stops. The line that says so goes to stderr and `log`, and is
        returned."""
        lines = self.decide_next_round(study, round_number, path)
        if log is not None:
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            Path(log).write_text("".join(f"scalestudy: {line}\n" for line in lines))
            print("\n".join(f"scalestudy: {line}" for line in lines), file=sys.stderr)
        return lines

    def decide_next_round(self, study: str, round_number: int, path: str) -> list[str]:
        """write_next_round's decision, written to `path`; returns the line that says it."""
        chosen, why = repeats.next_round(self.all_points_of(study), {study: self.sweep.studies[study]}, self.layout)
        ids = [p.id for p in chosen]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps({"study": study, "round": round_number, "next": ids, "why": why}, indent=1))
        done = f"{study}: round {round_number} done"
        if ids:
            more = f"{len(ids)} more repeat{'s' if len(ids) > 1 else ''}"
            return [f"{done}; round {round_number + 1} runs {more} (CI still wider than the target)"]
        at_max = sum(map(stopped_at_max, why.values()))
        return [f"{done}; every point has stopped ({len(why) - at_max} at their CI target, {at_max} at max)"]

    def finished_fingerprint(self, study: str, report_only: bool) -> str | list[str]:
        """Report only: which metrics.json exist, and when written (a change rebuilds the tables)."""
        if not report_only:
            return ""
        found = []
        for _record, path in self.expected_runs(study):
            try:
                found.append(f"{path}@{os.stat(path).st_mtime_ns}")
            except FileNotFoundError:
                continue
        return sorted(found)

    def points_digest(self, study: str) -> str:
        """The study's set of points in one short text: a param of its table, so that the tables
        and the report (`report` alone too) are rebuilt when the set changes (more repeats, a
        new axis value) before any new result has finished. Every point of the sweep, up to a
        `repeats: {max}`: which of those have run is told by the records, the table's inputs."""
        ids = sorted(p.id for p in self.all_points_of(study))
        digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
        return f"{len(ids)} points, sha256 {digest}"

    def study_setting(self, study: str, key: str) -> Any:
        """A study's key as the schema filled it (e.g. `estimator`, `budget_su`)."""
        return self.sweep.studies[study].get(key)

    def repeats_setting(self, study: str) -> str:
        """A study's `repeats` as canonical text (a param: a reordered sweep file changes nothing)."""
        return json.dumps(self.study_setting(study, "repeats"), sort_keys=True)

    def budgets(self) -> dict[str, Any]:
        """Each study's budget_su, sorted by study: params are compared as text, and reordering
        the sweep file changes no result."""
        return {study: self.study_setting(study, "budget_su") for study in sorted(self.studies)}

    def compare_baseline(self, config: Mapping[str, Any], studies_of: Callable[[str], list[str]]) -> str:
        """The compare target's baseline (`--config compare_baseline=PATH`), checked before the
        DAG is built: a results directory with a study of this sweep aggregated, or a published
        record of one (`studies_of`: the studies it holds, raising SweepError with what is wrong;
        compare.check_side, a layer above). Raises SweepError (one line) without one, or for a
        path that is neither."""
        baseline = config.get("compare_baseline")
        if not baseline:
            raise SweepError(
                ["compare_baseline: not given; the compare target needs --config compare_baseline=PATH "
                 "(a results directory)"]
            )  # fmt: skip
        try:
            studies = studies_of(str(baseline))
        except SweepError as error:
            raise SweepError([f"compare_baseline: {problem}" for problem in error.problems]) from None
        if not set(studies) & set(self.studies):
            raise SweepError(
                [f"compare_baseline: {baseline}: no study of this sweep (it has {', '.join(studies)}); allowed: "
                 f"results of {', '.join(self.studies)}"]
            )  # fmt: skip
        return str(baseline)

    def compare_inputs(self, baseline: str) -> list[str]:
        """This results directory's tables, and the baseline's (its runs.csv per study)."""
        path = Path(baseline)
        found = [str(path)] if path.is_file() else sorted(str(p) for p in path.glob("*/runs.csv"))
        return [self.layout.table(study, name) for study in self.studies for name in ("runs", "scaling")] + found
