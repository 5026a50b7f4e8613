"""HOOMD-blue WCA fluid benchmark (hoomd-benchmarks' md_pair_wca), strong or weak scaling.

Each rank runs scalestudy.apps.hoomd_wca (our equivalent of the reference module), or,
with `params.harness: hoomd_benchmarks`, the reference module itself. Both start from the
initial state the `hoomd_initial_state` rule made once per (N, density, dimensions) under
the results directory's assets (scalestudy.model.paths.Layout.hoomd_state), never inside
a timed job.

HOOMD-blue is not on PyPI: it comes from `--sdm conda` (envs/hoomd.yaml) or a site module
(the cluster file's `app_modules.hoomd`, with `--sdm env-modules`). Where it cannot be imported,
a point ends `failed` with the reason MISSING_HOOMD before anything is launched.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from ..model.paths import Layout
from ..model.point import Point
from .base import Param, ParseError
from .md import WcaBenchmark, md_figures

MISSING_HOOMD = "hoomd not installed (use --sdm conda or a site module)"
MISSING_HARNESS = "hoomd_benchmarks not importable (put hoomd-benchmarks on PYTHONPATH, or use harness: scalestudy)"
# The verbose shape (both harnesses): one line per timed run, then the mean alone on a line.
PER_RUN = re.compile(r"^\.\. ([0-9.]+(?:[eE][-+]?\d+)?) time steps per second\s*$", re.M)
# The plain shape (reference without -v: the mean alone), and the suite's "MDPairWCA: <mean>".
PARTICLES = re.compile(r"^scalestudy: (\d+) particles from", re.M)
MEAN = re.compile(r"^(?:MDPairWCA: )?([0-9]+\.?[0-9]*(?:[eE][-+]?\d+)?)\s*$", re.M)


class Hoomd(WcaBenchmark):
    name = "hoomd"
    breakdown_note: ClassVar[str] = (
        "HOOMD-blue's time per operation was not examined: it is not installed on the machine this breakdown "
        "was built on, so no split is shown rather than an invented one"
    )
    packages = ("hoomd",)
    python_module = "hoomd"
    params: ClassVar[dict[str, Param]] = {
        **WcaBenchmark.common_params,
        "dimensions": Param(int, choices=(2, 3), help="2 or 3", default=3),
        "device": Param(str, choices=("CPU", "GPU"), help="HOOMD-blue device (GPU: one rank per GPU)", default="CPU"),
        "harness": Param(
            str,
            choices=("scalestudy", "hoomd_benchmarks"),
            help="scalestudy's benchmark script or hoomd_benchmarks.md_pair_wca from PYTHONPATH",
            default="scalestudy",
        ),
        "initial_state_cache": Param(
            str, help="a folder of ready-made initial states to read instead of the results directory's assets"
        ),
    }

    def initial_state(self, point: Point, layout: Layout) -> str:
        """The state made by the hoomd_initial_state rule, or one in a folder the sweep names."""
        (made,) = self.made_files(point, layout)
        folder = self.setting(point, "initial_state_cache")
        return str(Path(folder) / Path(made).name) if folder else made

    def made_files(self, point: Point, layout: Layout) -> Iterable[str]:
        return (
            layout.hoomd_state(
                self.particles(point), self.setting(point, "density"), self.setting(point, "dimensions")
            ),
        )

    def inputs(self, point: Point, layout: Layout) -> dict[str, str]:
        return {"initial_state": self.initial_state(point, layout)}

    def memory_unpredicted(self, point: Point) -> str | None:
        # LAMMPS's twin is predicted from its measured bytes per atom (apps.lammps.memory);
        # HOOMD-blue's were never measured (it is not installed where the model was made).
        return "HOOMD-blue's bytes per particle have not been measured; its LAMMPS twin's are"

    def missing_software(self, point: Point) -> str | None:
        # The ranks run this interpreter (the job's: a conda env's, or one a site module extends).
        if importlib.util.find_spec("hoomd") is None:
            return MISSING_HOOMD
        reference = self.setting(point, "harness") == "hoomd_benchmarks"
        if reference and importlib.util.find_spec("hoomd_benchmarks") is None:
            return MISSING_HARNESS
        return None

    def how_to_fix(self, reason: str) -> str | None:
        if reason == MISSING_HOOMD:
            return (
                "HOOMD-blue is not on PyPI: run with `snakemake --sdm conda` (envs/hoomd.yaml), or name the "
                "site's module in the cluster file (`app_modules: {hoomd: [...]}`, with `--sdm env-modules`), then "
                "`--config retry_failed=true`; "
                "or run the LAMMPS twin study (app: lammps, e.g. lammps-wca), which measures the same WCA fluid "
                "in steps/s."
            )
        if reason == MISSING_HARNESS:
            return "Put hoomd-benchmarks on PYTHONPATH, or set `harness: scalestudy` (the same benchmark, shipped)."
        return None

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        initial = str(Path(self.initial_state(point, layout)).resolve())
        steps = [
            "--warmup_steps",
            str(self.setting(point, "warmup_steps")),
            "--benchmark_steps",
            str(self.setting(point, "benchmark_steps")),
            "--repeat",
            str(self.setting(point, "repeat")),
        ]
        entry = [sys.executable, "-m", "scalestudy.apps.hoomd_wca"]
        device = ["--device", str(self.setting(point, "device"))]
        if self.setting(point, "harness") == "hoomd_benchmarks":
            size = [
                "-N",
                str(self.particles(point)),
                "--rho",
                str(float(self.setting(point, "density"))),
                "--dimensions",
                str(self.setting(point, "dimensions")),
            ]
            return [*entry, "reference", "--initial-state", initial, "--run-dir", str(run_dir.resolve()), "--"] + (
                device + size + steps + ["-v"]
            )
        return [*entry, "benchmark", "--initial-state", initial, *device, *steps]

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        return parse_hoomd(log_text)

    def cleanup(self, point: Point, run_dir: Path) -> None:
        # The reference harness's view of the cache (a symlink) is not a result.
        shutil.rmtree(run_dir / "initial_configuration_cache", ignore_errors=True)


def parse_hoomd(log_text: str) -> dict[str, Any]:
    """Steps/s from either output shape: verbose (per timed run, then the mean) or plain (the mean)."""
    found = PARTICLES.search(log_text)
    particles = int(found.group(1)) if found else None
    per_run = [float(value) for value in PER_RUN.findall(log_text)]
    means = [float(value) for value in MEAN.findall(log_text)]
    if per_run:
        figures = md_figures(per_run, particles, log_text)
        if means and abs(means[-1] - figures["steps_per_s"]) > 1e-6 * figures["steps_per_s"]:
            raise ParseError(f"the printed mean {means[-1]} is not the mean of the timed runs {per_run}")
        return figures
    if not means:
        raise ParseError("no time steps per second in the output (neither '.. X time steps per second' nor the mean)")
    figures = md_figures([means[-1]], particles, log_text)
    # The plain shape prints only the mean: how many timed runs it averages is not known.
    del figures["timed_runs"], figures["steps_per_s_runs"]
    return figures
