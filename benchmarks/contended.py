"""Runs measured while other processes held the CPUs their ranks needed: what they measure, and
how often their verdicts lie.

Two parts, each on real runs measured as the workflow measures them
(scalestudy.launch.runner.run_point, conditions recorded):

1. The rule's basis. The same points with 0, 1, 2 and 4 busy processes beside them (each a
   Python busy loop on one CPU, started and ended here by pid): MPI latency at 8 B (the
   collectives app, alltoall through mpi4py on Open MPI, 2 ranks) and LAMMPS steps/s (the WCA
   benchmark, 1 rank). Per busy count: the median figure, its ratio to the median with no busy
   process, the mean share of the CPUs other processes took (other_cpu_share) and how many runs
   the rule (scalestudy.launch.conditions.contended) marks contended.

2. An A/A test on contended runs. `default` against `allreduce-recursive-doubling` (which changes
   only MPI's allreduce, so for alltoall it is a no-op) for the same latency, 2 ranks, with 1 or 2
   busy processes beside them (alternating per comparison). Each comparison is `--window` runs a
   side, interleaved in a seeded random order; its verdict is scalestudy.analysis.verdicts.variants's.

       false-verdict rate: A/A comparisons whose verdict is faster or slower, over all of them;
                           target <= 5% (what a 95% CI promises). Printed with the new rules
                           (contended runs and n = 2 hold a verdict back) and without them (the
                           CI and the checks before them: interleaving, conditions that differed)

Run from the repository root with the venv active:
    python benchmarks/contended.py                       # 4 runs per busy count, 24 A/A comparisons
    python benchmarks/contended.py --basis 0 --comparisons 4   # a smoke run
The machine's load before each part is printed: on a shared machine "0 busy" is not idle.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

import verdicts  # noqa: E402  (benchmarks/verdicts.py, beside this file)
from scalestudy.analysis.records import aggregate  # noqa: E402
from scalestudy.analysis.scaling import scaling  # noqa: E402
from scalestudy.analysis.verdicts import VERDICTS, variants  # noqa: E402
from scalestudy.config import clusters  # noqa: E402
from scalestudy.launch.runner import run_point  # noqa: E402
from scalestudy.model.contention import CONTENDED_SLACK_CPUS, contended, contention  # noqa: E402
from scalestudy.model.paths import Layout  # noqa: E402
from scalestudy.model.point import Point  # noqa: E402

BASELINE, NO_OP = "default", "allreduce-recursive-doubling"
NO_OP_FLAGS = {"coll_tuned_use_dynamic_rules": "1", "coll_tuned_allreduce_algorithm": "recursive_doubling"}
FALSE_TARGET = 0.05
BUSY_COUNTS = (0, 1, 2, 4)
# A busy loop ends with the benchmark that started it (its parent gone: a killed pytest worker
# once left three running for 30 min) and after BUSY_LIMIT_S whatever happens.
BUSY_LOOP = (
    "import os, sys, time\nend, parent = time.monotonic() + float(sys.argv[1]), int(sys.argv[2])\n"
    "while time.monotonic() < end and os.getppid() == parent: pass\n"
)
BUSY_LIMIT_S = 3600


def latency_point(side: str, repeat: int, study: str) -> Point:
    """MPI latency at 8 B: collectives, alltoall through mpi4py, 2 ranks (verdicts.py's point otherwise)."""
    return dataclasses.replace(
        verdicts.point(side, repeat, 500, 400),
        study=study,
        app="collectives",
        ranks_per_node=2,
        params={
            "backend": "mpi",
            "operation": "alltoall",
            "min_bytes": 8,
            "max_bytes": 8,
            "iterations": 2000,
            "warmup": 200,
        },  # fmt: skip
        mpi_flags=NO_OP_FLAGS if side == NO_OP else {},
    )


def lammps_point(repeat: int, study: str) -> Point:
    """benchmarks/verdicts.py's LAMMPS point (N = 500, 400 timed steps), in this study."""
    return dataclasses.replace(verdicts.point(BASELINE, repeat, 500, 400), study=study)


class Busy:
    """`count` busy loops, one CPU each, ended by their pids."""

    def __init__(self, count: int):
        self.count = count
        self.loops: list[subprocess.Popen] = []

    def __enter__(self):
        code = [sys.executable, "-c", BUSY_LOOP, str(BUSY_LIMIT_S), str(os.getpid())]
        self.loops = [subprocess.Popen(code) for _ in range(self.count)]
        time.sleep(0.5 if self.count else 0)
        return self

    def __exit__(self, *_):
        for loop in self.loops:
            loop.kill()
        for loop in self.loops:
            loop.wait()


def load_text() -> str:
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def run(point: Point, results: Path, cluster, seed: int) -> dict:
    run_dir = results / point.study / "runs" / point.id
    metrics = run_point(point, run_dir, cluster, layout=Layout(str(results)), order_seed=seed)
    if metrics["status"] != "ok":
        sys.exit(f"contended: a run failed: {metrics['reason']}")
    metrics["path"] = run_dir / "metrics.json"
    return metrics


def basis(args, results: Path, cluster) -> None:
    """Part 1: each figure with 0, 1, 2, 4 busy processes beside it, busy counts interleaved."""
    print(f"part 1, the rule's basis: {args.basis} runs per busy count and figure; before: {load_text()}")
    found: dict[tuple[str, int], list[dict]] = {}
    order = random.Random(args.seed)
    figures = [("latency", "collective_latency_us")] + ([("lammps", "steps_per_s")] if verdicts.LMP.exists() else [])
    for repeat in range(1, args.basis + 1):
        for busy in order.sample(BUSY_COUNTS, len(BUSY_COUNTS)):
            for name, figure in figures:
                point = (
                    latency_point(BASELINE, repeat, f"basis-{busy}")
                    if name == "latency"
                    else lammps_point(repeat, f"basis-lammps-{busy}")
                )
                with Busy(busy):
                    metrics = run(point, results, cluster, args.seed)
                c = metrics.get("conditions", {})
                found.setdefault((name, busy), []).append({
                    "value": metrics["figures"][figure], "other": c.get("other_cpu_share", float("nan")),
                    "contended": contended(c.get("other_cpu_share"), c.get("steal_share"), c.get("machine_cpus"),
                                           point.ranks_per_node),
                    "taken": contention(c.get("other_cpu_share"), c.get("steal_share"), c.get("machine_cpus"),
                                        point.ranks_per_node),
                })  # fmt: skip
    for name, figure in figures:
        quiet = statistics.median(r["value"] for r in found[(name, 0)])
        for busy in BUSY_COUNTS:
            rows = found[(name, busy)]
            median = statistics.median(r["value"] for r in rows)
            values = ", ".join(f"{r['value']:.4g}" for r in rows)
            print(
                f"  {name} [{figure}] with {busy} busy: median {median:.4g} (runs: {values}); ratio to 0 busy "
                f"{median / quiet:.3g}; other processes' mean share {statistics.mean(r['other'] for r in rows):.0%}"
                f"; contended {sum(r['contended'] for r in rows)}/{len(rows)}"
            )
        pooled(name, figure, [r for busy in BUSY_COUNTS for r in found[(name, busy)]])
    print(f"  after: {load_text()}")


# Bins of the CPUs others took beyond those a run left free (model.contention.contention).
CONTENTION_BINS = ((-1e9, CONTENDED_SLACK_CPUS), (CONTENDED_SLACK_CPUS, 0.5), (0.5, 1.0), (1.0, 1e9))


def pooled(name: str, figure: str, rows: list[dict]) -> None:
    """Every run of a figure by how many CPUs others took beyond those it left free: the median,
    its ratio to the uncontended runs' median and how far apart the runs of a bin lie."""
    quiet = [r["value"] for r in rows if r["taken"] is not None and r["taken"] <= CONTENDED_SLACK_CPUS]
    reference = statistics.median(quiet) if quiet else None
    for low, high in CONTENTION_BINS:
        values = sorted(r["value"] for r in rows if r["taken"] is not None and low < r["taken"] <= high)
        what = f"CPUs taken beyond the free ones in ({max(low, -1):g}, {high:g}]".replace("1e+09", "inf")
        if not values:
            print(f"  {name}: {what}: no run")
            continue
        median = statistics.median(values)
        ratio = f"{median / reference:.3g}" if reference else "– (no uncontended run)"
        print(
            f"  {name} [{figure}], {what}: n = {len(values)}, median {median:.4g}, ratio to the uncontended median "
            f"{ratio}, range {values[0]:.4g}-{values[-1]:.4g} (largest / smallest {values[-1] / values[0]:.3g})"
        )


def aa(args, results: Path, cluster) -> pd.DataFrame:
    """Part 2: `--comparisons` A/A comparisons of `--window` runs a side, busy 1 or 2."""
    print(
        f"part 2, A/A: {args.comparisons} comparisons of {args.window} runs a side, {BASELINE} vs {NO_OP} "
        f"(alltoall: a no-op); before: {load_text()}"
    )
    order, paths = random.Random(args.seed), []
    for comparison in range(args.comparisons):
        busy = 1 + comparison % 2
        study = f"aa{comparison:03d}-busy{busy}"
        with Busy(busy):
            for repeat in range(1, args.window + 1):
                for side in order.sample([BASELINE, NO_OP], 2):
                    paths.append(run(latency_point(side, repeat, study), results, cluster, args.seed)["path"])
    print(f"  after: {load_text()}")
    runs = aggregate(paths)
    table = variants(scaling(runs), runs=runs)
    return table[table["primary"]]


def without_new_rules(row) -> str:
    """The verdict as the checks before these rules gave it: the CI's, unless the sides were not
    interleaved or their conditions differed from each other."""
    if row["statistical_verdict"] in ("faster", "slower") and row["interleaved"] is not False and not row["conditions"]:
        return row["statistical_verdict"]
    return "held back"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--basis", type=int, default=4, help="runs per busy count and figure in part 1 (0: skip)")
    parser.add_argument("--comparisons", type=int, default=24, help="A/A comparisons in part 2 (default 24)")
    parser.add_argument("--window", type=int, default=2, help="runs a side per comparison (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="measure into this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    cluster = clusters.load("local")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(args.keep or scratch)
        if args.basis:
            basis(args, results, cluster)
        rows = aa(args, results, cluster) if args.comparisons else pd.DataFrame()
    if rows.empty:
        return 0
    lies = int(rows["verdict"].isin(("faster", "slower")).sum())
    before = rows.apply(without_new_rules, axis=1)
    lies_before = int(before.isin(("faster", "slower")).sum())
    n = len(rows)
    for label, count in (("with the new rules", lies), ("without them", lies_before)):
        share = count / n
        print(
            f"false-verdict rate {label}: {count}/{n} = {share:.1%} (target <= {FALSE_TARGET:.0%}; ratio "
            f"{share / FALSE_TARGET:.2f})"
        )
    marked = rows["contended_runs"].sum() + rows["contended_runs_baseline"].sum()
    print(
        f"  definition: A/A comparisons ({BASELINE} vs {NO_OP}, collectives alltoall 8 B latency, 2 ranks, "
        f"{args.window} vs {args.window} runs interleaved, 1 or 2 busy processes beside) whose verdict is faster "
        f"or slower; runs marked contended: {int(marked)} of {2 * n * args.window}; verdicts held back with the "
        f"new rules: {int((~rows['verdict'].isin(VERDICTS)).sum())} of {n}; took {time.perf_counter() - start:.0f} s"
    )
    kinds = rows["verdict"].str.split(":").str[0].value_counts()
    print(f"  verdicts: {', '.join(f'{kind} {count}' for kind, count in kinds.items())}")
    print(f"  the CI alone: {', '.join(f'{v} {n}' for v, n in rows['statistical_verdict'].value_counts().items())}")
    print(f"  methods: {', '.join(f'{m} {n}' for m, n in rows['method'].value_counts().items())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
