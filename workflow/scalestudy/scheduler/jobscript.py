"""What every backend's `submit` reads of a Snakemake jobscript, and how it refuses one.

Snakemake writes the job's properties (rule, params, resources, outputs) into the
jobscript; a point's request comes from its JSON and the cluster file, any other job (e.g.
an initial state) asks for one node and its threads (`generic_request`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config.requests import JobRequest
from ..model.point import Point
from ..model.units import GIB, MB


class SubmitRefused(Exception):
    """The site would refuse the job: nothing reached the scheduler. One line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def job_properties(jobscript: Path) -> dict[str, Any]:
    """Snakemake writes the job's properties (rule, params, resources, output) into the jobscript."""
    for line in jobscript.read_text().splitlines():
        if line.startswith("# properties = "):
            return json.loads(line[len("# properties = ") :])
    raise ValueError(f"{jobscript}: no '# properties = ' line (does the jobscript template keep {{properties}}?)")


def jobscript_point(properties: Mapping[str, Any]) -> Point | None:
    """The point a run job measures (its params' JSON; its walltime and queue from its
    resources), as every backend's `submit` reads it; None for any other job."""
    params, resources = properties.get("params") or {}, properties.get("resources") or {}
    if "point" not in params:
        return None
    return Point.from_json(params["point"], int(resources["walltime_s"]), resources.get("queue") or None)


def generic_request(properties: Mapping[str, Any], cluster) -> JobRequest:
    """A job that is not a point (e.g. making an initial configuration): one node, its threads."""
    resources = properties.get("resources") or {}
    queue = cluster.queue(cluster.queue_name(0, resources.get("queue") or None))
    ncpus = max(1, int(properties.get("threads") or 1))
    # Snakemake's mem_mb is in MB (10^6 bytes); PBS's mem= in its GB (2^30 bytes).
    mem_mb = resources.get("mem_mb")
    walltime_s = int(resources.get("runtime") or 60) * 60
    return JobRequest(
        name=re.sub(r"[^A-Za-z0-9._-]", "_", str(properties.get("rule", "job")))[:48],
        queue=queue,
        nodes=1,
        ncpus_per_node=ncpus,
        ngpus_per_node=0,
        mem_per_node_gib=max(1, int(mem_mb * MB / GIB) if mem_mb else int(ncpus * queue.mem_per_core_gib)),
        walltime_s=walltime_s,
        point_walltime_s=walltime_s,
    )
