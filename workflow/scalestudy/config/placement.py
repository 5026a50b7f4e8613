"""Process placement: the sweep's `hyperthreads`, `binding` and `mapping` axes, what each MPI
flavour accepts, and how each spells them on its launch line.

The words a study writes are the same for every MPI; this module holds, once, which words
each flavour has and the launcher options they become:

    binding   default (the launcher's own choice), none, hwthread, core, socket, numa
              Open MPI --bind-to X; MPICH Hydra -bind-to X
    mapping   default (ranks_per_node per node, as without the axis), core, socket, numa,
              hwthread (consecutive ranks to consecutive objects), spread (ranks dealt over
              the sockets in turn), ppr:N:node; Open MPI also ppr:N:socket and ppr:N:numa
              Open MPI --map-by X (+ :PE=threads_per_rank); MPICH Hydra -map-by X (-ppn as always)
    hyperthreads  true: hardware threads count as slots (Open MPI --use-hwthread-cpus; Hydra
              places by -ppn and needs no switch); only on a cluster whose file says it has
              SMT (threads_per_core > 1), which then accepts up to threads_per_core ranks per core

Checked when the study loads, one line per problem naming the key and what is allowed
(`study_problems` with the app's flavour, `point_problems` per scale, `cluster_problems`
against the cluster file); `openmpi_args` and `hydra_args` are what scalestudy.launch.command
puts on each launcher's line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..model.errors import did_you_mean
from ..model.paths import cluster_file
from ..model.point import DEFAULT_PLACEMENT, PLACEMENT_FIELDS, Point

FLAVOUR_NAMES = {"openmpi": "Open MPI", "mpich": "MPICH Hydra"}
# The binding words, the same for both launchers (Open MPI --bind-to, Hydra -bind-to).
BINDINGS = (DEFAULT_PLACEMENT, "none", "hwthread", "core", "socket", "numa")
# Mapping words that are an object type of both launchers' --map-by / -map-by.
MAP_OBJECTS = ("core", "socket", "numa", "hwthread")
# `spread`: ranks dealt over the node's sockets in turn (rank 0 socket 0, rank 1 socket 1, ...).
SPREAD = "spread"
SPREAD_AS = "socket"
PPR = re.compile(r"^ppr:([1-9][0-9]*):(node|socket|numa)$")
# Per-resource rank counts each launcher has: Hydra only per node (-ppn).
PPR_RESOURCES = {"openmpi": ("node", "socket", "numa"), "mpich": ("node",)}
# With threads_per_rank > 1 Open MPI reserves cores per rank (--map-by ...:PE=T), which binds
# each rank to its T cores: another binding is a conflict it refuses at launch.
BINDINGS_WITH_PE = (DEFAULT_PLACEMENT, "core", "hwthread")


def mappings(flavour: str) -> list[str]:
    """The mapping words a flavour accepts, as a message lists them."""
    return [DEFAULT_PLACEMENT, *MAP_OBJECTS, SPREAD, *(f"ppr:N:{r}" for r in PPR_RESOURCES.get(flavour, ()))]


def mapping_problem(value: Any, flavour: str) -> str | None:
    text = str(value)
    if text in (DEFAULT_PLACEMENT, SPREAD, *MAP_OBJECTS):
        return None
    match = PPR.fullmatch(text)
    allowed = ", ".join(mappings(flavour))
    name = FLAVOUR_NAMES.get(flavour, flavour)
    if match and match.group(2) in PPR_RESOURCES.get(flavour, ()):
        return None
    if match:
        return f"{text!r}: {name} has no per-{match.group(2)} rank count; allowed for {flavour}: {allowed}"
    return f"{text!r} is not a mapping{did_you_mean(text, mappings(flavour)) or ';'} allowed for {flavour}: {allowed}"


def study_problems(study: Mapping[str, Any], flavour: str) -> list[str]:
    """The placement axes of one validated study (the schema's defaults filled) against its
    app's MPI flavour; each line starts with the key (the caller prefixes studies.<name>.)."""
    problems = []
    for i, value in enumerate(study["binding"]):
        if value not in BINDINGS:
            suggestion = did_you_mean(str(value), BINDINGS) or ";"
            problems.append(
                f"binding[{i}]: {value!r} is not a binding{suggestion} allowed for {flavour}: {', '.join(BINDINGS)}"
            )
        elif study["threads_per_rank"] > 1 and flavour == "openmpi" and value not in BINDINGS_WITH_PE:
            problems.append(
                f"binding[{i}]: {value!r} with threads_per_rank {study['threads_per_rank']}: Open MPI reserves "
                f"cores per rank (--map-by ...:PE=N), which binds to them; allowed: {', '.join(BINDINGS_WITH_PE)}"
            )
    for i, value in enumerate(study["mapping"]):
        problem = mapping_problem(value, flavour)
        if problem:
            problems.append(f"mapping[{i}]: {problem}")
    for key in PLACEMENT_FIELDS:
        values = [str(v) for v in study[key]]
        if len(set(values)) != len(values):
            problems.append(f"{key}: a value is listed twice: {study[key]}")
    return problems


def point_problems(point: Point) -> list[str]:
    """What only the scale decides: ppr:N:node must place the point's ranks_per_node."""
    match = PPR.fullmatch(point.mapping)
    if match and match.group(2) == "node" and int(match.group(1)) != point.ranks_per_node:
        return [
            f"studies.{point.study}.mapping: {point.mapping!r} places {match.group(1)} ranks per node, but the point "
            f"has ranks_per_node={point.ranks_per_node}; use ppr:{point.ranks_per_node}:node or default"
        ]
    return []


def cluster_problems(point: Point, cluster_name: str, threads_per_core: int) -> list[str]:
    """Hardware threads only where the cluster file says the nodes have them."""
    if point.hyperthreads and threads_per_core < 2:
        return [
            f"studies.{point.study}.hyperthreads: true, but {cluster_name} has no hardware threads to use "
            f"({cluster_file(cluster_name)} threads_per_core: {threads_per_core}); use [false]"
        ]
    return []


def map_by(point: Point, flavour: str) -> str | None:
    """The launcher's mapping policy word for the point; None: the flavour's default line."""
    mapping = point.mapping
    if mapping == DEFAULT_PLACEMENT:
        return None
    if mapping == SPREAD:
        return SPREAD_AS
    if flavour == "mpich" and PPR.fullmatch(mapping):
        return None  # ppr:N:node is Hydra's -ppn N, on every line already
    return mapping


def openmpi_args(point: Point) -> list[str]:
    """Open MPI: --map-by (ppr:R:node by default, :PE=T for threads), --bind-to, --use-hwthread-cpus."""
    policy = map_by(point, "openmpi") or f"ppr:{point.ranks_per_node}:node"
    if point.threads_per_rank > 1:
        policy += f":PE={point.threads_per_rank}"
    args = ["--map-by", policy]
    if point.binding != DEFAULT_PLACEMENT:
        args += ["--bind-to", point.binding]
    if point.hyperthreads:
        args.append("--use-hwthread-cpus")
    return args


def hydra_args(point: Point) -> list[str]:
    """MPICH Hydra: -bind-to (core:T for threads, as without the axis), -map-by; -ppn is the caller's."""
    args = []
    binding = point.binding
    if binding == DEFAULT_PLACEMENT and point.threads_per_rank > 1:
        binding = "core"
    if binding != DEFAULT_PLACEMENT:
        per_rank = point.threads_per_rank > 1 and binding in ("core", "hwthread")
        args += ["-bind-to", f"{binding}:{point.threads_per_rank}" if per_rank else binding]
    policy = map_by(point, "mpich")
    if policy:
        args += ["-map-by", policy]
    return args
