"""The run rules' directives and the default target, as functions of a plan
(planning.plan.Plan): what workflow/rules/run.smk hands Snakemake for every app.

    run_inputs(plan, app)     # input: the made files its points read (+ kept records)
    point_json(plan, s, id)   # params.point: the point's definition (the rerun trigger)
    run_resources(plan, app)  # resources: constants, or functions of (study, point id)
    run_priority(plan)        # priority: the run order
    pack_group(plan, s, id)   # group: the point's pack

Snakemake calls a function directive once per job it plans, so a directive that is the same
for every point is handed over as a constant, and a function here costs a dict look-up.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..apps.base import App
from ..bookkeeping import retry
from ..config.requests import job_request
from ..config.study import inputs_key
from ..model.point import Point, first_repeats
from ..model.units import GIB, MIB
from ..scheduler import scheduler_for
from .plan import LOCAL_STEP, Plan

# A value of a run rule's directive that depends on the point: a function of (study, point id).
OfPoint = Callable[[str, str], Any]


def minutes(seconds: int) -> int:
    """Snakemake's `runtime` resource (minutes, which the Slurm plugin passes as `-t`), rounded up."""
    return max(1, -(-seconds // 60))


def targets(plan: Plan, report_only: bool) -> list[str]:
    """The default target: the report, after every point not run yet and every record to keep.
    Snakemake 9 does not rerun a finished table for a missing input (a new repeat, a new
    study) when it has no metadata, e.g. in a fresh clone; asked for by name, the missing
    record makes its run job run, then its study's table, whose other missing records
    follow: one per study is enough (each target file costs planning time). Every record to
    keep is asked for: it makes its point rerun."""
    if report_only:
        return [plan.layout.report_html]
    return [plan.layout.report_html, *plan.survey.first_missing.values(), *plan.survey.to_keep]


def study_pattern(plan: Plan, app: App) -> str:
    """Wildcard constraint: only the studies of `app` match that app's run rule."""
    names = plan.sweep.studies_of_app(app.name)
    return "|".join(map(re.escape, names)) if names else "(?!)"


def run_inputs(plan: Plan, app: App) -> list[str] | OfPoint:
    """The input directive of `app`'s run rule: the made files its points read, and each
    point's kept records (results/history.py). Planning cost grows with every input file and
    every function Snakemake calls per job, so when all points of the app read the same
    made files and none has a kept record (the usual case) this is a plain list, else a
    function of the point."""
    keys = {inputs_key(point) for point in plan.all_points.values() if point.app == app.name}
    shared = {tuple(plan.made_inputs_by_key[key]) for key in keys}
    kept = {
        key: state.kept for key, state in plan.survey.states.items() if state.kept and plan.point(*key).app == app.name
    }
    if len(shared) <= 1:
        made = list(shared.pop()) if shared else []
        if not kept:
            return made
        return lambda study, point_id: [*made, *kept.get((study, point_id), ())]

    def inputs_of(study: str, point_id: str) -> list[str]:
        return [*plan.point_made_inputs(plan.point(study, point_id)), *kept.get((study, point_id), ())]

    return inputs_of


def point_json(plan: Plan, study: str, point_id: str) -> str:
    """Everything that defines a point; a change reruns it (rerun-trigger params). Under
    `--config retry_failed=true` a failed point gains a retry number, so it reruns
    (results/retry.py); an ok point never changes."""
    return retry.with_retry(plan.point(study, point_id).to_json(), plan.survey.state(study, point_id).retry)


def run_priority(plan: Plan) -> int | OfPoint:
    """The run rules' `priority:`: each point's place in the run order, the first the
    highest (model.order). A constant where at most one point is to run: a function costs
    a call per job planned."""
    if len(plan.priority_of) <= 1:
        return 0
    return lambda study, point_id: plan.priority_of.get((study, point_id), 0)


def packs_any(plan: Plan) -> bool:
    """Does any point of this invocation run in a pack, now or in a later round? (Else the run
    rules have no `group:`: Snakemake would call the function for every job it plans.)"""
    return bool(plan.pack_of or plan.packed_later)


def pack_group(plan: Plan, study: str, point_id: str) -> str | None:
    """The run rules' `group:` (None: the point is a batch job of its own): its pack, planned
    now or by the round that runs it (Plan.pack_place)."""
    place = plan.pack_place(study, point_id)
    return place.name if place is not None else None


def batch_walltime_s(plan: Plan, point: Point) -> int:
    """The time limit a point's batch job asks for: its walltime plus the cluster's margin
    (job_request), the margin once per pack (on the pack's first point)."""
    place = plan.pack_place(point.study, point.id)
    if place is not None and not place.first:
        return point.walltime_seconds
    return job_request(point, plan.cluster).walltime_s


def point_resources(plan: Plan) -> dict[str, Callable[[Point], Any]]:
    """What every app's run job asks of a batch system, as functions of its point, then what
    only the cluster's scheduler's executor reads (its `job_resources`); the PBS submit
    command and the Slurm plugin size each batch job from them."""
    cluster = plan.cluster
    return {
        "nodes": lambda point: point.nodes,
        "ranks_per_node": lambda point: point.ranks_per_node,
        "gpus_per_node": lambda point: point.gpus_per_node,
        "tasks": lambda point: point.ranks,
        "cpus_per_task": lambda point: point.threads_per_rank,
        **scheduler_for(cluster).job_resources(),
        "queue": lambda point: cluster.queue_name(point.gpus_per_node, point.queue),
        # The batch job's time limit: the point's walltime and the cluster's margin
        # (config.requests.job_request), so that the runner's own timer stops the point and
        # writes its record before the scheduler kills the job.
        "runtime": lambda point: minutes(batch_walltime_s(plan, point)),
        # Memory per node as the request says (the record's memory_requested_gb over its
        # nodes), in the unit of Slurm's `--mem` that the plugin writes it as: MiB.
        "mem_mb": lambda point: job_request(point, cluster).mem_per_node_gib * GIB // MIB,
        "walltime_s": lambda point: point.walltime_seconds,
    }


def run_resources(plan: Plan, app: App) -> dict[str, Any]:
    """The resources of `app`'s run rule. A resource that is the same for every point of the
    app (the walltime of its studies, often the queue and threads) is a constant; only the
    others are functions of (study, point id), which Snakemake calls for every job it lists
    or submits. Every point of the sweep counts, planned now or in a later round (a ladder's
    rung above asks for its own nodes); the time limit of a study that packs is the point's
    (a pack's first point alone asks for the margin, whichever repeat it is)."""
    points = [point for point in first_repeats(plan.all_points.values()) if point.app == app.name]
    packing = any(plan.study.settings.studies[point.study].pack != 1 for point in points)
    resources: dict[str, Any] = {}
    for name, of_point in point_resources(plan).items():
        values = {of_point(point) for point in points}
        if len(values) == 1 and not (name == "runtime" and packing):
            resources[name] = values.pop()
        else:
            resources[name] = lambda study, point_id, of_point=of_point: of_point(plan.point(study, point_id))
    # The cluster the job was planned for: the PBS submit command refuses a job planned for
    # another. A resource, not a param (params are rerun triggers); not named `cluster`,
    # which Snakemake's Slurm plugin passes to sbatch as --clusters.
    return {**resources, **LOCAL_STEP, "planned_cluster": plan.cluster.name}


def prices_ended_batch_jobs(plan: Plan) -> bool:
    """Does the workflow price each ended batch job at what the scheduler charges? Where the
    executor reports each job done or failed and the scheduler says so (its
    `prices_ended_jobs`: Slurm's plugin; record_ended_batch_job); the PBS profiles' status
    command prices theirs itself (scheduler.pbs.status)."""
    return scheduler_for(plan.cluster).prices_ended_jobs


def record_ended_batch_job(
    plan: Plan, points: Sequence[tuple[str, str]], job_id: str, why: str, since: float, priced: bool = True
) -> bool:
    """The records of a batch job of `points` ((study, point id): one, or a pack's) that the
    executor reports ended, done or failed (Slurm: COMPLETED; TIMEOUT, CANCELLED, ...):
    kept, or written as failed, and priced at what the scheduler charges (its `cost`: Slurm's
    Elapsed; where `priced` and prices_ended_batch_jobs), as the PBS status command does
    (launch.ended.ended_batch_job). True when the job's points have their records
    (Snakemake then takes a failed job as done and keeps them), False when none of them
    started after `since` (this run's start)."""
    from ..launch.ended import ended_batch_job

    of_point = point_resources(plan)
    entries = []
    for study, point_id in points:
        point = plan.point(study, point_id)
        entries.append({
            "metrics": plan.layout.metrics(study, point_id),
            "point": point_json(plan, study, point_id),
            "walltime_s": of_point["walltime_s"](point),
            "queue": of_point["queue"](point),
        })  # fmt: skip
    job = {"pack": entries} if len(entries) > 1 else entries[0]
    ran = (
        functools.partial(scheduler_for(plan.cluster).cost, job_id)
        if priced and prices_ended_batch_jobs(plan)
        else None
    )
    return ended_batch_job(job_id, {**job, "cluster": plan.cluster.name, "submitted": since}, why, ran)
