"""PBS Pro (Gadi, ASPIRE 2A) behind Snakemake's cluster-generic executor.

- submit: the point's request -> one `qsub` line in the site's dialect;
- status: ONE `qstat -x -f -F json` for all active jobs per polling round, shared
  by every status call through a small cache, answered with exactly one word;
- the "Resource Usage on <date>" block Gadi appends to each job's output ->
  the run's `resources` (actual service units, memory, walltime);
- sidecar: deletes this run's unfinished jobs when Snakemake stops on an interrupt.

The status command runs once per job per round, so this module imports only what
the scheduler package needs (the sweep and cluster files); the runner and the apps
are imported only for a job that ended without metrics.json.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import study as study_loader
from ..config import clusters
from ..config.files import read_yaml, with_overrides
from ..config.requests import JobRequest, job_request, request_problems
from ..config.sweep import setting
from ..model.paths import BATCH_LOG, DEFAULT_SWEEP
from ..model.point import Point
from ..model.timefmt import hms

# ------------------------------------------------------------------ submit


def resource_list(request: JobRequest, dialect: str, jobfs_gb: float | None, storage: str | None) -> str:
    """Everything in ONE -l: PBS Pro accepts it, and Torque-style wrappers keep only the last -l."""
    if dialect == "gadi":
        items = [f"ncpus={request.ncpus}"]
        if request.ngpus:
            items.append(f"ngpus={request.ngpus}")
        items += [f"mem={request.mem_gb}GB", f"walltime={hms(request.walltime_s)}"]
        if jobfs_gb:
            items.append(f"jobfs={jobfs_gb:g}GB")
        if storage:
            items.append(f"storage={storage}")
        return ",".join(items)
    chunk = f"select={request.nodes}:ncpus={request.ncpus_per_node}"
    if request.ngpus_per_node:
        chunk += f":ngpus={request.ngpus_per_node}"
    chunk += f":mem={request.mem_per_node_gb}GB"
    items = [chunk]
    if request.nodes > 1:
        items.append("place=scatter")  # one chunk per node: the ranks per node the point asks for
    items.append(f"walltime={hms(request.walltime_s)}")
    return ",".join(items)


def qsub_command(
    request: JobRequest, cluster: clusters.Cluster, *, project: str, log_path: str, jobscript: str | None = None
) -> list[str]:
    """The qsub line of a request in the cluster's dialect, with its jobfs/storage defaults."""
    storage = cluster.storage.format(project=project) if cluster.storage else None
    argv = ["qsub", "-P", project, "-q", request.queue.submit_name]
    argv += ["-l", resource_list(request, cluster.pbs_dialect, cluster.jobfs_gb, storage)]
    argv += ["-N", request.name, "-j", "oe", "-o", log_path]
    return argv + ([jobscript] if jobscript else [])


def job_properties(jobscript: Path) -> dict[str, Any]:
    """Snakemake writes the job's properties (rule, params, resources, output) into the jobscript."""
    for line in jobscript.read_text().splitlines():
        if line.startswith("# properties = "):
            return json.loads(line[len("# properties = ") :])
    raise ValueError(f"{jobscript}: no '# properties = ' line (does the jobscript template keep {{properties}}?)")


def site_environment(cluster) -> str:
    """Lines that give the job the site's modules and environment (PBS passes none)."""
    lines = ["# site environment, from config/clusters/" + cluster.name + ".yaml"]
    # Values from config reach the job's shell quoted: one word each, nothing expanded.
    if cluster.modules:
        lines.append(shlex.join(["module", "load", *cluster.modules]))
    lines += [f"export {name}={shlex.quote(value)}" for name, value in cluster.job_env.items()]
    return "\n".join(lines) + "\n"


SITE_MARKER = "# scalestudy: site environment\n"


# ------------------------------------------------------------------ status


# job_state of a job that has ended (PBS Pro F/X; Torque and its wrappers C).
FINISHED_STATES = ("F", "X", "C")


