"""The one interface every app implements (after hoomd-benchmarks: one base class,
each benchmark a small subclass), and the registry apps enter by being defined.

An app answers four questions about a point: are its parameters meaningful,
which files does it need, what does each MPI rank run, and what do the run's
output files say. Everything else (launching, timing, metrics.json, analysis)
is shared. An app declares its figures (scalestudy.model.metrics.declare), its
parameters with their defaults (Param), the MPI it is built against and the Python
packages whose versions its runs record. Apps depend on the model layer only.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..model.errors import did_you_mean, divisors
from ..model.memory import Need
from ..model.metrics import Metric, metric
from ..model.paths import Layout
from ..model.point import PROGRAM, Point

# Each app folder's conda environment for `--sdm conda` (App.conda_env).
ENV_FILE = "env.yaml"


class ParseError(ValueError):
    """The run's output does not contain the figure the app promises."""


@dataclass(frozen=True)
class Param:
    """A parameter of the app's `params:` block in the sweep file. `default` is the one
    place its default is written (None: no default; the app handles its absence). What a value
    may be is declared here, beside the parameter, and both the load-time check and its hint
    are read from it: `choices`, `minimum`, and `divides` (another parameter whose value this
    one must divide, e.g. attention heads divide the hidden size; checked at every point with
    both values as the point has them, see App.declared_problems)."""

    kind: type | tuple[type, ...]
    required: bool = False
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    help: str = ""
    default: Any = None
    divides: str | None = None


# Every app, by name. An app module enters it by defining a subclass with a `name`
# (App.__init_subclass__); scalestudy.apps imports every module of its package.
APPS: dict[str, App] = {}


