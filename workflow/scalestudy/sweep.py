"""The sweep file: load, validate (shape + meaning), expand into run points.

A problem is reported as one line that names the key path, e.g.
``studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch'; defined: default, no-ucx``,
and all problems are reported together, before anything runs.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PACKAGE_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_ROOT.parent.parent
SCHEMA_PATH = REPO_ROOT / "config" / "schema" / "sweep.schema.yaml"
# The plots every study gets (results/report/plots/<study>.<kind>.png). Here, not in
# plots.py, so that planning a DAG never imports matplotlib.
PLOT_KINDS = ("metric", "speedup", "efficiency", "variants", "cost")
# Axis values become path segments of the point id.
SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
# An MPI flag set is for one MPI flavour: Open MPI sets become `--mca name value`,
# MPICH sets become environment variables of every rank (MPIR_CVAR_..., FI_..., UCX_...).
MPI_FLAVOURS = ("openmpi", "mpich")
FLAVOUR_KEY = "flavour"
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


class SweepError(ValueError):
    """Raised with every problem found, one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def hms_seconds(text: str) -> int:
    """'HH:MM:SS' (also 'MM:SS' or 'SS', as schedulers print short times) -> seconds."""
    seconds = 0
    for part in str(text).strip().split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def hms(seconds: float) -> str:
    """Seconds -> 'HH:MM:SS', the form walltimes take in the sweep file and in qsub."""
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


# How a point is run, not what it measures: left out of its identity.
HOW_RUN_FIELDS = frozenset({"walltime", "queue"})


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

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def id(self) -> str:
        """Readable and stable: the same point always maps to the same directory."""
        segments = [axis_segment(name, self.params[name]) for name in self.axes]
        per_node = f"gpn{self.gpus_per_node}" if self.gpus_per_node else f"rpn{self.ranks_per_node}"
        segments += [
            f"nodes{self.nodes}-{per_node}",
            f"mpi-{self.mpi_flag_set}",
            f"nccl-{self.nccl_env_set}",
            f"rep{self.repeat}",
        ]
        return "/".join(segments)

    @property
    def variant(self) -> str:
        """Everything but scale and repeat: the curve this point belongs to."""
        parts = [axis_segment(name, self.params[name]) for name in self.axes]
        parts += [f"mpi-{self.mpi_flag_set}", f"nccl-{self.nccl_env_set}"]
        return "/".join(parts)

    @property
    def walltime_seconds(self) -> int:
        return hms_seconds(self.walltime)

    def to_json(self) -> str:
        """What defines the point's result. The walltime and queue are left out: raising the
        walltime or moving to another queue must not rerun finished points (the job gets them
        separately)."""
        # Field by field, not dataclasses.asdict: its deep copy dominated 10,000-point dry runs.
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in HOW_RUN_FIELDS}
        return json.dumps(data, sort_keys=True, default=dict)

    @classmethod
    def from_json(cls, text: str, walltime_seconds: int, queue: str | None = None) -> Point:
        data = json.loads(text)
        data.pop("retry", None)  # the retry number of a retried point (scalestudy/retry.py)
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
        }
        record.update({f"param.{name}": self.params[name] for name in self.axes})
        return record


