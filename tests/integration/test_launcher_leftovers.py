"""What a killed launcher leaves behind does not stop a later launch.

Open MPI 5 keeps its session directory in $TMPDIR/ompi.<mpirun's pid>. An mpirun killed
outright (SIGKILL: after the runner's stop grace, PBS after kill_delay) leaves it there, and
a later mpirun given the same pid cannot start: "The PMIx server's listener thread failed to
start", exit 213. CI failed on it (a ping-pong run of test_hostile_workflow.py, pid_max
32768 here). `runner.execute` gives each launch a TMPDIR of its own.

The reference is Open MPI itself: a plain launch under the dead launcher's pid must fail
first, or the test has not met the condition and skips. The pid is handed out by writing
the kernel's last pid (root only), tried again when another process took it first. The
failed launch removes the directory as it exits, so a copy of it is put back before each.
"""

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from points import pingpong_point
from scalestudy.apps.registry import app_for
from scalestudy.config import clusters
from scalestudy.config.clusters import MpiLauncher
from scalestudy.launch import runner
from scalestudy.model.paths import Layout

MPIRUN = str(Path(sys.executable).parent / "mpirun")
LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
TRIES = 20
# The rank prints its PMIx namespace, prterun-<host>-<mpirun's pid>@1.
PRINT_NAMESPACE = [sys.executable, "-c", "import os; print(os.environ['PMIX_NAMESPACE'])"]


def mpirun(*command: str) -> list[str]:
    return [MPIRUN, "-np", "1", "--oversubscribe", "--allow-run-as-root", *command]


def next_pid_is(pid: int) -> None:
    LAST_PID.write_text(str(pid - 1))


@pytest.fixture
def dead_launcher(tmp_path, tmp_path_factory):
    """(pid, put back): an mpirun killed outright, and what puts its session directory back
    in tmp_path as the kill left it."""
    if not os.access(LAST_PID, os.W_OK):
        pytest.skip("handing a launcher a chosen pid needs root (/proc/sys/kernel/ns_last_pid)")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    dead = subprocess.Popen(mpirun("sleep", "60"), env=env, process_group=0, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    session = tmp_path / f"ompi.{dead.pid}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (session.is_dir() and any(session.glob("pmix.*"))):
        time.sleep(0.1)
    os.killpg(dead.pid, signal.SIGKILL)
    dead.wait()
    if not session.is_dir():
        pytest.skip(f"this MPI keeps no session directory at $TMPDIR/ompi.<pid> ({MPIRUN})")
    kept = tmp_path_factory.mktemp("left-behind") / session.name
    shutil.copytree(session, kept)

    def put_back() -> None:
        shutil.rmtree(session, ignore_errors=True)
        shutil.copytree(kept, session)

    return dead.pid, put_back


def launch_as(pid: int, launch, put_back) -> tuple[int, object]:
    """launch() with the kernel's next pid set to `pid`, the dead launcher's directory put
    back first; again until the launcher got that pid (another process may take it first)."""
    started: list[int] = []
    popen = subprocess.Popen

    def recorded(*args, **kwargs):
        process = popen(*args, **kwargs)
        started.append(process.pid)
        return process

    for _ in range(TRIES):
        put_back()
        next_pid_is(pid)
        subprocess.Popen = recorded
        try:
            result = launch()
        finally:
            subprocess.Popen = popen
        if started and started[0] == pid:
            return pid, result
        started.clear()
    pytest.skip(f"pid {pid} was taken by another process {TRIES} times")


def test_a_dead_launchers_session_directory_stops_a_plain_launch_but_not_ours(tmp_path, dead_launcher):
    pid, put_back = dead_launcher
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    command = mpirun(*PRINT_NAMESPACE)
    _, plain = launch_as(pid, lambda: subprocess.run(command, env=env, capture_output=True, text=True), put_back)
    # Open MPI's own behaviour, the condition of this test.
    assert plain.returncode == 213, plain.stdout + plain.stderr
    assert "listener thread failed to start" in plain.stdout + plain.stderr

    log = tmp_path / "stdout.log"
    _, ours = launch_as(pid, lambda: runner.execute(command, log, env, timeout_s=120, own_tmpdir=True), put_back)
    assert ours.exit_code == 0, log.read_text()
    assert f"-{pid}@" in log.read_text()  # the namespace names the launcher's pid
    # The launch's own TMPDIR went with it; the dead launcher's directory is as it was.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"ompi.{pid}", "stdout.log"])


def test_each_launch_gets_a_tmpdir_of_its_own_removed_when_it_ends(tmp_path):
    log = tmp_path / "stdout.log"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    ran = runner.execute(["sh", "-c", 'echo "$TMPDIR"; touch "$TMPDIR/left"'], log, env, timeout_s=60,
                         own_tmpdir=True)  # fmt: skip
    assert ran.exit_code == 0
    own = Path(log.read_text().strip())
    assert own.parent == tmp_path and own.name.startswith(runner.LAUNCH_TMPDIR_PREFIX)
    assert not own.exists()


def test_a_hydra_launch_keeps_the_jobs_tmpdir(tmp_path):
    """Hydra passes every variable to every node, where a TMPDIR made here does not exist."""
    log = tmp_path / "stdout.log"
    runner.execute(["sh", "-c", 'echo "$TMPDIR"'], log, {**os.environ, "TMPDIR": str(tmp_path)}, timeout_s=60)
    assert log.read_text().strip() == str(tmp_path)


def test_the_runner_gives_an_open_mpi_launch_a_tmpdir_of_its_own_and_hydra_none(tmp_path, monkeypatch):
    seen = []

    def execute(argv, log_path, env, timeout_s, own_tmpdir=False, other_hosts=()):
        seen.append(own_tmpdir)
        log_path.write_text("")
        return runner.Execution(0.1, 0)

    monkeypatch.setattr(runner, "execute", execute)
    point = pingpong_point()
    for flavour in ("openmpi", "mpich"):
        monkeypatch.setattr(type(app_for(point)), "mpi_flavour", flavour)
        launcher = MpiLauncher(flavour=flavour, launcher="true")
        cluster = dataclasses.replace(clusters.load("local"), mpi=launcher, other_mpis={})
        (tmp_path / flavour).mkdir()
        runner.measure(point, tmp_path / flavour, cluster, None, Layout(str(tmp_path)))
    assert seen == [True, False]


def test_under_slurm_the_launchs_folder_is_removed_on_the_other_nodes_with_the_jobs_tmpdir(tmp_path):
    """A fake srun records the step that removes a launch's folder on the other nodes: started
    after the launcher ended, with the job's TMPDIR (so that slurmstepd makes nothing)."""
    bin_dir, said = tmp_path / "bin", tmp_path / "srun.txt"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f'#!/bin/sh\necho "$TMPDIR $*" >> {said}\n')
    (bin_dir / "srun").chmod(0o755)
    job = tmp_path / "job"
    job.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(job), "SLURM_JOB_ID": "7"}
    log = tmp_path / "stdout.log"
    ran = runner.execute(["sh", "-c", f'echo "$TMPDIR"; test ! -e {said}'], log, env, timeout_s=60,
                         own_tmpdir=True, other_hosts=["n2"])  # fmt: skip
    assert ran.exit_code == 0, log.read_text()
    own = log.read_text().strip()
    assert said.read_text().splitlines() == [
        f"{job} --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist=n2 rm -rf -- {own}"
    ]
    assert not os.path.exists(own)
