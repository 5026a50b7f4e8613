"""The one interface of every batch scheduler backend: what the workflow asks of a scheduler,
and nothing it does not.

A backend is one module of this package (or of a subpackage) defining a `Scheduler` subclass
with its own `scheduler` name, the value a cluster file gives as `scheduler:`; the package
finds it (scalestudy.scheduler.backends: every Scheduler subclass of its modules, as
ReFrame's schedulers register by name) and `scheduler_for(cluster)` is the one place that
picks a cluster's. What differs within one scheduler is a subclass overriding only that
(`scheduler.pbs.dialects`: Gadi's totals are PBS Pro with its request written otherwise).

What the workflow asks, each answered by the backend's module alone:
- at load: `cluster_problems` (what the cluster file lacks to submit at all) and `problems`
  (a point's request this scheduler refuses, or cannot write: its site rules);
- while planning: `pack_problems`, `job_resources` (what the executor's jobs carry), the dry
  plan's `submit_line`, and whether the forecast prices batch jobs at all (`batch`);
- before the first job (`onstart`): `never_ran` and `save_packs`;
- once a job ended: `cost` where `prices_ended_jobs` (the executor reports the job; the
  workflow prices it: Slurm's plugin). A backend whose own commands follow and price the jobs
  (PBS Pro through Snakemake's cluster-generic executor: scheduler.pbs) says False.

Standard library only at the top: the PBS status and cancel commands (once per job per
polling round; within 2 s) load this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

# What the PBS status command answers: Snakemake's cluster-generic executor's three words.
RUNNING, SUCCESS, FAILED = "running", "success", "failed"

# Every backend by its `scheduler:` name, filled as each subclass is defined (__init_subclass__).
BACKENDS: dict[str, type[Scheduler]] = {}

Job = TypeVar("Job")


class Scheduler:
    """A batch scheduler as the workflow uses it, for the config.clusters.Cluster `cluster`
    (None where an operation needs none: the PBS status and cancel commands know only job
    ids). Every operation has the answer of a scheduler with nothing to add; a backend
    overrides what its scheduler does."""

    # The cluster file's `scheduler:` value this backend serves (a subclass that leaves it
    # as its parent's, e.g. a PBS dialect, is that backend's variant, not a backend).
    scheduler: ClassVar[str]
    # Does it run points as batch jobs (packs, a cost forecast, a dry plan's lines)?
    batch: ClassVar[bool] = True
    # Does the workflow price each job the executor reports ended (`cost`)?
    prices_ended_jobs: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "scheduler" in vars(cls):
            BACKENDS[cls.scheduler] = cls

    def __init__(self, cluster: Any = None, environ: Mapping[str, str] = os.environ):
        self.cluster = cluster
        self.environ = environ

    @classmethod
    def for_cluster(cls, cluster: Any) -> Scheduler:
        """The backend of `cluster` (a variant a cluster file's key picks overrides this);
        raises model.errors.SweepError for a cluster file it cannot serve."""
        return cls(cluster)

    # ------------------------------------------------------------------ at load

    def cluster_problems(self) -> list[str]:
        """What the cluster file (or the environment) lacks for any job to be submitted, one
        line each (PBS Pro: a project to charge). Asked only where jobs are submitted."""
        return []

    def problems(self, point: Any, request: Any) -> list[str]:
        """What this scheduler refuses of a point's request (a config.requests.JobRequest),
        or cannot ask for, beyond the queue's limits (config.requests): one line each,
        naming the study's keys (a config.requests.RequestRule)."""
        return []

    # ------------------------------------------------------------------ while planning

    def pack_problems(self, packs: Iterable[Any]) -> list[str]:
        """What the site would refuse of each pack's one batch job (config.packing.Pack: its
        walltime its points' summed), one line each, naming the study's `pack`."""
        from ..config.requests import request_problems

        problems: dict[str, None] = {}
        for pack in packs:
            for problem in request_problems(pack.request_point(), self.cluster, (self.problems,)):
                problems[f"{problem} (pack: the walltimes of its {len(pack.points)} points summed in {pack.name}; "
                         "use a smaller pack)"] = None  # fmt: skip
        return list(problems)

    def job_resources(self) -> dict[str, Callable[[Any], Any]]:
        """Resources of a run job that only this scheduler's executor reads, as functions of
        the point (model.point.Point; None: not set for that point), beside every backend's
        (planning.run_rules.point_resources)."""
        return {}

    def submit_line(self, request: Any, *, log_path: str, jobscript: str) -> list[str]:
        """The command that submits a job of `request` (a config.requests.JobRequest), as the
        dry plan (`python -m scalestudy plan`) prints it; nothing is run."""
        raise NotImplementedError(f"{type(self).__name__} does not say how it submits a job")

    # ------------------------------------------------------------------ before the first job

    def never_ran(self, resumed: Callable[[], Mapping[Job, str]]) -> list[Job]:
        """Of the jobs Snakemake would resume ({job: external id}, asked only by a backend that
        can tell), those whose batch job was deleted before it ran: they are submitted again."""
        return []

    def save_packs(self, packs: Mapping[str, list[dict]], add: bool = False) -> None:
        """Keep {pack name: its points' entries, in order} for the backend's submit command,
        which sees only a group job's jobscript (planning.start.packs_for_submit); `add`: beside
        those kept before (a later round's packs: planning.tables.write_next_round)."""

    # ------------------------------------------------------------------ once a job ended

    def cost(self, job_id: str) -> float | None:
        """Seconds of walltime the scheduler charges for the ENDED job `job_id` (Slurm's
        Elapsed; launch.ended prices a point at it), asked where `prices_ended_jobs`. None
        while the job has not ended, for a job the scheduler does not know, and when it
        does not say. Never raises."""
        return None
