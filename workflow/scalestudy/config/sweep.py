"""The sweep file: validate its shape (the JSON schema, which also holds every default)
and its names and sets, then expand it into run points.

A problem is reported as one line that names the key path, e.g.
``studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch'; defined: default, no-ucx``,
and all problems are reported together, before anything runs. What an app says about
its own parameters is checked one layer up (scalestudy.config.study), where the apps are known.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..apps.registry import APPS
from ..model import ladder
from ..model.errors import SweepError, did_you_mean
from ..model.paths import SCHEMA_PATH, folder_problem
from ..model.point import SAFE_SEGMENT, Point, Sweep, program_of
from ..model.repeats import limits as repeat_limits
from ..model.repeats import problems as repeat_problems
from ..model.settings import Settings, StudySettings
from .combinations import combination_problems, kept_combination, study_axes
from .files import drop_nulls, is_true, read_yaml
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
    return text or "top level"


@functools.cache
def schema() -> dict[str, Any]:
    """The sweep's schema (config/schema/sweep.schema.yaml) with the `assets:` entries the apps
    declare: each app's assets_key, an object its assets_problems checks."""
    loaded = read_yaml(SCHEMA_PATH)
    loaded["properties"]["assets"]["properties"] = {
        app.assets_key: {"type": "object", "description": app.assets_description}
        for app in APPS.values()
        if app.assets_key is not None
    }
    return loaded


@functools.cache
def defaults() -> dict[str, Any]:
    """The schema's defaults: top-level keys by name, a study's under "study", a figure's under
    "figure" and a node ladder's under "ladder"."""
    properties = schema()["properties"]
    study = properties["studies"]["additionalProperties"]["properties"]
    top = {key: spec["default"] for key, spec in properties.items() if "default" in spec}
    figure = schema()["definitions"]["figure"]["properties"]
    rungs = schema()["definitions"]["ladder"]["properties"]
    return {
        **top,
        "study": {key: spec["default"] for key, spec in study.items() if "default" in spec},
        "figure": {key: spec["default"] for key, spec in figure.items() if "default" in spec},
        "ladder": {key: spec["default"] for key, spec in rungs.items() if "default" in spec},
    }


def setting(config: Mapping[str, Any], key: str) -> Any:
    """A top-level setting of the sweep (results_dir, cluster, partial, ...), or its schema default."""
    value = config.get(key)
    return copy.deepcopy(defaults().get(key)) if value is None else value


# How a message names each JSON type the schema uses.
TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "keys (key: value)",
    "array": "a list",
    "null": "empty",
}
# The schema's own word for what a pattern allows (next to the pattern).
HINT = "x-hint"


def choices(values: Iterable[Any]) -> str:
    """Enum values as a user writes them (true, not True), each once."""
    return ", ".join(dict.fromkeys(str(v).lower() if str(v) in ("True", "False") else str(v) for v in values))