@dataclass
class JobState:
    job_id: str
    state: str  # PBS job_state: Q, H, W, T, S, R, E, B, M, F, X (Torque: C for completed)
    exit_status: int | None = None
    comment: str = ""
    resources_used: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    def verdict(self) -> tuple[str, str]:
        """(one of running|success|failed, why)."""
        if not self.finished:
            return "running", f"job_state {self.state}"
        if self.exit_status is None:
            return "success", "finished (this qstat gives no exit status)"
        if self.exit_status == 0:
            return "success", "Exit_status 0"
        if self.exit_status < 0:
            # PBS itself ended the job (e.g. -29 walltime, -27 memory) or could not start it.
            why = PBS_EXIT_CODES.get(self.exit_status, "killed or not started by PBS")
        elif self.exit_status > 256:
            why = f"killed by signal {self.exit_status - 256}"
        else:
            why = "the job script failed"
        return "failed", f"Exit_status {self.exit_status}: {why}" + (f" ({self.comment})" if self.comment else "")


# PBS Pro's JOB_EXEC_* codes (pbs_error.h) that a scaling study meets.
PBS_EXIT_CODES = {
    -1: "job exec failed, before files, no retry",
    -2: "job exec failed, after files, no retry",
    -3: "job exec failed, will retry",
    -4: "job aborted on MoM initialization",
    -10: "job did not run: files could not be staged in",
    -11: "killed: ncpus sum over the limit",
    -23: "killed: ncpus burst over the limit",
    -24: "killed: vmem over the limit",
    -25: "killed: pmem over the limit",
    -27: "killed: mem over the limit",
    -28: "killed: cput over the limit",
    -29: "killed: walltime over the limit",
}


def states_from_json(text: str) -> dict[str, JobState]:
    """`qstat -x -f -F json` (PBS Pro)."""
    jobs = json.loads(text).get("Jobs") or {}
    states = {}
    for job_id, attrs in jobs.items():
        exit_status = attrs.get("Exit_status")
        states[job_id] = JobState(
            job_id=job_id,
            state=str(attrs.get("job_state", "?")),
            exit_status=None if exit_status is None else int(exit_status),
            comment=str(attrs.get("comment", "")),
            resources_used={k: str(v) for k, v in (attrs.get("resources_used") or {}).items()},
        )
    return states


def states_from_text(text: str) -> dict[str, JobState]:
    """`qstat -f` text (PBS Pro without JSON, Torque, Slurm's torque wrappers)."""
    states: dict[str, JobState] = {}
    current: JobState | None = None
    for line in text.splitlines():
        header = re.match(r"^Job Id:\s*(\S+)", line)
        if header:
            current = states.setdefault(header.group(1), JobState(header.group(1), "?"))
            continue
        pair = re.match(r"^\s+([\w.]+)\s*=\s*(.*)$", line)
        if current is None or not pair:
            continue
        key, value = pair.group(1), pair.group(2).strip()
        if key == "job_state":
            current.state = value
        elif key.lower() == "exit_status":
            current.exit_status = int(value)
        elif key == "comment":
            current.comment = value
        elif key.startswith("resources_used."):
            current.resources_used[key.split(".", 1)[1]] = value
    return states


UNKNOWN_JOB = re.compile(r"Unknown Job Id:?\s*(\S+)", re.IGNORECASE)


def query(job_ids: list[str], qstat: str = "qstat") -> tuple[dict[str, JobState], set[str]]:
    """One qstat for all jobs: (states, ids the server says it does not know).
    Raises OSError/CalledProcessError/ValueError on a failed query (the caller retries later)."""
    result = subprocess.run([qstat, "-x", "-f", "-F", "json", *job_ids], capture_output=True, text=True, timeout=60)
    if result.stdout.lstrip().startswith("{"):
        states = states_from_json(result.stdout)
    elif "Unknown option" in result.stderr or "invalid option" in result.stderr.lower():
        # Not PBS Pro (no -x / -F json): the plain full listing.
        result = subprocess.run([qstat, "-f", *job_ids], capture_output=True, text=True, timeout=60)
        states = states_from_text(result.stdout)
    else:
        states = {}
    unknown = {m.group(1) for m in UNKNOWN_JOB.finditer(result.stderr)}
    if result.returncode != 0 and not states and not unknown:
        raise subprocess.CalledProcessError(result.returncode, qstat, result.stdout, result.stderr)
    return states, unknown


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get("SCALESTUDY_PBS_CACHE", ".snakemake/scalestudy-pbs"))


