"""A node ladder's judge (model.ladder.Judge): the finished rungs' efficiencies with their 95%
intervals, as scaling.csv computes them (analysis.scaling.ratio_intervals: Fieller's interval of
the two means, analysis.statistics.ratio_ci, on the study's estimator), and the calibrated
prediction of the next rung's efficiency (analysis.intervals.interval, as the scaling models'
efficiency limit reads it), handed to model.ladder.step, which decides.

The efficiency of a rung is against the ladder's first rung (its p0), as model.scaling_figures
defines it; with one ranks_per_node that is scaling.csv's row for the same scale.

Where the ladder has an intermediate rung before the next (`intermediate: true`), `intermediate`
gives the chance that measuring it decides (finds it below the threshold with 95% confidence):
model.ladder.measure_between_first weighs that chance against its cost.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..model import scaling_figures as figures
from ..model.ladder import MIN_RUNS, Ladder, Prediction, Rung, RungRuns, Step, step
from . import intervals, pmnf
from .scaling import ratio_intervals
from .statistics import summarize

DEFINITIONS = {
    "node ladder": "nodes: {from, up_to, stop_below_efficiency}: rungs from, 2·from, 4·from, ... up to up_to, run"
    " round by round; a rung is run only after the one below it, and the ladder stops at a rung whose"
    " parallel efficiency (against `from`) is below the threshold with 95% confidence (its whole ratio"
    " interval), before a rung whose calibrated predicted efficiency lies wholly below it, at a rung with"
    " fewer than 2 successful runs (no interval), or at up_to; the SU not spent: the rungs not run, every"
    " repeat at its requested walltime + margin, priced as the cost forecast prices them",
    "intermediate rung": "with `intermediate: true`, a rung at 1.5x between two doublings r and 2r (whole nodes),"
    " from the 4th rung on: measured before 2r where that is cheaper in expectation, i.e. where the calibrated"
    " probability P that it is measured below the threshold with 95% confidence (and so the ladder stops"
    " there, 2r never run) exceeds its cost's share of 2r's: the larger of 1.5r/2r (the forecast's price) and"
    " E(2r)/E(1.5r) predicted (the node-hours used where a job's walltime is its timed work); the worst case"
    " counts every intermediate rung",
}

# The calibrated levels an intermediate rung's distribution is read from: each two-sided interval
# gives two quantiles (equal tails), the centre a third (analysis.intervals: the median's lean).
QUANTILE_LEVELS = (0.95, 0.80)


def rung_table(measured: Sequence[RungRuns], estimator: str) -> pd.DataFrame:
    """One row per rung: the statistics of its repeats (analysis.statistics.summarize) and its ranks."""
    return pd.DataFrame(
        [{**summarize(list(r.values), estimator=estimator), "nodes": r.nodes, "ranks": r.ranks} for r in measured]
    )


def rungs_judged(measured: Sequence[RungRuns], kind: str, estimator: str) -> list[Rung]:
    """Each finished rung's efficiency against the first, with its 95% interval."""
    table = rung_table(measured, estimator)
    if table["n"].iloc[0] == 0:
        return [Rung(int(row.nodes), math.nan, runs=int(row.n)) for row in table.itertuples()]
    low, high, _why = ratio_intervals(table, 0, kind)
    base = table.iloc[0]
    out = []
    for index, row in table.iterrows():
        q = row["ranks"] / base["ranks"]
        efficiency = figures.parallel_efficiency(figures.speedup(base["mean"], row["mean"], kind), q)
        out.append(
            Rung(int(row["nodes"]), float(efficiency), float(figures.parallel_efficiency(low[index], q)),
                 float(figures.parallel_efficiency(high[index], q)), runs=int(row["n"]))
        )  # fmt: skip
    return out


def predicted(
    measured: Sequence[RungRuns],
    kind: str,
    estimator: str,
    nodes: int,
    ranks: int,
    calibrated: intervals.Calibration | None = None,
    level: float = pmnf.CONFIDENCE,
) -> Prediction:
    """The calibrated interval (analysis.intervals.interval at `level`; `calibrated`: the shipped
    calibration unless given) of the figure at the next rung, as an efficiency against the first
    rung; none (with why) where the rungs support no model."""
    table = rung_table(measured, estimator)
    table = table[table["n"] > 0]
    if table.empty or kind not in intervals.KINDS:
        return Prediction(nodes, note="no successful rung to predict from")
    n = table["n_used"] if "n_used" in table.columns else table["n"]
    found = intervals.interval(
        table["ranks"].to_numpy(float), table["mean"].to_numpy(float), [float(ranks)], kind,
        se=(table["std"] / np.sqrt(n)).fillna(0).to_numpy(float), spread=(table["std"] / table["mean"]).to_numpy(float),
        level=level, calibrated=calibrated,
    )  # fmt: skip
    value, low, high = float(found.value[0]), float(found.low[0]), float(found.high[0])
    if not (value > 0 and low > 0 and math.isfinite(high)):
        return Prediction(nodes, note=found.reasons[0] or "no positive prediction")
    base = table.iloc[0]
    q = ranks / base["ranks"]
    edges = sorted(
        float(figures.parallel_efficiency(figures.speedup(base["mean"], v, kind), q)) for v in (low, value, high)
    )
    return Prediction(nodes, edges[1], edges[0], edges[2], found.reasons[0])