def unknown_key_problems(where: str, instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """A key the schema does not define, with the closest allowed one when it looks like a typo."""
    allowed = list(schema.get("properties", {}))
    return [
        f"{where}: unknown key {key!r}{did_you_mean(key, allowed) or ';'} allowed: {', '.join(allowed)}"
        for key in instance
        if key not in allowed
    ]


def schema_message(error: Any) -> str:
    """One jsonschema error in words: what is wrong and what is allowed, from the rule itself."""
    value, rule, schema_ = error.instance, error.validator_value, error.schema
    hint = schema_.get(HINT) if isinstance(schema_, Mapping) else None
    about = f"name {value!r}" if "propertyNames" in error.absolute_schema_path else repr(value)
    if error.validator == "pattern":
        return f"{about} is not allowed; {hint or f'it must match {rule}'}"
    if error.validator == "type":
        kinds = " or ".join(TYPE_NAMES.get(kind, kind) for kind in ([rule] if isinstance(rule, str) else rule))
        return f"{about} is not {kinds}" + (f"; {hint}" if hint else "")
    if error.validator == "enum":
        return f"{about} is not allowed; allowed: {choices(rule)}"
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and hint:
        return f"{about} is not allowed; {hint}"
    if error.validator == "minimum":
        return f"{about} is not allowed; the least is {rule}"
    if error.validator == "exclusiveMinimum":
        return f"{about} is not allowed; use more than {rule}"
    if error.validator == "maximum":
        return f"{about} is not allowed; the most is {rule}"
    if error.validator == "exclusiveMaximum":
        return f"{about} is not allowed; use less than {rule}"
    if error.validator in ("minItems", "minProperties", "minLength"):
        return f"{about} is empty; give at least {rule}"
    if error.validator == "maxLength":
        return f"{about} is longer than {rule} characters"
    if error.validator == "required":
        missing = [key for key in rule if key not in value]
        return f"missing key {', '.join(map(repr, missing))} (required: {', '.join(rule)})"
    if error.validator in ("oneOf", "anyOf") and hint:
        return f"{about} is not allowed; {hint}"
    return error.message


@functools.cache
def python_pattern(pattern: str) -> re.Pattern[str]:
    r"""A schema pattern as JSON Schema means it (ECMA-262: `$` is the end of the text). In
    Python's `re`, `$` also matches before a final newline, so "00:10:00\n" would pass a
    walltime's pattern: here `$` is `\Z`."""
    return re.compile(re.sub(r"(?<!\\)\$", r"\\Z", pattern))


def ecma_pattern(validator: Any, pattern: str, instance: Any, schema_: Mapping[str, Any]) -> Iterable[Any]:
    """jsonschema's `pattern` keyword, with the pattern read as JSON Schema means it."""
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not python_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.cache
def validator_class() -> Any:
    import jsonschema

    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": ecma_pattern})


def schema_problems(config: Mapping[str, Any]) -> list[str]:
    """The schema's verdict, one line per problem naming its key, in words from the rule."""
    validator = validator_class()(schema())
    problems: dict[str, None] = {}
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        where = key_path(error.absolute_path)
        if error.validator == "additionalProperties" and error.validator_value is False:
            problems.update(dict.fromkeys(unknown_key_problems(where, error.instance, error.schema)))
        else:
            problems[f"{where}: {schema_message(error)}"] = None
    return list(problems)


# Where the operating system lives: results there would write into it (refused at or below,
# /var/tmp aside); and the root and the homes' parents, whose top the results would litter
# (refused themselves; a folder inside is fine).
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
                "/sbin", "/sys", "/usr", "/var")  # fmt: skip
SCRATCH_UNDER_SYSTEM = ("/var/tmp",)
SYSTEM_TOPS = ("/", "/home", "/root")


def results_dir_problems(config: Mapping[str, Any]) -> list[str]:
    """results_dir must be a directory of its own, never the root or a system directory
    (resolved: '../../etc' and links count where they lead)."""
    given = config.get("results_dir")
    if not isinstance(given, str) or not given:
        return []
    if given.startswith("~") or "$" in given:
        return [
            f"results_dir: {given!r}: nothing expands ~ or $VARIABLES here (a folder of that very name would be "
            "made); write the path out, e.g. /scratch/ab12/you/results"
        ]
    not_a_folder = folder_problem(given)
    if not_a_folder:
        return [f"results_dir: {given!r} {not_a_folder}; give results a folder of their own, e.g. results"]
    resolved = os.path.realpath(given)

    def under(top: str) -> bool:
        return resolved == top or resolved.startswith(top.rstrip("/") + "/")

    system = resolved in SYSTEM_TOPS or (
        any(under(top) for top in SYSTEM_TREES) and not any(under(top) for top in SCRATCH_UNDER_SYSTEM)
    )
    if not system:
        return []
    shown = repr(given) if resolved == given else f"{given!r} (that is {resolved})"
    what = "the root directory" if resolved == "/" else "a system directory"
    return [
        f"results_dir: {shown} is {what}; give results a directory of their own, "
        "e.g. results or /scratch/ab12/you/results"
    ]