@contextmanager
def locked(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def register(directory: Path, job_id: str, **facts: Any) -> None:
    """Remember a submitted job (its metrics.json, its point) for the status command."""
    with locked(directory), open(directory / "jobs.jsonl", "a") as registry:
        registry.write(json.dumps({"id": job_id, "submitted": time.time(), **facts}) + "\n")


def registry(directory: Path) -> dict[str, dict[str, Any]]:
    path = directory / "jobs.jsonl"
    if not path.exists():
        return {}
    return {entry["id"]: entry for entry in map(json.loads, path.read_text().splitlines()) if entry}


# A status call is the start of a new polling round when the job it asks about was
# already answered from the cache: then ONE qstat refreshes every active job, and the
# other calls of that round read the cache. These bound it in time as well.
MIN_REFRESH_S = 2.0
MAX_CACHE_AGE_S = 120.0
# A job qstat does not know (history expired, or never reached the server) is given up
# after this long.
UNKNOWN_GRACE_S = 300.0


def load_cache(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((directory / "states.json").read_text())
    except (OSError, ValueError):
        return {"refreshed": 0.0, "jobs": {}}


def save_cache(directory: Path, cache: dict[str, Any]) -> None:
    tmp = directory / ".states.json.tmp"
    tmp.write_text(json.dumps(cache))
    os.replace(tmp, directory / "states.json")


def refresh(cache: dict[str, Any], job_ids: Iterable[str], qstat: str, log) -> None:
    ids = sorted(set(job_ids))
    cache["refreshed"] = time.time()
    try:
        states, unknown = query(ids, qstat)
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        # A transient server problem must not abort a study: answer "running" and retry next round.
        log(f"scalestudy pbs status: qstat failed ({error!r}); jobs stay 'running' until it answers")
        return
    for job_id in ids:
        if job_id in states:
            state = states[job_id]
            cache["jobs"][job_id] = {
                "state": state.state,
                "exit_status": state.exit_status,
                "comment": state.comment,
                "served": False,
            }
        elif job_id in unknown:
            cache["jobs"][job_id] = {"state": "unknown", "served": False}


def status(job_id: str, directory: Path, qstat: str = "qstat", log=lambda msg: print(msg, file=sys.stderr)) -> str:
    """Exactly one of running|success|failed for `job_id`; never raises."""
    try:
        with locked(directory):
            cache = load_cache(directory)
            entry = cache["jobs"].get(job_id)
            age = time.time() - cache.get("refreshed", 0.0)
            stale = entry is None or age > MAX_CACHE_AGE_S or (entry.get("served") and age >= MIN_REFRESH_S)
            # The registry grows with every submission: it is read once per round (to find jobs
            # not yet polled) and for jobs that ended, not on every call of a round.
            jobs = registry(directory) if stale else None
            if stale:
                active = [
                    known for known, cached in cache["jobs"].items() if cached.get("state") not in FINISHED_STATES
                ]
                unseen = [known for known in jobs if known not in cache["jobs"]]
                refresh(cache, [*active, *unseen, job_id], qstat, log)
            entry = cache["jobs"].get(job_id)
            if entry is not None:
                entry["served"] = True
            save_cache(directory, cache)
            ended = entry is not None and entry["state"] in (*FINISHED_STATES, "unknown")
            job = (jobs if jobs is not None else registry(directory)).get(job_id) if ended else None
        return answer(job_id, entry, job, log)
    except Exception as error:  # a bug here must not abort the user's whole study
        log(f"scalestudy pbs status: {error!r}; answering 'running'")
        return "running"


def answer(job_id: str, entry: dict[str, Any] | None, job: dict[str, Any] | None, log) -> str:
    if entry is None:
        return "running"
    if entry["state"] == "unknown":
        submitted = (job or {}).get("submitted", 0.0)
        if time.time() - submitted < UNKNOWN_GRACE_S:
            return "running"
        verdict, why = "failed", "the PBS server no longer knows the job (history expired or deleted)"
    else:
        state = JobState(job_id, entry["state"], entry.get("exit_status"), entry.get("comment", ""))
        verdict, why = state.verdict()
    if verdict == "running":
        return verdict
    metrics = Path(job["metrics"]) if job and job.get("metrics") else None
    if metrics is None:
        return verdict
    if metrics.exists():
        # The point wrote its own record (ok or failed): that is the result, whatever the job's exit.
        return "success"
    # The job ended without a record (killed by PBS, node lost, job script error): the
    # point becomes failed data instead of a lost result.
    from ..launch.runner import record_lost_job

    record_lost_job(
        metrics, job.get("point"), job.get("walltime_s"), f"batch job {job_id} ended without metrics.json: {why}"
    )
    log(f"scalestudy pbs status: {job_id}: {why}; recorded as a failed point in {metrics}")
    return "success"


# ------------------------------------------------------------- commands


def generic_request(properties: Mapping[str, Any], cluster) -> JobRequest:
    """A job that is not a point (e.g. making an initial configuration): one node, its threads."""
    resources = properties.get("resources") or {}
    queue = cluster.queue(cluster.queue_name(0, resources.get("queue") or None))
    ncpus = max(1, int(properties.get("threads") or 1))
    mem_gb = resources.get("mem_mb")
    walltime_s = int(resources.get("runtime") or 60) * 60
    return JobRequest(
        name=re.sub(r"[^A-Za-z0-9._-]", "_", str(properties.get("rule", "job")))[:48],
        queue=queue,
        nodes=1,
        ncpus_per_node=ncpus,
        ngpus_per_node=0,
        mem_per_node_gb=max(1, int(mem_gb / 1024) if mem_gb else int(ncpus * queue.mem_per_core_gb)),
        walltime_s=walltime_s,
        point_walltime_s=walltime_s,
    )


def submit(jobscript: Path, cluster_name: str, qsub: str = "qsub", environ: Mapping[str, str] = os.environ) -> str:
    """Submit a Snakemake jobscript; returns the PBS job id. Raises SubmitRefused with one
    line per problem when the site would reject the job."""
    properties = job_properties(jobscript)
    params, resources = properties.get("params") or {}, properties.get("resources") or {}
    planned_for = params.get("cluster") or cluster_name
    if planned_for != cluster_name:
        # `--config k=v` on the command line replaces the profile's `config: [cluster=...]`.
        raise SubmitRefused(
            [
                f"cluster: the workflow planned this job for {planned_for!r} but the profile submits to "
                f"{cluster_name!r}; with --config on the command line, add cluster={cluster_name}"
            ]
        )
    cluster = clusters.load(cluster_name)
    problems = []
    project = cluster.project_name(environ)
    if not project:
        problems.append(f"config/clusters/{cluster.name}.yaml: project is not set and $PROJECT is empty")
    outputs = properties.get("output") or []
    point = None
    if "point" in params:
        point = Point.from_json(params["point"], int(resources["walltime_s"]), resources.get("queue") or None)
        problems += request_problems(point, cluster)
        request = job_request(point, cluster)
    else:
        request = generic_request(properties, cluster)
    if problems:
        raise SubmitRefused(problems)
    run_dir = Path(outputs[0]).parent if outputs else Path(".snakemake/scalestudy-pbs/logs")
    run_dir.mkdir(parents=True, exist_ok=True)
    script = jobscript.read_text()
    if SITE_MARKER in script:
        jobscript.write_text(script.replace(SITE_MARKER, site_environment(cluster), 1))
    argv = qsub_command(
        request, cluster, project=project, log_path=str((run_dir / BATCH_LOG).resolve()), jobscript=str(jobscript)
    )
    argv[0] = qsub
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise SubmitRefused([f"qsub exited with {result.returncode}: {result.stderr.strip() or result.stdout.strip()}"])
    job_id = result.stdout.strip().splitlines()[0].strip()
    register(
        cache_dir(environ),
        job_id,
        run=environ.get(SIDECAR_VARS) or None,
        metrics=next((o for o in outputs if o.endswith("metrics.json")), None),
        point=params.get("point"),
        walltime_s=resources.get("walltime_s"),
        queue=resources.get("queue"),
    )
    return job_id


class SubmitRefused(Exception):
    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


# ------------------------------------------------------------- sidecar

# Snakemake's remote executors take the active jobs out of their list for the length of
# each status round; a Ctrl-C inside that window calls the cancel command with no job at
# all, and the jobs keep running (and charging). The sidecar closes that gap: Snakemake
# starts it once per run, hands the first line it prints (a run id) to every submit call
# in $SNAKEMAKE_CLUSTER_SIDECAR_VARS, and terminates it on shutdown. Then it deletes the
# run's jobs that have no metrics.json yet. After a normal end every job has its record,
# so nothing is deleted.
SIDECAR_VARS = "SNAKEMAKE_CLUSTER_SIDECAR_VARS"
CANCELLED = "cancelled"  # job ids the cancel command already passed to qdel
QDEL_LOG = "qdel.log"


def unfinished_jobs(directory: Path, run: str) -> list[str]:
    """This run's jobs that may still be queued or running: no metrics.json, not seen
    finished by the status command, not already passed to qdel."""
    try:
        cancelled = set((directory / CANCELLED).read_text().split())
    except OSError:
        cancelled = set()
    seen = load_cache(directory)["jobs"]
    return [
        job_id
        for job_id, job in registry(directory).items()
        if job.get("run") == run
        and job_id not in cancelled
        and seen.get(job_id, {}).get("state") not in FINISHED_STATES
        and not (job.get("metrics") and Path(job["metrics"]).exists())
    ]


def delete_jobs(directory: Path, job_ids: list[str], qdel: str = "qdel") -> None:
    """One qdel for all of them; what it says goes to qdel.log."""
    if not job_ids:
        return
    with open(directory / CANCELLED, "a") as cancelled:
        cancelled.write("".join(f"{job_id}\n" for job_id in job_ids))
    with open(directory / QDEL_LOG, "a") as log:
        log.write(f"sidecar: qdel {' '.join(job_ids)}\n")
        log.flush()
        try:
            subprocess.run([qdel, *job_ids], stdout=log, stderr=log, stdin=subprocess.DEVNULL, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as error:
            log.write(f"sidecar: {qdel} failed: {error}\n")


def sidecar(directory: Path, qdel: str = "qdel", poll_s: float = 5.0) -> int:
    """Print a run id, wait for Snakemake to terminate us, then delete the run's unfinished jobs."""
    directory.mkdir(parents=True, exist_ok=True)
    run = uuid.uuid4().hex
    # Ctrl-C reaches the whole foreground process group; Snakemake decides what happens
    # and then terminates this process, which is the moment to act.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    print(run, flush=True)
    parent = os.getppid()
    while signal.sigtimedwait({signal.SIGTERM}, poll_s) is None:
        if os.getppid() != parent:
            return 0  # Snakemake was killed outright: leave its jobs alone
    delete_jobs(directory, unfinished_jobs(directory, run), qdel)
    return 0


def plan(profile: Path, extra_configfiles: list[str] | None = None) -> list[str]:
    """The exact qsub line of every point of the study a profile would run (dry mode)."""
    profile_config = read_yaml(profile / "config.v8+.yaml")
    from ..config.files import load_files

    files = [*(profile_config.get("configfiles") or [DEFAULT_SWEEP]), *(extra_configfiles or [])]
    config = with_overrides(load_files(*files), profile_config.get("config") or [])
    loaded = study_loader.load(config)
    cluster = loaded.cluster
    project = cluster.project_name() or "$PROJECT"
    results = setting(config, "results_dir")
    lines = []
    for point in loaded.sweep.points:
        problems = request_problems(point, cluster)
        if problems:
            lines += [f"# refused: {problem}" for problem in problems]
            continue
        argv = qsub_command(
            job_request(point, cluster),
            cluster,
            project=project,
            log_path=f"{results}/{point.study}/runs/{point.id}/{BATCH_LOG}",
            jobscript="<jobscript>",
        )
        lines.append(shlex.join(argv))
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m scalestudy.scheduler.pbs")
    commands = parser.add_subparsers(dest="command", required=True)
    sub = commands.add_parser("submit", help="qsub a Snakemake jobscript; prints the job id")
    sub.add_argument("--cluster", required=True)
    sub.add_argument("jobscript", type=Path)
    stat = commands.add_parser("status", help="print running|success|failed for a job id")
    stat.add_argument("job_id")
    commands.add_parser("sidecar", help="Snakemake's sidecar: deletes the run's unfinished jobs on an interrupt")
    dry = commands.add_parser("plan", help="print the qsub line of every point (nothing is submitted)")
    dry.add_argument("--profile", type=Path, required=True)
    dry.add_argument("--configfile", nargs="*", default=[])
    args = parser.parse_args(argv)
    if args.command == "status":
        print(status(args.job_id, cache_dir()))
        return 0
    if args.command == "sidecar":
        return sidecar(cache_dir(), os.environ.get("SCALESTUDY_QDEL", "qdel"))
    if args.command == "plan":
        print("\n".join(plan(args.profile, args.configfile)))
        return 0
    try:
        print(submit(args.jobscript, args.cluster))
    except SubmitRefused as refused:
        for problem in refused.problems:
            print(f"scalestudy: refused before submission: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
