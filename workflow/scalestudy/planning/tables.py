"""The inputs and params of the rules after the run jobs (the tables, the rounds of repeats,
the report, compare), as functions of a plan (planning.plan.Plan). A study's settings are
read from its typed value (model.settings.StudySettings: `plan.study.settings.studies[name]`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..bookkeeping import history, ladder, repeats
from ..config import forecast, packing
from ..model.errors import SweepError
from ..model.point import Point
from ..model.repeats import stopped_at_max
from ..scheduler import scheduler_for
from .plan import Plan, round_points
from .start import packs_for_submit
from .summary import climb_words


def run_metrics(plan: Plan, study: str) -> list[str]:
    return [plan.layout.metrics(p.study, p.id) for p in plan.sweep.points_of(study)]


def all_points_of(plan: Plan, study: str) -> list[Point]:
    """Every point of `study` in the sweep, up to a `repeats: {max}`, planned now or not."""
    return [p for p in plan.all_points.values() if p.study == study]


def points_now(plan: Plan, study: str) -> list[Point]:
    """The points of `study` as the records on disk leave it: every point, or for repeats
    until clear those needed so far, for a node ladder the rungs it has climbed
    (bookkeeping.ladder.in_play), after the last round too."""
    settings = {study: plan.study.settings.studies[study]}
    return ladder.in_play(all_points_of(plan, study), settings, plan.layout, plan.judge)


def expected_runs(plan: Plan, study: str) -> list[tuple[dict[str, Any], str]]:
    """(point record, metrics.json path) of every point of `study`, finished or not."""
    return [(p.as_record(), plan.layout.metrics(p.study, p.id)) for p in points_now(plan, study)]


def aggregate_inputs(
    plan: Plan, study: str, report_only: bool, round_output: Callable[[int], str] | None = None
) -> list[str]:
    """The study's records, except for a report from what has finished: then none (no run job
    enters the DAG) and `finished_fingerprint` rebuilds the tables as results come in. A
    table job run in a process of its own does not know the targets; it reads the records
    itself, and the main process has planned them. A study with rounds waits for the round
    that adds none: `round_output(n)` is round n's decision, and raises (Snakemake's
    checkpoint) until that round has run, which puts the round in the DAG."""
    if report_only or not plan.main_process:
        return []
    if study in plan.rounds and round_output is not None:
        round_number = 1
        while round_points(round_output(round_number)):
            round_number += 1
        return [plan.layout.metrics(p.study, p.id) for p in points_now(plan, study)]
    return run_metrics(plan, study)


def round_inputs(plan: Plan, study: str, round_number: int, round_output: Callable[[int], str]) -> list[str]:
    """What round `round_number` of a study's repeats waits for: round 1, the points planned
    at load; a later round, the points the round before it chose (and its decision). A
    round's job run in a process of its own reads the records itself (as a table's does)."""
    if not plan.main_process:
        return []
    if round_number == 1:
        return run_metrics(plan, study)
    previous = round_output(round_number - 1)
    return [previous, *(plan.layout.metrics(study, point_id) for point_id in round_points(previous))]


def write_next_round(plan: Plan, study: str, round_number: int, path: str, log: str | None = None) -> list[str]:
    """Decide round `round_number + 1` from the records made so far (bookkeeping.repeats.next_round)
    and write it to `path`: the ids of its points (none: every point has stopped) and why
    each point goes on or stops. The line that says so goes to stderr and `log`, and is
    returned."""
    lines = decide_next_round(plan, study, round_number, path)
    if log is not None:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(log).write_text("".join(f"scalestudy: {line}\n" for line in lines))
        print("\n".join(f"scalestudy: {line}" for line in lines), file=sys.stderr)
    return lines


def decide_next_round(plan: Plan, study: str, round_number: int, path: str) -> list[str]:
    """write_next_round's decision, written to `path`; returns the line that says it."""
    settings = {study: plan.study.settings.studies[study]}
    if settings[study].ladder is not None:
        return decide_next_rung(plan, study, round_number, path)
    chosen, why = repeats.next_round(all_points_of(plan, study), settings, plan.layout)
    packed = write_round(plan, study, round_number, chosen, why, path)
    done = f"{study}: round {round_number} done"
    if chosen:
        more = f"{len(chosen)} more repeat{'s' if len(chosen) > 1 else ''}"
        return [f"{done}; round {round_number + 1} runs {more} (CI still wider than the target)", *packed]
    at_max = sum(map(stopped_at_max, why.values()))
    return [f"{done}; every point has stopped ({len(why) - at_max} at their CI target, {at_max} at max)"]


