"""The point and sweep model: one point is one run (one batch job, one directory, one
metrics.json). Built once by the configuration layer (scalestudy.config.sweep.expand);
jobs get a point back from its JSON (`Point.from_json`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import yaml

from .paths import SCHEMA_PATH
from .settings import StudySettings
from .timefmt import hms, hms_seconds

# Axis values become path segments of the point id.
SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
# How a point is run, not what it measures: left out of its identity.
HOW_RUN_FIELDS = frozenset({"walltime", "queue"})
# A parameter axis's column in the tables (runs.csv, scaling.csv): "param.<name>".
AXIS_PREFIX = "param."
# The key of the retry number in a retried point's JSON (scalestudy.bookkeeping.retry).
RETRY_KEY = "retry"
# The word for the launcher's own choice of binding or mapping (scalestudy.config.placement).
DEFAULT_PLACEMENT = "default"
# Process placement (hardware threads as slots, binding, mapping): each field's value when a
# study does not choose, i.e. what the launcher does by itself. A point at these values has no
# placement segment in its id and none of these keys in its JSON, so points of studies written
# before placement existed keep their directories and definitions.
PLACEMENT_FIELDS = ("hyperthreads", "binding", "mapping")
# A study that declares its own program (app: command): the study keys that say what it runs
# and how its output is read. Its points carry them as `program` (program_of), so the run job,
# the record check and the analysis read the study's own figures from the point or its row.
PROGRAM_KEYS = ("command", "figures", "primary", "mpi")
# The program's column in runs.csv (its JSON), only for the points of such a study.
PROGRAM = "program"


def schema_placement_defaults() -> Mapping[str, Any]:
    """Each placement field's default: the one value of its axis's default in the sweep schema,
    the one place that says it (read once, at import)."""
    with open(SCHEMA_PATH, encoding="utf-8") as file:
        schema = yaml.load(file, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    study = schema["properties"]["studies"]["additionalProperties"]["properties"]
    defaults = {}
    for name in PLACEMENT_FIELDS:
        (defaults[name],) = study[name]["default"]  # an axis: a list of one value
    return MappingProxyType(defaults)


PLACEMENT_DEFAULTS = schema_placement_defaults()


def axis_segment(name: str, value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"{name}{text}" if isinstance(value, int | float) and not isinstance(value, bool) else f"{name}-{text}"


@dataclass(frozen=True)
class Point:
    """One run: one batch job, one directory, one metrics.json."""

    study: str
    app: str
    scaling: str
    nodes: int
    ranks_per_node: int
    gpus_per_node: int
    threads_per_rank: int
    mpi_flag_set: str
    nccl_env_set: str
    repeat: int
    walltime: str
    params: Mapping[str, Any]
    axes: tuple[str, ...] = ()
    mpi_flags: Mapping[str, str] = field(default_factory=dict)
    nccl_env: Mapping[str, str] = field(default_factory=dict)
    # The batch queue (None: the cluster's default for CPU or GPU points). Like the
    # walltime, it is how the point is run, not what it measures.
    queue: str | None = None
    # Placement axes (PLACEMENT_DEFAULTS: the launcher's own choice); their spelling per MPI
    # flavour is scalestudy.config.placement's.
    hyperthreads: bool = PLACEMENT_DEFAULTS["hyperthreads"]
    binding: str = PLACEMENT_DEFAULTS["binding"]
    mapping: str = PLACEMENT_DEFAULTS["mapping"]
    # A command study's program (program_of); {} for every other app, whose JSON has no such key.
    program: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @functools.cached_property
    def id(self) -> str:
        """Readable and stable: the same point always maps to the same directory. Computed once
        per point (a plan looks it up several times per point; the fields never change)."""
        per_node = f"gpn{self.gpus_per_node}" if self.gpus_per_node else f"rpn{self.ranks_per_node}"
        return "/".join(
            [
                *self.axis_segments,
                f"nodes{self.nodes}-{per_node}",
                f"mpi-{self.mpi_flag_set}",
                f"nccl-{self.nccl_env_set}",
                *self.placement_segments,
                f"rep{self.repeat}",
            ]
        )

    @property
    def placement(self) -> dict[str, Any]:
        """The placement fields that differ from the launcher's default ({} for most points)."""
        return {name: getattr(self, name) for name, value in PLACEMENT_DEFAULTS.items() if getattr(self, name) != value}

    @property
    def placement_segments(self) -> list[str]:
        """One path segment naming the placement, e.g. 'ht_bind-core_map-ppr-2-socket'; none at
        the default placement (directories of points that do not choose stay as they were)."""
        placement = self.placement
        if not placement:
            return []
        parts = ["ht"] if placement.get("hyperthreads") else []
        parts += [f"{word}-{placement[name]}".replace(":", "-") for name, word in PLACEMENT_WORDS if name in placement]
        return ["_".join(parts)]

    @property
    def axis_segments(self) -> list[str]:
        return [axis_segment(name, self.params[name]) for name in self.axes]

    @property
    def variant(self) -> str:
        """Everything but scale and repeat: the curve this point belongs to."""
        return "/".join(
            [*self.axis_segments, f"mpi-{self.mpi_flag_set}", f"nccl-{self.nccl_env_set}", *self.placement_segments]
        )

    @property
    def combination(self) -> tuple[str, tuple[Any, ...]]:
        """The study and the values of its parameter axes: points with equal combinations
        have equal params (the study fixes the rest). A value, never an object identity."""
        return self.study, tuple(self.params[name] for name in self.axes)

    @property
    def walltime_seconds(self) -> int:
        return hms_seconds(self.walltime)

    def to_json(self) -> str:
        """What defines the point's result. The walltime and queue are left out: raising the
        walltime or moving to another queue must not rerun finished points (the job gets them
        separately)."""
        # Field by field, not dataclasses.asdict: its deep copy dominated 10,000-point dry runs
        # (and the field names once: dataclasses.fields() per call was a tenth of a dry run's
        # own share).
        data = {name: getattr(self, name) for name in ALWAYS_DEFINING}
        data.update(self.placement)  # only where chosen: a point at the default keeps its JSON
        if self.program:
            data[PROGRAM] = self.program
        return json.dumps(data, sort_keys=True, default=dict)

    @classmethod
    def from_json(cls, text: str, walltime_seconds: int, queue: str | None = None) -> Point:
        data = json.loads(text)
        data.pop(RETRY_KEY, None)  # the retry number of a retried point (scalestudy.bookkeeping.retry)
        data["queue"] = queue
        data["axes"] = tuple(data["axes"])
        data["walltime"] = hms(walltime_seconds)
        return cls(**data)

    def as_record(self) -> dict[str, Any]:
        """Flat columns for runs.csv."""
        record = {
            "study": self.study,
            "app": self.app,
            "scaling": self.scaling,
            "point": self.id,
            "variant": self.variant,
            "nodes": self.nodes,
            "ranks_per_node": self.ranks_per_node,
            "gpus_per_node": self.gpus_per_node,
            "ranks": self.ranks,
            "threads_per_rank": self.threads_per_rank,
            "mpi_flag_set": self.mpi_flag_set,
            "nccl_env_set": self.nccl_env_set,
            "repeat": self.repeat,
            **{name: getattr(self, name) for name in PLACEMENT_FIELDS},
        }
        record.update({AXIS_PREFIX + name: self.params[name] for name in self.axes})
        if self.program:
            record[PROGRAM] = json.dumps(self.program, sort_keys=True)
        return record


