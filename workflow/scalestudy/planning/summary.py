"""What is said before the first job, and whether the budget allows it: functions of a plan
(planning.plan.Plan) and of what Snakemake was told (plan.Forcing, read by the adapter).

    summary_lines(plan, forcing)   # the one summary line (+ packs, forecast) before any job
    budget_problems(plan, forcing) # budget_su_total over the jobs to submit (one line)
    rerun_line(plan, reruns, forcing)  # at the start: run jobs Snakemake runs that were not counted
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..bookkeeping import history, ladder
from ..config import forecast, packing
from ..model.ladder import nodes_text
from ..model.paths import RUNS_SEGMENT
from ..model.point import Point
from ..scheduler import scheduler_for
from .plan import REPORT_TARGETS, Forcing, Plan, run_rule


def warnings(plan: Plan) -> list[str]:
    """What is printed as `sweep warning:` lines at load and does not stop planning: inputs
    no rule makes that are not there yet (a real run stops at its start), points that may
    not fit in memory."""
    return [f"{problem} (a real run stops here)" for problem in plan.missing_inputs] + list(plan.study.warnings)


def report_only(plan: Plan, targets: Iterable[str]) -> bool:
    """`report` or `compare` (or `--config partial=true`): the report (or the comparison)
    from the runs that have finished; no point runs."""
    targets = set(targets)
    return plan.study.settings.partial or (bool(targets) and targets <= REPORT_TARGETS)


def asks_report_only(plan: Plan, forcing: Forcing | None) -> bool:
    """Only a report (or compare) is asked for, as far as is known while the Snakefile is read
    (`forcing` None: no DAG is being set up, e.g. --lint)."""
    return report_only(plan, forcing.targets) if forcing is not None else plan.study.settings.partial


def forced_points(plan: Plan, forcing: Forcing | None) -> list[Point]:
    """The points that run only because Snakemake was told to (finished, unchanged): every
    point of the DAG under --forceall, those of a run rule or a metrics.json named by
    --forcerun, the metrics.json targets under --force. The DAG holds every point, except
    where every target is a point's metrics.json; a report alone holds none."""
    if forcing is None or report_only(plan, forcing.targets):
        return []
    if not (forcing.everything or forcing.rules_or_files or forcing.targets_forced):
        return []  # the usual case: no path of a 100,000-point plan is spelt out
    layout, points = plan.layout, plan.study.points
    by_metrics = {os.path.abspath(layout.metrics(p.study, p.id)): p for p in points}
    targets = {os.path.abspath(target) for target in forcing.targets}
    in_dag = [by_metrics[t] for t in targets] if targets and targets <= by_metrics.keys() else points
    named = {os.path.abspath(name) for name in forcing.rules_or_files}
    planned = {(p.study, p.id) for p in plan.to_submit}

    def forced(point: Point) -> bool:
        metrics = os.path.abspath(layout.metrics(point.study, point.id))
        return (
            forcing.everything
            or run_rule(point.app) in forcing.rules_or_files
            or metrics in named
            or (forcing.targets_forced and metrics in targets)
        )

    return [p for p in in_dag if (p.study, p.id) not in planned and forced(p)]


def asked(plan: Plan, forcing: Forcing | None) -> Callable[[Point], bool] | None:
    """Which points the given targets need, where every target is a study's file
    (`<results>/<study>/runs.csv`, its plots...: that study's points) or a point's
    (`<results>/<study>/runs/<id>/...`: that point); None where all of them are (no target,
    the report, a rule's name, anything else)."""
    if forcing is None or not forcing.targets:
        return None
    results = os.path.abspath(plan.layout.results)
    studies, points = set(), set()
    for target in forcing.targets:
        relative = os.path.relpath(os.path.abspath(target), results).split(os.sep)
        if relative[0] not in plan.study.settings.studies:
            return None
        if len(relative) > 2 and relative[1] == RUNS_SEGMENT:
            points.add((relative[0], "/".join(relative[2:-1])))
        else:
            studies.add(relative[0])
    return lambda point: point.study in studies or (point.study, point.id) in points


def narrowed(
    plan: Plan, forcing: Forcing | None
) -> tuple[history.Survey, list[Point], list[Point], list[packing.Pack]]:
    """(the survey, the points to submit, the later repeats, the packs) of what the given
    targets need: what the opening line, the forecast and the budget count."""
    keep = asked(plan, forcing)
    later = [*plan.later_repeats, *plan.later_rungs]
    if keep is None:
        return plan.survey, plan.to_submit, later, plan.packs
    packs = [pack for pack in plan.packs if any(keep(point) for point in pack.points)]
    return (
        plan.survey.only(p for p in plan.study.points if keep(p)),
        [p for p in plan.to_submit if keep(p)],
        [p for p in later if keep(p)],
        packs,
    )


