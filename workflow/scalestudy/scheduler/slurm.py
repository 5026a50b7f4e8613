"""Slurm as a scalestudy scheduler (`Slurm`, interface.Scheduler). The workflow's Slurm jobs
go through Snakemake's Slurm executor plugin (profiles/slurm), which submits, polls and
cancels them itself, sized from the run rules' resources (planning.run_rules.point_resources)
and this backend's own (`job_resources`: `mpi`, and `slurm_extra` for hardware threads); the
workflow prices each job the plugin reports ended (`cost`, from planning.run_rules). The dry
plan prints the sbatch line of each point (`submit_line`).

Hardware threads (`hyperthreads: [true]`, a cluster file's `threads_per_core` > 1) are asked
for as Slurm asks for them, `--threads-per-core=<threads_per_core>`: Slurm then gives the job
nodes with that many threads per core and lets its tasks use them, and refuses the job where
its nodes have fewer ("Requested node configuration is not available"): the refusal is Slurm's.

What Slurm charges for a batch job: its Elapsed (end minus start, the job's start-up
included), as PBS charges resources_used.walltime (launch.ended prices a point at it).

`job_elapsed` asks, in turn, the first source that shows the job ended:
- `sacct -j ID -X` (the accounting database, slurmdbd): what a site with accounting answers;
- `sacct -c -j ID -X` (the job completion log, JobCompType=jobcomp/filetxt): a Slurm without
  slurmdbd (the test Slurm; there plain `sacct` fails at once: "accounting storage is disabled");
- `scontrol show job ID` (JobState, RunTime), while the controller remembers the job (MinJobAge).
Each command is bounded in time; a failure, a timeout or an answer that does not show the job
ended moves on to the next source. Called from Snakemake's status thread (snakemake_adapter),
once per ended job: it must not hold it long. The worst case of one call is the three
timeouts; a command that timed out is not asked again for SKIP_AFTER_TIMEOUT_S (a slurmdbd that
hangs would otherwise cost every job of a status round its timeout).

Standard library, the interface and the model's time parser at the top: `cost` runs once per
ended batch job.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..model.timefmt import slurm_seconds
from .interface import Scheduler

# Slurm's job states that are final (sacct(1) "JOB STATE CODES"); sacct writes a cancelled
# job's as "CANCELLED by <uid>".
ENDED_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "REVOKED", "TIMEOUT",
})  # fmt: skip
# Each command's bound: the status thread waits for it (and Snakemake's shutdown for that thread).
COMMAND_TIMEOUT_S = 5.0
# A command that timed out is skipped this long (per process: Snakemake's run).
SKIP_AFTER_TIMEOUT_S = 300.0
# When each command (by its first two words) last timed out, time.monotonic().
timed_out: dict[tuple[str, ...], float] = {}
# JobID, State, Elapsed of the job's allocation alone (-X: not its steps), parsable, no header.
SACCT_FIELDS = ["-X", "-n", "-P", "-o", "JobID,State,Elapsed"]


def sources(job_id: str) -> list[tuple[list[str], Callable[[str, str], float | None]]]:
    """The commands `job_elapsed` asks, in order, each with the parser of its output."""
    return [
        (["sacct", "-j", job_id, *SACCT_FIELDS], from_sacct),
        (["sacct", "-c", "-j", job_id, *SACCT_FIELDS], from_sacct),
        (["scontrol", "-o", "show", "job", job_id], from_scontrol),
    ]


def ended(state: str) -> bool:
    return state.split(" ")[0].rstrip("+") in ENDED_STATES


def from_sacct(text: str, job_id: str) -> float | None:
    """Elapsed seconds from `sacct ... -X -n -P -o JobID,State,Elapsed` lines, if one is the job
    and ended (a requeued job has a line per run: the last one that ended)."""
    found = None
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) >= 3 and fields[0] == job_id and ended(fields[1]):
            try:
                found = slurm_seconds(fields[2])
            except ValueError:
                continue
    return found


def from_scontrol(text: str, job_id: str) -> float | None:
    """RunTime seconds from `scontrol -o show job ID` (one line per job), if the job ended."""
    for line in text.splitlines():
        fields = dict(re.findall(r"(?:^|\s)(\w+)=(\S*)", line))
        if fields.get("JobId") == job_id and ended(fields.get("JobState", "")):
            try:
                return slurm_seconds(fields.get("RunTime", ""))
            except ValueError:
                return None
    return None


def job_elapsed(job_id: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> float | None:
    """Seconds Slurm charges for the ended job `job_id` (see the module's docstring); None when
    no source shows it ended. Never raises."""
    return first_answer(sources(str(job_id)), str(job_id), run)


def first_answer(asked: list[tuple[list[str], Callable[[str, str], Any]]], job_id: str, run) -> Any:
    """The first parsed answer (not None) of the commands `asked`, in order: a command that
    fails or times out moves on to the next (and one that timed out is skipped for
    SKIP_AFTER_TIMEOUT_S). None when no command answers."""
    for argv, parse in asked:
        command = tuple(argv[:2])
        if time.monotonic() - timed_out.get(command, -SKIP_AFTER_TIMEOUT_S) < SKIP_AFTER_TIMEOUT_S:
            continue
        try:
            result = run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            timed_out[command] = time.monotonic()
            continue
        except (OSError, subprocess.SubprocessError):
            continue
        if result.returncode == 0 and (answer := parse(result.stdout, job_id)) is not None:
            return answer
    return None


class Slurm(Scheduler):
    """Slurm (profiles/slurm: Snakemake's Slurm executor plugin). `run` runs the commands
    (subprocess.run; tests give a fake)."""

    scheduler = "slurm"
    prices_ended_jobs = True

    def __init__(
        self,
        cluster: Any = None,
        environ: Mapping[str, str] = os.environ,
        run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    ):
        super().__init__(cluster, environ)
        self.run = run

    def job_resources(self) -> dict[str, Callable[[Any], Any]]:
        """The plugin's `mpi` (`mpi_launcher`) and, for a point on hardware threads, its
        `slurm_extra` (what the plugin adds to sbatch as it is: `hardware_threads`)."""
        return {"mpi": mpi_launcher, "slurm_extra": lambda point: hardware_threads(point, self.cluster)}

    def submit_line(self, request: Any, *, log_path: str, jobscript: str) -> list[str]:
        """The sbatch line the plugin's submission amounts to (`sbatch_command`)."""
        return sbatch_command(request, log_path=log_path, jobscript=jobscript, cluster=self.cluster)

    def cost(self, job_id: str) -> float | None:
        """`job_elapsed`: the job's Elapsed. Called by planning.run_rules.record_ended_batch_job
        (Snakemake's status thread, once per ended job)."""
        return job_elapsed(job_id, self.run)


def mpi_launcher(point: Any) -> str | None:
    """The plugin's `mpi` resource: a multi-rank point runs mpirun itself in the allocation
    (no srun -n1 wrapper, which would hold the CPUs mpirun's daemons need). The plugin
    refuses `mpi` with one task, so a 1-rank point runs inside `srun -n1`: its launcher then
    starts no srun of its own (MPICH's Hydra forks a 1-node point's proxy,
    launch.command.hydra_command)."""
    return "mpirun" if point.ranks > 1 else None


def hardware_threads(point: Any, cluster: Any) -> str | None:
    """sbatch's words for a point on hardware threads: `--threads-per-core=N`, N the cluster
    file's threads_per_core (a whole number: nothing of the file reaches the plugin's shell
    but digits); None for a point on cores."""
    if not point.hyperthreads:
        return None
    return f"--threads-per-core={int(cluster.threads_per_core)}"


def sbatch_command(request: Any, *, log_path: str, jobscript: str, cluster: Any = None) -> list[str]:
    """The sbatch line of a request (a config.requests.JobRequest): what the profile's plugin
    asks for a point's job (nodes, tasks = ranks, cpus per task = threads per rank, its time
    limit, its memory per node), GPUs per node where it has some, hardware threads where the
    point runs on them (`cluster`'s threads per core); no partition or account, as the profile
    gives the plugin none (slurm_partition: "")."""
    from ..model.timefmt import hms

    argv = ["sbatch", "--parsable", "--job-name", request.name, "--output", log_path]
    argv += [f"--nodes={request.nodes}", f"--ntasks={request.nodes * request.ranks_per_node}"]
    argv += [f"--cpus-per-task={request.threads_per_rank}", f"--time={hms(request.walltime_s)}"]
    # The request's GB is 2^30 bytes (config.clusters); Slurm's G suffix is 1024 MiB: the same.
    argv += [f"--mem={request.mem_per_node_gib}G"]
    if request.ngpus_per_node:
        argv.append(f"--gpus-per-node={request.ngpus_per_node}")
    if request.hyperthreads and cluster is not None:
        argv.append(f"--threads-per-core={int(cluster.threads_per_core)}")
    return [*argv, jobscript]
