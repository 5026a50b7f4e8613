"""What Slurm charges for an ended job (scheduler.slurm.job_elapsed), from what the test Slurm
answered (tests/data/slurm: no slurmdbd, so plain `sacct` fails and `sacct -c` answers), and a
Slurm job's points priced at it through the PBS path's code (launch.ended)."""

import json
import subprocess

import pytest
from scalestudy.launch.ended import ended_batch_job
from scalestudy.model.point import Point
from scalestudy.scheduler import slurm

RECORDED = "slurm/slurm-22.05.8-local.json"


@pytest.fixture
def recorded(data_dir):
    return json.loads((data_dir / RECORDED).read_text())


@pytest.fixture(autouse=True)
def no_command_timed_out_yet(monkeypatch):
    monkeypatch.setattr(slurm, "timed_out", {})


def answering(answers: dict, asked: list | None = None):
    """A subprocess.run that answers each command as the recorded Slurm did (a missing one:
    not found), keeping what it was asked and with which timeout."""

    def run(argv, **kwargs):
        if asked is not None:
            asked.append((argv, kwargs.get("timeout")))
        source = "sacct-c" if argv[:2] == ["sacct", "-c"] else argv[0]
        if source not in answers:
            raise FileNotFoundError(argv[0])
        answer = answers[source]
        if isinstance(answer, Exception):
            raise answer
        assert argv == answer["argv"], argv
        return subprocess.CompletedProcess(argv, answer["returncode"], answer["stdout"], answer["stderr"])

    return run


@pytest.mark.parametrize(("case", "job_id", "seconds"), [("completed", "1", 3.0), ("cancelled", "2", 3.0),
                                                         ("timeout", "3", 87.0)])  # fmt: skip
def test_without_slurmdbd_the_job_completion_log_says_the_elapsed(recorded, case, job_id, seconds):
    """Plain sacct fails at once there ("Slurm accounting storage is disabled"); sacct -c
    answers; scontrol is not asked. The timed-out job ran 1:27 for a limit of 1 minute."""
    asked: list = []
    assert slurm.job_elapsed(job_id, run=answering(recorded[case], asked)) == seconds
    assert [argv[:2] for argv, _ in asked] == [["sacct", "-j"], ["sacct", "-c"]]
    assert all(timeout == slurm.COMMAND_TIMEOUT_S for _, timeout in asked)


@pytest.mark.parametrize(("case", "job_id", "seconds"), [("completed", "1", 3.0), ("timeout", "3", 87.0)])
def test_the_controller_says_it_where_neither_sacct_does(recorded, case, job_id, seconds):
    """No sacct on the path, or its completion log not written yet: scontrol's RunTime of the ended job."""
    without_log = {**recorded[case], "sacct-c": {**recorded[case]["sacct-c"], "stdout": ""}}
    assert slurm.job_elapsed(job_id, run=answering(without_log)) == seconds
    only_scontrol = {"scontrol": recorded[case]["scontrol"]}
    assert slurm.job_elapsed(job_id, run=answering(only_scontrol)) == seconds


def test_a_command_that_hangs_is_cut_off_the_next_source_asked_and_it_is_skipped_a_while(recorded, monkeypatch):
    """A hung slurmdbd: sacct times out once, and the next jobs of the round do not wait for it."""
    hung = {**recorded["completed"], "sacct": subprocess.TimeoutExpired(["sacct"], slurm.COMMAND_TIMEOUT_S)}
    asked: list = []
    assert slurm.job_elapsed("1", run=answering(hung, asked)) == 3.0
    assert slurm.job_elapsed("1", run=answering(hung, asked)) == 3.0
    assert [argv[:2] for argv, _ in asked] == [["sacct", "-j"], ["sacct", "-c"], ["sacct", "-c"]]
    later = slurm.timed_out[("sacct", "-j")] + slurm.SKIP_AFTER_TIMEOUT_S + 1
    monkeypatch.setattr(slurm.time, "monotonic", lambda: later)
    assert slurm.job_elapsed("1", run=answering(hung, asked)) == 3.0 and asked[3][0][:2] == ["sacct", "-j"]


def test_a_running_or_unknown_job_has_no_elapsed_yet(recorded):
    """The running job: sacct -c has no line, scontrol says RUNNING (RunTime 00:00:03 is not
    what it will be charged); the unknown one: scontrol exits 1."""
    assert slurm.job_elapsed("2", run=answering(recorded["running"])) is None
    assert slurm.job_elapsed("999999", run=answering(recorded["unknown"])) is None
    assert slurm.job_elapsed("1", run=answering({})) is None


