"""A batch job the executor reports ended, as snakemake_adapter hands it to the plan: a job
reported done is priced before Snakemake is told (Slurm: its Elapsed), a failed one keeps its
records; nothing of this holds Snakemake's status thread once it is cancelling its jobs, and an
error in it never reaches Snakemake. The real executor and Slurm are in
tests/integration/test_scheduler_integration.py."""

from types import SimpleNamespace

from scalestudy.planning.snakemake_adapter import SnakemakeRun


class Executor:
    """The remote executor's reporting surface, as Snakemake's status thread and scheduler call it."""

    def __init__(self):
        self.reported: list[tuple[str, str]] = []
        self.wait = True

    def report_job_success(self, job_info):
        self.reported.append(("done", job_info.external_jobid))

    def report_job_error(self, job_info, msg=None, **kwargs):
        self.reported.append(("failed", job_info.external_jobid))

    def cancel(self):
        self.reported.append(("cancel", ""))
        self.wait = False


def job_info(job_id: str, *points: str, rule: str = "run_pingpong"):
    jobs = [SimpleNamespace(rule=SimpleNamespace(name=rule), wildcards=SimpleNamespace(study="s", point=point))
            for point in points]  # fmt: skip
    if len(jobs) == 1:
        job = SimpleNamespace(is_group=lambda: False, **vars(jobs[0]))
    else:
        job = SimpleNamespace(is_group=lambda: True, jobs=jobs)
    return SimpleNamespace(job=job, external_jobid=job_id)


def wrapped(done_too=True, answer=True):
    executor = Executor()
    workflow = SimpleNamespace(scheduler=SimpleNamespace(_executor=executor), local_exec=False)
    calls = []

    def record(points, job_id, why, since, priced):
        calls.append((points, job_id, priced))
        if isinstance(answer, Exception):
            raise answer
        return answer

    SnakemakeRun(workflow).keep_records_of_failed_batch_jobs(["run_pingpong"], record, done_too)
    return executor, calls


def test_a_job_reported_done_is_recorded_and_priced_before_snakemake_is_told():
    executor, calls = wrapped()
    executor.report_job_success(job_info("11", "p1"))
    executor.report_job_success(job_info("12", "p2", "p3"))
    assert calls == [([("s", "p1")], "11", True), ([("s", "p2"), ("s", "p3")], "12", True)]
    assert executor.reported == [("done", "11"), ("done", "12")]


def test_a_failed_job_with_records_is_reported_done_once_and_priced():
    executor, calls = wrapped()
    executor.report_job_error(job_info("13", "p1"), msg="SLURM-job '13' failed, SLURM status is: 'TIMEOUT'.")
    # Reported done through the executor's own report: the points are not recorded twice.
    assert calls == [([("s", "p1")], "13", True)] and executor.reported == [("done", "13")]


def test_without_done_too_or_for_other_rules_a_done_job_passes_as_it_is():
    executor, calls = wrapped(done_too=False)
    executor.report_job_success(job_info("14", "p1"))
    assert not calls and executor.reported == [("done", "14")]
    executor, calls = wrapped()
    executor.report_job_success(job_info("15", "report", rule="report"))
    assert not calls and executor.reported == [("done", "15")]


def test_once_snakemake_cancels_its_jobs_nothing_is_priced():
    """Ctrl-C: Snakemake calls the executor's cancel, then joins the status thread; a job reported
    done after that is passed on without asking the scheduler, a failed one is kept unpriced."""
    executor, calls = wrapped()
    executor.cancel()
    assert executor.reported == [("cancel", "")]
    executor.report_job_success(job_info("16", "p1"))
    executor.report_job_error(job_info("17", "p2"), msg="CANCELLED")
    assert calls == [([("s", "p2")], "17", False)]
    assert executor.reported[1:] == [("done", "16"), ("done", "17")]


def test_an_error_while_recording_never_reaches_snakemake():
    executor, calls = wrapped(answer=OSError("disk full"))
    executor.report_job_success(job_info("18", "p1"))
    executor.report_job_error(job_info("19", "p2"), msg="TIMEOUT")
    # As the executor made them: done stays done, failed stays failed (no record was kept).
    assert len(calls) == 2 and executor.reported == [("done", "18"), ("failed", "19")]


def test_a_local_run_is_left_as_it_is():
    executor = Executor()
    workflow = SimpleNamespace(scheduler=SimpleNamespace(_executor=executor), local_exec=True)
    SnakemakeRun(workflow).keep_records_of_failed_batch_jobs(["run_pingpong"], lambda *_: True, True)
    assert executor.report_job_success.__func__ is Executor.report_job_success
