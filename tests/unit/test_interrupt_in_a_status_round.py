"""Ctrl-C while Snakemake's status thread asks the scheduler about its batch jobs still cancels
them (snakemake_adapter.SnakemakeRun.cancel_the_jobs_of_a_status_round_too). The status loop and
`cancel` here are the remote executor's own (snakemake_interface_executor_plugins); the executor
plugin under them is a stub that records what it is asked to cancel. Against a real Slurm:
tests/integration/test_scheduler_integration.py (a ladder's queued rung cancelled by Ctrl-C)."""

import asyncio
import threading
from types import SimpleNamespace

from scalestudy.planning.snakemake_adapter import SnakemakeRun
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor


class Remote:
    """A remote executor: RemoteExecutor's status loop and cancel over a stub plugin, whose status
    round sees job "ended" done and is interrupted (Ctrl-C) when it reaches the job `interrupt_at`."""

    _wait_for_jobs = RemoteExecutor._wait_for_jobs
    cancel = RemoteExecutor.cancel

    def __init__(self, job_ids, interrupt_at=None):
        self.lock = threading.Lock()
        self.active_jobs = [SimpleNamespace(external_jobid=job_id) for job_id in job_ids]
        self.wait = True
        settings = SimpleNamespace(init_seconds_before_status_checks=0)
        self.workflow = SimpleNamespace(executor_plugin=SimpleNamespace(common_settings=settings))
        self.interrupt_at, self.cancelled, self.reported = interrupt_at, [], []

    async def check_active_jobs(self, active_jobs):
        for job_info in active_jobs:
            if job_info.external_jobid == self.interrupt_at:
                self.cancel()  # Ctrl-C: the main thread cancels while this round runs
            if job_info.external_jobid == "ended":
                self.report_job_success(job_info)
            else:
                yield job_info

    def cancel_jobs(self, active_jobs):
        self.cancelled.append([job_info.external_jobid for job_info in active_jobs])

    def report_job_success(self, job_info):
        self.reported.append(("done", job_info.external_jobid))

    def report_job_error(self, job_info, msg=None, **kwargs):
        self.reported.append(("failed", job_info.external_jobid))

    def shutdown(self):
        self.wait = False

    async def sleep(self):
        await asyncio.sleep(0)


def wrapped(remote: Remote) -> Remote:
    workflow = SimpleNamespace(scheduler=SimpleNamespace(_executor=remote), local_exec=False)
    SnakemakeRun(workflow).cancel_the_jobs_of_a_status_round_too()
    return remote


def test_ctrl_c_during_a_status_round_cancels_the_jobs_the_round_holds_but_not_those_it_saw_end():
    """Before, the round had taken every job off `active_jobs`: nothing was cancelled, and the
    queued jobs ran later, unattended."""
    remote = wrapped(Remote(["ended", "11", "12", "13"], interrupt_at="12"))
    asyncio.run(remote._wait_for_jobs())
    assert remote.cancelled == [["11", "12", "13"]]
    assert remote.reported == [("done", "ended")]


def test_ctrl_c_between_rounds_cancels_each_active_job_once():
    remote = wrapped(Remote(["ended", "21", "22"]))
    asyncio.run(one_round(remote))
    remote.cancel()
    assert remote.cancelled == [["21", "22"]]


async def one_round(remote: Remote) -> None:
    """A status round as RemoteExecutor's loop makes it: the jobs taken off, asked about, the
    ones still running put back."""
    with remote.lock:
        active_jobs = list(remote.active_jobs)
        remote.active_jobs.clear()
    still = [job_info async for job_info in remote.check_active_jobs(active_jobs)]
    with remote.lock:
        remote.active_jobs.extend(still)


def test_a_local_run_is_left_as_it_is():
    remote = Remote(["31"])
    workflow = SimpleNamespace(scheduler=SimpleNamespace(_executor=remote), local_exec=True)
    SnakemakeRun(workflow).cancel_the_jobs_of_a_status_round_too()
    assert remote.cancel_jobs.__func__ is Remote.cancel_jobs
