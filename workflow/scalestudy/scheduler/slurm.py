"""What Slurm charges for a batch job: its Elapsed (end minus start, the job's start-up
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

Standard library and the model's time parser only: it runs once per ended batch job.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable

from ..model.timefmt import slurm_seconds

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
    for argv, parse in sources(str(job_id)):
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
        if result.returncode == 0 and (seconds := parse(result.stdout, str(job_id))) is not None:
            return seconds
    return None