def with_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with the schema's defaults filled in; every set list has the empty `default` set.
    What has the wrong shape is left as it is, for the schema to name."""
    config = drop_nulls(dict(config))
    for key in ("mpi_flag_sets", "nccl_env_sets"):
        sets = config.get(key) or {}
        if isinstance(sets, Mapping):
            config[key] = {name: dict(v) if isinstance(v, Mapping) else v for name, v in sets.items()}
            config[key].setdefault(DEFAULT_SET, {})
    study_defaults = defaults()["study"]
    studies = config.get("studies")
    for study in studies.values() if isinstance(studies, Mapping) else ():
        if not isinstance(study, dict):
            continue
        for key, value in study_defaults.items():
            study.setdefault(key, copy.deepcopy(value))
        if ladder.is_ladder(study.get("nodes")):
            study["nodes"] = {**defaults()["ladder"], **study["nodes"]}
        figures = study.get("figures")
        if isinstance(figures, Mapping):
            study["figures"] = {
                name: {**defaults()["figure"], **spec} if isinstance(spec, Mapping) else spec
                for name, spec in figures.items()
            }
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
        problems += repeat_problems(study["repeats"], where)
        laddered = ladder.problems(study, where)
        problems += laddered
        for axis_key in ("nodes", "ranks_per_node", "gpus_per_node"):
            values = study.get(axis_key, [])
            if ladder.is_ladder(values):
                continue
            if len(set(values)) != len(values):
                problems.append(f"{where}.{axis_key}: a value is listed twice: {values}")
        for param, value in study["params"].items():
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if not SAFE_SEGMENT.fullmatch(str(item)):
                        problems.append(
                            f"{where}.params.{param}[{i}]: axis value {item!r} cannot name a directory;"
                            " use letters, digits, '.', '_', '+' or '-'"
                        )
                if len(set(map(str, value))) != len(value):
                    problems.append(f"{where}.params.{param}: a value is listed twice: {value}")
        # A ladder's own line says what of exclude or zip it cannot take: no second line about it.
        problems += [] if laddered else combination_problems(where, study)
    return problems


def flag_set_flavour(flag_set: Mapping[str, Any]) -> str:
    return str(flag_set.get(FLAVOUR_KEY, "openmpi"))


def fitting_sets(flag_sets: Mapping[str, Mapping[str, Any]], flavour: str) -> list[str]:
    """The sets a study whose app runs on `flavour` may name (empty sets fit every MPI)."""
    return [name for name, flag_set in flag_sets.items() if not flag_set or flag_set_flavour(flag_set) == flavour]


# An Open MPI MCA parameter's name: lower-case words joined by '_' (btl, coll_hcoll_enable).
MCA_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def flag_set_problems(flag_sets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """MPICH sets are environment variables: their names must be ones. Open MPI sets are MCA
    parameters: an environment variable's name there (MPICH's MPIR_CVAR_..., FI_..., UCX_...) is
    a set for the other flavour, which Open MPI would take as an unknown parameter and ignore."""
    problems = []
    for name, flag_set in flag_sets.items():
        if flag_set_flavour(flag_set) != "mpich":
            for key in flag_set:
                if key != FLAVOUR_KEY and ENV_NAME.fullmatch(key) and not MCA_NAME.fullmatch(key):
                    problems.append(
                        f"mpi_flag_sets.{name}.{key}: an environment variable in a set for openmpi, whose "
                        "sets are MCA parameters (lower-case, e.g. btl); allowed: `flavour: mpich` for a set "
                        "of MPICH's variables, or Open MPI's MCA names"
                    )
            continue
        for key in flag_set:
            if key != FLAVOUR_KEY and not ENV_NAME.fullmatch(key):
                problems.append(
                    f"mpi_flag_sets.{name}.{key}: an MPICH set holds environment variables; "
                    "use upper-case letters, digits and '_' (e.g. MPIR_CVAR_ASYNC_PROGRESS)"
                )
    return problems


def study_named(problem: str, names: Iterable[str]) -> str | None:
    """The study whose key a problem's line starts with (`studies.<name>.`, `:`, `[`), the
    longest such name; None for a line about the sweep's own keys (or about `studies` whole)."""
    for name in sorted(names, key=len, reverse=True):
        head = f"studies.{name}"
        if problem.startswith(head) and problem[len(head) : len(head) + 1] in (".", ":", "["):
            return name
    return None


@dataclass
class Findings:
    """The problems the checks of a sweep find, gathered so that one pass reports them all.
    Each check assumes that what the checks before it refused is sound, so a study with a
    problem is left out of the checks after (`add` returns the config without it) while the
    other studies go on; a problem of the sweep's own keys (a flag set, results_dir, assets,
    the cluster) stops the checks after it (`stopped`)."""

    lines: list[str] = field(default_factory=list)
    stopped: bool = False

    def add(self, config: Mapping[str, Any], problems: Iterable[str]) -> dict[str, Any]:
        studies = config.get("studies")
        names = list(studies) if isinstance(studies, Mapping) else []
        broken = set()
        for problem in problems:
            if problem not in self.lines:
                self.lines.append(problem)
            name = study_named(problem, names)
            if name is None:
                self.stopped = True
            broken.add(name)
        if not isinstance(studies, Mapping) or not broken - {None}:
            return dict(config)
        return {**config, "studies": {name: study for name, study in studies.items() if name not in broken}}

    def raise_any(self) -> None:
        if self.lines:
            raise SweepError(self.lines)


