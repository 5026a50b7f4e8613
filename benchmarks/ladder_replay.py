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

Then the prediction-chosen rungs (`intermediate: true`, model.ladder.measure_between_first) against
the doubling-only ladder on the same series: (iii) the doubling ladder, from the first published
scale each rung the smallest published scale at least twice the last (a ladder's doublings, where
a series has no exact doubling the nearest above), judged with the prediction; (iv) the same
ladder with an intermediate rung 1.5x the rung below (whole nodes, from the 4th rung on, as the
workflow's ladder), offered to the judge only where the series published that scale (the only
measurable scales); where the judge would have chosen an intermediate the series lacks, the
replay counts it ("wanted") and climbs to the doubling. A stop at an intermediate rung is judged
as the doubling ladder's stop before the next rung (the threshold crossed before it). Node-hours
are the published ones (p x time) of the scales each ladder ran, as a share of the full doubling
ladder's: where (iv) ran an intermediate rung that did not decide, it spent more than (iii).
(v) does the same on synthetic Amdahl series, T(p) = f + (1 - f)/p at p = 1, 2, 4, 8, 12, 16, 24,
32, 48, 64 (every intermediate scale measurable), for serial fractions f = 0.02 ... 0.08 (the
efficiency crosses 0.7 between 8 and 64 nodes): where the rule does choose an intermediate rung.
"""

from __future__ import annotations

import argparse
import csv
import math
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
from scalestudy.model.ladder import (  # noqa: E402
    CLIMB,
    MEASURED,
    MODEL_SCALES,
    PREDICTED,
    TOP,
    RungRuns,
    cost_share,
    intermediate_between,
)

GADI_TABLE = REPO / "tests" / "data" / "gadi-2024-hoomd-wca-strong.csv"
REPEATS = 3
# (v)'s synthetic series: Amdahl's law at these serial fractions and scales.
SERIAL_FRACTIONS = (0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08)
SYNTHETIC_SCALES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)


def amdahl_series() -> dict[str, dict]:
    return {
        f"amdahl_f{f:.2f}": {"p": list(SYNTHETIC_SCALES), "y": [f + (1 - f) / p for p in SYNTHETIC_SCALES],
                             "kind": "time", "split": "synthetic"}
        for f in SERIAL_FRACTIONS
    }  # fmt: skip


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


def doubling_chain(scales: list[int]) -> list[int]:
    """The doubling ladder on a series' scales (ascending): from the first, each rung the smallest
    scale at least twice the last."""
    chain = [scales[0]]
    for q in scales[1:]:
        if q >= 2 * chain[-1]:
            chain.append(q)
    return chain


@dataclass
class ChainReplay:
    series: str
    chain: list[int]  # the doubling rungs
    path: list[int]  # the scales run, in order
    stop: int  # the scale it stopped at
    reason: str
    verdict: str
    spent: float  # node-hours of the path, as a share of the full doubling ladder's
    offered: list[int]  # intermediate rungs the series published (measurable) where the ladder climbed past
    chosen: list[int]  # intermediate rungs run
    decided: list[int]  # intermediate rungs that stopped the ladder (the doubling above never run)
    wanted: list[int]  # intermediate rungs the judge chose that the series did not publish
    # Each decision with an intermediate candidate: (its nodes, P that it decides, its cost share).
    chances: list[tuple[int, float, float]]

    def line(self, against: ChainReplay | None = None) -> str:
        text = (
            f"  {self.series:<36} rungs {len(self.chain):>2} stops at {self.stop:>5} of {self.chain[-1]:>5} "
            f"({self.reason:<15}) {self.verdict:<10} spent {self.spent:4.0%}"
        )
        if against is None:
            return text
        ints = lambda xs: ",".join(map(str, xs)) or "-"  # noqa: E731
        delta = self.spent - against.spent
        top = max(self.chances, key=lambda c: c[1] - c[2], default=None)
        best = f"P {top[1]:.2f} vs share {top[2]:.2f} at {top[0]}" if top else "no candidate"
        return (
            f"{text} ({delta:+4.0%} vs (iii))  measurable between: {ints(self.offered):<8} run: {ints(self.chosen):<5} "
            f"decided: {ints(self.decided):<4} wanted, not published: {ints(self.wanted):<5} closest: {best}"
        )


def replay_chain(name: str, s: dict, threshold: float, noise: float, intermediate: bool) -> ChainReplay:
    """The doubling ladder on a series (iii), or with its published intermediate rungs (iv)."""
    scales = [int(round(q)) for q in map(float, s["p"])]
    y, kind = list(map(float, s["y"])), s["kind"]
    value = dict(zip(scales, y, strict=True))
    hours = dict(zip(scales, node_hours(list(map(float, s["p"])), y, kind), strict=True))
    chain = doubling_chain(scales)
    measured: list[RungRuns] = []
    path: list[int] = []
    offered, chosen, decided, wanted = [], [], [], []
    chances: list[tuple[int, float, float]] = []
    nodes = chain[0]
    while True:
        v = value[nodes]
        measured.append(RungRuns(nodes, nodes, tuple(v * (1 + noise * d) for d in (-1, 0, 1))))
        path.append(nodes)
        between: list[int] = []
        if intermediate and nodes in chain:
            k = chain.index(nodes)
            if MODEL_SCALES - 1 <= k < len(chain) - 1:
                m = intermediate_between(nodes, chain[k + 1])
                between = [m] if m is not None else []
        step = judge_rungs(chain, threshold, kind, "mean", measured, between=between)
        if step.reason != CLIMB:
            break
        offered += [m for m in between if m in value]
        if step.between is not None and math.isfinite(step.between.decides):
            following = chain[chain.index(nodes) + 1]
            share = cost_share(step.between, following, step.predicted)
            chances.append((step.between.nodes, step.between.decides, share))
        if step.next_nodes in between:
            if step.next_nodes not in value:  # chosen, but not a published scale: the doubling instead
                wanted.append(step.next_nodes)
                nodes = chain[chain.index(nodes) + 1]
                continue
            chosen.append(step.next_nodes)
        nodes = step.next_nodes
    stop, reason = path[-1], step.reason
    if stop in chosen and reason == MEASURED:
        decided.append(stop)
    # Judged on the doubling rungs: a stop at an intermediate rung is the stop before the next one.
    efficiency = published_efficiency([float(q) for q in chain], [value[q] for q in chain], kind)
    below_rung = max(k for k, q in enumerate(chain) if q <= stop)
    as_reason = PREDICTED if stop not in chain and reason == MEASURED else reason
    judged = verdict(efficiency, below_rung, as_reason, threshold)
    spent = sum(hours[q] for q in path) / sum(hours[q] for q in chain)
    return ChainReplay(name, chain, path, stop, reason, judged, spent, offered, chosen, decided, wanted, chances)


def chain_totals(doublings: list[ChainReplay], with_between: list[ChainReplay]) -> list[str]:
    n = len(doublings)
    mean = lambda rs: sum(r.spent for r in rs) / n  # noqa: E731
    counts = lambda rs: (  # noqa: E731
        f"agrees {sum(r.verdict == 'agrees' for r in rs)}, late {sum(r.verdict.startswith('late') for r in rs)}, "
        f"early {sum(r.verdict == 'early' for r in rs)}"
    )
    differ = [(a, b) for a, b in zip(doublings, with_between, strict=True) if abs(a.spent - b.spent) > 1e-12]
    chances = [(r.series, *c) for r in with_between for c in r.chances]
    closest = max(chances, key=lambda c: c[2] - c[3], default=None)
    run = sum(len(r.chosen) for r in with_between)
    decided = sum(len(r.decided) for r in with_between)
    wanted = sum(len(r.wanted) for r in with_between)
    return [
        f"  total (iii) doubling ladder: {n} series; {counts(doublings)}; node-hours spent: mean {mean(doublings):.1%} "
        "of the full doubling ladder per series",
        f"  total (iv) with intermediate rungs: {counts(with_between)}; node-hours spent: mean "
        f"{mean(with_between):.1%}; series offered a measurable intermediate rung "
        f"{sum(bool(r.offered) for r in with_between)}, intermediate rungs run "
        f"{run}, of which stopped the ladder {decided}; chosen but not published {wanted}; node-hours differ in "
        f"{len(differ)} series"
        + (": " + ", ".join(f"{b.series} {b.spent - a.spent:+.1%}" for a, b in differ) if differ else ""),
        f"  decisions with an intermediate candidate (the ladder climbing past its 4th rung): {len(chances)}; its P "
        f"above its cost share in {sum(c[2] > c[3] for c in chances)}"
        + (
            f"; closest: {closest[0]} at {closest[1]} nodes, P {closest[2]:.2f} vs share {closest[3]:.2f}"
            if closest
            else ""
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, default=figures.EFFICIENCY_THRESHOLD)
    parser.add_argument("--noise", type=float, default=0.03, help="the repeats' relative standard deviation")
    parser.add_argument("--series", nargs="*", help="only these series, published or synthetic (default: all)")
    args = parser.parse_args(argv)
    series, synthetic = {**published_series(SERIES_FILE), **gadi_series()}, amdahl_series()
    if args.series:
        unknown = [name for name in args.series if name not in series and name not in synthetic]
        if unknown:
            known = ", ".join([*series, *synthetic])
            print(f"--series: unknown {', '.join(unknown)}; known: {known}", file=sys.stderr)
            return 2
        series = {name: series[name] for name in args.series if name in series}
        synthetic = {name: synthetic[name] for name in args.series if name in synthetic}
    started = time.monotonic()
    print(f"ladder replay: {len(series)} published series, {len(synthetic)} synthetic, threshold {args.threshold:g}, "
          f"{REPEATS} repeats at ±{args.noise:.0%} per rung")  # fmt: skip
    if series:
        for predict, title in ((False, "measured rungs alone"), (True, "measured rungs and the calibrated prediction")):
            print(f"({'ii' if predict else 'i'}) judged by the {title}")
            replays = [replay(name, s, args.threshold, args.noise, predict) for name, s in series.items()]
            for r in replays:
                print(r.line())
            print(totals(replays))
        print("(iii) the doubling ladder (each rung the smallest published scale at least twice the last), judged "
              "with the prediction")  # fmt: skip
        doublings = [replay_chain(name, s, args.threshold, args.noise, False) for name, s in series.items()]
        for r in doublings:
            print(r.line())
        print("(iv) the same with intermediate rungs (1.5x, from the 4th rung) where the prediction makes one the "
              "cheaper measurement that decides; measurable only where the series published that scale")  # fmt: skip
        with_between = [replay_chain(name, s, args.threshold, args.noise, True) for name, s in series.items()]
        for r, against in zip(with_between, doublings, strict=True):
            print(r.line(against))
        for line in chain_totals(doublings, with_between):
            print(line)
    if synthetic:
        scales = ", ".join(map(str, SYNTHETIC_SCALES))
        print(f"(v) synthetic Amdahl series, T(p) = f + (1 - f)/p at p = {scales}, every intermediate scale "
              "measurable: (iii) the doubling ladder, then (iv) with intermediate rungs")  # fmt: skip
        doublings = [replay_chain(name, s, args.threshold, args.noise, False) for name, s in synthetic.items()]
        with_between = [replay_chain(name, s, args.threshold, args.noise, True) for name, s in synthetic.items()]
        for a, b in zip(doublings, with_between, strict=True):
            print(a.line())
            print(b.line(a))
        for line in chain_totals(doublings, with_between):
            print(line)
    print(f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