# How the placement fields name themselves in a path segment (hyperthreads: "ht").
PLACEMENT_WORDS = (("binding", "bind"), ("mapping", "map"))


def first_repeats(points: Iterable[Point]) -> list[Point]:
    """A point's repeats differ from it only in their number: its first repeat stands for all
    where only what they share matters (the request and its refusals, the memory needed,
    the resources asked), so a 100,000-point sweep of 1,000 repeats checks 100."""
    return [point for point in points if point.repeat == 1]


# What defines a point's result: every field but how it is run (Point.to_json).
DEFINING_FIELDS = tuple(f.name for f in dataclasses.fields(Point) if f.name not in HOW_RUN_FIELDS)
# Those in every point's JSON; the placement fields join only where they differ from the default,
# the program only where a study declares one.
ALWAYS_DEFINING = tuple(name for name in DEFINING_FIELDS if name not in PLACEMENT_DEFAULTS and name != PROGRAM)


def program_of(study: Mapping[str, Any]) -> dict[str, Any]:
    """A study's program as its points carry it ({} where the study has no `command`): the
    command template, the figures as a list in the order the sweep declares them (a point's
    JSON sorts mapping keys; the first figure is the primary one by default) each with its
    `name`, the primary figure's name, and the MPI the program is built against where the
    study names one."""
    if "command" not in study:
        return {}
    figures = study.get("figures") or {}
    listed = [{"name": name, **spec} for name, spec in figures.items()] if isinstance(figures, Mapping) else []
    first = listed[0]["name"] if listed else None
    program = {"command": study["command"], "figures": listed, "primary": study.get("primary") or first}
    return {**program, "mpi": study["mpi"]} if "mpi" in study else program


@dataclass(frozen=True)
class Sweep:
    # Each study's own settings (model.settings; the raw config is not kept).
    studies: Mapping[str, StudySettings]
    mpi_flag_sets: Mapping[str, Mapping[str, str]]
    nccl_env_sets: Mapping[str, Mapping[str, str]]
    points: tuple[Point, ...]
    # Points each study's `exclude` and `zip` leave out of its cross product (not planned).
    excluded: Mapping[str, int] = field(default_factory=dict)

    def points_of(self, study: str) -> list[Point]:
        return [p for p in self.points if p.study == study]

    def studies_of_app(self, app: str) -> list[str]:
        return [name for name, study in self.studies.items() if study.app == app]
