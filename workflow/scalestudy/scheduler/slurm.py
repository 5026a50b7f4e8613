"""Slurm as a scalestudy scheduler (`Slurm`, interface.Scheduler). The workflow's Slurm jobs
go through Snakemake's Slurm executor plugin (profiles/slurm), which submits, polls and
cancels them itself; the workflow calls `cost` (planning.run_rules, once per ended job) and
the runner reads the allocation's hosts (launch.command: `hosts` does the same). `submit`,
`status` and `cancel` do what the plugin does, with the same commands, for a caller outside
Snakemake (tests, a user's script).

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

import dataclasses
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..model.timefmt import slurm_seconds
from .interface import FAILED, RUNNING, SUCCESS, Scheduler

# Slurm's job states that are final (sacct(1) "JOB STATE CODES"); sacct writes a cancelled
# job's as "CANCELLED by <uid>".
ENDED_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "REVOKED", "TIMEOUT",
})  # fmt: skip
# The ended states Snakemake's Slurm plugin reports as a failed job (its `fail_stati`); a
# PREEMPTED or REVOKED job may run again (requeued), so it is not failed yet.
FAILED_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "ERROR",
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


def state_sources(job_id: str) -> list[tuple[list[str], Callable[[str, str], str | None]]]:
    """The same commands, in the same order, each with the parser of the job's state."""
    parsers = {"sacct": state_from_sacct, "scontrol": state_from_scontrol}
    return [(argv, parsers[argv[0]]) for argv, _elapsed in sources(job_id)]


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


def state_from_sacct(text: str, job_id: str) -> str | None:
    """The job's state (its first word: `CANCELLED by 0` is CANCELLED) from sacct's lines, the
    last line of the job (a requeued job has one per run)."""
    found = None
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) >= 3 and fields[0] == job_id:
            found = fields[1].split(" ")[0].rstrip("+")
    return found


def state_from_scontrol(text: str, job_id: str) -> str | None:
    """The job's JobState from `scontrol -o show job ID`."""
    for line in text.splitlines():
        fields = dict(re.findall(r"(?:^|\s)(\w+)=(\S*)", line))
        if fields.get("JobId") == job_id and fields.get("JobState"):
            return fields["JobState"]
    return None


def job_elapsed(job_id: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> float | None:
    """Seconds Slurm charges for the ended job `job_id` (see the module's docstring); None when
    no source shows it ended. Never raises."""
    return first_answer(sources(str(job_id)), str(job_id), run)


def job_state(job_id: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str | None:
    """The job's Slurm state (PENDING, RUNNING, COMPLETED, ...) from the first source that
    lists the job; None when none does. Never raises."""
    return first_answer(state_sources(str(job_id)), str(job_id), run)


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

    def __init__(
        self,
        cluster: Any = None,
        environ: Mapping[str, str] = os.environ,
        run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    ):
        super().__init__(cluster, environ)
        self.run = run

    def submit(self, jobscript: Path) -> str:
        """sbatch of the jobscript, sized from the point's request (`sbatch_command`) as the
        plugin sizes a point's job from its resources (planning.run_rules.point_resources).
        The workflow's jobs are submitted by the plugin; nothing in the workflow calls this."""
        from ..config.requests import job_request, request_problems
        from ..model.paths import BATCH_LOG
        from .jobscript import SubmitRefused, generic_request, job_properties, jobscript_point
        from .pbs.dialects import site_rules

        properties = job_properties(jobscript)
        if properties.get("type") == "group":
            raise SubmitRefused([f"{jobscript}: a group job (a pack's): Snakemake's Slurm plugin submits those"])
        point = jobscript_point(properties)
        if point is not None:
            problems = request_problems(point, self.cluster, site_rules(self.cluster))
            if problems:
                raise SubmitRefused(problems)
            request = job_request(point, self.cluster)
        else:
            # One task with the job's threads, as the plugin asks for a job's `threads`.
            generic = generic_request(properties, self.cluster)
            request = dataclasses.replace(generic, threads_per_rank=generic.ncpus_per_node)
        outputs = properties.get("output") or []
        log = Path(outputs[0]).parent / BATCH_LOG if outputs else Path(f"{request.name}.%j.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = sbatch_command(request, log_path=str(log.resolve()), jobscript=str(jobscript))
        result = self.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise SubmitRefused(
                [f"sbatch exited with {result.returncode}: {result.stderr.strip() or result.stdout.strip()}"]
            )
        # --parsable: "<id>" or "<id>;<cluster>".
        return result.stdout.strip().splitlines()[0].split(";")[0]

    def status(self, job_id: str) -> str:
        """The plugin's answer from the same sources as `cost` (sacct, its job completion log,
        scontrol): COMPLETED is SUCCESS, a state of FAILED_STATES is FAILED, any other state
        RUNNING, and so is a job no source lists (as the plugin: not in the accounting yet).
        The workflow's jobs are polled by the plugin; nothing in the workflow calls this."""
        state = job_state(job_id, self.run)
        if state == "COMPLETED":
            return SUCCESS
        return FAILED if state in FAILED_STATES else RUNNING

    def cancel(self, job_ids: Sequence[str]) -> None:
        """`scancel ID...`, as the plugin cancels a run's jobs on an interrupt (bounded to
        COMMAND_TIMEOUT_S; what scancel says is not kept). The workflow's jobs are cancelled
        by the plugin; nothing in the workflow calls this."""
        if not job_ids:
            return
        try:
            self.run(["scancel", *job_ids], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError):
            return

    def cost(self, job_id: str) -> float | None:
        """`job_elapsed`: the job's Elapsed. Called by planning.run_rules.record_ended_batch_job
        (Snakemake's status thread, once per ended job)."""
        return job_elapsed(job_id, self.run)

    def hosts(self, environ: Mapping[str, str] = os.environ) -> list[str]:
        """$SLURM_JOB_NODELIST expanded (n[1-2] -> n1 n2), read back from `scontrol show job`
        where the plugin's job step removed it (launch.command.slurm_allocation): what the
        runner gives mpirun."""
        from ..launch.command import nodelist_hosts, slurm_allocation

        return nodelist_hosts({**environ, **slurm_allocation(environ)})


def sbatch_command(request: Any, *, log_path: str, jobscript: str) -> list[str]:
    """The sbatch line of a request (a config.requests.JobRequest): what the profile's plugin
    asks for a point's job (nodes, tasks = ranks, cpus per task = threads per rank, its time
    limit, its memory per node), GPUs per node where it has some; no partition or account,
    as the profile gives the plugin none (slurm_partition: "")."""
    from ..model.timefmt import hms

    argv = ["sbatch", "--parsable", "--job-name", request.name, "--output", log_path]
    argv += [f"--nodes={request.nodes}", f"--ntasks={request.nodes * request.ranks_per_node}"]
    argv += [f"--cpus-per-task={request.threads_per_rank}", f"--time={hms(request.walltime_s)}"]
    # The request's GB is 2^30 bytes (config.clusters); Slurm's G suffix is 1024 MiB: the same.
    argv += [f"--mem={request.mem_per_node_gib}G"]
    if request.ngpus_per_node:
        argv.append(f"--gpus-per-node={request.ngpus_per_node}")
    return [*argv, jobscript]