def write_round(plan: Plan, study: str, round_number: int, chosen: list[Point], why: dict, path: str) -> list[str]:
    """Write round `round_number`'s decision to `path`: the ids of the next round's points, why,
    and their packs (config.packing, as the points planned at load are packed; each name tagged
    with its round), which the run rules' `group:` reads (Plan.pack_place) and the scheduler's
    submit command is given (its save_packs). Returns the line that says the packs, if any."""
    packs = packing.packs(chosen, plan.cluster, plan.study.settings.studies, plan.study.settings.order_seed,
                          tag=f".r{round_number + 1}")  # fmt: skip
    decision = {"study": study, "round": round_number, "next": [p.id for p in chosen], "why": why,
                "packs": {pack.name: [p.id for p in pack.points] for pack in packs}}  # fmt: skip
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(decision, indent=1))
    if not packs:
        return []
    scheduler_for(plan.cluster).save_packs(packs_for_submit(plan, packs), add=True)
    packed = sum(len(pack.points) for pack in packs)
    names = ", ".join(pack.name for pack in packs)
    return [f"{study}: round {round_number + 1} packs {packed} points into {len(packs)} batch jobs ({names})"]


def decide_next_rung(plan: Plan, study: str, round_number: int, path: str) -> list[str]:
    """A laddered study's round: the points in play without a record (the repeats a rung still
    needs, or the next rung where a ladder climbs), and each ladder's step in words."""
    settings = {study: plan.study.settings.studies[study]}
    planned, found = ladder.decide(all_points_of(plan, study), settings, plan.layout, plan.judge)
    chosen = [p for p in planned if read_record(plan, p) is None]
    why = {name: climb_words(climb) for (_study, name), climb in found.items()}
    packed = write_round(plan, study, round_number, chosen, why, path)
    done = f"{study}: round {round_number} done"
    lines = [f"{study}: ladder {name}: {words}" for name, words in why.items()]
    if chosen:
        more = f"{len(chosen)} more point{'s' if len(chosen) > 1 else ''}"
        return [*lines, f"{done}; round {round_number + 1} runs {more}", *packed]
    return [*lines, f"{done}; every ladder has stopped"]


def plain(value: Any) -> Any:
    """A dataclass tree as JSON values, nan as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def step_entry(step) -> dict[str, Any]:
    """One decision of a ladder for ladder.json: after which rung, what came next (None: it
    stopped) and why, and the intermediate rung's prediction where it had one."""
    between = dataclasses.asdict(step.between) if step.between is not None else None
    return {"after": step.top, "next": step.next_nodes, "reason": step.reason, "why": step.why, "between": between}


def ladder_state(plan: Plan, study: str) -> dict[str, Any]:
    """What a laddered study's ladders did, for the report: each ladder's rungs as judged, each
    step (which rung came next and why), why it stopped (or where it stands), and the node-hours
    and SU of the scales it ran and did not run against the full ladder's (every rung and
    intermediate rung at every repeat, as the cost forecast prices them: config.forecast.ladder_cost;
    `doublings`: the doubling rungs alone, the ladder without intermediate rungs)."""
    settings = plan.study.settings.studies[study]
    assert settings.ladder is not None
    points = all_points_of(plan, study)
    _planned, found = ladder.decide(points, {study: settings}, plan.layout, plan.judge)
    doublings = set(settings.ladder.rungs())
    out: dict[str, Any] = {"study": study, "rungs": list(settings.ladder.rungs()),
                           "intermediate": list(settings.ladder.between()),
                           "threshold": settings.ladder.threshold, "ladders": []}  # fmt: skip
    for (_study, name), climb in found.items():
        members = [p for p in points if ladder.ladder_of(p) == name]
        climbed = {p.nodes for p in climb.in_play}
        skipped = [p for p in members if p.nodes not in climbed]
        run = [p for p in members if p.nodes in climbed]
        full_hours, full_su = forecast.ladder_cost(members, plan.cluster)
        saved_hours, saved_su = forecast.ladder_cost(skipped, plan.cluster)
        run_hours, run_su = forecast.ladder_cost(run, plan.cluster)
        rung_hours, rung_su = forecast.ladder_cost([p for p in members if p.nodes in doublings], plan.cluster)
        out["ladders"].append(
            {
                "ladder": name,
                "stopped": climb.waiting_on is None,
                "waiting_on": climb.waiting_on,
                "step": dataclasses.asdict(climb.step) if climb.step is not None else None,
                "steps": [step_entry(step) for step in climb.steps],
                "run": sorted(climbed & {p.nodes for p in members}),
                "not_run": sorted({p.nodes for p in skipped}),
                "node_hours": {"full": full_hours, "not_spent": saved_hours, "spent": run_hours,
                               "doublings": rung_hours},
                "su": {"full": full_su, "not_spent": saved_su, "spent": run_su, "doublings": rung_su},
                "cluster": plan.cluster.name,
            }
        )  # fmt: skip
    return plain(out)