def test_sacct_lines_of_a_slurmdbd():
    """sacct(1)'s forms: a cancelled job's state names who cancelled it, a requeued job has a
    line per run (the last that ended counts), another job's line is not this one's, a
    running one has no Elapsed to charge yet, and a job past a day has days."""
    assert slurm.from_sacct("41|CANCELLED by 0|00:02:05\n", "41") == 125.0
    assert slurm.from_sacct("42|REQUEUED|00:00:40\n42|COMPLETED|1-00:00:09\n", "42") == 86409.0
    assert slurm.from_sacct("420|COMPLETED|00:00:09\n", "42") is None
    assert slurm.from_sacct("43|RUNNING|00:00:09\n", "43") is None


def test_scontrol_of_another_job_or_without_a_time_says_nothing(recorded):
    line = recorded["completed"]["scontrol"]["stdout"]
    assert slurm.from_scontrol(line, "1") == 3.0
    assert slurm.from_scontrol(line, "11") is None
    assert slurm.from_scontrol(line.replace("RunTime=00:00:03", "RunTime=INVALID"), "1") is None


# ---------------------------------------------------------------- priced through launch.ended


def pingpong_point(**changes) -> Point:
    values = dict(study="pp", app="pingpong", scaling="strong", nodes=1, ranks_per_node=2, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                  walltime="00:04:00", params={}, mpi_flags={}, nccl_env={})  # fmt: skip
    values.update(changes)
    return Point(**values)


def launched(path, wall_s, **more):
    """A record as the runner writes it: the launch's own time and estimate (Gadi's normal queue:
    2 SU per core-hour x 2 cores)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    used = {"walltime_used_s": wall_s, "service_units": 2 * 2 * wall_s / 3600, "service_units_source": "estimated"}
    path.write_text(json.dumps({"status": "ok", "figures": {"t": 1.0}, "resources": used, **more}))


def test_a_slurm_job_reported_done_is_charged_its_elapsed_with_the_launch_beside_it(recorded, tmp_path):
    metrics = tmp_path / "p1" / "metrics.json"
    launched(metrics, 1.2)
    job = {"metrics": str(metrics), "point": pingpong_point().to_json(), "walltime_s": 240, "queue": None,
           "cluster": "gadi", "submitted": 0.0}  # fmt: skip
    ran = lambda: slurm.job_elapsed("3", run=answering(recorded["timeout"]))  # noqa: E731
    assert ended_batch_job("3", job, "the batch job ended, reported done", ran)
    used = json.loads(metrics.read_text())["resources"]
    assert used["batch_walltime_used_s"] == 87.0 and used["walltime_used_s"] == 1.2
    assert used["service_units"] == pytest.approx(2 * 2 * 87 / 3600, abs=1e-6)
    assert used["service_units_source"] == "scheduler"
    assert used["service_units_launch"] == pytest.approx(2 * 2 * 1.2 / 3600, abs=1e-9)


def test_a_slurm_packs_elapsed_is_split_between_its_points_and_adds_up(tmp_path):
    pack = [{"metrics": str(tmp_path / f"p{n}" / "metrics.json"), "point": pingpong_point(repeat=n).to_json(),
             "walltime_s": 240, "queue": None} for n in (1, 2)]  # fmt: skip
    launched(tmp_path / "p1" / "metrics.json", 3.0)
    launched(tmp_path / "p2" / "metrics.json", 1.0)
    assert ended_batch_job("9", {"pack": pack, "cluster": "gadi", "submitted": 0.0}, "done", lambda: 10.0)
    used = [json.loads((tmp_path / f"p{n}" / "metrics.json").read_text())["resources"] for n in (1, 2)]
    assert [u["batch_walltime_used_s"] for u in used] == [7.5, 2.5]
    assert sum(u["service_units"] for u in used) == pytest.approx(2 * 2 * 10 / 3600, abs=1e-6)


def test_without_an_elapsed_the_launchs_estimate_stays(tmp_path):
    metrics = tmp_path / "p1" / "metrics.json"
    launched(metrics, 1.2)
    job = {"metrics": str(metrics), "point": pingpong_point().to_json(), "walltime_s": 240, "queue": None,
           "cluster": "gadi", "submitted": 0.0}  # fmt: skip
    before = metrics.read_text()
    assert ended_batch_job("3", job, "the batch job ended, reported done", lambda: None)
    assert metrics.read_text() == before


def test_slurm_is_not_asked_about_a_job_none_of_whose_points_started(tmp_path):
    """Cancelled while queued (or never submitted): nothing to price, no command run."""
    job = {"metrics": str(tmp_path / "p1" / "metrics.json"), "point": pingpong_point().to_json(), "walltime_s": 240,
           "queue": None, "cluster": "gadi", "submitted": 0.0}  # fmt: skip

    def asked():
        raise AssertionError("the scheduler was asked about a job that never started")

    assert not ended_batch_job("5", job, "CANCELLED", asked)
