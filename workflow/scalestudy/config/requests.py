"""What a point asks of a batch scheduler, and what a site would refuse.

One request per point, computed from the point and the cluster file; each scheduler
backend (scalestudy.scheduler: PBS Pro's qsub, Slurm's plugin) writes it in its own words,
and the runner estimates a run's cost from it. The checks here run when the workflow loads,
so a study the site would reject stops before anything is submitted; what only a backend's
way of writing the request refuses (Gadi's whole nodes) comes from that backend as a
RequestRule (SiteRules.problems).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from ..model.errors import did_you_mean
from ..model.paths import cluster_file
from ..model.point import Point, first_repeats
from ..model.timefmt import hms
from . import placement
from .clusters import Cluster, Queue


@dataclass(frozen=True)
class JobRequest:
    name: str
    queue: Queue
    nodes: int
    ncpus_per_node: int
    ngpus_per_node: int
    # In the cluster file's unit, the site's "GB" (2^30 bytes; config.clusters), as requested.
    mem_per_node_gib: int
    walltime_s: int
    # What the point itself runs with: the batch walltime adds the cluster's margin.
    point_walltime_s: int
    # Ranks on hardware threads: the site must be asked for them (Gadi: other=hyperthread).
    hyperthreads: bool = False
    # How the point places its ranks: MPI ranks on each node and threads of each rank
    # (a PBS chunk's mpiprocs and ompthreads; PBS_NODEFILE lists a host once per mpiproc).
    ranks_per_node: int = 1
    threads_per_rank: int = 1

    @property
    def ncpus(self) -> int:
        return self.nodes * self.ncpus_per_node

    @property
    def ngpus(self) -> int:
        return self.nodes * self.ngpus_per_node

    @property
    def mem_gib(self) -> int:
        return self.nodes * self.mem_per_node_gib


def job_name(point: Point) -> str:
    """Short and meaningful in `qstat`: study, nodes and GPUs or ranks per node, MPI set,
    NCCL set ('d' for default), placement where chosen, repeat; e.g. litgpt-full.n2g4.no-ucx-h.d.r1,
    hoomd-wca.n2r96.d.d.ht_bind-core.r1."""

    def short(name: str) -> str:
        return "d" if name == "default" else name[:8]

    per_node = f"g{point.gpus_per_node}" if point.gpus_per_node else f"r{point.ranks_per_node}"
    # A placement other than the default, as its directory names it (ht_bind-core): none otherwise.
    placement = "".join(f".{segment}" for segment in point.placement_segments)
    name = (
        f"{point.study[:16]}.n{point.nodes}{per_node}.{short(point.mpi_flag_set)}.{short(point.nccl_env_set)}"
        f"{placement}.r{point.repeat}"
    )
    # Names are restricted by the sweep schema already; PBS also wants no whitespace.
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def cores_used_by(point: Point, cluster: Cluster) -> int:
    """Cores per node the point's ranks and threads occupy: on hardware threads (a cluster
    with SMT), threads_per_core of them share a core."""
    used = point.ranks_per_node * point.threads_per_rank
    if point.hyperthreads and cluster.threads_per_core > 1:
        return math.ceil(used / cluster.threads_per_core)
    return used


def job_request(point: Point, cluster: Cluster) -> JobRequest:
    queue = cluster.queue(cluster.queue_name(point.gpus_per_node, point.queue))
    cores_used = cores_used_by(point, cluster)
    if point.gpus_per_node and queue.cores_per_gpu:
        # Queues that tie cores to GPUs (gpuvolta: 12 per GPU): ask for exactly that.
        ncpus_per_node = queue.cores_per_gpu * point.gpus_per_node
    elif point.gpus_per_node and queue.gpus_per_node:
        ncpus_per_node = max(cores_used, queue.cores_per_node * point.gpus_per_node // queue.gpus_per_node)
    else:
        ncpus_per_node = cores_used
    if point.nodes > 1 or ncpus_per_node >= queue.cores_per_node:
        mem_per_node = queue.mem_per_node_gib  # whole nodes
    elif point.gpus_per_node and queue.gpus_per_node:
        mem_per_node = queue.mem_per_node_gib * point.gpus_per_node / queue.gpus_per_node
    else:
        mem_per_node = ncpus_per_node * queue.mem_per_core_gib
    return JobRequest(
        name=job_name(point),
        queue=queue,
        nodes=point.nodes,
        ncpus_per_node=ncpus_per_node,
        ngpus_per_node=point.gpus_per_node,
        mem_per_node_gib=max(1, math.floor(mem_per_node)),
        walltime_s=point.walltime_seconds + cluster.walltime_margin_s,
        point_walltime_s=point.walltime_seconds,
        hyperthreads=point.hyperthreads,
        ranks_per_node=point.ranks_per_node,
        threads_per_rank=point.threads_per_rank,
    )


# A scheduler backend's own refusal of a point's request (e.g. a PBS dialect's): one line
# per problem, naming the study's keys.
RequestRule = Callable[[Point, JobRequest], list[str]]


class SiteRules(Protocol):
    """What loading a study asks of the cluster's scheduler backend (scheduler.interface.
    Scheduler; this layer cannot import one): what the cluster file lacks to submit anything,
    and its RequestRule."""

    def cluster_problems(self) -> list[str]: ...

    def problems(self, point: Point, request: JobRequest) -> list[str]: ...


def scale_of(point: Point) -> str:
    """The point's size as refusals name it: 'at nodes=2, ranks_per_node=36'."""
    per_node = (
        f"gpus_per_node={point.gpus_per_node}" if point.gpus_per_node else f"ranks_per_node={point.ranks_per_node}"
    )
    return f"at nodes={point.nodes}, {per_node}"