class App:
    name: ClassVar[str]
    metrics: ClassVar[tuple[Metric, ...]]
    # The figure speedup and efficiency are computed from first.
    primary_metric: ClassVar[str]
    params: ClassVar[Mapping[str, Param]]
    # The MPI the app is built against: picks the cluster's launcher and the flag sets that fit.
    mpi_flavour: ClassVar[str] = "openmpi"
    # Python distributions whose versions every run records (besides MPI and Snakemake's).
    packages: ClassVar[tuple[str, ...]] = ()
    # Parameter axes compared like MPI flag sets, against a baseline value at the same scale
    # (torch-parallel: every strategy against ddp), and the figures shown beside each verdict
    # (accuracy beside speed: a faster strategy that trains worse shows).
    compared: ClassVar[Mapping[str, str]] = {}
    quality: ClassVar[tuple[str, ...]] = ()
    # The declared figures of each row of the run's size table (figures[SIZE_TABLE]: a curve
    # over message size), latency first, then bandwidth (scalestudy.analysis.sizes); () for none.
    size_figures: ClassVar[tuple[str, ...]] = ()
    # A module jobs must be able to import (HOOMD-blue is not on PyPI); None: nothing beyond the venv.
    python_module: ClassVar[str | None] = None
    # The entry of the sweep's `assets:` that sets how this app's made inputs are made (the
    # local LitGPT stand-ins: litgpt_tiny), checked by `assets_problems`; None: no such entry.
    # The schema's `assets:` takes it from here (config.sweep.schema), described by the second.
    assets_key: ClassVar[str | None] = None
    assets_description: ClassVar[str] = ""
    # A published scaling table (presentation.published: nodes, cores per node, walltime used)
    # with a column named as this app's primary figure reads as this app's runs.
    published_record: ClassVar[bool] = False
    # An app that declares no parts of a run (`declare(..., part=, whole=)`): what it can tell of
    # where its time goes, in a sentence the report prints in place of a breakdown.
    breakdown_note: ClassVar[str] = ""
    # An app whose program and figures a study declares in the sweep (app: command): it reads
    # the study keys of model.point.PROGRAM_KEYS, which every other app refuses.
    declared_in_sweep: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            if cls.name in APPS:
                raise ValueError(f"app {cls.name!r} is defined twice")
            APPS[cls.name] = cls()

    @property
    def conda_env(self) -> str:
        """The app's conda environment for `--sdm conda`: env.yaml in the app's folder (beside
        the app.py that defines it)."""
        return str(Path(sys.modules[type(self).__module__].__file__).with_name(ENV_FILE))

    def setting(self, point: Point, name: str) -> Any:
        """A parameter's value at a point: the sweep's, else its declared default."""
        value = point.params.get(name)
        return self.params[name].default if value is None else value

    def param_problems(self, params: Mapping[str, Any]) -> list[str]:
        """Problems with a study's params, each 'params.<key>: <what is wrong>; allowed: ...'."""
        problems = []
        for name, spec in self.params.items():
            if spec.required and name not in params:
                problems.append(f"params.{name}: required by app {self.name!r} ({spec.help})")
        for name, value in params.items():
            if name not in self.params:
                allowed = ", ".join(sorted(self.params))
                suggestion = did_you_mean(name, self.params) or ";"
                problems.append(
                    f"params.{name}: unknown parameter for app {self.name!r}{suggestion} allowed: {allowed}"
                )
                continue
            spec = self.params[name]
            for i, item in enumerate(value if isinstance(value, list) else [value]):
                where = f"params.{name}" + (f"[{i}]" if isinstance(value, list) else "")
                problems += [f"{where}: {p}" for p in value_problems(item, spec)]
        return problems

    def study_problems(self, study: Mapping[str, Any]) -> list[str]:
        """Problems of a study's params together with its other keys (e.g. scaling)."""
        return []

    def assets_problems(self, settings: Mapping[str, Any]) -> list[str]:
        """Problems of the settings under `assets.<assets_key>`, each '.<key>: <what is wrong>'."""
        return []

    def value(self, point: Point, name: str) -> Any:
        """A parameter's value at a point as the run uses it (`setting`, or where the default
        depends on other parameters, e.g. a model family's width, that default)."""
        return self.setting(point, name)

    def uses(self, point: Point, name: str) -> bool:
        """Does the run at `point` use parameter `name` (e.g. attention heads only in a transformer)?"""
        return True

    def declared_problems(self, point: Point) -> list[str]:
        """The constraints the parameters declare between each other (Param.divides), at a point."""
        problems = []
        for name, spec in self.params.items():
            if spec.divides is None or not self.uses(point, name):
                continue
            value, other = self.value(point, name), self.value(point, spec.divides)
            if other % value:
                problems.append(
                    f"params.{name}: {value} does not divide {spec.divides} {other}; "
                    f"allowed: a divisor of {spec.divides} ({divisors(other)})"
                )
        return problems

    def preflight(self, point: Point) -> list[str]:
        """Problems that show only at a given scale; reported before anything runs."""
        return []

    def inputs(self, point: Point, layout: Layout) -> dict[str, str]:
        """Files the point reads, by the parameter that names them."""
        return {}

    def made_files(self, point: Point, layout: Layout) -> Iterable[str]:
        """The files this app's own rules make under the assets that `point` may read (the
        rules' outputs). Only these are made DAG edges; any other input, under the assets
        or not (a typo in a path that uses {results_dir}), is checked at load like any other."""
        return ()

    def inputs_key(self, point: Point) -> Hashable:
        """Points with equal keys read the same input files (asked once per key): by default
        the study and its axis values, which fix the params."""
        return point.combination

    def memory(self, point: Point, figures: Mapping[str, Any] | None = None) -> Need | None:
        """What a rank of this point needs in memory (model.memory), for apps that train; None
        where the app does not say (nothing is predicted or refused). `figures`: a finished
        run's, where the app can read the model's shape from them instead of building it."""
        return None

    def memory_unpredicted(self, point: Point) -> str | None:
        """Why this point's memory cannot be predicted, said at load (a user's own program),
        or None."""
        return None

    def memory_checked_at_load(self, point: Point) -> bool:
        """Whether Snakemake's load refuses this point when its memory does not fit (False where
        the shape costs seconds to read and the point cannot run short of memory in practice;
        `python -m scalestudy memory` still predicts it)."""
        return True

    def loads_mpi4py(self, point: Point) -> bool:
        """Do the point's ranks load MPI through mpi4py in the rank's Python? Then the runner asks
        which MPI library that is, refuses a launch whose launcher is another MPI, and each rank
        names the library it loaded (model.rank_probe.mpi_library)."""
        return False

    def missing_software(self, point: Point) -> str | None:
        """Why the app cannot run where this job runs (checked before launching), or None."""
        return None

    def how_to_fix(self, reason: str) -> str | None:
        """What to do when every run of a study failed for `reason` (the report says it
        under the reason); None: nothing the app knows beyond the reason itself."""
        return None

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        """What every MPI rank executes, as an argument list."""
        raise NotImplementedError

    def rank_env(self, point: Point) -> dict[str, str]:
        """Variables every rank must see (exported through the launcher)."""
        return {"OMP_NUM_THREADS": str(point.threads_per_rank)}

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        """Figures from the run's output; raises ParseError when the main figure is missing."""
        raise NotImplementedError

    def cleanup(self, point: Point, run_dir: Path) -> None:
        """Remove bulky outputs the study does not need (they would eat the user's quota)."""

    def result_complete(self, log_text: str) -> bool:
        """Whether the output holds the result every rank finished measuring, so that a failure
        after it (a rank dying at exit) leaves the figures standing. False unless the app says
        how its output shows that (a result line printed after every rank took part)."""
        return False

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)

    def figure(self, name: str) -> Metric:
        """A figure this app's runs record: its own declaration, else the global one (the
        columns of a size table, the job's wall time: model.metrics.metric)."""
        return next((m for m in self.metrics if m.name == name), None) or metric(name)

    def configured(self, program: Mapping[str, Any]) -> App:
        """The app as a study with `program` (model.point.program_of) runs and reads it; the
        registered app itself for every app whose figures are its own."""
        return self


