"""HOOMD-blue's WCA fluid benchmark (hoomd-benchmarks' md_pair_wca), strong or weak scaling:
everything of HOOMD-blue's but the program its ranks run. Two files, as hoomd-benchmarks keeps
a benchmark:

- here, the app: its parameters (beyond the ones the MD twins share, apps/md.py), its made input
  (the initial state: its path, and the command and runtime that make it), each rank's command
  and the parser of what the ranks print;
- rank.py, the program every rank runs under mpirun: the protocol (our equivalent of the
  reference module, or, with `params.harness: hoomd_benchmarks`, the reference module itself),
  and the maker of the initial state. It imports nothing of scalestudy, so it never loads this
  module (pyproject.toml: the rank-program contract).

The initial state is made once per (N, density, dimensions) under the results directory's
assets, by the `hoomd_initial_state` rule (rules.smk in this folder wires what this module
declares), never inside a timed job; points sharing it read one file.

HOOMD-blue is not on PyPI: it comes from `--sdm conda` (env.yaml beside this module) or a site module
(the cluster file's `app_modules.hoomd`, with `--sdm env-modules`). Where it cannot be imported,
a point ends `failed` with the reason MISSING_HOOMD before anything is launched, and the
initial state is not planned (workflow/rules/run.smk).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...model.paths import REPO_ROOT, Layout
from ...model.point import Point
from ..base import Param, ParseError
from ..md import WcaBenchmark, md_figures
from . import rank as hoomd_wca

MISSING_HOOMD = "hoomd not installed (use --sdm conda or a site module)"
MISSING_HARNESS = "hoomd_benchmarks not importable (put hoomd-benchmarks on PYTHONPATH, or use harness: scalestudy)"

# Where the initial states are, under the results directory's assets (model.paths.Layout.assets).
STATE_FOLDER = "hoomd-wca"

# What the ranks print (parse_hoomd). The verbose shape (both harnesses): one line per timed
# run, then the mean alone on a line.
PER_RUN = re.compile(r"^\.\. ([0-9.]+(?:[eE][-+]?\d+)?) time steps per second\s*$", re.M)
# The plain shape (reference without -v: the mean alone), and the suite's "MDPairWCA: <mean>".
MEAN = re.compile(r"^(?:MDPairWCA: )?([0-9]+\.?[0-9]*(?:[eE][-+]?\d+)?)\s*$", re.M)
# N, which only our harness prints (the reference does not).
PARTICLES = re.compile(r"^scalestudy: (\d+) particles from", re.M)
# HOOMD-blue's notice on more than one rank.
DECOMPOSITION = re.compile(r"Using domain decomposition: n_x = (\d+) n_y = (\d+) n_z = (\d+)")


class Hoomd(WcaBenchmark):
    name = "hoomd"
    # Published HOOMD-blue scaling tables (steps/s per node count) read as this app's runs.
    published_record = True
    breakdown_note: ClassVar[str] = (
        "HOOMD-blue's time per operation was not examined: it is not installed on the machine this breakdown "
        "was built on, so no split is shown rather than an invented one"
    )
    packages = ("hoomd",)
    python_module = "hoomd"
    # What every rank runs, and what makes the initial state: `python -m <program>`.
    program: ClassVar[str] = hoomd_wca.__name__
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

    # ---- the made input: the initial state of (N, density, dimensions), made by the
    # hoomd_initial_state rule (this folder's rules.smk wires these; it reads them from APPS)

    # The rule's wildcards, in the order of the file name, and what each may be (rho as a float).
    state_wildcards: ClassVar[Mapping[str, str]] = {
        "particles": r"[1-9][0-9]*",
        "rho": r"[0-9]+\.[0-9]+(e[-+]?[0-9]+)?",
        "dimensions": "[23]",
    }
    # How it is made: `python -m <program>` with these arguments on the rule's wildcards, one
    # process (hoomd_wca.initial_state: hard-sphere Monte Carlo, written in one rename).
    make_state_arguments: ClassVar[str] = (
        "initial-state --N {wildcards.particles} --rho {wildcards.rho} --dimensions {wildcards.dimensions}"
        " --output {output:q}"
    )
    # Its job's runtime limit in minutes (N = 32,000 took 3.5 minutes on one rank).
    make_state_runtime_min: ClassVar[int] = 120

    @staticmethod
    def state_file(
        layout: Layout, particles: int | str, rho: float | str, dimensions: int | str, suffix: str = "gsd"
    ) -> str:
        """The initial state of (N, density, dimensions), named as the reference harness names
        its cache (rho as a float), so that `harness: hoomd_benchmarks` finds it; `suffix="log"`:
        its maker's log. Arguments may be wildcards ("{particles}")."""
        rho_text = rho if isinstance(rho, str) else float(rho)
        return f"{layout.assets}/{STATE_FOLDER}/hard_sphere_{particles}_{rho_text}_{dimensions}.{suffix}"

    def state_pattern(self, layout: Layout, suffix: str = "gsd") -> str:
        """`state_file` on the rule's wildcards: the rule's output (`suffix="log"`: its log)."""
        particles, rho, dimensions = (f"{{{name}}}" for name in self.state_wildcards)
        return self.state_file(layout, particles, rho, dimensions, suffix)

    def made_files(self, point: Point, layout: Layout) -> Iterable[str]:
        density, dimensions = self.setting(point, "density"), self.setting(point, "dimensions")
        return (self.state_file(layout, self.particles(point), density, dimensions),)

    def initial_state(self, point: Point, layout: Layout) -> str:
        """The state made by the hoomd_initial_state rule, or one in a folder the sweep names."""
        (made,) = self.made_files(point, layout)
        folder = self.setting(point, "initial_state_cache")
        return str(Path(folder) / Path(made).name) if folder else made

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
                "HOOMD-blue is not on PyPI: run with `snakemake --sdm conda` "
                f"({Path(self.conda_env).relative_to(REPO_ROOT)}), or name the "
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
        entry = [sys.executable, "-m", self.program]
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
        figures = md_figures(per_run, particles, log_text, DECOMPOSITION)
        if means and abs(means[-1] - figures["steps_per_s"]) > 1e-6 * figures["steps_per_s"]:
            raise ParseError(f"the printed mean {means[-1]} is not the mean of the timed runs {per_run}")
        return figures
    if not means:
        raise ParseError("no time steps per second in the output (neither '.. X time steps per second' nor the mean)")
    figures = md_figures([means[-1]], particles, log_text, DECOMPOSITION)
    # The plain shape prints only the mean: how many timed runs it averages is not known.
    del figures["timed_runs"], figures["steps_per_s_runs"]
    return figures