def request_problems(point: Point, cluster: Cluster, rules: Iterable[RequestRule] = ()) -> list[str]:
    """What the site would reject, one line each, naming the study's keys: the queue's
    limits here, then each of the backend's `rules`."""
    where = f"studies.{point.study}"
    scale = scale_of(point)
    wanted = cluster.queue_name(point.gpus_per_node, point.queue)
    if cluster.queues and wanted not in cluster.queues:
        return [
            f"{where}.queue: {wanted!r} is not a queue of {cluster.name}{did_you_mean(wanted, cluster.queues) or ';'}"
            f" allowed: {', '.join(cluster.queues)}"
        ]
    if not cluster.queues and point.queue:
        return [
            f"{where}.queue: {point.queue!r}, but {cluster.name} has no queues "
            f"({cluster_file(cluster.name)}); remove queue"
        ]
    problems = placement.cluster_problems(point, cluster.name, cluster.threads_per_core)
    if problems:
        return problems
    request = job_request(point, cluster)
    queue = request.queue
    cores_used = cores_used_by(point, cluster)
    if cluster.nodes is not None and point.nodes > cluster.nodes:
        machine, fix = (
            ("is one machine", "use nodes: [1]")
            if cluster.nodes == 1
            else (f"has {cluster.nodes} nodes", f"use at most {cluster.nodes}")
        )
        problems.append(
            f"{where}.nodes: {point.nodes} nodes, but {cluster.name} {machine} "
            f"({cluster_file(cluster.name)} nodes: {cluster.nodes}); {fix}"
        )
    if point.gpus_per_node > queue.gpus_per_node:
        nodes = f"queue {queue.name} nodes" if cluster.queues else "nodes"
        problems.append(
            f"{where}.gpus_per_node: {point.gpus_per_node} GPUs per node but {cluster.name} {nodes} have "
            f"{queue.gpus_per_node}" + ("" if cluster.queues else f" ({cluster_file(cluster.name)})")
        )
    if queue.cores_per_gpu and not point.gpus_per_node:
        problems.append(
            f"{where}: queue {queue.name} takes GPU jobs only (ncpus = {queue.cores_per_gpu} x ngpus); "
            f"set gpus_per_node or another queue"
        )
    # A cluster whose launcher oversubscribes (one machine rehearsing a study) runs more
    # ranks than cores on purpose.
    if not cluster.mpi.oversubscribe and (
        cores_used > request.ncpus_per_node or request.ncpus_per_node > queue.cores_per_node
    ):
        got = min(request.ncpus_per_node, queue.cores_per_node)
        if point.hyperthreads:
            threads = cluster.threads_per_core
            problems.append(
                f"{where}: {point.ranks_per_node * point.threads_per_rank} hardware threads per node "
                f"(ranks_per_node x threads_per_rank) {scale}, but a {queue.name} job gets {got} of "
                f"{queue.cores_per_node} cores x {threads} threads ({queue.cores_per_node * threads} at most)"
            )
        else:
            problems.append(
                f"{where}: {cores_used} cores per node (ranks_per_node x threads_per_rank) {scale}, but a "
                f"{queue.name} job gets {got} of {queue.cores_per_node}"
                + (
                    f"; hyperthreads: [true] fits up to {cluster.threads_per_core} per core"
                    if cluster.threads_per_core > 1
                    else ""
                )
            )
    limit = queue.max_walltime_s(request.ncpus, request.ngpus)
    size = f"{request.ngpus} GPUs" if queue.gpus_per_node else f"{request.ncpus} ncpus"
    if limit == 0:
        problems.append(f"{where}: {size} {scale} is more than queue {queue.name} accepts ({queue.max_size()})")
    elif limit is not None and request.walltime_s > limit:
        problems.append(
            f"{where}.walltime: {hms(request.walltime_s)} (the point's {point.walltime} + margin "
            f"{hms(cluster.walltime_margin_s)}) is over queue {queue.name}'s limit {hms(limit)} for {size}"
        )
    for rule in rules:
        problems += rule(point, request)
    return problems


def sweep_problems(points: list[Point], cluster: Cluster, rules: Iterable[RequestRule] = ()) -> list[str]:
    """Every distinct refusal over a study's points, on every cluster: one machine too (its
    one node, its GPUs); each point's first repeat is checked for all."""
    rules = tuple(rules)
    problems: dict[str, None] = {}
    for point in first_repeats(points):
        problems.update(dict.fromkeys(request_problems(point, cluster, rules)))
    return list(problems)


def estimated_service_units(
    queue: Queue, ncpus: int, ngpus: int, mem_gib: float, walltime_used_s: float
) -> float | None:
    """Cost from the request and the queue's rate (the way Gadi charges):
    rate x max(ncpus, mem / memory per core) x hours, or rate x ngpus x hours per GPU-hour."""
    if queue.charge_rate is None:
        return None
    hours = walltime_used_s / 3600
    if queue.charge_unit == "gpu_hour":
        return queue.charge_rate * ngpus * hours
    return queue.charge_rate * max(ncpus, mem_gib / queue.mem_per_core_gib) * hours
