"""A node ladder: node counts chosen round by round instead of fixed in advance.

`nodes: {from: 1, up_to: 64, stop_below_efficiency: 0.7}` makes the rungs from, 2·from,
4·from, ... up to up_to (doublings; up_to must be one). Every rung is a point of the sweep (its
id never changes, the forecast and the budget count every rung: the worst case), but a rung is
planned only once the rung below it has finished (every repeat it needs) and the ladder climbs:

- it stops at a rung whose measured parallel efficiency is below the threshold with 95%
  confidence (the whole ratio interval below it: model.scaling_figures.judge, BELOW);
- it stops before the next rung when the calibrated prediction of that rung's efficiency lies
  wholly below the threshold (its optimistic edge is below it);
- it stops at a rung with fewer than 2 successful runs (an interrupted or failed repeat: no
  interval to judge; `retry_failed=true` measures them again and the ladder goes on), and at up_to.

`intermediate: true` adds a rung between two doublings r and 2r: m = 1.5·r in whole nodes (the
1.5x candidate of analysis.intervals.candidates), from the MODEL_SCALES-th rung on (below it no
prediction can be made, so none could be chosen). Each is a point of the sweep too (its id never
changes, whether it is run or not; the forecast, the budget and the dry run count it in the
worst case: every rung and every intermediate rung). After r the ladder climbs to m instead of
2r where m is the cheapest measurement that decides whether the threshold is crossed
(`measure_between_first`; its price: `cost_share`).

`step` is that decision, on numbers others compute (the analysis: analysis.ladder.judge); the
records on disk choose the rungs in play (bookkeeping.ladder). Pure Python, standard library only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .scaling_figures import BELOW, judge

# A rung is judged from at least this many successful runs (a ratio interval needs 2 at each end).
MIN_RUNS = 2
# The keys of a ladder as the schema spells them.
FROM, UP_TO, STOP_BELOW, INTERMEDIATE = "from", "up_to", "stop_below_efficiency", "intermediate"
# An intermediate rung: this times the rung below it, in whole nodes (analysis.intervals.candidates' 1.5x).
BETWEEN_FACTOR = 1.5
# The fewest measured scales a scaling model, hence a prediction, is made from (analysis.pmnf.MIN_SCALES;
# a test holds them equal): intermediate rungs come only after this many rungs.
MODEL_SCALES = 4
# Why a ladder stops (Step.reason); CLIMB: it goes on.
CLIMB, MEASURED, PREDICTED, TOP, NO_RESULT = "climb", "measured below", "predicted below", "up_to reached", "no result"


def intermediate_between(low: int, high: int) -> int | None:
    """The intermediate rung between rungs `low` and `high`: BETWEEN_FACTOR·low rounded to whole
    nodes as analysis.intervals.candidates rounds it (Python's round), where strictly between."""
    nodes = round(low * BETWEEN_FACTOR)
    return nodes if low < nodes < high else None


@dataclass(frozen=True)
class Ladder:
    start: int  # `from`
    up_to: int
    threshold: float  # stop_below_efficiency, else the study's efficiency_threshold
    intermediate: bool = False  # `intermediate`: a rung at 1.5x between doublings, where cheaper

    def rungs(self) -> tuple[int, ...]:
        """from, 2·from, 4·from, ... not above up_to (the doublings)."""
        out, nodes = [], self.start
        while nodes <= self.up_to:
            out.append(nodes)
            nodes *= 2
        return tuple(out)

    def between(self) -> tuple[int, ...]:
        """The intermediate rungs (none unless `intermediate`): one between each rung from the
        MODEL_SCALES-th on and the doubling above it."""
        if not self.intermediate:
            return ()
        rungs = self.rungs()
        pairs = zip(rungs[MODEL_SCALES - 1 : -1], rungs[MODEL_SCALES:], strict=True)
        found = (intermediate_between(low, high) for low, high in pairs)
        return tuple(nodes for nodes in found if nodes is not None)

    def scales(self) -> tuple[int, ...]:
        """Every node count the ladder may run: its rungs and intermediate rungs, ascending."""
        return tuple(sorted({*self.rungs(), *self.between()}))

    def candidates(self, top: int) -> tuple[int, ...]:
        """What may be measured after `top`: the scales above it up to the next doubling rung."""
        following = [nodes for nodes in self.rungs() if nodes > top]
        return tuple(n for n in self.scales() if top < n <= following[0]) if following else ()

    def text(self) -> str:
        between = self.between()
        words = f" ({', '.join(map(str, between))} between, each measured first where cheaper)" if between else ""
        return f"{', '.join(map(str, self.rungs()))} nodes{words}, stops below efficiency {self.threshold:g}"

    def __post_init__(self) -> None:
        if self.start < 1:
            raise ValueError(f"a ladder starts at 1 node or more, not {self.start}")


def is_ladder(nodes: Any) -> bool:
    """Is a study's `nodes` a ladder (a mapping), not a list of node counts?"""
    return isinstance(nodes, Mapping)


def of(nodes: Any, efficiency_threshold: float) -> Ladder | None:
    """A study's `nodes` (the schema's defaults filled in) as a ladder; None for a list."""
    if not is_ladder(nodes):
        return None
    threshold = nodes.get(STOP_BELOW)
    return Ladder(int(nodes[FROM]), int(nodes[UP_TO]), float(efficiency_threshold if threshold is None else threshold),
                  bool(nodes.get(INTERMEDIATE, False)))  # fmt: skip


def node_values(nodes: Any) -> list[int]:
    """The node counts a study's `nodes` expands into: the list, or every rung of the ladder (its
    intermediate rungs too: each a point whose id never changes, whether it is run or not)."""
    if not is_ladder(nodes):
        return list(nodes)
    return list(Ladder(int(nodes[FROM]), int(nodes[UP_TO]), 1.0, bool(nodes.get(INTERMEDIATE, False))).scales())


def problems(study: Mapping[str, Any], where: str) -> list[str]:
    """What the schema cannot say of a study's ladder, one line each: from above up_to, an up_to
    that is no doubling of from, a weak-scaling study, one repeat, nodes zipped or excluded."""
    nodes = study.get("nodes")
    if not is_ladder(nodes):
        return []
    start, up_to = int(nodes[FROM]), int(nodes[UP_TO])
    at = f"{where}.nodes"
    if start > up_to:
        return [f"{at}.from: {start} is above up_to {up_to}; use from <= up_to"]
    found = []
    rungs = Ladder(start, up_to, 1.0).rungs()
    if rungs[-1] != up_to:
        found.append(
            f"{at}.up_to: {up_to} is not a doubling of from {start} (rungs {', '.join(map(str, rungs))}, ...); "
            f"allowed: {rungs[-1]} or {rungs[-1] * 2}"
        )
    if study.get("scaling") == "weak":
        found.append(
            f"{at}: a ladder stops on strong-scaling (parallel) efficiency S(p)·p0/p, and this study is "
            "scaling: weak, whose efficiency is T(p0)/T(p) (weak efficiency), which the ladder does not judge "
            "(its prediction intervals are calibrated on strong-scaling series); allowed: a list of nodes, "
            "or scaling: strong"
        )
    if nodes.get(INTERMEDIATE) is True and rungs[-1] == up_to and not Ladder(start, up_to, 1.0, True).between():
        first = start * 2**MODEL_SCALES
        found.append(
            f"{at}.intermediate: true, but the ladder {', '.join(map(str, rungs))} has no intermediate rung (the "
            f"first comes after its rung {MODEL_SCALES}, where a prediction can first be made); allowed: false, "
            f"or up_to >= {first}"
        )
    repeats = study.get("repeats")
    if isinstance(repeats, int) and repeats < 2:
        found.append(
            f"{where}.repeats: {repeats} with a node ladder: a rung's efficiency has a 95% interval only from at "
            "least 2 repeats at it and at `from`; allowed: repeats >= 2, or {min: 2, max: ..., ci: ...}"
        )
    for i, group in enumerate(study.get("zip") or []):
        if "nodes" in group:
            found.append(
                f"{where}.zip[{i}]: nodes is a ladder, whose rungs are chosen round by round; allowed: zip other "
                "axes, or a list of nodes"
            )
    for i, entry in enumerate(study.get("exclude") or []):
        if isinstance(entry, Mapping) and "nodes" in entry:
            found.append(
                f"{where}.exclude[{i}].nodes: a ladder climbs every rung in turn and cannot skip one; allowed: "
                "exclude other axes, or a smaller up_to"
            )
    return found


def cluster_problem(nodes: Any, where: str, cluster: str, cluster_nodes: int | None, file: str) -> str | None:
    """A ladder whose up_to is more nodes than the cluster file has (one line), else None."""
    if not is_ladder(nodes) or cluster_nodes is None or int(nodes[UP_TO]) <= cluster_nodes:
        return None
    rungs = Ladder(int(nodes[FROM]), cluster_nodes, 1.0).rungs() if int(nodes[FROM]) <= cluster_nodes else ()
    allowed = f"up_to: {rungs[-1]}" if rungs else f"a ladder from at most {cluster_nodes}"
    return (
        f"{where}.nodes.up_to: {nodes[UP_TO]} nodes, but {cluster} has {cluster_nodes} "
        f"({file} nodes: {cluster_nodes}); allowed: {allowed}"
    )


def nodes_text(nodes: int) -> str:
    return f"{nodes} node{'s' if nodes != 1 else ''}"


@dataclass(frozen=True)
class RungRuns:
    """What a finished rung measured, as the judge (analysis.ladder.judge) is given it: the primary
    figure of each successful repeat."""

    nodes: int
    ranks: int
    values: tuple[float, ...]


@dataclass(frozen=True)
class Rung:
    """A finished rung as the ladder judges it: its efficiency against `from`, with its 95%
    interval (nan: none, e.g. no successful run, or one repeat)."""

    nodes: int
    efficiency: float
    low: float = math.nan
    high: float = math.nan
    runs: int = 2  # successful runs

    @property
    def ok(self) -> bool:
        return self.runs > 0

    def text(self) -> str:
        if not self.ok:
            return f"{nodes_text(self.nodes)}: no successful run"
        interval = f" [{self.low:.2f}–{self.high:.2f}]" if math.isfinite(self.low) and math.isfinite(self.high) else ""
        return f"{nodes_text(self.nodes)}: efficiency {self.efficiency:.2f}{interval}"


@dataclass(frozen=True)
class Prediction:
    """The calibrated prediction of a rung's efficiency (nan where there is none); for an
    intermediate rung also `decides`: the calibrated probability that measuring it finds it below
    the threshold with 95% confidence (analysis.ladder.intermediate; nan: not computed)."""

    nodes: int
    efficiency: float = math.nan
    low: float = math.nan
    high: float = math.nan
    note: str = ""  # why there is none
    decides: float = math.nan

    @property
    def given(self) -> bool:
        return math.isfinite(self.high)

    def band(self) -> str:
        return f"{self.efficiency:.2f} [{self.low:.2f}–{self.high:.2f}]"


@dataclass(frozen=True)
class Step:
    """What the ladder does after its highest finished rung: climb to `next_nodes` or stop at
    `top` (the highest rung measured), and why, in words."""

    reason: str  # CLIMB or why it stops
    top: int
    next_nodes: int | None
    why: str
    # What the decision was made on: the finished rungs as judged, the next rung's prediction,
    # the intermediate rung's (with the chance that it decides) where the ladder has one there.
    rungs: tuple[Rung, ...] = ()
    predicted: Prediction | None = None
    between: Prediction | None = None

    @property
    def climbs(self) -> bool:
        return self.reason == CLIMB


def cost_share(between: Prediction, following: int, predicted: Prediction | None = None) -> float:
    """What measuring the intermediate rung costs as a share of measuring the rung `following`,
    c_m/c_d, read as the larger of two prices, so that the rule holds under either:

    - m/d: the forecast's and the budget's price, and a job's walltime that does not shrink with
      scale (start-up, input, a fixed number of steps timed at any scale): every rung runs the same
      repeats at the same requested walltime, so a rung costs its nodes (3/4 for m = 1.5·r, d = 2·r);
    - E_d/E_m, the predicted efficiencies' ratio (their centres): the node-hours used where a job's
      walltime is the strong-scaling work itself, p·T(p) = p0·T(p0)/E(p).

    A job's walltime that is partly each costs a share between the two (a mediant)."""
    share = between.nodes / following
    if predicted is not None and predicted.given and between.given and between.efficiency > 0:
        share = max(share, predicted.efficiency / between.efficiency)
    return share


def measure_between_first(decides: float, share: float) -> bool:
    """Whether an intermediate rung m is the cheapest measurement that decides whether the
    threshold is crossed before the next rung d, rather than d itself (`decides`: P below;
    `share`: c_m/c_d, `cost_share`).

    The question after a rung r that holds the threshold is whether d is worth its allocation.
    Measuring d costs c_d. Measuring m first costs c_m, and c_d more unless m is found below the
    threshold with 95% confidence: then the threshold is crossed by m, so by d too (the ladder
    reads efficiency as falling with scale: it stops at the first rung below), the ladder stops at
    m and d is never run. Where m is not found below, the ladder goes on to d as it would have
    (with m among the rungs its prediction is made from, which can only stop it sooner), so what
    comes after d is the same either way. Measuring m first is cheaper in expectation exactly
    when c_m + (1 − P)·c_d < c_d, i.e. P > c_m/c_d, with P the calibrated probability that m is
    measured wholly below the threshold. An unknown P (nan) never chooses m."""
    return decides > share


def step(
    rungs: Sequence[int],
    measured: Sequence[Rung],
    threshold: float,
    predicted: Prediction | None = None,
    between: Prediction | None = None,
) -> Step:
    """The decision after the rungs `measured` (every one finished, in order from the first of
    `rungs`, the doublings, with any intermediate rungs among them): stop at the last measured rung
    when it has no successful run, when its efficiency is below `threshold` with 95% confidence,
    when it is the last rung, or when `predicted` (the next rung's calibrated efficiency) lies
    wholly below the threshold; otherwise climb: to the intermediate rung `between` (a prediction
    with its chance to decide) where measure_between_first says it is cheaper, else to the next rung.
    The step holds what it was decided on (the rungs as judged, the predictions)."""
    made = functools.partial(Step, rungs=tuple(measured), predicted=predicted, between=between)
    last = measured[-1]
    at = nodes_text(last.nodes)
    above = [nodes for nodes in rungs if nodes > last.nodes]
    if last.runs < MIN_RUNS:
        runs = "no successful run" if not last.ok else f"{last.runs} successful run"
        why = f"{runs} at {at}: its efficiency has no interval to judge (retry_failed=true measures it again)"
        return made(NO_RESULT, last.nodes, None, why)
    if judge(last.low, last.high, threshold) == BELOW:
        why = f"efficiency at {at} {last.efficiency:.2f} [{last.low:.2f}–{last.high:.2f}] is below {threshold:g}"
        return made(MEASURED, last.nodes, None, f"{why} with 95% confidence")
    if not above:
        return made(TOP, last.nodes, None, f"reached up_to ({at}) with efficiency {last.efficiency:.2f}")
    following = nodes_text(above[0])
    if predicted is not None and predicted.given and judge(predicted.low, predicted.high, threshold) == BELOW:
        band = predicted.band()
        why = f"the calibrated prediction at {following} is efficiency {band}, below {threshold:g} with 95% confidence"
        return made(PREDICTED, last.nodes, None, why)
    holds = f"{last.text()}, not below {threshold:g}"
    if between is None or not last.nodes < between.nodes < above[0]:
        return made(CLIMB, last.nodes, above[0], f"{holds}: climbs to {following}")
    if not math.isfinite(between.decides):
        note = f"; {nodes_text(between.nodes)} first: no prediction ({between.note})" if between.note else ""
        return made(CLIMB, last.nodes, above[0], f"{holds}: climbs to {following}{note}")
    at = nodes_text(between.nodes)
    share = cost_share(between, above[0], predicted)
    chance = (
        f"{at} (predicted {between.band()}) is measured wholly below {threshold:g} with probability "
        f"{between.decides:.2f}"
    )
    price = f"its cost relative to {following}, {share:.2f}"
    if measure_between_first(between.decides, share):
        nxt = f" (predicted {predicted.band()})" if predicted is not None and predicted.given else ""
        why = (
            f"{holds}: climbs to {at} before {following}{nxt}: {chance}, above {price}: the cheaper "
            f"measurement, in expectation, that decides whether {following} is worth running"
        )
        return made(CLIMB, last.nodes, between.nodes, why)
    why = f"{holds}: climbs to {following} ({chance}, not above {price})"
    return made(CLIMB, last.nodes, above[0], why)


def settle(step: Step, ladder: Ladder, finished: Collection[int]) -> Step:
    """A climbing step whose candidates (the scales after its top, up to the next rung) have a
    finished measurement already: the lowest of those is next, for it costs nothing (the cheapest
    measurement). Where a ladder's decision at a rung changed since a candidate was run (a new
    calibration), it so reads what was measured instead of running the other candidate too."""
    if not step.climbs:
        return step
    done = [nodes for nodes in ladder.candidates(step.top) if nodes in finished]
    if not done or done[0] == step.next_nodes:
        return step
    why = f"{step.why}; {nodes_text(done[0])} is measured already (no cost): read first"
    return dataclasses.replace(step, next_nodes=done[0], why=why)


# How a ladder's finished rungs are judged: (the ladder, the primary figure's kind 'rate' or
# 'time', the study's estimator, the finished rungs in order) -> the next step. The analysis
# computes it (analysis.ladder.judge: ratio intervals, calibrated predictions); the planning and
# the results are handed it from above both (the Snakefile, `python -m scalestudy plan`).
Judge = Callable[["Ladder", str, str, Sequence[RungRuns]], Step]
