"""Replays published strong-scaling series as node ladders (scalestudy.model.ladder): each series'
published scales are the rungs it could have measured, climbed one by one with the judge a study
uses (scalestudy.analysis.ladder: the rung's efficiency with its 95% ratio interval, and the
calibrated prediction of the next rung), and prints per series and in total where the ladder
stops, whether the published efficiency at the stopping rung and the next one agree with that
decision, and the share of the full ladder's node-hours not spent.

    python benchmarks/ladder_replay.py [--threshold 0.7] [--noise 0.03] [--series NAME ...]

The series: every one of benchmarks/data/published_strong_scaling.csv (the calibration, check
and set-aside halves of the prediction intervals, each named with its split) and the published
Gadi HOOMD-blue table (tests/data/gadi-2024-hoomd-wca-strong.csv, steps/s). A published table
gives one number per scale, and the ladder judges a rung from repeats: each number is read as 3
repeats at (1 - noise, 1, 1 + noise) x the number (their relative standard deviation is `noise`;
3% is a quiet cluster's run-to-run spread), so the mean is the published number.

The judgment, per series, against the published efficiency E(p) = S(p)·p0/p (the first rung p0):
- agrees: the ladder stopped at the first rung whose published E is below the threshold, or (stopped
  by the prediction) at the rung just before it, or climbed every rung of a series that never falls
  below it;
- late: it climbed past the first rung below the threshold (spent what the published numbers say
  was not worth it); early: it stopped while the next rung's published E still held the threshold.
Node-hours of a rung: p × its time (a rate's time is work/rate, the work fixed in strong scaling),
the same repeats at every rung; the share not spent is that of the rungs above the stop. Each series
is printed twice: judged by the measured rungs alone, and with the calibrated prediction too.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "benchmarks"))

from calibrate_intervals import SERIES_FILE, published_series  # noqa: E402
from scalestudy.analysis.ladder import judge_rungs  # noqa: E402
from scalestudy.model import scaling_figures as figures  # noqa: E402
from scalestudy.model.ladder import CLIMB, PREDICTED, TOP, RungRuns  # noqa: E402

GADI_TABLE = REPO / "tests" / "data" / "gadi-2024-hoomd-wca-strong.csv"
REPEATS = 3


def gadi_series() -> dict[str, dict]:
    lines = [line for line in GADI_TABLE.read_text().splitlines() if line and not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    return {
        "gadi_hoomd_wca_2024": {
            "p": [float(r["nodes"]) for r in rows],
            "y": [float(r["steps_per_s"]) for r in rows],
            "kind": "rate",
            "split": "gadi table",
        }
    }


@dataclass
class Replay:
    series: str
    split: str
    rungs: list[float]
    stop: int  # index of the rung the ladder stopped at
    reason: str
    efficiency: list[float]  # published E per rung
    verdict: str
    not_spent: float  # share of the full ladder's node-hours

    def line(self) -> str:
        def e(k: int) -> str:
            return f"{self.efficiency[k]:.2f}" if 0 <= k < len(self.efficiency) else "-"

        nxt = f"{self.rungs[self.stop + 1]:g}" if self.stop + 1 < len(self.rungs) else "-"
        return (
            f"  {self.series:<36} {self.split:<10} stops at {self.rungs[self.stop]:>7g} of {self.rungs[-1]:>7g} "
            f"({self.reason:<15}) E {e(self.stop)} next {nxt:>6} E {e(self.stop + 1):>4}  {self.verdict:<14} "
            f"not spent {self.not_spent:4.0%}"
        )


def published_efficiency(p: list[float], y: list[float], kind: str) -> list[float]:
    speedups = [figures.speedup(y[0], v, kind) for v in y]
    return [float(figures.parallel_efficiency(s, q / p[0])) for q, s in zip(p, speedups, strict=True)]


def node_hours(p: list[float], y: list[float], kind: str) -> list[float]:
    return [q * (v if kind == "time" else 1 / v) for q, v in zip(p, y, strict=True)]


def verdict(efficiency: list[float], stop: int, reason: str, threshold: float) -> str:
    below = next((k for k, e in enumerate(efficiency) if figures.falls_below(e, threshold)), None)
    if below is None:
        return "agrees" if reason == TOP else "early"
    if stop == below or (reason == PREDICTED and stop == below - 1):
        return "agrees"
    if stop > below:
        return f"late by {stop - below}"
    return "early"


def replay(name: str, s: dict, threshold: float, noise: float, predict: bool) -> Replay:
    p, y, kind = list(map(float, s["p"])), list(map(float, s["y"])), s["kind"]
    # Scales as whole numbers (some series count cores in the thousands): the ladder's rungs.
    rungs = [int(round(q)) for q in p]
    measured: list[RungRuns] = []
    stop, reason = len(rungs) - 1, TOP
    for k, (q, v) in enumerate(zip(rungs, y, strict=True)):
        measured.append(RungRuns(q, q, tuple(v * (1 + noise * d) for d in (-1, 0, 1))))
        step = judge_rungs(rungs, threshold, kind, "mean", measured, predict=predict)
        if step.reason != CLIMB:
            stop, reason = k, step.reason
            break
    efficiency = published_efficiency(p, y, kind)
    hours = node_hours(p, y, kind)
    return Replay(name, s.get("split", ""), p, stop, reason, efficiency, verdict(efficiency, stop, reason, threshold),
                  sum(hours[stop + 1 :]) / sum(hours))  # fmt: skip


def totals(replays: list[Replay]) -> str:
    agree = sum(r.verdict == "agrees" for r in replays)
    late = sum(r.verdict.startswith("late") for r in replays)
    early = sum(r.verdict == "early" for r in replays)
    stopped = [r for r in replays if r.stop < len(r.rungs) - 1]
    mean_saved = sum(r.not_spent for r in replays) / len(replays)
    return (
        f"  total: {len(replays)} series; stopped before the last rung {len(stopped)}; agrees {agree}, late {late}, "
        f"early {early}; node-hours not spent: mean {mean_saved:.0%} of the full ladder per series "
        f"({sum(r.not_spent for r in replays if r.verdict == 'agrees') / len(replays):.0%} where the decision agrees)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, default=figures.EFFICIENCY_THRESHOLD)
    parser.add_argument("--noise", type=float, default=0.03, help="the repeats' relative standard deviation")
    parser.add_argument("--series", nargs="*", help="only these series (default: all)")
    args = parser.parse_args(argv)
    series = {**published_series(SERIES_FILE), **gadi_series()}
    if args.series:
        unknown = [name for name in args.series if name not in series]
        if unknown:
            print(f"--series: unknown {', '.join(unknown)}; known: {', '.join(series)}", file=sys.stderr)
            return 2
        series = {name: series[name] for name in args.series}
    started = time.monotonic()
    print(f"ladder replay: {len(series)} published series, threshold {args.threshold:g}, "
          f"{REPEATS} repeats at ±{args.noise:.0%} per rung")  # fmt: skip
    for predict, title in ((False, "measured rungs alone"), (True, "measured rungs and the calibrated prediction")):
        print(f"({'ii' if predict else 'i'}) judged by the {title}")
        replays = [replay(name, s, args.threshold, args.noise, predict) for name, s in series.items()]
        for r in replays:
            print(r.line())
        print(totals(replays))
    print(f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
