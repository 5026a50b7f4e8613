"""How often does a torch-parallel rank die at exit after printing its result?

Seen in the local study: a 2-rank CPU point printed its whole result, then a rank ended with
"terminate called without an active exception" (SIGABRT) and the run was recorded mpi_abort
(1 of 48 runs; 1 launch in 50-120 under load). This launches the rank program as the runner
does (Open MPI's mpirun, 2 ranks, gloo, a TMPDIR of its own per launch) on a short bow
pipeline, over and over, with --busy `yes > /dev/null` processes loading the machine, and
counts the launches that printed their result and then failed (non-zero exit, or the
terminate line in their output). This checkout against another revision (--before, default
25b3435: the rank ended through the interpreter's teardown), interleaved launch by launch so
that both meet the same load.

    python benchmarks/exit_abort.py --launches 300 --busy 2          # this checkout only
    python benchmarks/exit_abort.py --launches 150 --busy 2 --ab     # both, interleaved
    python benchmarks/exit_abort.py --minutes 30 --ab                # as many as fit

Prints, for each side: launches, aborts after the result, other failures, the rate and its
95% upper bound (rule of three where none), and the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULT = "scalestudy-torch-result"
TERMINATE = "terminate called without an active exception"
RANK_ARGS = ["--model", "bow", "--strategy", "pipeline", "--batch-size", "16", "--micro-batches", "2",
             "--steps", "3", "--warmup-steps", "1", "--width", "64", "--depth", "2", "--device", "cpu"]  # fmt: skip


def checkout_of(revision: str, folder: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "workflow", "config"], check=True,
                             capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def launch(tree: Path) -> tuple[str, str]:
    """('ok' | 'abort_after_result' | 'failed', the output's tail) of one 2-rank launch."""
    mpirun = Path(sys.executable).parent / "mpirun"
    with tempfile.TemporaryDirectory(prefix="scalestudy-abort-") as scratch:
        env = {**os.environ, "PYTHONPATH": str(tree / "workflow"), "TMPDIR": scratch, "OMP_NUM_THREADS": "1"}
        command = [str(mpirun), "-np", "2", "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS",
                   sys.executable, "-m", "scalestudy.apps.torch_parallel.rank", *RANK_ARGS]  # fmt: skip
        ran = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    output = ran.stdout + ran.stderr
    if ran.returncode == 0 and TERMINATE not in output:
        return "ok", ""
    kind = "abort_after_result" if RESULT in output else "failed"
    return kind, f"exit {ran.returncode}: " + " | ".join(output.strip().splitlines()[-4:])


def upper_95(events: int, trials: int) -> float:
    """A one-sided 95% upper bound of a rate: 3/n where none was seen (rule of three), else the
    Clopper-Pearson bound by bisection on the binomial tail."""
    if trials == 0:
        return 1.0
    if events == 0:
        return 3 / trials
    from math import comb

    low, high = events / trials, 1.0
    for _ in range(60):
        p = (low + high) / 2
        tail = sum(comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(events + 1))
        low, high = (p, high) if tail > 0.05 else (low, p)
    return high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=300, help="launches of each side")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long (whatever was reached)")
    parser.add_argument("--busy", type=int, default=2, help="`yes > /dev/null` processes loading the machine")
    parser.add_argument("--ab", action="store_true", help="also launch --before's rank program, interleaved")
    parser.add_argument("--before", default="25b3435")
    args = parser.parse_args()
    busy = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(args.busy)]
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    loads = []
    try:
        with tempfile.TemporaryDirectory(prefix="scalestudy-abort-before-") as before:
            sides = {"this checkout": REPO}
            if args.ab:
                sides[args.before] = checkout_of(args.before, Path(before))
            counts = {label: {"ok": 0, "abort_after_result": 0, "failed": 0} for label in sides}
            for n in range(args.launches):
                if deadline and time.monotonic() > deadline:
                    break
                for label, tree in sides.items():
                    kind, tail = launch(tree)
                    counts[label][kind] += 1
                    if kind != "ok":
                        print(f"launch {n + 1} ({label}): {kind}: {tail}", flush=True)
                loads.append(os.getloadavg()[0])
                if (n + 1) % 10 == 0:
                    print(f"... {n + 1} launches each: {counts}", flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    load = f"load average {min(loads):.1f}-{max(loads):.1f}" if loads else "no launch"
    print(f"busy processes: {args.busy}; {load}")
    for label, count in counts.items():
        total = sum(count.values())
        aborts = count["abort_after_result"]
        print(f"{label}: {total} launches, {aborts} aborts after the result (rate {aborts / max(total, 1):.4f}, "
              f"95% upper bound {upper_95(aborts, total):.4f}), {count['failed']} other failures")  # fmt: skip


if __name__ == "__main__":
    main()
