"""Why a point failed: one category per failed run, read from what the run left behind
(exit code, the scheduler's record, the log), never guessed from the app.

Categories (metrics.json `category`; null when `status` is ok):

  walltime            the point ran past its walltime and was stopped (by us or the scheduler)
  out_of_memory       a rank ran out of host memory (MemoryError, bad_alloc, OOM killer) or GPU memory
  nccl_error          NCCL reported an error or a collective timed out
  mpi_init_error      MPI refused to start: unknown component in a flag set, MPI_Init failed,
                      the launcher could not open its PMIx socket
  node_failure        a node of the job was lost or could not be reached (the launcher lost its
                      daemon there, or could not start one): the reason names the host
  mpi_abort           the MPI job lost a rank (killed by a signal) or a rank called MPI_Abort
  app_error           the app exited non-zero for its own reasons (exit code + last lines in reason)
  dependency_missing  something the point needs is not installed (module, executable, launcher)
  mpi_mismatch        a rank's MPI library is not its launcher's MPI (pip's Open MPI 5 under a site
                      module's 4.1 mpirun, MPICH's library under Open MPI's): refused before the
                      launch where the rank's Python tells, else found in the ranks' own lines
  preflight_refusal   the point cannot work at this scale; nothing was run
  unparseable_output  the run ended but its output lacks the figures (e.g. a log cut off mid-line)
  scheduler_error     the job died without writing metrics.json (node lost, killed, cancelled),
                      was ended from outside while the point ran (the signal named: qdel,
                      scancel, an interrupted Snakemake), or its pack's job died before the
                      point started; walltime / out_of_memory instead when the scheduler says so
  scalestudy_error    a bug in scalestudy or an app parser; the run itself may have been fine

The order of the checks below is the order of precedence: a rank killed at the walltime
also "exits on a signal", and an out-of-memory rank also "loses" the MPI job; the
cause is reported, not the consequence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CATEGORIES = (
    "walltime",
    "out_of_memory",
    "nccl_error",
    "mpi_init_error",
    "node_failure",
    "mpi_abort",
    "app_error",
    "dependency_missing",
    "mpi_mismatch",
    "preflight_refusal",
    "unparseable_output",
    "scheduler_error",
    "scalestudy_error",
)
TAIL_LINES = 5
SIGNAL_EXIT = {137: "SIGKILL", 139: "SIGSEGV", 134: "SIGABRT", 143: "SIGTERM", -9: "SIGKILL", -15: "SIGTERM"}


@dataclass(frozen=True)
class Failure:
    category: str
    reason: str


def markers(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.M)


# What each failure looks like in a log (Open MPI 4/5, MPICH/Hydra, PyTorch, CUDA, NCCL, Python).
OUT_OF_MEMORY = markers(
    r"\bMemoryError\b",
    r"std::bad_alloc",
    r"CUDA out of memory",
    r"OutOfMemoryError",
    r"CUDA error: out of memory",
    r"Cannot allocate memory",
    r"oom[-_ ]kill",
    r"Out of memory",
    r"exceeded (?:its |the )?memory limit",
)
NCCL_ERROR = markers(
    r"NCCL WARN",
    r"\bNCCL error\b",
    r"ncclSystemError|ncclInternalError|ncclInvalidArgument|ncclInvalidUsage|ncclUnhandledCudaError|ncclRemoteError",
    r"Watchdog caught collective operation timeout",
    r"NCCL communicator was aborted",
    r"ProcessGroupNCCL.*(?:timeout|Timeout|error)",
)
DEPENDENCY_MISSING = markers(
    r"ModuleNotFoundError: No module named",
    r"ImportError: ",
    r"error while loading shared libraries",
    r": command not found",
    r"scalestudy-rank: cannot run ",
    r"^cannot start .*No such file",
    r"was unable to find the executable",
    r"could not access or execute an executable",
)
MPI_INIT_ERROR = markers(
    r"A requested component was not found",
    r"MPI_INIT failed",
    r"An error occurred in MPI_Init",
    r"MPI_Init(?:_thread)? failed",
    r"ompi_mpi_init: ",
    r"Fatal error in (?:PMPI_|MPI_)Init",
    # Open MPI 5's launcher could not open its PMIx socket (exit 213), e.g. a dead launcher's
    # session directory under the same pid (runner.launch_tmpdir keeps that from our launches).
    r"PMIx server's listener thread failed to start",
)
MPI_ABORT = markers(
    r"MPI_ABORT was invoked",
    # Open MPI wraps its message lines: any whitespace between words.
    r"noticed\s+that\s+process\s+rank\s+\d+\s+with\s+PID\s+\d+\s+on\s+node\s+\S+\s+exited\s+on\s+signal",
    r"exited\s+on\s+signal\s+\d+",
    r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
    r"has\s+lost\s+communication",
    r"PMIX_ERR_UNREACH",
    r"lost (?:connection|contact) (?:to|with)",
    r"application called MPI_Abort",
    # The surviving rank noticed first (which line Open MPI prints first is a race).
    r"communication\s+peer\s+process\s+has\s+unexpectedly\s+disconnected",
    r"exited\s+due\s+to\s+process\s+rank\s+\d+\s+with\s+PID\s+\d+\s+on\s+node\s+\S+\s+calling\s+\"abort\"",
    r"Primary\s+job\s+terminated\s+normally,\s+but\s+\d+\s+process(?:es)?\s+returned",
)
# A node of the job lost, in its launcher's words, and where they name the node. Open MPI 5
# (PRRTE; ORTE in Open MPI 4) when a remote daemon dies or its link goes (its ssh session ends:
# "failed to report back"), also when it could not start one at all; ssh's own lines where it
# could not reach the host, where the host closed the session (its processes killed: printed
# at every log level) and where the host stopped answering (the session's ServerAliveInterval x
# ServerAliveCountMax passed: printed at ssh's default level, INFO, not at ERROR or QUIET).
# MPICH's Hydra has no words of its own for a lost proxy: its ssh session's are the only ones,
# and after "Timeout, server ... not responding." Hydra waits on for ever (the runner ends it,
# runner.NODE_LOST_GRACE_S after any of these words).
NODE_LOST = (
    (r"ssh: connect to host \S+ port \d+: .*", r"ssh: connect to host (\S+) port"),
    (r"ssh: Could not resolve hostname \S+: .*", r"ssh: Could not resolve hostname ([^\s:]+)"),
    (r"Timeout, server \S+ not responding\.?", r"Timeout, server (\S+) not responding"),
    (r"Connection to \S+ closed by remote host\.?", r"Connection to (\S+) closed by remote host"),
    (r"(?:PRTE|ORTE) has lost communication with a remote daemon\.?", r"Remote daemon:\s+\S+\s+on node\s+(\S+)"),
    (r"A daemon failed to report back after being spawned\.?", r"Remote host:\s+(\S+)"),
)


def node_lost_words(text: str) -> str | None:
    """The launcher's words that say a node was lost (NODE_LOST), the first of them in `text`,
    on one line; None where there are none (what the runner watches for while the launcher runs)."""
    found = [match for words, _host in NODE_LOST if (match := re.search(words, text))]
    if not found:
        return None
    return " ".join(min(found, key=lambda match: match.start()).group(0).split())


def lost_node(log_text: str, how: str) -> Failure | None:
    """node_failure, naming the host, where the launcher says it lost a node (or never reached
    it); `how` the launcher ended (its exit code, or the words after which it hung and was
    killed: those words are not quoted twice)."""
    for words, host in NODE_LOST:
        found = re.search(words, log_text)
        if found:
            named = re.search(host, log_text[found.start() :])
            where = named.group(1) if named else "a node"
            said = " ".join(found.group(0).split())
            quoted = "" if repr(said) in how else f": {said}"
            return Failure("node_failure", f"node {where} lost or unreachable ({how}){quoted}")
    return None


# The scheduler's word for a job it ended (Slurm states, PBS Pro JOB_EXEC_KILL_* exit
# statuses of OpenPBS job.h: -29 walltime, -26 vmem, -27 mem; -24/-25 ncpus and -28 cput
# are other limits, scheduler_error with PBS's reason).
SCHEDULER_WALLTIME = {"TIMEOUT", "DEADLINE", "-29"}
SCHEDULER_OOM = {"OUT_OF_MEMORY", "OOM", "-26", "-27"}


def tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)


def first_match(pattern: re.Pattern[str], text: str) -> str | None:
    """The whole log line(s) of the first match, on one line (the evidence quoted in the reason)."""
    match = pattern.search(text)
    if not match:
        return None
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return " ".join(text[start : end if end >= 0 else len(text)].split())[:300]


def scheduler_state(record: Mapping[str, Any] | None) -> str | None:
    """The end state a scheduler recorded: Slurm `State` (sacct) or PBS `Exit_status`."""
    if not record:
        return None
    for key in ("state", "State", "job_state", "Exit_status", "exit_status"):
        if record.get(key) is not None:
            return str(record[key]).split()[0].upper()
    return None


def classify(
    exit_code: int | None,
    killed_for: str | None,
    log_text: str,
    scheduler_record: Mapping[str, Any] | None = None,
    walltime: str | None = None,
) -> Failure | None:
    """The failure of a run that ended with `exit_code` (None: unknown), or None if it did not fail.

    killed_for: "walltime" when we stopped it at its walltime, a fatal MPI line when we
    killed a launcher that hung after it, else None. scheduler_record: what the scheduler
    says about the job (e.g. {"State": "TIMEOUT"} from sacct, {"Exit_status": -29} from qstat).
    """
    state = scheduler_state(scheduler_record)
    if killed_for == "walltime" or state in SCHEDULER_WALLTIME:
        who = "the scheduler" if state in SCHEDULER_WALLTIME else "scalestudy"
        return Failure("walltime", f"walltime exceeded: stopped by {who} after {walltime or 'its walltime'}")
    if state in SCHEDULER_OOM:
        return Failure("out_of_memory", f"out of memory: the scheduler recorded {state}")
    code = "unknown" if exit_code is None else str(exit_code)
    how = f"exit code {code}" + (f" ({SIGNAL_EXIT[exit_code]})" if exit_code in SIGNAL_EXIT else "")
    if killed_for:
        how = f"launcher hung after {killed_for!r} and was killed"
    # A lost node is the cause of whatever its ranks' partners said next, and Open MPI 5 may
    # even exit 0 after it lost a daemon (seen: a node's processes killed mid-run).
    node = lost_node(log_text, how)
    if node:
        return node
    if exit_code == 0 and killed_for is None:
        return None
    for category, pattern, label in (
        ("out_of_memory", OUT_OF_MEMORY, "out of memory"),
        ("nccl_error", NCCL_ERROR, "NCCL error"),
        ("dependency_missing", DEPENDENCY_MISSING, "dependency missing"),
        ("mpi_init_error", MPI_INIT_ERROR, "MPI failed to start"),
        ("mpi_abort", MPI_ABORT, "MPI job aborted or lost a rank"),
    ):
        evidence = first_match(pattern, log_text)
        if evidence:
            return Failure(category, f"{label} ({how}): {evidence}")
    if exit_code == 127:
        return Failure("dependency_missing", f"dependency missing ({how}): {tail(log_text)}")
    return Failure("app_error", f"app exited with code {code}: {tail(log_text)}")


def stopped_from_outside(signal_name: str, wall_s: float | None) -> Failure:
    """A run whose job was ended from outside while its ranks ran (the runner passed the
    signal on to the launcher's process group and killed what was left). The runner cannot
    tell a scheduler's walltime kill from a qdel or scancel: a scheduler's record that says
    walltime or memory makes it that category later (`scheduler_category`)."""
    ran = "" if wall_s is None else f" after {wall_s:.0f} s"
    return Failure(
        "scheduler_error",
        f"stopped from outside by {signal_name}{ran}: the batch job was ended (its walltime, qdel, scancel) "
        f"or Snakemake was interrupted; the launcher and its ranks were stopped",
    )


def scheduler_category(reason: str) -> str:
    """The category of a job that ended without metrics.json, from the scheduler's words
    (runner.record_lost_job): PBS `Exit_status -29`, Slurm `TIMEOUT`, ..."""
    for word in re.findall(r"Exit_status (-?\d+)|\b([A-Z_]{3,})\b", reason):
        state = word[0] or word[1]
        if state in SCHEDULER_WALLTIME:
            return "walltime"
        if state in SCHEDULER_OOM:
            return "out_of_memory"
    return "scheduler_error"
