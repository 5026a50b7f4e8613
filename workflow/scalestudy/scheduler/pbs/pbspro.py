"""PBS Pro as a scalestudy scheduler (interface.Scheduler), writing a request as OpenPBS
documents it: `select` chunks, one per node (NSCC ASPIRE 2A speaks it unchanged). A site
with its own spelling is a subclass that overrides only what differs (dialects.py: Gadi),
as ReFrame's Torque scheduler is its PBS one with what differs overridden.

The five operations are done by the commands' modules (submit, status, cancel: one module
per command, each imported inside its method): the status and cancel commands call this
class on every call, so its top imports only the standard library and the interface.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..interface import Scheduler


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

    # ------------------------------------------------------------------ the five operations

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

    def cost(self, job_id: str) -> float | None:
        """The ended job's resources_used.walltime in seconds: from the status command's last
        qstat answer (the cache), else one qstat of its own. The status command prices a
        point with the same figure (status.answer)."""
        from .cache import load_states
        from .status import FINISHED_STATES, query

        try:
            cached = load_states(self.cache())
            entry = cached["jobs"].get(job_id)
            if entry is None or "walltime_used" not in entry:
                states, _unknown, _form = query([job_id], self.qstat, cached.get("form") or "json")
                state = states.get(job_id)
                entry = state and {"state": state.state, "walltime_used": state.resources_used.get("walltime")}
        except Exception:  # never raises: a qstat that fails says nothing of the cost
            return None
        if not entry or entry.get("state") not in FINISHED_STATES:
            return None
        from ...launch.ended import ran_s

        return ran_s(entry.get("walltime_used"))

    def hosts(self, environ: Mapping[str, str] = os.environ) -> list[str]:
        """The hosts of $PBS_NODEFILE (a host once per mpiproc, or per CPU at Gadi), each once,
        in its order (launch.command.nodefile_hosts: the runner reads the same)."""
        from ...launch.command import nodefile_hosts

        return nodefile_hosts(environ)
