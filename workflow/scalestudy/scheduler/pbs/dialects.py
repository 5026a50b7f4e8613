"""PBS resource dialects: how a site wants a request written after `qsub -l`, and what only
that spelling refuses.

A cluster file names its dialect (`pbs_dialect:`, default `select`): `select` is PBS Pro as
OpenPBS writes it (pbspro.PbsPro itself, NSCC ASPIRE 2A's spelling); every other dialect is
a subclass of it that overrides only what differs (the way ReFrame's Torque scheduler is its
PBS one). A new site with its own spelling is one more subclass here, listed in DIALECTS.
"""

from __future__ import annotations

from ...config.clusters import Cluster
from ...config.requests import JobRequest, RequestRule, scale_of
from ...model.errors import SweepError
from ...model.paths import cluster_file
from ...model.point import Point
from .pbspro import PbsPro


class Gadi(PbsPro):
    """NCI Gadi: totals (`ncpus=,ngpus=,mem=`), no `select`; jobfs and the storage the job
    may reach from the cluster file; whole nodes past one node."""

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
        """Totals cannot say how the cores spread over the nodes: past one node Gadi gives
        whole nodes only."""
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


# Each `pbs_dialect:` name and its class.
DIALECTS: dict[str, type[PbsPro]] = {cls.name: cls for cls in (Gadi, PbsPro)}


def dialect_of(cluster: Cluster) -> PbsPro:
    """The PBS Pro scheduler of the cluster, in the dialect its file names; SweepError for a
    name none is registered under."""
    if cluster.pbs_dialect not in DIALECTS:
        raise SweepError(
            [
                f"{cluster_file(cluster.name)}: pbs_dialect {cluster.pbs_dialect!r} is not known; "
                f"allowed: {', '.join(DIALECTS)}"
            ]
        )
    return DIALECTS[cluster.pbs_dialect](cluster)


def site_rules(cluster: Cluster) -> tuple[RequestRule, ...]:
    """What a PBS Pro cluster's dialect adds to the refusals of config.requests (its file
    names a dialect, `select` by default; an unknown name stops the study): PbsPro.problems
    as scheduler_for(cluster) gives it."""
    return (dialect_of(cluster).problems,)
