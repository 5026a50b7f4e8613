"""The one interface of every batch scheduler backend, and the one place that picks a backend.

A backend is a `Scheduler` with five operations: `submit` a batch job, its `status`,
`cancel` jobs, the `cost` of an ended job (the seconds the site charges), the `hosts` of
the allocation a process runs in. PBS Pro is `scheduler.pbs.pbspro.PbsPro` (PBS Pro as
OpenPBS writes a request: `select` chunks), each site's resource dialect a subclass of it
that overrides only what differs (`scheduler.pbs.dialects`: Gadi); Slurm is
`scheduler.slurm.Slurm`. `scalestudy.scheduler.scheduler_for(cluster)` gives the one a
cluster file names (`scheduler:`, and for PBS Pro `pbs_dialect:`), as ReFrame's schedulers
are looked up by name.

Standard library only: the PBS status and cancel commands (once per job per polling round;
within 2 s) load this module.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

# What `status` answers: Snakemake's cluster-generic executor's three words.
RUNNING, SUCCESS, FAILED = "running", "success", "failed"


class Scheduler(abc.ABC):
    """A batch scheduler as scalestudy uses it. `cluster` is the config.clusters.Cluster the
    jobs are for (None where an operation needs none: the PBS status and cancel commands
    know only job ids)."""

    # The cluster file's `scheduler:` value this backend serves.
    scheduler: ClassVar[str]

    def __init__(self, cluster: Any = None, environ: Mapping[str, str] = os.environ):
        self.cluster = cluster
        self.environ = environ

    @abc.abstractmethod
    def submit(self, jobscript: Path) -> str:
        """Submit the Snakemake jobscript `jobscript` (its `# properties = ` line names the
        rule, the point and its resources) as one batch job of `self.cluster`, sized from the
        point's request (config.requests.job_request) in the scheduler's own words. Returns
        the scheduler's job id. Raises scheduler.jobscript.SubmitRefused, one line per
        problem, when the site would refuse the request: nothing reaches the scheduler."""

    @abc.abstractmethod
    def status(self, job_id: str) -> str:
        """Exactly one of RUNNING, SUCCESS, FAILED for the job `job_id`. Queued, held or
        running is RUNNING; a job the scheduler does not (yet) know is RUNNING until the
        backend can tell it is gone (each backend says when). Never raises: a scheduler that
        does not answer gives RUNNING, asked again later."""

    @abc.abstractmethod
    def cancel(self, job_ids: Sequence[str]) -> None:
        """Ask the scheduler to delete the jobs `job_ids` (queued or running); returns once
        that is asked, without waiting for the jobs to end. Ids of jobs that ended or that
        the scheduler does not know are its to ignore. Never raises."""

    @abc.abstractmethod
    def cost(self, job_id: str) -> float | None:
        """Seconds of walltime the scheduler charges for the ENDED job `job_id` (PBS's
        resources_used.walltime, Slurm's Elapsed; launch.ended prices a point at it). None
        while the job has not ended, for a job the scheduler does not know, and when it
        does not say. Never raises."""

    @abc.abstractmethod
    def hosts(self, environ: Mapping[str, str] = os.environ) -> list[str]:
        """The hosts of the allocation of the batch job the caller runs in (`environ` is its
        environment), in the scheduler's order, each once. [] outside such an allocation."""
