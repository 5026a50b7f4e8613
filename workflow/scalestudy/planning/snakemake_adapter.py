"""Every use of a Snakemake internal, in one place: what the plan (scalestudy.planning.plan) needs to
know of the running Snakemake, read from its `workflow` object, and the few things done to it.

Snakemake's documented API for a Snakefile is its directives, `config`, `workflow.basedir`
and the `onstart` hook; everything below reaches past that and may change in any release.
Tested with Snakemake 9.27.1 (requirements.txt), with the cluster-generic executor 1.0.9 and
the Slurm executor 2.8.0. Each function says why it is needed, so that a Snakemake upgrade
that breaks one shows here, in the tests of the rules that use it (tests/integration:
test_nothing_lost, test_pbs_commands, test_scheduler_integration, test_workflow_checks,
benchmarks/overhead.py), and nowhere else.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .plan import Deployment, Forcing

try:  # see per_job
    from snakemake.common import overwrite_function_params
except ImportError:  # a Snakemake without the hook: functions are inspected per call
    overwrite_function_params = None


class SnakemakeRun:
    """The running Snakemake, as the plan sees it."""

    def __init__(self, workflow: Any) -> None:
        self.workflow = workflow

    @property
    def main_process(self) -> bool:
        """False inside a job Snakemake runs in a process of its own (a batch job), which needs no
        survey and submits nothing (`workflow.is_main_process`)."""
        return self.workflow.is_main_process

    @property
    def configfiles(self) -> list[str]:
        """The files Snakemake read the config from (the --configfile or profile ones, else the
        Snakefile's `configfile:`), read again strictly by the loader."""
        return list(self.workflow.configfiles)

    @property
    def configfiles_given(self) -> bool:
        """Were sweep files named (--configfile, a profile's configfiles)? They replace the shipped
        example instead of being merged into it (`workflow.overwrite_configfiles`)."""
        return bool(self.workflow.overwrite_configfiles)

    def targets(self) -> set[str]:
        """The targets asked for; known only once the DAG is planned, not while the Snakefile is
        read (`workflow.dag_settings.targets`)."""
        settings = self.workflow.dag_settings
        return set(settings.targets) if settings is not None else set()

    def forcing(self) -> Forcing | None:
        """What Snakemake was told to run whatever the files say (--forceall, --forcerun, --force,
        --rerun-incomplete) and the targets, from its DAG settings (`DAGSettings.forceall`,
        `forcerun`, `forcetargets`, `force_incomplete`, `targets`). While the Snakefile is read
        `workflow.dag_settings` is still None: they are then the settings of the DAG being set
        up (see dag_settings_being_set_up). None where there are none (--lint)."""
        settings = self.workflow.dag_settings or dag_settings_being_set_up()
        if settings is None:
            return None
        return Forcing(
            everything=bool(settings.forceall),
            rules_or_files=frozenset(map(str, settings.forcerun or ())),
            targets=frozenset(map(str, settings.targets or ())),
            targets_forced=bool(settings.forcetargets),
            incomplete=bool(settings.force_incomplete),
        )

    def lock_requested(self) -> bool:
        """Snakemake takes its own lock (not --nolock): scalestudy then takes the results
        directory's, which Snakemake's does not cover from another working directory."""
        return bool(self.workflow.execution_settings.lock)

    def deployment(self) -> Deployment:
        """--sdm conda / env-modules: which interpreter jobs run and what they can import."""
        from snakemake_interface_executor_plugins.settings import DeploymentMethod

        methods = self.workflow.deployment_settings.deployment_method
        return Deployment(conda=DeploymentMethod.CONDA in methods, env_modules=DeploymentMethod.ENV_MODULES in methods)

    def job_python(self) -> str:
        """The interpreter of run jobs: the conda env's under --sdm conda, else the one running
        this workflow (its venv need not be activated; clusters share its path)."""
        return "python" if self.deployment().conda else sys.executable

    def jobs_can_import(self, module: str | None, site_modules: Iterable[str]) -> bool:
        return self.deployment().jobs_can_import(module, list(site_modules), here_importable)

    def jobs_to_rerun(self, rules: Iterable[str]) -> dict[str, str]:
        """metrics.json -> why, of every job of `rules` Snakemake is about to run, whatever its
        reason (one of its own too: an input made again, --forcerun): their records are kept
        first (`dag.needrun_jobs`, `dag.reason`)."""
        rules, dag = set(rules), self.workflow.dag
        return {job.output.metrics: str(dag.reason(job)) for job in dag.needrun_jobs() if job.rule.name in rules}

    def resumed_batch_jobs(self, rules: Iterable[str]) -> dict[str, str]:
        """metrics.json -> external id, of each job of `rules` that Snakemake will resume (poll)
        under the batch job id an interrupted run recorded, instead of submitting it
        (`dag.incomplete_external_jobid`)."""
        rules, dag = set(rules), self.workflow.dag
        return {
            job.output.metrics: job_id
            for job in dag.needrun_jobs()
            if job.rule.name in rules and (job_id := dag.incomplete_external_jobid(job))
        }

    def forget_batch_job(self, metrics: str) -> None:
        """Take the incomplete mark (and its external id) off the job writing `metrics`, so it is
        submitted afresh (`persistence.cleanup`)."""
        for job in self.workflow.dag.needrun_jobs():
            if getattr(job.output, "metrics", None) == metrics:
                self.workflow.persistence.cleanup(job)

    def count_group_components_as(self, groups: Iterable[str], name: str) -> None:
        """Snakemake makes one group job per connected component of a group, and a pack's points
        are not connected: the profiles' `group-components: [<name>=...]` lets a group span
        that many, and a group's id is looked up under the name its components are counted by
        (`workflow.parent_groupids`)."""
        self.workflow.parent_groupids.update(dict.fromkeys(groups, name))

    def groups_counted_as(self, group: Callable[[str, str], str | None], name: str) -> Any:
        """A run rule's `group:` from `group` (a function of (study, point id)), each group it
        names counted as `name`'s components (count_group_components_as) when it first names
        it: a group that comes into the plan after the Snakefile was read (a later round's
        pack, planning.run_rules.pack_group) spans its points too, not one group job each."""
        known = self.workflow.parent_groupids

        def counted(study: str, point_id: str) -> str | None:
            found = group(study, point_id)
            if found is not None and found not in known:
                self.count_group_components_as([found], name)
            return found

        return of_wildcards(counted)

    def keep_records_of_failed_batch_jobs(
        self,
        rules: Iterable[str],
        record: Callable[[list[tuple[str, str]], str, str, float, bool], bool],
        done_too: bool = False,
    ) -> None:
        """A batch job of `rules` that the executor reports failed is handed to `record` ((study,
        point) of each of its jobs, the batch job id, the executor's words, this run's start,
        whether to price it); where `record` answers True the job is reported done instead, so
        that Snakemake keeps the records the points wrote (or `record` wrote for them) and goes
        on to the report. With `done_too`, a job reported done is handed to `record` first as
        well (Slurm: its points priced at the job's Elapsed before Snakemake, and the report,
        read them).

        Snakemake's Slurm executor reports a job that Slurm ended TIMEOUT or CANCELLED as
        failed, whatever the job wrote, and Snakemake then removes the job's outputs ("Removing
        output files of failed job ... since they might be corrupted"): the record the runner
        wrote when the job was stopped would be lost, and the report not built. The PBS
        profiles need none of this (their status command answers `success` for a job that
        left records, and prices it). Wraps the remote executor's `report_job_error` and
        `report_job_success`, through which every executor plugin reports an ended job, from
        its status thread (`workflow.scheduler._executor`, made before the onstart hook runs);
        a local run (no batch jobs) is left as it is.

        Snakemake's shutdown joins that status thread, so nothing here may hold it long: once
        Snakemake is cancelling its jobs (Ctrl-C: the executor's `cancel`, wrapped to say so) or
        shutting down (`executor.wait` False), a job reported done is passed on at once and a
        failed one is kept unpriced (`record`'s last argument False: no scheduler command); an
        error in `record` is printed and the report passed on as the executor made it."""
        import time

        scheduler = getattr(self.workflow, "scheduler", None)
        executor = getattr(scheduler, "_executor", None)
        if executor is None or self.workflow.local_exec:
            return
        rules, since = set(rules), time.time()
        report_error, report_success, cancel = executor.report_job_error, executor.report_job_success, executor.cancel
        cancelling = threading.Event()

        def stopping() -> bool:
            return cancelling.is_set() or not getattr(executor, "wait", True)

        def recorded(job_info: Any, why: str) -> bool:
            """`record` of the job's points, if they are all of `rules`; False where not, or on an error."""
            job = job_info.job
            jobs = list(job.jobs) if job.is_group() else [job]
            if not jobs or not all(each.rule.name in rules for each in jobs):
                return False
            points = [(each.wildcards.study, each.wildcards.point) for each in jobs]
            try:
                return record(points, str(job_info.external_jobid), why, since, not stopping())
            except Exception as error:  # a record not written must not stop the workflow
                print(f"scalestudy: batch job {job_info.external_jobid}: {why}: not recorded: {error!r}",
                      file=sys.stderr)  # fmt: skip
                return False

        def report_job_error(job_info: Any, msg: str | None = None, **kwargs: Any) -> None:
            if recorded(job_info, msg or "the batch job failed"):
                points = len(job_info.job.jobs) if job_info.job.is_group() else 1
                print(f"scalestudy: {msg}: kept as the record of {points} point(s)", file=sys.stderr)
                report_success(job_info)
                return
            report_error(job_info, msg, **kwargs)

        def report_job_success(job_info: Any) -> None:
            if not stopping():
                recorded(job_info, "the batch job ended, reported done")
            report_success(job_info)

        def cancel_jobs_and_shut_down() -> None:
            cancelling.set()
            cancel()

        executor.report_job_error = report_job_error
        executor.cancel = cancel_jobs_and_shut_down
        if done_too:
            executor.report_job_success = report_job_success

    def cancel_the_jobs_of_a_status_round_too(self) -> None:
        """Ctrl-C cancels every batch job still queued or running, also while their status is asked.

        A remote executor's status thread takes its jobs off `active_jobs` while it asks the
        scheduler about them, and puts back those still running after the round
        (`RemoteExecutor._wait_for_jobs`); Ctrl-C (`RemoteExecutor.cancel`) hands `cancel_jobs`
        only `active_jobs`. An interrupt during a round therefore cancelled nothing: under Slurm
        (no sidecar) a node ladder's queued rung then ran later, unattended and charged, while
        the next run submitted it again. Here `cancel_jobs` is also handed the round's jobs that
        the round has not reported ended (`report_job_success`, `report_job_error`), each once.
        A local run (no batch jobs) is left as it is."""
        scheduler = getattr(self.workflow, "scheduler", None)
        executor = getattr(scheduler, "_executor", None)
        if executor is None or self.workflow.local_exec:
            return
        check, cancel = executor.check_active_jobs, executor.cancel_jobs
        report_success, report_error = executor.report_job_success, executor.report_job_error
        asked: dict[int, Any] = {}  # id -> job info: the jobs of the latest round, less those it saw end
        lock = threading.Lock()

        async def check_active_jobs(active_jobs: list) -> Any:
            with lock:
                asked.clear()
                asked.update((id(job_info), job_info) for job_info in active_jobs)
            async for job_info in check(active_jobs):
                yield job_info

        def ended(job_info: Any) -> None:
            with lock:
                asked.pop(id(job_info), None)

        def report_job_success(job_info: Any) -> None:
            ended(job_info)
            report_success(job_info)

        def report_job_error(job_info: Any, msg: str | None = None, **kwargs: Any) -> None:
            ended(job_info)
            report_error(job_info, msg, **kwargs)

        def cancel_jobs(active_jobs: list) -> None:
            with lock:
                every = {id(job_info): job_info for job_info in [*active_jobs, *asked.values()]}
            cancel(list(every.values()))

        executor.check_active_jobs = check_active_jobs
        executor.report_job_success, executor.report_job_error = report_job_success, report_job_error
        executor.cancel_jobs = cancel_jobs

    def end_executor_wait_at_exit(self) -> None:
        """Let Snakemake exit when it had nothing to do (issue 13, fix 4).

        cluster-generic starts the sidecar with the executor, and a thread that waits (not a
        daemon) until the executor's `wait` turns False, which only the executor's shutdown
        does. When the DAG is empty, Snakemake prints "Nothing to be done" and returns without
        shutting the executor down: that thread keeps the process alive until Ctrl-C. Python
        joins such threads at exit AFTER its threading-atexit hooks (and before `atexit`'s), so
        one hook here ends the wait: the thread then terminates the sidecar (which deletes no
        job: the run submitted none) and the process exits. After a normal end `wait` is
        already False and this does nothing (`workflow._scheduler._executor.wait`)."""
        workflow = self.workflow

        def end_wait() -> None:
            scheduler = getattr(workflow, "_scheduler", None)
            executor = getattr(scheduler, "_executor", None)
            if getattr(executor, "wait", False):
                executor.wait = False

        threading._register_atexit(end_wait)  # the only hook that runs before non-daemon threads are joined

    @staticmethod
    def end_status_wait_at_shutdown() -> None:
        """Let Snakemake exit as soon as its last batch job is known to have ended, not one
        status polling interval later (30 s on the PBS profiles).

        A remote executor's status thread checks its jobs, then sleeps the polling interval
        (`RemoteExecutor.sleep`); its `shutdown` sets `wait` False and joins that thread, so it
        waits out the sleep the thread has just begun. Here the sleep is taken in steps of
        STATUS_WAIT_STEP_S and ends when `wait` turns False; while jobs run, the checks are as
        far apart as before (`snakemake_interface_executor_plugins.executors.remote`)."""
        try:
            from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
        except ImportError:
            return
        if getattr(RemoteExecutor.sleep, "ends_at_shutdown", False):
            return

        async def sleep(self) -> None:
            import asyncio
            import time

            deadline = time.monotonic() + self.next_seconds_between_status_checks
            while self.wait and (left := deadline - time.monotonic()) > 0:
                await asyncio.sleep(min(left, STATUS_WAIT_STEP_S))

        sleep.ends_at_shutdown = True
        RemoteExecutor.sleep = sleep


# How often a status thread's sleep looks whether Snakemake is shutting down.
STATUS_WAIT_STEP_S = 0.5


def dag_settings_being_set_up() -> Any:
    """The DAG settings of the Snakemake run whose Snakefile is being read, or None. Snakemake
    reads the Snakefile while it sets up its DAG API (`snakemake.api.DAGApi.__post_init__` asks
    for `workflow_api._workflow`, which includes the Snakefile) and only then assigns
    `workflow.dag_settings`; until then the settings are that DAGApi's `dag_settings`, found
    on the call stack."""
    try:
        from snakemake.settings.types import DAGSettings
    except ImportError:
        return None
    frame = sys._getframe(1)
    while frame is not None:
        settings = getattr(frame.f_locals.get("self"), "dag_settings", None)
        if isinstance(settings, DAGSettings):
            return settings
        frame = frame.f_back
    return None


def per_job(function: Callable) -> Callable:
    """A function Snakemake calls for every job (an input, param or resource function). Snakemake
    reads its signature on every call (inspect.signature, twice: most of the cost of calling
    it); given once here (`snakemake.common.overwrite_function_params`), a 100,000-point plan
    saves seconds per function. With a Snakemake that lacks the hook, the function is
    inspected per call, as before."""
    if overwrite_function_params is not None:
        overwrite_function_params(function, inspect.signature(function).parameters)
    return function


def of_wildcards(value: Any) -> Any:
    """A plan's value of a run rule's directive as Snakemake takes it: a function of (study,
    point id) becomes a function of the job's wildcards; a constant stays one."""
    if not callable(value):
        return value
    return per_job(lambda wildcards: value(wildcards.study, wildcards.point))


def resources_of_wildcards(resources: Mapping[str, Any]) -> dict[str, Any]:
    return {name: of_wildcards(value) for name, value in resources.items()}


def here_importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
