"""What `onstart` does before the first job of a run (not a report): a list of steps, each a
function of the plan and of what Snakemake's DAG holds, each done by one owner:

    step                    owner (what does the work)
    stop_on_missing_inputs  plan.missing_inputs (config.study at load): raises SweepError
    check_site_modules      launch.modules.site_problems: the site's modules exist and load its MPI
    check_site_mpi          launch.site_mpi.problems: each launcher is its MPI, and the ranks' mpi4py's
    say_uncounted_reruns    summary.rerun_line: Snakemake runs more run jobs than counted
    take_lock               bookkeeping.locking.hold: one running workflow per results directory
    archive_retries         bookkeeping.retry.archive: the failed records to retry
    keep_before_rerun       bookkeeping.history.keep_before_rerun: finished records about to rerun
    resubmit_never_ran      the scheduler's never_ran (PBS Pro's: one qstat): resumed jobs deleted unrun
    save_packs              the scheduler's save_packs (PBS Pro's: for qsub): the packs' points

`start` runs them in that order and returns the held lock (keep it while the workflow runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..apps.registry import app_for
from ..bookkeeping import history, locking, retry
from ..config.packing import Pack
from ..launch import modules, site_mpi
from ..model.errors import SweepError
from ..scheduler import scheduler_for
from .plan import Forcing, Plan
from .summary import rerun_line


@dataclass(frozen=True)
class Start:
    """What Snakemake holds at the start of a run (the adapter reads it): whether its lock is
    asked for; the run jobs it runs (metrics.json -> why); the batch jobs it would resume
    (`resumed()`: metrics.json -> job id, asked only by a scheduler that can tell one that never
    ran) and how to forget one;
    what it was told (`forcing`)."""

    lock: bool
    reruns: Mapping[str, str]
    resumed: Callable[[], Mapping[str, str]] = dict
    forget: Callable[[str], None] = lambda metrics: None
    forcing: Forcing | None = None
    say: Callable[[str], None] = print
    # Under --sdm env-modules Snakemake loads each app's `app_modules` in its jobs.
    env_modules: bool = False
    # Under --sdm conda a job's ranks run the app's env's Python, not this one.
    conda: bool = False


def stop_on_missing_inputs(plan: Plan, run: Start, held: list) -> None:
    if plan.missing_inputs:
        raise SweepError(plan.missing_inputs)


def check_site_modules(plan: Plan, run: Start, held: list) -> None:
    """Before any job is submitted (today a module name is first used inside the job, after the
    queue wait): the modules the points' jobs load and the site's MPI they put on PATH."""
    apps = {app_for(point).name: app_for(point) for point in plan.to_submit}
    launchers = [plan.cluster.launcher_for(app.mpi_flavour) for app in apps.values()]
    app_modules = [name for app in apps for name in plan.cluster.app_modules.get(app, ())]
    problems = modules.site_problems(plan.cluster, launchers, app_modules if run.env_modules else ())
    if problems:
        raise SweepError(problems)


def check_site_mpi(plan: Plan, run: Start, held: list) -> None:
    """Once, before any job (never once per point at run time): each launcher the points use is
    the MPI it is named for, and the MPI the ranks' mpi4py loads (launch.site_mpi.problems)."""
    uses: dict = {}
    for point in plan.to_submit:
        app = app_for(point)
        launcher = plan.cluster.launcher_for(app.mpi_flavour)
        mpi4py, names = uses.get(launcher, (False, ()))
        app_modules = plan.cluster.app_modules.get(app.name, ()) if run.env_modules else ()
        uses[launcher] = (mpi4py or app.loads_mpi4py(point), tuple(dict.fromkeys([*names, *app_modules])))
    problems = site_mpi.problems(plan.cluster, uses, ask_mpi4py=not run.conda)
    if problems:
        raise SweepError(problems)


def say_uncounted_reruns(plan: Plan, run: Start, held: list) -> None:
    uncounted = rerun_line(plan, run.reruns, run.forcing)
    if uncounted:
        run.say(uncounted)


def take_lock(plan: Plan, run: Start, held: list) -> None:
    """Raises ResultsBusy where another workflow holds it."""
    if run.lock:
        held.append(locking.hold(plan.layout.results))


def archive_retries(plan: Plan, run: Start, held: list) -> None:
    retry.archive(plan.survey.retry_archives)


def keep_before_rerun(plan: Plan, run: Start, held: list) -> None:
    history.keep_before_rerun(run.reruns, planned=plan.survey.keeping)


def resubmit_never_ran(plan: Plan, run: Start, held: list) -> None:
    for metrics in scheduler_for(plan.cluster).never_ran(run.resumed):
        run.say(f"scalestudy: {metrics}: its batch job was deleted before it ran; submitted again")
        run.forget(metrics)


def save_packs(plan: Plan, run: Start, held: list) -> None:
    if plan.packs:
        scheduler_for(plan.cluster).save_packs(packs_for_submit(plan))


STEPS = (
    stop_on_missing_inputs,
    check_site_modules,
    check_site_mpi,
    say_uncounted_reruns,
    take_lock,
    archive_retries,
    keep_before_rerun,
    resubmit_never_ran,
    save_packs,
)


def start(plan: Plan, run: Start) -> list:
    """Every step of STEPS in order; returns the held lock. Raises SweepError or ResultsBusy."""
    held: list = []
    for step in STEPS:
        step(plan, run, held)
    return held


def packs_for_submit(plan: Plan, packs: Iterable[Pack] | None = None) -> dict[str, list[dict[str, Any]]]:
    """For a scheduler's submit command: which points each group job runs, in order (`packs`:
    the plan's, or a later round's)."""
    return {
        pack.name: [
            {"metrics": plan.layout.metrics(p.study, p.id), "point": p.to_json(), "walltime_s": p.walltime_seconds,
             "queue": p.queue}
            for p in pack.points
        ]
        for pack in (plan.packs if packs is None else packs)
    }  # fmt: skip
