"""Fault injection with real processes: a real mpirun and real ping-pong ranks are killed,
starved, misconfigured and cut off, and each run must end with the right category.
The launcher wrappers below change the environment of a real mpirun (a memory limit, a
truncated output copy, a disk filled up); they never fake its output."""

import errno
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from points import pingpong_point
from scalestudy.config.clusters import Cluster, MpiLauncher
from scalestudy.launch import runner
from scalestudy.launch.provenance import rank_lines
from scalestudy.launch.runner import run_point

MPIRUN = str(Path(sys.executable).parent / "mpirun")
LONG = {"iterations": 10**8, "warmup": 0, "max_bytes": 64}


def cluster(launcher: str = MPIRUN) -> Cluster:
    mpi = MpiLauncher(launcher=launcher, oversubscribe=True, allow_run_as_root=True)
    return Cluster("test", "none", 2, 0, 8.0, 0.0, mpi)


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wrapper(tmp_path: Path, name: str, body: str) -> str:
    """A launcher that runs the real mpirun with "$@" inside `body` (--version: just mpirun)."""
    script = tmp_path / name
    version = 'if [ "$*" = --version ]; then exec "$MPIRUN" --version; fi'
    script.write_text(f"#!/usr/bin/env bash\nMPIRUN={MPIRUN}\n{version}\n{body}\n")
    script.chmod(0o755)
    return str(script)


def metrics_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def test_a_rank_killed_mid_run_is_mpi_abort(tmp_path):
    run_dir = tmp_path / "run"
    result = {}
    worker = threading.Thread(target=lambda: result.update(run_point(pingpong_point(params=LONG), run_dir, cluster())))
    worker.start()
    deadline = time.monotonic() + 60
    ranks = []
    while len(ranks) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        log = run_dir / "stdout.log"
        ranks = rank_lines(log.read_text()) if log.exists() else []
    assert len(ranks) == 2, "the ranks never started"
    time.sleep(1)  # well inside the ping-pong loop
    os.kill(next(r["pid"] for r in ranks if r["rank"] == 1), signal.SIGKILL)
    worker.join(timeout=90)
    assert result["status"] == "failed" and result["category"] == "mpi_abort", result["reason"]
    # Either prterun reports the killed rank, or the survivor reports its peer gone first (its own
    # words, or prterun's that it called abort): which line comes first is a race.
    said = ("exited on signal 9", "unexpectedly disconnected", 'calling "abort"')
    assert any(words in result["reason"] for words in said), result["reason"]
    assert result["resources"]["walltime_used_s"] < 50


def test_a_point_longer_than_its_walltime_is_stopped_as_walltime(tmp_path):
    point = pingpong_point(params=LONG, walltime="00:00:03")
    metrics = run_point(point, tmp_path / "run", cluster())
    assert metrics["category"] == "walltime" and metrics["status"] == "failed"
    assert 3 <= metrics["resources"]["walltime_used_s"] < 30
    # The ranks are gone: nothing of the point keeps the allocation busy.
    pids = [r["pid"] for r in rank_lines((tmp_path / "run" / "stdout.log").read_text())]
    deadline = time.monotonic() + 10
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pids and not any(map(running, pids))


def test_an_mpi_component_that_does_not_exist_is_mpi_init_error(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "FATAL_GRACE_S", 3.0)  # Open MPI 5 may hang after MPI_Init fails
    point = pingpong_point(mpi_flags={"btl": "nosuchcomponent"})
    metrics = run_point(point, tmp_path / "run", cluster())
    assert metrics["category"] == "mpi_init_error", metrics["reason"]
    assert metrics["reason"].startswith("MPI failed to start")


def test_a_rank_out_of_host_memory_is_out_of_memory(tmp_path):
    # 1 GB of address space per process, and a 1 GB message: the ranks' buffers cannot exist.
    launcher = wrapper(tmp_path, "mpirun-1gb", 'ulimit -v 1000000\nexec "$MPIRUN" "$@"')
    params = {"iterations": 2, "warmup": 0, "min_bytes": 10**9, "max_bytes": 10**9}
    metrics = run_point(pingpong_point(params=params), tmp_path / "run", cluster(launcher))
    assert metrics["category"] == "out_of_memory", metrics["reason"]
    assert "MemoryError" in metrics["reason"]