def chance_below(quantiles: Sequence[tuple[float, float]], value: float) -> float:
    """P(X < value) from quantiles of X, (probability, x) with x > 0: linear in log x between them;
    below the lowest 0 and above the highest its probability (the tails beyond the calibrated
    quantiles are not known: each read as low as it may be, which never favours a rung first)."""
    knots = sorted(quantiles)
    probs = [q for q, _ in knots]
    logs = list(np.maximum.accumulate([math.log(x) for _, x in knots]))  # quantiles never fall
    if not math.isfinite(value) or value <= 0:
        return 0.0
    x = math.log(value)
    if x < logs[0]:
        return 0.0
    if x >= logs[-1]:
        return probs[-1]
    return float(np.interp(x, logs, probs))


def intermediate(
    measured: Sequence[RungRuns],
    kind: str,
    estimator: str,
    nodes: int,
    ranks: int,
    threshold: float,
    calibrated: intervals.Calibration | None = None,
) -> Prediction:
    """The intermediate rung's calibrated prediction (as `predicted`, at 95%) and its `decides`:
    the probability that, measured, it is below `threshold` with 95% confidence. Its efficiency's
    distribution is read off the calibrated intervals at QUANTILE_LEVELS and their centre
    (`chance_below`); its measured interval is taken as wide, relative to its value, as the last
    rung's (the same repeats): it is wholly below where efficiency < threshold · E/high of that rung."""
    found = [predicted(measured, kind, estimator, nodes, ranks, calibrated, level) for level in QUANTILE_LEVELS]
    wide = found[0]
    if not all(f.given for f in found):
        return Prediction(nodes, note=wide.note or "no prediction")
    last = rungs_judged(measured, kind, estimator)[-1]
    margin = last.high / last.efficiency if math.isfinite(last.high) and last.efficiency > 0 else math.inf
    quantiles = [(0.5, wide.efficiency)]
    for level, f in zip(QUANTILE_LEVELS, found, strict=True):
        quantiles += [((1 - level) / 2, f.low), ((1 + level) / 2, f.high)]
    decides = chance_below(quantiles, threshold / max(margin, 1.0)) if math.isfinite(margin) else 0.0
    return dataclasses.replace(wide, decides=decides)


def judge(
    ladder: Ladder,
    kind: str,
    estimator: str,
    measured: Sequence[RungRuns],
    calibrated: intervals.Calibration | None = None,
    predict: bool = True,
) -> Step:
    """model.ladder.Judge: the next step after the finished rungs `measured` (`predict`: False
    judges the measured rungs alone, as benchmarks/ladder_replay.py compares)."""
    return judge_rungs(ladder.rungs(), ladder.threshold, kind, estimator, measured, calibrated, predict,
                       ladder.between())  # fmt: skip


def judge_rungs(
    rungs: Sequence[int],
    threshold: float,
    kind: str,
    estimator: str,
    measured: Sequence[RungRuns],
    calibrated: intervals.Calibration | None = None,
    predict: bool = True,
    between: Sequence[int] = (),
) -> Step:
    """`judge` on any rungs (a published series' scales, benchmarks/ladder_replay.py); `between`:
    the intermediate rungs (each between two of `rungs`), judged only with `predict`."""
    judged = rungs_judged(measured, kind, estimator)
    above = [nodes for nodes in rungs if nodes > measured[-1].nodes]
    forecast = middle = None
    if above and judged[-1].ok and predict:
        ranks_per_node = measured[-1].ranks // measured[-1].nodes
        forecast = predicted(measured, kind, estimator, above[0], above[0] * ranks_per_node, calibrated)
        first = [nodes for nodes in between if measured[-1].nodes < nodes < above[0]]
        if first and judged[-1].runs >= MIN_RUNS:
            middle = intermediate(measured, kind, estimator, first[0], first[0] * ranks_per_node, threshold, calibrated)
    return step(rungs, judged, threshold, forecast, middle)
