"""PBS Pro as a scalestudy scheduler (interface.Scheduler), writing a request as OpenPBS
documents it: `select` chunks, one per node (NSCC ASPIRE 2A speaks it unchanged). A site
with its own spelling is a subclass that overrides only what differs (dialects.py: Gadi),
as ReFrame's Torque scheduler is its PBS one with what differs overridden; the cluster
file's `pbs_dialect:` picks it (`for_cluster`).

Snakemake's cluster-generic executor runs this backend's commands (profiles/pbs/scalestudy-pbs:
submit, status, cancel, sidecar; one module each), which follow the jobs and price each
ended one themselves (status.py): the workflow asks no `cost`. Before the first job it asks
`never_ran` (resume.py) and `save_packs` (cache.py). The status and cancel commands call
this class on every call, so its top imports only the standard library and the interface.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..interface import Job, Scheduler


class PbsPro(Scheduler):
    """PBS Pro behind Snakemake's cluster-generic executor (profiles/pbs/scalestudy-pbs calls
    submit, status and cancel); `cluster` a config.clusters.Cluster (None for status, cancel,
    cost and hosts, which need none). `qsub`, `qstat`: the commands (tests, wrappers); qdel
    is $SCALESTUDY_QDEL, else qdel (cancel.qdel_command)."""

    scheduler = "pbspro"
    # The cluster file's `pbs_dialect:` this class writes (the default, dialects.DIALECTS).
    name: ClassVar[str] = "select"
    # The resource that asks for hardware threads (None: this spelling has no way to).
    hyperthread_resource: ClassVar[str | None] = None

    def __init__(
        self, cluster: Any = None, environ: Mapping[str, str] = os.environ, qsub: str = "qsub", qstat: str = "qstat"
    ):
        super().__init__(cluster, environ)
        self.qsub, self.qstat = qsub, qstat

    # ------------------------------------------------------------------ the request, written

    def resources(self, request: Any, project: str) -> list[str]:
        """The `name=value` items of the request (a config.requests.JobRequest), in the order
        the site documents them. PBS writes a host into PBS_NODEFILE once per mpiproc of its
        chunk (default 1): without `mpiprocs`, Open MPI's PBS support sees one slot per node
        and a point with 2 ranks per node fails to map ("Procs mapped: 1 ... PPR: 2:node")."""
        chunk = f"select={request.nodes}:ncpus={request.ncpus_per_node}"
        if request.ngpus_per_node:
            chunk += f":ngpus={request.ngpus_per_node}"
        chunk += f":mpiprocs={request.ranks_per_node}:ompthreads={request.threads_per_rank}"
        chunk += f":mem={request.mem_per_node_gib}GB"
        items = [chunk]
        if request.nodes > 1:
            items.append("place=scatter")  # one chunk per node: the ranks per node the point asks for
        return [*items, self.walltime(request)]

    def resource_list(self, request: Any, project: str) -> str:
        """What follows `-l`: every resource in ONE `-l` (PBS Pro accepts it, and Torque-style
        wrappers such as Slurm's qsub keep only the last `-l`)."""
        return ",".join(self.resources(request, project))

    def qsub_command(self, request: Any, *, project: str, log_path: str, jobscript: str | None = None) -> list[str]:
        """The qsub line of a request (a config.requests.JobRequest), its resources in this
        dialect: what `submit` runs and the dry plan prints."""
        argv = ["qsub", "-P", project, "-q", request.queue.submit_name]
        argv += ["-l", self.resource_list(request, project)]
        argv += ["-N", request.name, "-j", "oe", "-o", log_path]
        return argv + ([jobscript] if jobscript else [])

    def problems(self, point: Any, request: Any) -> list[str]:
        """What the site refuses only because of how the request must be written (a
        config.requests.RequestRule); one line each, naming the study's keys (the queue's own
        limits: config.requests)."""
        if request.hyperthreads and not self.hyperthread_resource:
            from ...model.paths import cluster_file

            return [
                f"studies.{point.study}.hyperthreads: true, but the PBS dialect {self.name!r} of "
                f"{cluster_file(self.cluster.name)} has no way to ask for hardware threads; use [false]"
            ]
        return []

    @staticmethod
    def walltime(request: Any) -> str:
        from ...model.timefmt import hms

        return f"walltime={hms(request.walltime_s)}"

    # ------------------------------------------------------------------ the commands

    def cache(self) -> Path:
        """The directory the PBS commands share (cache.py)."""
        from .cache import cache_dir

        return cache_dir(self.environ)

    def submit(self, jobscript: Path) -> str:
        """qsub in this class's dialect (submit.submit), from the submit command. A point or a
        pack qsub refuses gets its failed records and a pseudo id status answers SUCCESS for."""
        from .submit import submit

        return submit(jobscript, self)

    def status(self, job_id: str) -> str:
        """status.status, from the status command: one `qstat` per polling round for every
        active job, shared through the cache. A job qstat does not know is RUNNING for
        status.UNKNOWN_GRACE_S after its submission, FAILED after; a job that ended without
        its point's record gets a failed record and answers SUCCESS (the record is the
        result)."""
        from .status import status

        return status(job_id, self.cache(), self.qstat)

    def cancel(self, job_ids: Sequence[str]) -> None:
        """cancel.cancel, from the cancel command (within Snakemake's 2 s): one qdel for all,
        started detached; what it says goes to the cache's qdel.log."""
        from .cancel import cancel, qdel_command

        cancel(list(job_ids), self.cache(), qdel_command(self.environ))

    # ------------------------------------------------------------------ what the workflow asks

    @classmethod
    def for_cluster(cls, cluster: Any) -> PbsPro:
        """The class of the cluster file's `pbs_dialect:` (dialects.DIALECTS); SweepError for
        a name none is registered under."""
        from .dialects import dialect_of

        return dialect_of(cluster)

    def cluster_problems(self) -> list[str]:
        """PBS Pro sites charge every job to a project (qsub -P): without one each submission
        would be refused, once per job; said when the study loads, dry runs included."""
        if self.cluster.project_name(self.environ):
            return []
        from ...model.paths import cluster_file

        name = self.cluster.name
        return [
            f"{cluster_file(name)} project: not set and $PROJECT is empty; {name} charges every job to a "
            "project (qsub -P): export PROJECT=<your project code> or set project: in that file"
        ]

    def submit_line(self, request: Any, *, log_path: str, jobscript: str) -> list[str]:
        """The qsub line, charged to the cluster's project ($PROJECT where none is set yet)."""
        project = self.cluster.project_name(self.environ) or "$PROJECT"
        return self.qsub_command(request, project=project, log_path=log_path, jobscript=jobscript)

    def never_ran(self, resumed: Callable[[], Mapping[Job, str]]) -> list[Job]:
        """resume.never_ran: one qstat of the ids Snakemake would resume after an interrupt."""
        from .resume import never_ran

        return never_ran(resumed())

    def save_packs(self, packs: Mapping[str, list[dict]], add: bool = False) -> None:
        """cache.save_packs, read by the submit command (submit.py) for each group job."""
        from .cache import save_packs

        save_packs(self.cache(), packs, add)