def axis_segment(name: str, value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"{name}{text}" if isinstance(value, int | float) and not isinstance(value, bool) else f"{name}-{text}"


@dataclass(frozen=True)
class Sweep:
    studies: Mapping[str, Mapping[str, Any]]
    mpi_flag_sets: Mapping[str, Mapping[str, str]]
    nccl_env_sets: Mapping[str, Mapping[str, str]]
    points: tuple[Point, ...]

    def points_of(self, study: str) -> list[Point]:
        return [p for p in self.points if p.study == study]

    def studies_of_app(self, app: str) -> list[str]:
        return [name for name, study in self.studies.items() if study["app"] == app]


# ---------------------------------------------------------------- loading


def is_true(value: Any) -> bool:
    """A flag from a config file (True) or from --config (the string 'true')."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def drop_nulls(value: Any) -> Any:
    """An overlay sets a key to null to remove it (JSON merge-patch semantics)."""
    if isinstance(value, Mapping):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge, overlay wins; used for config/local.yaml over config/sweep.yaml."""
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_yaml(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def load_files(*paths: str | Path) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for path in paths:
        config = merge(config, read_yaml(path))
    return config


def key_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


def schema_problems(config: Mapping[str, Any]) -> list[str]:
    import jsonschema

    schema = read_yaml(SCHEMA_PATH)
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        where = key_path(error.absolute_path)
        if error.validator == "pattern" and error.absolute_path:
            message = (
                f"{error.instance!r} is not allowed; use letters, digits, '.', '_' or '-' ({error.validator_value})"
            )
        elif error.validator == "propertyNames":
            message = f"name {error.instance!r} is not allowed: {error.message}"
        else:
            message = error.message
        problems.append(f"{where}: {message}")
    return problems


def with_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    config = drop_nulls(dict(config))
    config.setdefault("mpi_flag_sets", {})
    config.setdefault("nccl_env_sets", {})
    config["mpi_flag_sets"] = {k: dict(v or {}) for k, v in config["mpi_flag_sets"].items()}
    config["nccl_env_sets"] = {k: dict(v or {}) for k, v in config["nccl_env_sets"].items()}
    config["mpi_flag_sets"].setdefault("default", {})
    config["nccl_env_sets"].setdefault("default", {})
    for study in config.get("studies", {}).values():
        if not isinstance(study, dict):
            continue
        study.setdefault("scaling", "strong")
        study.setdefault("threads_per_rank", 1)
        study.setdefault("mpi_flags", ["default"])
        study.setdefault("nccl_env", ["default"])
        study.setdefault("repeats", 1)
        study.setdefault("walltime", "01:00:00")
        study.setdefault("params", {})
    return config


def meaning_problems(config: Mapping[str, Any]) -> list[str]:
    from . import nccl
    from .apps import APPS

    problems = []
    for set_name, variables in config["nccl_env_sets"].items():
        for variable, value in variables.items():
            problem = nccl.value_problem(variable, value)
            if problem:
                problems.append(f"nccl_env_sets.{set_name}.{variable}: {problem}")
    for name, study in config["studies"].items():
        where = f"studies.{name}"
        if study["app"] not in APPS:
            problems.append(f"{where}.app: unknown app {study['app']!r}; allowed: {', '.join(sorted(APPS))}")
            continue
        has_ranks, has_gpus = "ranks_per_node" in study, "gpus_per_node" in study
        if has_ranks == has_gpus:
            problems.append(f"{where}: give exactly one of ranks_per_node or gpus_per_node")
        for key, sets in (("mpi_flags", "mpi_flag_sets"), ("nccl_env", "nccl_env_sets")):
            defined = ", ".join(sorted(config[sets]))
            for i, set_name in enumerate(study[key]):
                if set_name not in config[sets]:
                    problems.append(f"{where}.{key}[{i}]: unknown set {set_name!r}; defined: {defined}")
            if len(set(study[key])) != len(study[key]):
                problems.append(f"{where}.{key}: a set is listed twice")
        problems += flavour_problems(where, study, config["mpi_flag_sets"])
        for axis_key in ("nodes", "ranks_per_node", "gpus_per_node"):
            values = study.get(axis_key, [])
            if len(set(values)) != len(values):
                problems.append(f"{where}.{axis_key}: a value is listed twice: {values}")
        for param, value in study["params"].items():
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if not SAFE_SEGMENT.match(str(item)):
                        problems.append(
                            f"{where}.params.{param}[{i}]: axis value {item!r} cannot name a directory;"
                            " use letters, digits, '.', '_', '+' or '-'"
                        )
                if len(set(map(str, value))) != len(value):
                    problems.append(f"{where}.params.{param}: a value is listed twice: {value}")
        app = APPS[study["app"]]
        problems += [f"{where}.{p}" for p in app.param_problems(study["params"])]
        problems += [f"{where}.{p}" for p in app.study_problems(study)]
    return problems


def flag_set_flavour(flag_set: Mapping[str, Any]) -> str:
    return str(flag_set.get(FLAVOUR_KEY, "openmpi"))


def flavour_problems(where: str, study: Mapping[str, Any], flag_sets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A non-empty flag set must be for the MPI the study's app is built against."""
    from .apps import APPS

    app = APPS[study["app"]]
    problems = []
    for i, set_name in enumerate(study["mpi_flags"]):
        flag_set = flag_sets.get(set_name)
        if not flag_set or flag_set_flavour(flag_set) == app.mpi_flavour:
            continue
        fitting = [n for n, s in flag_sets.items() if not s or flag_set_flavour(s) == app.mpi_flavour]
        problems.append(
            f"{where}.mpi_flags[{i}]: set {set_name!r} is for {flag_set_flavour(flag_set)} but app {study['app']!r}"
            f" runs on {app.mpi_flavour}; sets that fit: {', '.join(fitting)}"
        )
    return problems


def flag_set_problems(flag_sets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """MPICH sets are environment variables: their names must be ones."""
    problems = []
    for name, flag_set in flag_sets.items():
        if flag_set_flavour(flag_set) != "mpich":
            continue
        for key in flag_set:
            if key != FLAVOUR_KEY and not ENV_NAME.match(key):
                problems.append(
                    f"mpi_flag_sets.{name}.{key}: an MPICH set holds environment variables; "
                    "use upper-case letters, digits and '_' (e.g. MPIR_CVAR_ASYNC_PROGRESS)"
                )
    return problems


def validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the config with defaults filled in, or raise SweepError with every problem."""
    config = with_defaults(config)
    problems = schema_problems(config)
    if problems:
        raise SweepError(problems)
    problems = flag_set_problems(config["mpi_flag_sets"]) + meaning_problems(config)
    if problems:
        raise SweepError(problems)
    return config


# ---------------------------------------------------------------- expansion


def expand_study(name: str, study: Mapping[str, Any], config: Mapping[str, Any]) -> list[Point]:
    params = study["params"]
    axes = tuple(k for k, v in params.items() if isinstance(v, list))
    axis_values = [params[k] for k in axes]
    gpus = "gpus_per_node" in study
    per_node_values = study["gpus_per_node"] if gpus else study["ranks_per_node"]
    # One params dict per axis combination, shared by its points (never mutated): code that
    # looks at params once per distinct value (input files) keys on it.
    resolved_params = {
        combo: {**params, **dict(zip(axes, combo, strict=True))} for combo in itertools.product(*axis_values)
    }
    mpi_flags = {
        name: {k: str(v) for k, v in config["mpi_flag_sets"][name].items() if k != FLAVOUR_KEY}
        for name in study["mpi_flags"]
    }
    nccl_env = {name: {k: str(v) for k, v in config["nccl_env_sets"][name].items()} for name in study["nccl_env"]}
    points = []
    for combo, nodes, per_node, mpi_set, nccl_set in itertools.product(
        resolved_params, study["nodes"], per_node_values, study["mpi_flags"], study["nccl_env"]
    ):
        resolved = resolved_params[combo]
        for repeat in range(1, study["repeats"] + 1):
            points.append(
                Point(
                    study=name,
                    app=study["app"],
                    scaling=study["scaling"],
                    nodes=nodes,
                    ranks_per_node=per_node,
                    gpus_per_node=per_node if gpus else 0,
                    threads_per_rank=study["threads_per_rank"],
                    mpi_flag_set=mpi_set,
                    nccl_env_set=nccl_set,
                    repeat=repeat,
                    walltime=study["walltime"],
                    params=resolved,
                    axes=axes,
                    mpi_flags=mpi_flags[mpi_set],
                    nccl_env=nccl_env[nccl_set],
                    queue=study.get("queue"),
                )
            )
    return points


def expand(config: Mapping[str, Any]) -> list[Point]:
    points = []
    for name, study in config["studies"].items():
        points += expand_study(name, study, config)
    return points


def preflight_problems(points: Iterable[Point]) -> list[str]:
    """Per-point checks that need the scale (e.g. batch size vs ranks), reported once per study/key."""
    from .apps import APPS

    problems: list[str] = []
    for point in points:
        for problem in APPS[point.app].preflight(point):
            line = f"studies.{point.study}.{problem}"
            if line not in problems:
                problems.append(line)
    return problems


@functools.lru_cache(maxsize=4096)
def made_here(path: str, assets_dir: str) -> bool:
    """Is `path` one of the files this workflow's rules make (under the assets directory)?"""
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(assets_dir))


def under_assets(path: str, assets_dir: str) -> str:
    """`path` (a file under the assets directory) spelled as `assets_dir`/..., the form of rule outputs."""
    return os.path.join(assets_dir, os.path.relpath(os.path.abspath(path), os.path.abspath(assets_dir)))


def inputs_by_params(points: Iterable[Point]) -> dict[Any, tuple[Point, dict[str, str]]]:
    """The input files of each distinct params dict (points share them: see expand_study),
    with one point that has it; 10,000 points of one study ask the app once. An app whose
    inputs also depend on the scale (weak scaling: N grows with ranks) keys on that too."""
    from .apps import APPS

    found: dict[Any, tuple[Point, dict[str, str]]] = {}
    for point in points:
        key = APPS[point.app].inputs_key(point)
        if key not in found:
            found[key] = (point, APPS[point.app].inputs(point))
    return found


def missing_inputs(points: Iterable[Point], assets_dir: str) -> list[str]:
    """Input files no rule makes (outside `assets_dir`) that do not exist, once per study and key."""
    problems: list[str] = []
    for point, inputs in inputs_by_params(points).values():
        for key, path in inputs.items():
            line = f"studies.{point.study}.params.{key}: {path} does not exist"
            if not made_here(path, assets_dir) and not Path(path).exists() and line not in problems:
                problems.append(line)
    return problems


def load(config: Mapping[str, Any]) -> Sweep:
    """Validate and expand; raises SweepError listing every problem, one line each."""
    config = validate(config)
    points = expand(config)
    problems = preflight_problems(points)
    if problems:
        raise SweepError(problems)
    return Sweep(
        studies=config["studies"],
        mpi_flag_sets=config["mpi_flag_sets"],
        nccl_env_sets=config["nccl_env_sets"],
        points=tuple(points),
    )