def validated(config: Mapping[str, Any], found: Findings) -> dict[str, Any]:
    """The config with defaults filled in, less the studies with a problem (each added to
    `found`); while `found.stopped`, what is returned is not to be checked further."""
    config = with_defaults(config)
    config = found.add(config, schema_problems(config) + results_dir_problems(config))
    if found.stopped:
        return config
    return found.add(config, set_problems(config))


def validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the config with defaults filled in, or raise SweepError with every problem."""
    found = Findings()
    config = validated(config, found)
    found.raise_any()
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
    placements = list(itertools.product(study["hyperthreads"], study["binding"], study["mapping"]))
    program = program_of(study)
    kept = kept_combination(study, study_axes(study))
    per_node_axis = "gpus_per_node" if gpus else "ranks_per_node"
    points = []
    node_values = ladder.node_values(study["nodes"])
    for combo, nodes, per_node, mpi_set, nccl_set, (hyperthreads, binding, mapping) in itertools.product(
        resolved_params, node_values, per_node_values, study["mpi_flags"], study["nccl_env"], placements
    ):
        values = {"nodes": nodes, per_node_axis: per_node, "mpi_flags": mpi_set, "nccl_env": nccl_set,
                  "hyperthreads": hyperthreads, "binding": binding, "mapping": mapping,
                  **dict(zip(axes, combo, strict=True))}  # fmt: skip
        if not kept(values):
            continue
        resolved = resolved_params[combo]
        for repeat in range(1, repeat_limits(study["repeats"]).max + 1):
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
                    hyperthreads=hyperthreads,
                    binding=binding,
                    mapping=mapping,
                    program=program,
                )
            )
    return points


def study_settings(name: str, study: Mapping[str, Any]) -> StudySettings:
    """A validated study's own settings (the schema's defaults filled in) as typed values."""
    return StudySettings(
        name=name,
        app=study["app"],
        repeats=study["repeats"],
        pack=study["pack"],
        budget_su=study.get("budget_su"),
        estimator=study["estimator"],
        efficiency_threshold=study["efficiency_threshold"],
        predict_up_to=study["predict_up_to"],
        ladder=ladder.of(study["nodes"], study["efficiency_threshold"]),
    )


def settings_of(config: Mapping[str, Any], sweep: Sweep) -> Settings:
    """The top-level settings of `config` (the schema's default where a key is not given) and
    each study's (`sweep.studies`): the one reading of them; everything after reads these."""
    return Settings(
        cluster=setting(config, "cluster"),
        results_dir=str(setting(config, "results_dir")),
        partial=is_true(setting(config, "partial")),
        retry_failed=is_true(setting(config, "retry_failed")),
        budget_su_total=setting(config, "budget_su_total"),
        order_seed=int(setting(config, "order_seed")),
        predict_from=setting(config, "predict_from"),
        compare_baseline=setting(config, "compare_baseline"),
        assets=setting(config, "assets") or {},
        studies=sweep.studies,
    )


def load(config: Mapping[str, Any]) -> Sweep:
    """Validate and expand; raises SweepError listing every problem, one line each."""
    return expand(validate(config))


def expand(config: Mapping[str, Any]) -> Sweep:
    """A validated config (see `validate`) as its points."""
    points, excluded = [], {}
    for name, study in config["studies"].items():
        planned = expand_study(name, study, config)
        product = math.prod(len(values) for values in study_axes(study).values())
        left_out = product * repeat_limits(study["repeats"]).max - len(planned)
        if left_out:
            excluded[name] = left_out
        points += planned
    return Sweep(
        studies={name: study_settings(name, study) for name, study in config["studies"].items()},
        mpi_flag_sets=config["mpi_flag_sets"],
        nccl_env_sets=config["nccl_env_sets"],
        points=tuple(points),
        excluded=excluded,
    )