def test_a_log_cut_off_mid_line_is_unparseable_output(tmp_path):
    # The job ends well but the last 40 bytes of its output are lost (a quota, a lost copy):
    # the log ends inside the closing summary line. (The hosts' watcher lines, printed once
    # their ranks ended, come after it: left out, so that the cut falls in the app's output.)
    body = (
        'full=$(mktemp)\n"$MPIRUN" "$@" > "$full" 2>&1\ncode=$?\n'
        'grep -v "^scalestudy-host " "$full" | head -c -40\nrm -f "$full"\nexit $code'
    )
    metrics = run_point(pingpong_point(), tmp_path / "run", cluster(wrapper(tmp_path, "mpirun-cut", body)))
    log = (tmp_path / "run" / "stdout.log").read_text()
    assert "scalestudy-pingpong {" in log and not log.endswith("\n")
    assert metrics["exit_code"] == 0
    assert metrics["category"] == "unparseable_output", metrics["reason"]


def test_a_bad_nccl_value_is_refused_before_anything_runs(tmp_path, repo):
    # No NCCL runs on a CPU machine; NCCL itself would ignore the value with a warning
    # (the setting silently not taking effect), so scalestudy refuses it up front.
    sweep = {
        "cluster": "local",
        "nccl_env_sets": {"bad": {"NCCL_IB_DISABLE": "maybe"}},
        "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "nccl_env": ["bad"]}},
    }
    (tmp_path / "bad.json").write_text(json.dumps(sweep))
    command = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(repo / "profiles/local"), "--configfile", str(tmp_path / "bad.json")]  # fmt: skip
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "sweep error: nccl_env_sets.bad.NCCL_IB_DISABLE: 'maybe' is not allowed; allowed: 0, 1" in run.stderr
    assert not (tmp_path / "results" / "pp").exists()


class FullDiskFile(io.StringIO):
    """A file that takes half of what is written, then fails as a full disk does."""

    def write(self, text):
        super().write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_metrics_write_that_fails_leaves_no_half_file(tmp_path, monkeypatch):
    real_open = open

    def open_full(path, mode="r", **kwargs):
        real_open(path, mode, **kwargs).close()  # the partial file exists on disk
        return FullDiskFile()

    monkeypatch.setattr(runner, "open", open_full, raising=False)
    with pytest.raises(OSError, match="No space left"):
        runner.write_atomically(tmp_path / "metrics.json", json.dumps({"status": "ok"}))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    try:
        command = ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)]
        subprocess.run(command, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {error}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_at_the_metrics_write_fails_the_job_and_leaves_no_file(tmp_path, tiny_disk, monkeypatch, capsys):
    # The run ends well, then the disk fills up (another job, the user's quota) before
    # metrics.json is written: the job fails, no partial file, the point reruns next time.
    from scalestudy import __main__ as cli

    body = f'"$MPIRUN" "$@"\ncode=$?\ncat /dev/zero > {tiny_disk}/filler 2>/dev/null\nexit $code'
    launcher = wrapper(tmp_path, "mpirun-fill", body)
    monkeypatch.setattr(cli.clusters, "load", lambda name: cluster(launcher))
    metrics_path = tiny_disk / "run" / "metrics.json"
    code = cli.main(["run-point", "--point", pingpong_point().to_json(), "--walltime-s", "60", "--cluster", "test",
                     "--metrics", str(metrics_path)])  # fmt: skip
    assert code == 1
    assert "cannot write metrics.json: [Errno 28] No space left on device" in capsys.readouterr().err
    assert "scalestudy-pingpong" in (tiny_disk / "run" / "stdout.log").read_text()  # the run itself happened
    assert not metrics_path.exists()
    assert [p.name for p in metrics_path.parent.iterdir() if p.name.startswith(".")] == []