def summary_lines(plan: Plan, forcing: Forcing | None = None) -> list[str]:
    """Printed once, before Snakemake's own output: the points per study and the run jobs to
    submit and why (`forcing`: what Snakemake was told to run again, and the targets: only
    what they need is counted); the packs; what the jobs to submit may cost (on a cluster;
    not for a report, which submits none)."""
    forced = forced_points(plan, forcing)
    only_report = asks_report_only(plan, forcing)
    survey, _, later, packs = narrowed(plan, forcing)
    excluded = sum(n for study, n in plan.sweep.excluded.items() if study in survey.points)
    lines = [history.summary_line(survey, only_report, len(forced), excluded)]
    lines += ladder_lines(plan)
    if packs and not only_report:
        packed = sum(len(pack.points) for pack in packs)
        names = ", ".join(pack.name for pack in packs)
        lines.append(f"scalestudy: packed {packed} points into {len(packs)} batch jobs ({names})")
    if forcing is not None and forcing.incomplete and not report_only(plan, forcing.targets):
        lines.append(
            "scalestudy: --rerun-incomplete: points an interrupted run left incomplete run again too; "
            "the count is given when the run starts"
        )
    to_run = survey.to_run + len(forced)
    if scheduler_for(plan.cluster).batch and not only_report and to_run:
        lines += forecast.forecast_lines(submit_forecast(plan, forced, forcing), submit_words(plan, to_run, forcing))
    elif to_run and not only_report and later:
        rungs = {(p.study, p.id) for p in plan.later_rungs}
        repeats = sum((p.study, p.id) not in rungs for p in later)
        if repeats:
            lines.append(
                f"scalestudy: later rounds may add up to {repeats} repeats (up to max), "
                "while a point's CI is wider than its target"
            )
    return lines


def ladder_lines(plan: Plan) -> list[str]:
    """Each laddered study's ladder, where it stands and its worst case (every rung and
    intermediate rung, priced by the cost forecast: config.forecast.ladder_cost), before the first job."""
    lines = []
    for name, settings in plan.study.settings.studies.items():
        if settings.ladder is None:
            continue
        rungs = [p for p in plan.all_points.values() if p.study == name]
        hours, units = forecast.ladder_cost(rungs, plan.cluster)
        cost = f"{hours:,.2f} node-hours" + (f", {forecast.su(units)}" if units is not None else "")
        states = sorted({climb_words(climb) for (study, _), climb in plan.climbs.items() if study == name})
        every = "every rung and intermediate rung" if settings.ladder.between() else "every rung"
        lines.append(
            f"scalestudy: {name}: node ladder {settings.ladder.text()} (with 95% confidence, or as the "
            f"calibrated prediction of the next rung says); worst case, {every}: {cost}"
            + (f"; now: {'; '.join(states)}" if states else "")
        )
    return lines


def climb_words(climb: ladder.Climb) -> str:
    """A ladder's state in words: waiting on a rung's runs, climbing, or stopped and why."""
    if climb.waiting_on is not None:
        return f"runs at {nodes_text(climb.waiting_on)}" + (f" ({climb.step.why})" if climb.step else "")
    assert climb.step is not None
    return f"stopped at {nodes_text(climb.step.top)} ({climb.step.why})"


def submit_forecast(plan: Plan, forced: Sequence[Point] = (), forcing: Forcing | None = None) -> forecast.Forecast:
    """What the batch jobs this invocation submits may cost: the points to submit that the
    targets need (none that finished, unless forced), a pack priced as one job, and the
    repeats up to a study's `repeats: {max: ...}` that later rounds may add (the most it may
    cost)."""
    survey, to_submit, later, packs = narrowed(plan, forcing)
    return forecast.forecast([*to_submit, *forced, *later], plan.cluster, survey.measured(), packs)


def submit_words(plan: Plan, to_run: int, forcing: Forcing | None = None) -> str:
    """What a forecast of this invocation prices, in words."""
    words = forecast.to_submit_words(to_run)
    later = narrowed(plan, forcing)[2]
    rungs = {(p.study, p.id) for p in plan.later_rungs}
    repeats = sum((p.study, p.id) not in rungs for p in later)
    if repeats:
        words += f" and the {repeats} repeats up to max that later rounds may add"
    if len(later) - repeats:
        words += f" and the {len(later) - repeats} runs of the ladder rungs above (the worst case: every rung)"
    return words


def budget_problems(plan: Plan, forcing: Forcing | None = None) -> list[str]:
    """Nothing spent by surprise: one line when the jobs to submit may cost more than
    `budget_su_total`. A report (or compare, or a partial report) submits nothing and is
    never refused; a batch job's own Snakemake submits nothing either."""
    budget = plan.study.settings.budget_su_total
    forced = forced_points(plan, forcing)
    to_run = narrowed(plan, forcing)[0].to_run + len(forced)
    if budget is None or asks_report_only(plan, forcing) or not plan.main_process or not to_run:
        return []
    return forecast.budget_problems(submit_forecast(plan, forced, forcing), budget, submit_words(plan, to_run, forcing))


def rerun_line(plan: Plan, reruns: Mapping[str, str], forcing: Forcing | None) -> str | None:
    """At the start of a run, once Snakemake's DAG exists: when it runs run jobs the summary
    did not count (`reruns`: metrics.json -> Snakemake's reason, of every run job it runs;
    e.g. the points an interrupted run left incomplete, under --rerun-incomplete), the
    true count and Snakemake's reasons for the others, in one line; else None."""
    counted_points = [*plan.to_submit, *forced_points(plan, forcing)]
    if len(reruns) <= len(counted_points):
        return None  # the summary's count holds
    counted = {os.path.abspath(plan.layout.metrics(p.study, p.id)) for p in counted_points}
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
