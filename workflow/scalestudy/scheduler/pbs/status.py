"""The status command: exactly one word (running|success|failed) per call, as Snakemake's
cluster-generic executor wants, for a job id.

The executor calls it once per active job per polling round. One `qstat -x -f -F json` for
all active jobs answers a whole round: the first call of a round refreshes the shared
states (cache.STATES) under a lock, the others read them. A job that ended without its
metrics.json (killed by PBS, node lost, job script error) is recorded as a failed point.

Every call pays this module's start-up: standard library and `cache` only; the runner is
imported only for a job that ended without metrics.json.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cache import load_states, locked, registry, save_states

# job_state of a job that has ended (PBS Pro F/X; Torque and its wrappers C).
FINISHED_STATES = ("F", "X", "C")
# OpenPBS job.h: a finished job that was deleted (qdel); with no Exit_status it never ran.
JOB_SUBSTATE_TERMINATED = 91


@dataclass
class JobState:
    job_id: str
    state: str  # PBS job_state: Q, H, W, T, S, R, E, B, M, F, X (Torque: C for completed)
    exit_status: int | None = None
    comment: str = ""
    resources_used: dict[str, str] = field(default_factory=dict)
    substate: int | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def never_ran(self) -> bool:
        """Deleted before it started (qdel of a queued job, e.g. on Ctrl-C): PBS Pro ends it
        F with substate 91 (JOB_SUBSTATE_TERMINATED) and no Exit_status. Such a point simply
        runs next time; it is no failed run (a job deleted while running has an Exit_status,
        271 = SIGTERM)."""
        return self.finished and self.exit_status is None and self.substate == JOB_SUBSTATE_TERMINATED

    def verdict(self) -> tuple[str, str]:
        """(one of running|success|failed, why)."""
        if not self.finished:
            return "running", f"job_state {self.state}"
        if self.never_ran:
            return "failed", "deleted before it ran (job_state F, substate 91, no Exit_status)"
        if self.exit_status is None:
            return "success", "finished (this qstat gives no exit status)"
        if self.exit_status == 0:
            return "success", "Exit_status 0"
        if self.exit_status < 0:
            # PBS itself ended the job (e.g. -29 walltime, -27 memory) or could not start it.
            why = PBS_EXIT_CODES.get(self.exit_status, "killed or not started by PBS")
        elif self.exit_status > 256:
            why = PBS_SIGNAL_EXITS.get(self.exit_status, f"killed by signal {self.exit_status - 256}")
        else:
            why = "the job script failed"
        return "failed", f"Exit_status {self.exit_status}: {why}" + (f" ({self.comment})" if self.comment else "")


# PBS Pro's own exit statuses: the JOB_EXEC_* codes of OpenPBS src/include/job.h (a job PBS
# ended or could not start; > 256 is a signal + 256, 0..255 the job script's own exit).
PBS_EXIT_CODES = {
    -1: "job exec failed, before files, no retry (JOB_EXEC_FAIL1)",
    -2: "job exec failed, after files, no retry (JOB_EXEC_FAIL2)",
    -3: "job exec failed, will retry (JOB_EXEC_RETRY)",
    -4: "job aborted on MoM initialization (JOB_EXEC_INITABT)",
    -5: "job aborted on MoM initialization, checkpoint, no migrate (JOB_EXEC_INITRST)",
    -6: "job aborted on MoM initialization, checkpoint, migrate (JOB_EXEC_INITRMG)",
    -7: "job restart failed (JOB_EXEC_BADRESRT)",
    -10: "job did not run: invalid uid/gid for the job (JOB_EXEC_FAILUID)",
    -11: "job requeued to run again (JOB_EXEC_RERUN)",
    -12: "job checkpointed and killed (JOB_EXEC_CHKP)",
    -13: "job did not run: bad password (JOB_EXEC_FAIL_PASSWORD)",
    -14: "job requeued: a sister node failed (JOB_EXEC_RERUN_SIS_FAIL)",
    -15: "job requeued for restart from checkpoint (JOB_EXEC_QUERST)",
    -16: "job did not run: a hook rejected it, requeued (JOB_EXEC_FAILHOOK_RERUN)",
    -17: "job did not run: a hook rejected it (JOB_EXEC_FAILHOOK_DELETE)",
    -18: "a hook requeued the job (JOB_EXEC_HOOK_RERUN)",
    -19: "a hook deleted the job (JOB_EXEC_HOOK_DELETE)",
    -20: "job requeued: lost the connection to its first node (JOB_EXEC_RERUN_MS_FAIL)",
    -21: "job did not run: security breach in a PBS directory (JOB_EXEC_FAIL_SECURITY)",
    -22: "job did not run: a hook failed (JOB_EXEC_HOOKERROR)",
    -23: "job did not run: no Kerberos credentials (JOB_EXEC_FAIL_KRB5)",
    -24: "killed: ncpus over the limit, burst (JOB_EXEC_KILL_NCPUS_BURST)",
    -25: "killed: ncpus over the limit, sum (JOB_EXEC_KILL_NCPUS_SUM)",
    -26: "killed: vmem over the limit (JOB_EXEC_KILL_VMEM)",
    -27: "killed: mem over the limit (JOB_EXEC_KILL_MEM)",
    -28: "killed: cput over the limit (JOB_EXEC_KILL_CPUT)",
    -29: "killed: walltime over the limit (JOB_EXEC_KILL_WALLTIME)",
    -30: "job did not run: join job error (JOB_EXEC_JOINJOB)",
}


# A job PBS ended by a signal exits 256 + its number (OpenPBS: "the job was killed with a
# signal", Exit_status = 256 + signal). qdel of a running job sends SIGTERM, then SIGKILL after
# the queue's kill_delay; PBS's walltime and resource limits have their own codes (-29, -27).
PBS_SIGNAL_EXITS = {
    271: "deleted (qdel) or ended by SIGTERM",
    265: "ended by SIGKILL (qdel after its kill_delay, or qdel -W force)",
}


def states_from_json(text: str) -> dict[str, JobState]:
    """`qstat -x -f -F json` (PBS Pro)."""
    jobs = json.loads(text).get("Jobs") or {}
    states = {}
    for job_id, attrs in jobs.items():
        exit_status, substate = attrs.get("Exit_status"), attrs.get("substate")
        states[job_id] = JobState(
            job_id=job_id,
            state=str(attrs.get("job_state", "?")),
            exit_status=None if exit_status is None else int(exit_status),
            comment=str(attrs.get("comment", "")),
            resources_used={k: str(v) for k, v in (attrs.get("resources_used") or {}).items()},
            substate=None if substate is None else int(substate),
        )
    return states


def states_from_text(text: str) -> dict[str, JobState]:
    """`qstat -f` text (PBS Pro's, Torque's, Slurm's torque wrappers'). PBS Pro indents its
    attributes with spaces and wraps a long value onto lines that start with a tab; Torque
    indents attributes with a tab."""
    states: dict[str, JobState] = {}
    current: JobState | None = None
    for line in re.sub(r"\n\t(?![\w.]+ = )", "", text).splitlines():
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
        elif key == "substate":
            current.substate = int(value)
        elif key == "comment":
            current.comment = value
        elif key.startswith("resources_used."):
            current.resources_used[key.split(".", 1)[1]] = value
    return states


UNKNOWN_JOB = re.compile(r"Unknown Job Id:?\s*(\S+)", re.IGNORECASE)


# How the jobs are asked: `json` (qstat -x -f -F json), `text` (qstat -x -f: an OpenPBS
# whose JSON lists only the first of several ids, openpbs/openpbs#2672), `plain` (qstat -f:
# no -x / -F json, Torque and Slurm's wrappers). Remembered in the cache between rounds.
QUERY_FORMS = {"json": ["-x", "-f", "-F", "json"], "text": ["-x", "-f"], "plain": ["-f"]}


def query(job_ids: list[str], qstat: str = "qstat", form: str = "json") -> tuple[dict[str, JobState], set[str], str]:
    """One qstat for all jobs: (states, ids the server says it does not know, the form that
    answers them all). Ids a JSON answer leaves out (neither listed nor unknown: OpenPBS's
    JSON prints only the first of several jobs) are asked again at once as text, which lists
    all, and the form `text` is returned so that later rounds ask once. Raises
    OSError/CalledProcessError/ValueError on a failed query (the caller retries later)."""
    result = subprocess.run([qstat, *QUERY_FORMS[form], *job_ids], capture_output=True, text=True, timeout=60)
    if form == "json" and result.stdout.lstrip().startswith("{"):
        states = states_from_json(result.stdout)
    elif form == "json" and ("Unknown option" in result.stderr or "invalid option" in result.stderr.lower()):
        return query(job_ids, qstat, "plain")  # not PBS Pro
    elif form != "json":
        states = states_from_text(result.stdout)
    else:
        states = {}
    unknown = {m.group(1) for m in UNKNOWN_JOB.finditer(result.stderr)}
    if result.returncode != 0 and not states and not unknown:
        raise subprocess.CalledProcessError(result.returncode, qstat, result.stdout, result.stderr)
    left_out = [job_id for job_id in job_ids if job_id not in states and job_id not in unknown]
    if form == "json" and states and left_out:
        more, more_unknown, _ = query(left_out, qstat, "text")
        return {**states, **more}, unknown | more_unknown, "text"
    return states, unknown, form


# A status call is the start of a new polling round when the job it asks about was
# already answered from the cache: then ONE qstat refreshes every active job, and the
# other calls of that round read the cache. These bound it in time as well.
MIN_REFRESH_S = 2.0
MAX_CACHE_AGE_S = 120.0
# A job qstat does not know (history expired, or never reached the server) is given up
# after this long.
UNKNOWN_GRACE_S = 300.0
# A job is refreshed while Snakemake asks about it (every 30 s in the profiles): one left
# unfinished in the cache by a run that was killed, and not asked for this long, is no
# longer queried (a later run that resumes it asks again). Likewise a registered job never
# seen is looked for only this long after its submission.
ACTIVE_WINDOW_S = 300.0


def refresh(cache: dict[str, Any], job_ids: Iterable[str], qstat: str, log) -> None:
    ids = sorted(set(job_ids))
    cache["refreshed"] = time.time()
    try:
        states, unknown, cache["form"] = query(ids, qstat, cache.get("form") or "json")
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        # A transient server problem must not abort a study: answer "running" and retry next round.
        log(f"scalestudy pbs status: qstat failed ({error!r}); jobs stay 'running' until it answers")
        return
    for job_id in ids:
        asked = cache["jobs"].get(job_id, {}).get("asked", 0.0)
        if job_id in states:
            state = states[job_id]
            cache["jobs"][job_id] = {
                "state": state.state,
                "exit_status": state.exit_status,
                "substate": state.substate,
                "comment": state.comment,
                # How long it ran: the cost of a job that ended without its records.
                "walltime_used": state.resources_used.get("walltime"),
                "served": False,
                "asked": asked,
            }
        elif job_id in unknown:
            cache["jobs"][job_id] = {"state": "unknown", "served": False, "asked": asked}


# The pseudo job id the submit command prints when qsub refused a point: its failed record
# is written, and the status command answers at once.
REFUSED_PREFIX = "qsub-refused."


def status(job_id: str, directory: Path, qstat: str = "qstat", log=lambda msg: print(msg, file=sys.stderr)) -> str:
    """Exactly one of running|success|failed for `job_id`; never raises."""
    if job_id.startswith(REFUSED_PREFIX):
        return "success"  # the refusal is the point's failed record (submit.py)
    try:
        with locked(directory):
            cache = load_states(directory)
            entry = cache["jobs"].get(job_id)
            now = time.time()
            age = now - cache.get("refreshed", 0.0)
            stale = entry is None or age > MAX_CACHE_AGE_S or (entry.get("served") and age >= MIN_REFRESH_S)
            # The registry grows with every submission: it is read once per round (to find jobs
            # not yet polled) and for jobs that ended, not on every call of a round.
            jobs = registry(directory) if stale else None
            if stale:
                active = [
                    known
                    for known, cached in cache["jobs"].items()
                    if cached.get("state") not in FINISHED_STATES and now - cached.get("asked", 0.0) < ACTIVE_WINDOW_S
                ]
                unseen = [
                    known
                    for known, job in jobs.items()
                    if known not in cache["jobs"] and now - job.get("submitted", 0.0) < ACTIVE_WINDOW_S
                ]
                refresh(cache, [*active, *unseen, job_id], qstat, log)
            entry = cache["jobs"].get(job_id)
            if entry is not None:
                entry["served"] = True
                entry["asked"] = now
            save_states(directory, cache)
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
        state = JobState(
            job_id, entry["state"], entry.get("exit_status"), entry.get("comment", ""), substate=entry.get("substate")
        )
        verdict, why = state.verdict()
        if state.never_ran:
            # Deleted while queued (Ctrl-C): no failed record, so that the point runs next time.
            log(f"scalestudy pbs status: {job_id}: {why}; the point runs next time")
            return verdict
    if verdict == "running":
        return verdict
    if job and job.get("pack"):
        from ...launch.ended import ended_pack, ran_s

        lost = ended_pack(job_id, job, why, ran_s(entry.get("walltime_used")))
        if lost:
            log(f"scalestudy pbs status: {job_id}: {why}; {lost} of its {len(job['pack'])} points recorded as failed")
        return "success"
    metrics = Path(job["metrics"]) if job and job.get("metrics") else None
    if metrics is None:
        return verdict
    if metrics.exists():
        # The point wrote its own record (ok or failed): that is the result, whatever the job's
        # exit; one the runner wrote when the job was ended from outside takes PBS's reason,
        # and every one the cost PBS charges (the job's resources_used.walltime, not the launch's).
        take_scheduler_word(metrics, why)
        if entry.get("walltime_used"):
            from ...launch.ended import ended_job, ran_s

            ended_job(job, ran_s(entry["walltime_used"]))
        return "success"
    # The job ended without a record (killed by PBS, node lost, job script error): the point
    # becomes failed data instead of a lost result, with what the site charges for the job.
    from ...launch.ended import lost_point, ran_s

    lost_point(job_id, job, why, ran_s(entry.get("walltime_used")))
    log(f"scalestudy pbs status: {job_id}: {why}; recorded as a failed point in {metrics}")
    return "success"


def take_scheduler_word(metrics: Path, why: str) -> None:
    """The runner's record of a point stopped from outside gets PBS's reason
    (launch.ended.with_scheduler_word); any other record is left as it is, unread by Python's
    JSON and without loading the launch code."""
    try:
        stopped = '"stop_signal"' in metrics.read_text()
    except OSError:
        return
    if stopped:
        from ...launch.ended import with_scheduler_word

        with_scheduler_word(metrics, why)