def write_ladder(plan: Plan, study: str, path: str, log: str | None = None) -> None:
    """The ladder rule: ladder_state as JSON (the report's section reads it)."""
    state = ladder_state(plan, study)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(state, indent=1))
    if log is not None:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(log).write_text(f"{path}: {len(state['ladders'])} ladders\n")


def read_record(plan: Plan, point: Point) -> dict | None:
    return history.read(plan.layout.metrics(point.study, point.id))[0]


def finished_fingerprint(plan: Plan, study: str, report_only: bool) -> str | list[str]:
    """Report only: which metrics.json exist, and when written (a change rebuilds the tables)."""
    if not report_only:
        return ""
    found = []
    for _record, path in expected_runs(plan, study):
        try:
            found.append(f"{path}@{os.stat(path).st_mtime_ns}")
        except FileNotFoundError:
            continue
    return sorted(found)


def points_digest(plan: Plan, study: str) -> str:
    """The study's set of points in one short text: a param of its table, so that the tables
    and the report (`report` alone too) are rebuilt when the set changes (more repeats, a
    new axis value) before any new result has finished. Every point of the sweep, up to a
    `repeats: {max}`: which of those have run is told by the records, the table's inputs."""
    ids = sorted(p.id for p in all_points_of(plan, study))
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    return f"{len(ids)} points, sha256 {digest}"


def budgets(plan: Plan) -> dict[str, Any]:
    """Each study's budget_su, sorted by study: params are compared as text, and reordering
    the sweep file changes no result."""
    return {study: plan.study.settings.studies[study].budget_su for study in sorted(plan.studies)}


def compare_baseline(plan: Plan, studies_of: Callable[[str], list[str]]) -> str:
    """The compare target's baseline (`--config compare_baseline=PATH`), checked before the
    DAG is built: a results directory with a study of this sweep aggregated, or a published
    record of one (`studies_of`: the studies it holds, raising SweepError with what is wrong;
    compare.check_side, a layer above). Raises SweepError (one line) without one, or for a
    path that is neither."""
    baseline = plan.study.settings.compare_baseline
    if not baseline:
        raise SweepError(
            ["compare_baseline: not given; the compare target needs --config compare_baseline=PATH "
             "(a results directory)"]
        )  # fmt: skip
    try:
        studies = studies_of(str(baseline))
    except SweepError as error:
        raise SweepError([f"compare_baseline: {problem}" for problem in error.problems]) from None
    if not set(studies) & set(plan.studies):
        raise SweepError(
            [f"compare_baseline: {baseline}: no study of this sweep (it has {', '.join(studies)}); allowed: "
             f"results of {', '.join(plan.studies)}"]
        )  # fmt: skip
    return str(baseline)


def compare_inputs(plan: Plan, baseline: str) -> list[str]:
    """This results directory's tables, and the baseline's (its runs.csv per study)."""
    path = Path(baseline)
    found = [str(path)] if path.is_file() else sorted(str(p) for p in path.glob("*/runs.csv"))
    return [plan.layout.table(study, name) for study in plan.studies for name in ("runs", "scaling")] + found
