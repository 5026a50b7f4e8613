"""Packing: points with the same batch request run one after another in one batch job.

A study says `pack: scale` (every point of a scale, i.e. of one batch request, in one job)
or `pack: N` (at most N points per job; 1, the default, is one job per point). Points share
a job only when their request is the same: queue, nodes, cores, GPUs and memory per node,
ranks per node, threads per rank, hardware threads. Inside a pack the points run in the
sweep's run order (model.order: round by round, a seeded shuffle within), so that drift of
the machine spreads over every variant and none always runs first.
The pack's walltime is the sum of its points' walltimes plus the cluster's margin, once.

Each point stays its own Snakemake job (its directory, metrics.json, provenance, its own
timer): a pack is a Snakemake group (workflow/rules/run.smk `group:`), submitted as one
batch job by the cluster executor, and one point's failure or walltime stop is that point's
record only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..model import order
from ..model.point import Point
from ..model.settings import StudySettings
from ..model.timefmt import hms
from .clusters import Cluster
from .requests import JobRequest, job_request

SCALE = "scale"  # `pack: scale`: every point of one batch request in one job
# The name under which the cluster profiles give Snakemake the number of components a pack's
# group may span (`group-components: [pack=100000]`: any pack, whatever its size).
GROUP_COMPONENTS_NAME = "pack"


@dataclass(frozen=True)
class Pack:
    name: str  # the Snakemake group id and the batch job's name
    points: tuple[Point, ...]  # in the order they run

    def walltime_s(self, cluster: Cluster) -> int:
        """The batch job's walltime: the points' walltimes one after another, plus the margin once."""
        return sum(point.walltime_seconds for point in self.points) + cluster.walltime_margin_s

    def request_point(self) -> Point:
        """The pack's first point with the pack's summed walltime (margin excluded): what
        config.requests prices and checks against the queue's limits."""
        total = sum(point.walltime_seconds for point in self.points)
        return dataclasses.replace(self.points[0], walltime=hms(total))


def request_key(point: Point, cluster: Cluster) -> JobRequest:
    """What must be equal for points to share a batch job: the whole request but its name and
    walltime (a pack's walltime is its points' summed), so a field a request gains (e.g.
    hyperthreads) separates packs without being listed here."""
    return dataclasses.replace(job_request(point, cluster), name="", walltime_s=0, point_walltime_s=0)


def packs(
    points: Iterable[Point], cluster: Cluster, studies: Mapping[str, StudySettings], seed: int = 0, tag: str = ""
) -> list[Pack]:
    """The packs of the points whose study packs (`studies`: the sweep's, their `pack` filled
    by the schema; 1 for none), in study order; a pack of one point is no pack (it runs as it
    would unpacked). A pack runs its points in the sweep's run order (model.order, `seed`: the
    sweep's order_seed): round by round, shuffled within a round, as unpacked points run, so
    that no variant always runs first in a round (A B | B A | ...). `tag` ends each name (a
    later round's packs: `.r2`, so that no name is an earlier round's)."""
    groups: dict[tuple, list[Point]] = {}
    for point in points:
        size = studies[point.study].pack
        if size == 1:
            continue
        groups.setdefault((point.study, request_key(point, cluster)), []).append(point)
    result: list[Pack] = []
    names: set[str] = set()
    for (study, _key), members in groups.items():
        ordered = order.run_order(members, seed)
        size = studies[study].pack
        chunk = len(ordered) if size == SCALE else int(size)
        first = ordered[0]
        per_node = f"g{first.gpus_per_node}" if first.gpus_per_node else f"r{first.ranks_per_node}"
        for index, start in enumerate(range(0, len(ordered), chunk), start=1):
            part = tuple(ordered[start : start + chunk])
            if len(part) < 2:
                continue
            name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{study[:16]}.n{first.nodes}{per_node}.pack{index}{tag}")
            while name in names:  # the same scale on another queue
                name += "x"
            names.add(name)
            result.append(Pack(name, part))
    return result
