"""PBS resource dialects: how a site wants a request written after `qsub -l`, and what only
that spelling refuses.

A cluster file names its dialect (`pbs_dialect:`, default `select`); each dialect is a
class registered under that name that overrides only what differs from `Dialect` (the way
ReFrame registers its schedulers). A new site with its own spelling is one more class here.

Every resource goes in ONE `-l`: PBS Pro accepts it, and Torque-style wrappers (Slurm's
qsub) keep only the last `-l`.
"""

from __future__ import annotations

from typing import ClassVar

from ...config.clusters import Cluster
from ...config.requests import JobRequest, RequestRule, scale_of
from ...model.errors import SweepError
from ...model.paths import cluster_file
from ...model.point import Point
from ...model.timefmt import hms

DIALECTS: dict[str, type[Dialect]] = {}


def registered(cls: type[Dialect]) -> type[Dialect]:
    """Class decorator: the dialect a cluster file's `pbs_dialect: <cls.name>` picks."""
    DIALECTS[cls.name] = cls
    return cls


class Dialect:
    name: ClassVar[str]

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def resources(self, request: JobRequest, project: str) -> list[str]:
        """The `name=value` items of the request, in the order the site documents them."""
        raise NotImplementedError

    def resource_list(self, request: JobRequest, project: str) -> str:
        """What follows `-l`."""
        return ",".join(self.resources(request, project))

    # The resource that asks for hardware threads (None: this spelling has no way to).
    hyperthread_resource: ClassVar[str | None] = None

    def problems(self, point: Point, request: JobRequest) -> list[str]:
        """What the site refuses only because of how the request must be written; one line
        each, naming the study's keys (the queue's own limits: config.requests)."""
        if request.hyperthreads and not self.hyperthread_resource:
            return [
                f"studies.{point.study}.hyperthreads: true, but the PBS dialect {self.name!r} of "
                f"{cluster_file(self.cluster.name)} has no way to ask for hardware threads; use [false]"
            ]
        return []

    @staticmethod
    def walltime(request: JobRequest) -> str:
        return f"walltime={hms(request.walltime_s)}"


@registered
class GadiDialect(Dialect):
    """NCI Gadi: totals (`ncpus=,ngpus=,mem=`), no `select`; jobfs and the storage the job
    may reach from the cluster file."""

    name = "gadi"
    # NCI: `-l other=hyperthread` gives each requested core's two hardware threads.
    hyperthread_resource = "other=hyperthread"

    def resources(self, request: JobRequest, project: str) -> list[str]:
        items = [f"ncpus={request.ncpus}"]
        if request.ngpus:
            items.append(f"ngpus={request.ngpus}")
        # PBS's GB (2^30 bytes), the cluster file's numbers as they are (config.clusters).
        items += [f"mem={request.mem_gib}GB", self.walltime(request)]
        if self.cluster.jobfs_gib:
            items.append(f"jobfs={self.cluster.jobfs_gib:g}GB")
        if self.cluster.storage:
            items.append(f"storage={self.cluster.storage.format(project=project)}")
        if request.hyperthreads:
            items.append(self.hyperthread_resource)
        return items

    def problems(self, point: Point, request: JobRequest) -> list[str]:
        # Totals cannot say how the cores spread over the nodes: past one node Gadi gives
        # whole nodes only.
        # (A multiple of the node's cores spread thinner, e.g. 2 x 24, would be given 1 node.)
        queue = request.queue
        if request.nodes == 1 or request.ncpus_per_node >= queue.cores_per_node:
            return []
        whole = f"ranks_per_node x threads_per_rank = {queue.cores_per_node}"
        if point.hyperthreads:
            whole += f" cores, {queue.cores_per_node * self.cluster.threads_per_core} with hyperthreads"
        if request.ncpus % queue.cores_per_node:
            what = f"is not a multiple of {queue.cores_per_node}"
        else:
            what = f"is {request.ncpus_per_node} cores per node"
        return [
            f"studies.{point.study}: ncpus={request.ncpus} {scale_of(point)} {what}; Gadi {queue.name} jobs past "
            f"one node take whole nodes ({whole})"
        ]


@registered
class SelectDialect(Dialect):
    """PBS Pro's chunks (NSCC ASPIRE 2A): `select=N:ncpus=:ngpus=:mpiprocs=:ompthreads=:mem=`,
    one chunk per node. PBS writes a host into PBS_NODEFILE once per mpiproc of its chunk
    (default 1): without `mpiprocs`, Open MPI's PBS support sees one slot per node and a
    point with 2 ranks per node fails to map ("Procs mapped: 1 ... PPR: 2:node")."""

    name = "select"

    def resources(self, request: JobRequest, project: str) -> list[str]:
        chunk = f"select={request.nodes}:ncpus={request.ncpus_per_node}"
        if request.ngpus_per_node:
            chunk += f":ngpus={request.ngpus_per_node}"
        chunk += f":mpiprocs={request.ranks_per_node}:ompthreads={request.threads_per_rank}"
        chunk += f":mem={request.mem_per_node_gib}GB"
        items = [chunk]
        if request.nodes > 1:
            items.append("place=scatter")  # one chunk per node: the ranks per node the point asks for
        return [*items, self.walltime(request)]


def dialect_of(cluster: Cluster) -> Dialect:
    """The dialect the cluster file names; SweepError for a name none is registered under."""
    if cluster.pbs_dialect not in DIALECTS:
        raise SweepError(
            [
                f"{cluster_file(cluster.name)}: pbs_dialect {cluster.pbs_dialect!r} is not known; "
                f"allowed: {', '.join(DIALECTS)}"
            ]
        )
    return DIALECTS[cluster.pbs_dialect](cluster)


def site_rules(cluster: Cluster) -> tuple[RequestRule, ...]:
    """What the cluster's dialect adds to the refusals of config.requests (every cluster
    names a dialect, `select` by default, so an unknown name stops any study)."""
    return (dialect_of(cluster).problems,)