def app_of(app: Any, program: Any = None) -> App | None:
    """The app that runs and reads a point, a record or a row: the registered app `app`,
    configured by its study's program where it has one (a mapping, or the JSON text runs.csv
    holds). The one lookup of an app's figures and primary figure; None for an unknown app."""
    registered = APPS.get(app) if isinstance(app, str) else None
    if registered is None or not registered.declared_in_sweep:
        return registered
    if not isinstance(program, str):  # a mapping, or a missing cell (None, NaN): no program
        program = json.dumps(program if isinstance(program, Mapping) else {}, sort_keys=True)
    return configured_app(app, program)


@functools.lru_cache(maxsize=256)
def configured_app(app: str, program_json: str) -> App:
    """Configured once per program (10,000 points of a study share it)."""
    return APPS[app].configured(json.loads(program_json))


def app_for(point: Point) -> App:
    """The app of a point (app_of with the point's own program)."""
    found = app_of(point.app, point.program)
    if found is None:
        raise KeyError(f"no app {point.app!r}; apps: {', '.join(sorted(APPS))}")
    return found


def app_of_row(row: Mapping[str, Any]) -> App | None:
    """The app of a row of runs.csv (or of a record's point columns): its app and program cells."""
    return app_of(row.get("app"), row.get(PROGRAM))


def table_and_summary(log_text: str, header: str, prefix: str, name: str) -> tuple[str, dict[str, Any]]:
    """The text of a rank program's table (from its header to its closing line) and the JSON of
    that closing line ('<prefix> {...}'); ParseError where either is missing or cut off."""
    header_at = log_text.find(header)
    summary_at = log_text.find(prefix + " ")
    if header_at < 0 or summary_at < 0:
        raise ParseError(f"no {name} table with its closing '{prefix}' line in the output")
    summary_line = log_text[summary_at:].splitlines()[0]
    try:
        summary = json.loads(summary_line[len(prefix) + 1 :])
    except json.JSONDecodeError as error:
        raise ParseError(f"the closing '{prefix}' line is cut off: {error}") from None
    return log_text[header_at:summary_at], summary


# How a message names the kinds of value a Param takes.
KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def kind_names(kinds: tuple[type, ...]) -> str:
    """'an integer', 'a number' (int or float), 'a string or an integer', ..."""
    if float in kinds:
        kinds = tuple(k for k in kinds if k is not int)  # an integer is a number
    return " or ".join(KIND_NAMES.get(k, f"a {k.__name__}") for k in kinds)


def value_problems(value: Any, spec: Param) -> list[str]:
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    # YAML booleans are ints to Python; never accept one where a number is meant.
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        return [f"{value!r} is not {kind_names(kinds)}"]
    if spec.choices and value not in spec.choices:
        return [f"{value!r} is not allowed; allowed: {', '.join(map(str, spec.choices))}"]
    if spec.minimum is not None and value < spec.minimum:
        return [f"{value!r} must be at least {spec.minimum:g}"]
    return []
