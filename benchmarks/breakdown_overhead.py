"""What does measuring the time breakdown cost the figure it explains?

torch-parallel profiles `breakdown_steps` steps *after* its timed steps (torch.profiler), so
the figure should not move. This runs one point with and without the breakdown, interleaved
(with, without, with, ...: drift on a shared machine falls on both sides), and prints:

(a) the figure, samples/s (the app's own: global batch / median step time of the slowest rank),
    mean ± 95% CI (n) of each side, and the speed ratio with / without, 95% CI (Welch t on the
    log ratio, scalestudy.analysis.verdicts.speed_ratio). Target: the CI includes 1.
(b) the profiler's cost on the steps it splits: the profiled step's wall time / the timed
    median step of the same run (median over runs, n; mean, min and max beside): how much
    slower the split steps are than the figure's (the parts are fractions of those slower steps).

LAMMPS's breakdown is its own default timer (`timer normal`, on in every run, the figure's
included): there is nothing to switch off, so it is not measured here.

Run from the repository root with the venv active:
    python benchmarks/breakdown_overhead.py                       # mlp, ddp, 2 ranks, 5 runs a side
    python benchmarks/breakdown_overhead.py --repeats 2 --steps 5 # a smoke run (the tests do this)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.analysis.statistics import summarize  # noqa: E402
from scalestudy.analysis.verdicts import speed_ratio  # noqa: E402
from scalestudy.apps.torch_parallel.app import parse_torch_parallel  # noqa: E402
from scalestudy.model.metrics import metric  # noqa: E402


def run(args: argparse.Namespace, breakdown_steps: int) -> dict:
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    command = [mpirun, "-np", str(args.ranks), "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1",
               "-x", f"PYTHONPATH={REPO / 'workflow'}", sys.executable, "-m", "scalestudy.apps.torch_parallel.rank",
               "--model", args.model, "--strategy", args.strategy, "--mode", "throughput", "--batch-size",
               str(args.batch_size), "--steps", str(args.steps), "--warmup-steps", "3",
               "--breakdown-steps", str(breakdown_steps)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"the rank program failed: {done.stderr[-3000:]}")
    return parse_torch_parallel(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--strategy", default="ddp")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--breakdown-steps", type=int, default=5, help="profiled steps of the side with it")
    parser.add_argument("--repeats", type=int, default=5, help="runs per side")
    args = parser.parse_args()
    sides: dict[str, list[dict]] = {"with": [], "without": []}
    for _ in range(args.repeats):
        sides["with"].append(run(args, args.breakdown_steps))
        sides["without"].append(run(args, 0))
    figure = metric("samples_per_s")
    point = f"{args.model} {args.strategy} {args.ranks} ranks, {args.steps} timed steps (throughput)"
    print(f"figure: {figure.name}: {figure.label} [{figure.unit}]; {point}; runs interleaved")
    stats = {}
    for side, runs in sides.items():
        stats[side] = summarize([r["samples_per_s"] for r in runs])
        s = stats[side]
        what = f"{args.breakdown_steps} profiled steps after the timed ones" if side == "with" else "no profiling"
        print(f"(a) {side} the breakdown ({what}): {s['mean']:.4g} ± {s['ci95']:.2g} samples/s (n = {s['n']})")
    ratio = speed_ratio(stats["with"], stats["without"], figure.kind)
    print(f"(a) ratio with / without: {ratio['ratio']:.3f} (95% CI {ratio['ci_low']:.3f} – {ratio['ci_high']:.3f}; "
          f"{ratio['verdict']}); target: the CI includes 1")  # fmt: skip
    cost = [r["profiled_step_s"] / r["optimizer_step_s"] for r in sides["with"]]
    print(f"(b) profiled step / timed median step, same run: ratio {statistics.median(cost):.3f} "
          f"(median over n = {len(cost)} runs; mean {statistics.fmean(cost):.3f}, min {min(cost):.3f}, "
          f"max {max(cost):.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
