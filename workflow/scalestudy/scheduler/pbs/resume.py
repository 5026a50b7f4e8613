"""Jobs of an interrupted run that never started: their points run again, afresh.

Snakemake's cluster-generic executor resumes a job whose output is marked incomplete
with the external id it recorded (the next run polls the old id instead of submitting).
After Ctrl-C the queued jobs were deleted before they ran (PBS Pro: job_state F, substate
91, no Exit_status), so resuming them would poll a job that will never write its point's
record. Before the first job (`onstart`), ONE qstat asks about the ids to be resumed; the
ones that never ran lose their incomplete mark, and Snakemake submits their points again.
A job still queued or running is resumed as before; one that ran and was killed keeps
its failed record (status.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import TypeVar

from .cache import cache_dir, load_states
from .status import query

Job = TypeVar("Job")


def never_ran(resumed: Mapping[Job, str], qstat: str = "qstat") -> list[Job]:
    """Of {Snakemake job: external id}, the jobs whose batch job was deleted before it ran.
    A failed qstat forgets nothing (the jobs are then resumed, as Snakemake would)."""
    if not resumed:
        return []
    form = load_states(cache_dir()).get("form") or "json"  # as the status command last asked
    try:
        states, _unknown, _form = query(sorted(set(resumed.values())), qstat, form)
    except (OSError, ValueError, subprocess.SubprocessError):
        return []
    return [job for job, job_id in resumed.items() if job_id in states and states[job_id].never_ran]
