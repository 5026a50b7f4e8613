"""The sweep file: validate its shape (the JSON schema, which also holds every default)
and its names and sets, then expand it into run points.

A problem is reported as one line that names the key path, e.g.
``studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch'; defined: default, no-ucx``,
and all problems are reported together, before anything runs. What an app says about
its own parameters is checked one layer up (scalestudy.study), where the apps are known.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..model.errors import SweepError
from ..model.paths import SCHEMA_PATH
from ..model.point import SAFE_SEGMENT, Point, Sweep
from .files import drop_nulls, read_yaml
from .nccl import value_problem

# An MPI flag set is for one MPI flavour: Open MPI sets become `--mca name value`,
# MPICH sets become environment variables of every rank (MPIR_CVAR_..., FI_..., UCX_...).
MPI_FLAVOURS = ("openmpi", "mpich")
FLAVOUR_KEY = "flavour"
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
# The set every study may name: no flags, no variables.
DEFAULT_SET = "default"
# A string param may say where the results directory is (e.g. the local study's stand-in
# model under {results_dir}/assets), so that it follows `results_dir:`.
RESULTS_DIR_TOKEN = "{results_dir}"


# ---------------------------------------------------------------- shape and defaults


def key_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


@functools.cache
def schema() -> dict[str, Any]:
    return read_yaml(SCHEMA_PATH)


@functools.cache
def defaults() -> dict[str, Any]:
    """The schema's defaults: top-level keys by name, and a study's under "study"."""
    properties = schema()["properties"]
    study = properties["studies"]["additionalProperties"]["properties"]
    top = {key: spec["default"] for key, spec in properties.items() if "default" in spec}
    return {**top, "study": {key: spec["default"] for key, spec in study.items() if "default" in spec}}


def setting(config: Mapping[str, Any], key: str) -> Any:
    """A top-level setting of the sweep (results_dir, cluster, partial, ...), or its schema default."""
    value = config.get(key)
    return copy.deepcopy(defaults().get(key)) if value is None else value


def schema_problems(config: Mapping[str, Any]) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
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
    """The config with the schema's defaults filled in; every set list has the empty `default` set."""
    config = drop_nulls(dict(config))
    for key in ("mpi_flag_sets", "nccl_env_sets"):
        config[key] = {name: dict(values or {}) for name, values in (config.get(key) or {}).items()}
        config[key].setdefault(DEFAULT_SET, {})
    study_defaults = defaults()["study"]
    for study in config.get("studies", {}).values():
        if not isinstance(study, dict):
            continue
        for key, value in study_defaults.items():
            study.setdefault(key, copy.deepcopy(value))
    return config


def set_problems(config: Mapping[str, Any]) -> list[str]:
    """Names of sets and axis values that must mean something before any app is asked."""
    problems = flag_set_problems(config["mpi_flag_sets"])
    for set_name, variables in config["nccl_env_sets"].items():
        for variable, value in variables.items():
            problem = value_problem(variable, value)
            if problem:
                problems.append(f"nccl_env_sets.{set_name}.{variable}: {problem}")
    for name, study in config["studies"].items():
        where = f"studies.{name}"
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
    return problems


def flag_set_flavour(flag_set: Mapping[str, Any]) -> str:
    return str(flag_set.get(FLAVOUR_KEY, "openmpi"))


def fitting_sets(flag_sets: Mapping[str, Mapping[str, Any]], flavour: str) -> list[str]:
    """The sets a study whose app runs on `flavour` may name (empty sets fit every MPI)."""
    return [name for name, flag_set in flag_sets.items() if not flag_set or flag_set_flavour(flag_set) == flavour]


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
    problems = set_problems(config)
    if problems:
        raise SweepError(problems)
    return config


# ---------------------------------------------------------------- expansion


def with_results_dir(value: Any, results_dir: str) -> Any:
    return value.replace(RESULTS_DIR_TOKEN, results_dir) if isinstance(value, str) else value


def expand_study(name: str, study: Mapping[str, Any], config: Mapping[str, Any]) -> list[Point]:
    results_dir = setting(config, "results_dir")
    params = {key: with_results_dir(value, results_dir) for key, value in study["params"].items()}
    axes = tuple(k for k, v in params.items() if isinstance(v, list))
    axis_values = [params[k] for k in axes]
    gpus = "gpus_per_node" in study
    per_node_values = study["gpus_per_node"] if gpus else study["ranks_per_node"]
    # One params dict per axis combination, shared by its points (never mutated).
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


def load(config: Mapping[str, Any]) -> Sweep:
    """Validate and expand; raises SweepError listing every problem, one line each."""
    return expand(validate(config))


def expand(config: Mapping[str, Any]) -> Sweep:
    """A validated config (see `validate`) as its points."""
    points = []
    for name, study in config["studies"].items():
        points += expand_study(name, study, config)
    return Sweep(
        studies=config["studies"],
        mpi_flag_sets=config["mpi_flag_sets"],
        nccl_env_sets=config["nccl_env_sets"],
        points=tuple(points),
    )
