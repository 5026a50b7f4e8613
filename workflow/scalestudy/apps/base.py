"""The one interface every app implements (after hoomd-benchmarks: one base class,
each benchmark a small subclass).

An app answers four questions about a point: are its parameters meaningful,
which files does it need, what does each MPI rank run, and what do the run's
output files say. Everything else (launching, timing, metrics.json, analysis)
is shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..sweep import Point


class ParseError(ValueError):
    """The run's output does not contain the figure the app promises."""


@dataclass(frozen=True)
class Metric:
    """A figure an app reports. `kind` fixes the direction of speedup:
    rate (higher is better, S = R(p)/R(p0)) or time (lower is better, S = T(p0)/T(p))."""

    name: str
    label: str
    unit: str
    kind: Literal["rate", "time", "size"]
    # A rate that grows with the problem size (tokens/s, particle-steps/s): weak-scaling
    # efficiency divides it by p/p0. One that does not (time steps/s) is compared as is.
    extensive: bool = True


@dataclass(frozen=True)
class Param:
    """A parameter of the app's `params:` block in the sweep file."""

    kind: type | tuple[type, ...]
    required: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    help: str = ""


class App:
    name: ClassVar[str]
    metrics: ClassVar[tuple[Metric, ...]]
    # The figure speedup and efficiency are computed from first.
    primary_metric: ClassVar[str]
    params: ClassVar[Mapping[str, Param]]
    # The MPI the app is built against: picks the cluster's launcher and the flag sets that fit.
    mpi_flavour: ClassVar[str] = "openmpi"

    def param_problems(self, params: Mapping[str, Any]) -> list[str]:
        """Problems with a study's params, each 'params.<key>: <what is wrong>; allowed: ...'."""
        problems = []
        for name, spec in self.params.items():
            if spec.required and name not in params:
                problems.append(f"params.{name}: required by app {self.name!r} ({spec.help})")
        for name, value in params.items():
            if name not in self.params:
                allowed = ", ".join(sorted(self.params))
                problems.append(f"params.{name}: unknown parameter for app {self.name!r}; allowed: {allowed}")
                continue
            spec = self.params[name]
            for i, item in enumerate(value if isinstance(value, list) else [value]):
                where = f"params.{name}" + (f"[{i}]" if isinstance(value, list) else "")
                problems += [f"{where}: {p}" for p in value_problems(item, spec)]
        return problems

    def study_problems(self, study: Mapping[str, Any]) -> list[str]:
        """Problems of a study's params together with its other keys (e.g. scaling)."""
        return []

    def preflight(self, point: Point) -> list[str]:
        """Problems that show only at a given scale; reported before anything runs."""
        return []

    def inputs(self, point: Point) -> dict[str, str]:
        """Files the point reads, by the parameter that names them."""
        return {}

    def inputs_key(self, point: Point) -> Any:
        """Points with equal keys read the same input files (checked once per key)."""
        return id(point.params)

    def missing_software(self, point: Point) -> str | None:
        """Why the app cannot run where this job runs (checked before launching), or None."""
        return None

    def rank_command(self, point: Point, run_dir: Path) -> list[str]:
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

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)


def value_problems(value: Any, spec: Param) -> list[str]:
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    # YAML booleans are ints to Python; never accept one where a number is meant.
    if isinstance(value, bool) and bool not in kinds:
        return [f"{value!r} is not a {' or '.join(k.__name__ for k in kinds)}"]
    if not isinstance(value, kinds):
        return [f"{value!r} is not a {' or '.join(k.__name__ for k in kinds)}"]
    if spec.choices and value not in spec.choices:
        return [f"{value!r} is not allowed; allowed: {', '.join(spec.choices)}"]
    if spec.minimum is not None and value < spec.minimum:
        return [f"{value!r} must be at least {spec.minimum:g}"]
    return []
