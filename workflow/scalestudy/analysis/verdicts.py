# Stays whole (a little over 500 lines): the verdict rules and the one lookup of each side's runs (Sides) they all read.
"""variants.csv: every MPI flag set, NCCL env set and placement (and an app's compared
parameter: torch-parallel's strategy) against its baseline at the same scale, per figure: the
speed ratio with its 95% CI, and a verdict only where it holds; written by the scaling rule
from the table analysis.scaling.write_scaling_table made (`write_variants_table`).

- variants: speed ratio of a set (or placement: hyperthreads, binding, mapping)
  against `default` (the launcher's own placement) at the same scale (> 1 =
  faster), with a 95% CI from Welch's t on the log ratio, or where the repeats
  are not near-normal the Hodges-Lehmann ratio with its Mann-Whitney CI;
  "faster"/"slower" only when the CI excludes 1, the two sides' runs were
  interleaved in time and their conditions (launch.conditions) were alike. An app's compared parameter (torch-parallel's
  strategy) is compared with its baseline value (ddp) the same way, with the
  app's quality figures (final accuracy and loss) of both beside the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ..apps.registry import APPS
from ..model.contention import OLDER_RULE
from ..model.metrics import HIGHER_IS_BETTER
from ..model.point import AXIS_PREFIX, PLACEMENT_DEFAULTS
from .records import MPI_COLUMN, contended_mask, write_table
from .scaling import SCALE_COLUMNS, curve_columns
from .statistics import CONFIDENCE, MEAN, near_normal, rank_cut, summarize

# Clearly different conditions: the mean share of the CPUs that other processes used (or the
# hypervisor stole) during the two sides' runs differs by more than this many of the CPUs, or
# their mean CPU or GPU clocks by more than CLOCK_GAP of the faster's.
OTHER_CPU_GAP = 0.25
CLOCK_GAP = 0.10
# Runs interleaved round by round put at most two runs of one side next to each other in time
# (the last of a round, the first of the next); three or more were measured with the other
# side absent (measured_together).
ALONE_RUNS = 3
# Two runs a side cannot show whether they fit Welch's assumption (near_normal needs three);
# a verdict on fewer than N_CHECKED stands only where each side's runs agree within
# N2_SPREAD (the larger over the smaller, less 1): two runs of one point 4x apart (5,759 and
# 1,430 us, README "Contended runs") say the runs are not one distribution, whatever the CI.
N_CHECKED = 3
N2_SPREAD = 0.10
# What a variant is compared along, each against its baseline at the same scale with every
# other axis held: the MPI and NCCL sets against `default`, the placement fields against the
# launcher's default placement.
VARIANT_AXES = (
    ("MPI flag set", "mpi_flag_set", "default"),
    ("NCCL env set", "nccl_env_set", "default"),
    *((name.replace("_", " "), name, default) for name, default in PLACEMENT_DEFAULTS.items()),
)

DEFINITIONS = {
    "variant_ratio": "speed ratio of a set, placement or strategy vs its baseline (default; the launcher's own"
    " placement; ddp) at the same scale (> 1 faster), 95% CI by the comparison the repeats fit (named in the"
    " table): Welch t on the log ratio where both sides look near-normal (no outlier, Shapiro–Wilk on the logs"
    " not rejected at 5%), else the Hodges–Lehmann ratio with its Mann–Whitney CI (ranks; needs n ≥ 4 each);"
    " a verdict only when the CI excludes 1, the sides ran interleaved and under like conditions; accuracy"
    " and loss (mean of the repeats) beside where the app reports them",
    "run_order": "points run round by round (repeat 1 of every point, then repeat 2, ...), each round in a random"
    " order drawn from the sweep's order_seed; each run records its seed, round and key",
    "not_interleaved": "a verdict is held back when one side's runs all ended before the other's began (e.g. a"
    " set added to a sweep that had run): the machine may have changed in between; where both sides also have"
    " runs measured together (the study's repeats raised), only those are compared (runs_compared)",
    "conditions_differed": "a verdict is held back when the two sides ran under clearly different conditions:"
    f" the mean share of the CPUs used by other processes (or stolen by the hypervisor) differs by more than"
    f" {OTHER_CPU_GAP:.0%} of the CPUs, or the mean CPU or GPU clock by more than {CLOCK_GAP:.0%}; per run,"
    " other processes' share = (busy CPU time of the machine from /proc/stat − the run's own process tree's)"
    " / (CPUs × wall time)",
    "few_repeats": f"a verdict on fewer than {N_CHECKED} runs a side (whose shape cannot be checked) stands only"
    f" where each side's runs agree within {N2_SPREAD:.0%} (largest / smallest − 1), said in its justification;"
    " else it waits for more repeats",
}


def used_count(row: Mapping) -> int:
    """The values a point's figure rests on: n_used (a trimmed mean drops two), else n."""
    used = row.get("n_used")
    return int(row["n"]) if used is None or (isinstance(used, float) and math.isnan(used)) else int(used)


VERDICTS = ("faster", "slower", "no measurable difference")
TOO_FEW = "too few repeats for a verdict (need n ≥ 2 each)"
NO_RUN = "no successful run to compare"


def speed_ratio(variant: Mapping, baseline: Mapping, kind: str) -> dict:
    """How many times faster `variant` is than `baseline` (> 1 faster), with a 95% CI from
    Welch's t on the log ratio (delta method: se^2 = s1^2/(n1 m1^2) + s0^2/(n0 m0^2)). The
    direction is the figure's kind's (model.metrics.HIGHER_IS_BETTER)."""
    m1, s1, n1 = variant["mean"], variant["std"], used_count(variant)
    m0, s0, n0 = baseline["mean"], baseline["std"], used_count(baseline)
    out = {"ratio": np.nan, "ci_low": np.nan, "ci_high": np.nan, "verdict": NO_RUN}
    if n1 == 0 or n0 == 0 or not (m1 > 0 and m0 > 0):
        return out
    out["ratio"] = m1 / m0 if HIGHER_IS_BETTER[kind] else m0 / m1
    if n1 < 2 or n0 < 2:
        out["verdict"] = TOO_FEW
        return out
    v1, v0 = s1**2 / (n1 * m1**2), s0**2 / (n0 * m0**2)
    se = math.sqrt(v1 + v0)
    if se == 0:
        out.update(ci_low=out["ratio"], ci_high=out["ratio"])
    else:
        dof = se**4 / (v1**2 / (n1 - 1) + v0**2 / (n0 - 1))
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof)) * se
        out.update(ci_low=out["ratio"] * math.exp(-half), ci_high=out["ratio"] * math.exp(half))
    if out["ci_low"] > 1:
        out["verdict"] = "faster"
    elif out["ci_high"] < 1:
        out["verdict"] = "slower"
    else:
        out["verdict"] = "no measurable difference"
    return out


# ---------------------------------------------------------------- verdicts that hold

# The comparison chosen by the data (every table names it): Welch's t on the log ratio when the
# repeats of both sides look near-normal, the rank-based one otherwise.
WELCH, RANKS = "welch", "ranks"
METHOD_NAMES = {
    WELCH: "Welch t on the log ratio",
    RANKS: "Hodges–Lehmann ratio, Mann–Whitney CI (ranks)",
}
TOO_FEW_FOR_RANKS = "too few repeats for a rank-based verdict (need n ≥ 4 each)"
NOT_INTERLEAVED = "not interleaved"
CONDITIONS_DIFFERED = "conditions differed"
CONTENDED = "contended"
WAITS = "waits for more repeats"
# How to measure contended runs again (the report says it where any run was contended).
MEASURE_AGAIN = "raise repeats (the uncontended runs are compared once each side has 2) or measure on a quiet machine"
# The per-run conditions (launch.conditions) the checks read, as runs.csv has them.
CONDITION_COLUMNS = ("other_cpu_share", "steal_share", "cpu_mhz_mean", "gpu_sm_clock_mhz")


def rank_ratio(variant: np.ndarray, baseline: np.ndarray, kind: str) -> dict:
    """The speed ratio as the Hodges–Lehmann estimate of the shift of the logs (the median of
    every pairwise log ratio), with the distribution-free CI from Mann–Whitney's U."""
    x1 = np.log(np.asarray(variant, dtype=float))
    x0 = np.log(np.asarray(baseline, dtype=float))
    sign = 1 if HIGHER_IS_BETTER[kind] else -1
    differences = np.sort(sign * (x1[:, None] - x0[None, :]).ravel())
    out = {"ratio": float(np.exp(np.median(differences))), "ci_low": np.nan, "ci_high": np.nan}
    cut = rank_cut(x1.size, x0.size)
    if cut == 0:
        out["verdict"] = TOO_FEW_FOR_RANKS
        return out
    out.update(ci_low=float(np.exp(differences[cut - 1])), ci_high=float(np.exp(differences[-cut])))
    out["verdict"] = "faster" if out["ci_low"] > 1 else "slower" if out["ci_high"] < 1 else "no measurable difference"
    return out


def side_runs(runs: pd.DataFrame | None, row: Mapping, metric_name: str) -> pd.DataFrame:
    """The successful runs behind a row of the scaling table (its study, curve and scale)."""
    if runs is None or runs.empty or metric_name not in runs.columns or "variant" not in runs.columns:
        return pd.DataFrame()
    ok = runs[(runs["status"] == "ok") & (runs["study"] == row["study"]) & (runs["variant"] == row["variant"])]
    ok = ok[(ok["nodes"] == row["nodes"]) & (ok["ranks"] == row["ranks"])]
    return ok[pd.to_numeric(ok[metric_name], errors="coerce") > 0]


class Sides:
    """side_runs of one runs table, each found once: `variants` compares a baseline with every
    set of every axis, and searching the whole table for each side was most of its time (10,000
    runs: 620 searches). The runs are grouped by SIDE_KEYS once; a row with a missing key, or a
    table without those columns, is searched as side_runs searches it."""

    SIDE_KEYS = ("study", "variant", "nodes", "ranks")

    def __init__(self, runs: pd.DataFrame | None):
        self.runs = runs
        self.found: dict = {}
        self.pairs: dict = {}
        self.groups: dict | None = None
        columns = () if runs is None else runs.columns
        if runs is not None and not runs.empty and {"status", *self.SIDE_KEYS} <= set(columns):
            self.ok = runs[runs["status"] == "ok"]
            self.groups = self.ok.groupby(list(self.SIDE_KEYS), sort=False, dropna=False).indices

    def of(self, row: Mapping, metric_name: str) -> pd.DataFrame:
        key = tuple(row[k] for k in self.SIDE_KEYS)
        if self.groups is None or metric_name not in self.runs.columns or any(pd.isna(v) for v in key):
            return side_runs(self.runs, row, metric_name)
        if (key, metric_name) not in self.found:
            side = self.ok.iloc[self.groups.get(key, [])]
            self.found[key, metric_name] = side[pd.to_numeric(side[metric_name], errors="coerce") > 0]
        return self.found[key, metric_name]

    def together(self, variant: pd.DataFrame, baseline: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """measured_together of two sides of these runs, once per pair of sides (each figure of a
        point compares the same runs)."""
        key = (tuple(variant.index), tuple(baseline.index))
        if key not in self.pairs:
            self.pairs[key] = measured_together(variant, baseline)
        return self.pairs[key]


# Columns of times parsed (times): (their values, dtype) -> the parsed values.
PARSED_TIMES: dict = {}
PARSED_TIMES_KEPT = 4096


def parsed_times(column: pd.Series):
    """pd.to_datetime(column, utc=True, errors="coerce")'s values, parsed once per distinct
    column of times (each side's are read in every comparison it is part of)."""
    try:
        key = (tuple(column), str(column.dtype))
        parsed = PARSED_TIMES.get(key)
    except TypeError:  # a cell that cannot be a key: parsed as it is
        return pd.to_datetime(column, utc=True, errors="coerce").array
    if parsed is None:
        if len(PARSED_TIMES) >= PARSED_TIMES_KEPT:
            PARSED_TIMES.clear()
        parsed = PARSED_TIMES[key] = pd.to_datetime(column, utc=True, errors="coerce").array
    return parsed


def times(column: pd.Series) -> pd.Series:
    """pd.to_datetime(column, utc=True, errors="coerce"), through parsed_times."""
    return pd.Series(parsed_times(column), index=column.index, name=column.name)


def time_span(side: pd.DataFrame) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    if side.empty or "started" not in side.columns or "finished" not in side.columns:
        return None
    started, finished = parsed_times(side["started"]), parsed_times(side["finished"])
    started, finished = started[~started.isna()], finished[~finished.isna()]
    if not len(started) or not len(finished):
        return None
    return started.min(), finished.max()


def interleaving(variant: pd.DataFrame, baseline: pd.DataFrame) -> str:
    """'' when the two sides' runs were measured interleaved (their time spans overlap) or
    their times are unknown; else why not, with when each side ran."""
    spans = time_span(variant), time_span(baseline)
    if None in spans:
        return ""
    (v0, v1), (b0, b1) = spans
    if v0 <= b1 and b0 <= v1:
        return ""
    when = lambda a, b: f"{a:%Y-%m-%d %H:%M}–{b:%H:%M}" if a.date() == b.date() else f"{a:%Y-%m-%d}–{b:%Y-%m-%d}"  # noqa: E731
    return (
        f"{NOT_INTERLEAVED}: the baseline ran {when(b0, b1)} UTC, the set {when(v0, v1)} UTC; "
        "raise the study's repeats: the new repeats of both sides run interleaved and are compared"
    )


def measured_together(variant: pd.DataFrame, baseline: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Where a side also has runs from a time the other side was not measured (a set added to a
    sweep after its baseline ran, and measured alone in the invocation that added it; then the
    study's repeats raised, and both sides' new repeats run interleaved), only the runs of each
    side measured while the other side was; else None (compare them as they are).

    Interleaved round by round (one run of each side a round, shuffled within it), at most
    two runs of one side follow each other with none of the other's between: the last of one
    round and the first of the next. A stretch of ALONE_RUNS or more in start order is a time
    that side was measured alone; those runs are left out (but one next to an interleaved
    stretch's run of its round), where each side keeps two or more."""
    sides = [variant, baseline]
    starts = [times(side["started"]) if "started" in side else None for side in sides]
    if any(when is None or when.isna().any() or len(when) < 2 for when in starts):
        return None
    # Records say when a run started to the second: runs in the same second go in their round's
    # order (repeat), as they ran, not one side before the other (which made 3 of a side "alone").
    merged = pd.DataFrame({
        "side": np.repeat([0, 1], [len(when) for when in starts]),
        "position": np.concatenate([np.arange(len(when)) for when in starts]),
        "started": pd.concat(starts, ignore_index=True),
        "repeat": np.concatenate([pd.to_numeric(side["repeat"], errors="coerce") if "repeat" in side
                                  else np.full(len(side), np.nan) for side in sides]),
    }).sort_values(["started", "repeat", "side"], kind="stable")  # fmt: skip
    stretch = merged["side"].ne(merged["side"].shift()).cumsum().to_numpy()
    size = pd.Series(stretch).map(pd.Series(stretch).value_counts()).to_numpy()
    alone = size >= ALONE_RUNS
    if not alone.any():
        return None
    # A stretch's run next to an interleaved stretch's, of the same round (repeat), is that
    # round's run; where repeats are unknown, it is taken to be.
    repeat = merged["repeat"].to_numpy()
    same_round = (repeat[1:] == repeat[:-1]) | np.isnan(repeat[1:]) | np.isnan(repeat[:-1])
    meets_short = (stretch[1:] != stretch[:-1]) & same_round
    previous_short = np.r_[False, ~alone[:-1] & meets_short]
    next_short = np.r_[~alone[1:] & meets_short, False]
    kept = merged[~alone | previous_short | next_short]
    together = tuple(side.iloc[sorted(kept.loc[kept["side"] == i, "position"])] for i, side in enumerate(sides))
    return together if all(len(side) >= 2 for side in together) else None


def mean_condition(side: pd.DataFrame, column: str) -> float:
    if side.empty or column not in side.columns:
        return np.nan
    values = pd.to_numeric(side[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else np.nan


def conditions_differed(variant: pd.DataFrame, baseline: pd.DataFrame, names: tuple[str, str]) -> str:
    """'' unless the two sides ran under clearly different conditions (OTHER_CPU_GAP, CLOCK_GAP);
    then what differed, in numbers (`names`: the variant's and the baseline's)."""
    found = []
    for column, what in (("other_cpu_share", "other processes used"), ("steal_share", "the hypervisor stole")):
        a, b = mean_condition(baseline, column), mean_condition(variant, column)
        if np.isfinite(a) and np.isfinite(b) and abs(a - b) > OTHER_CPU_GAP:
            found.append(f"{what} {a:.0%} of the CPUs during {names[1]}'s runs, {b:.0%} during {names[0]}'s")
    for column, what in (("cpu_mhz_mean", "CPU clock"), ("gpu_sm_clock_mhz", "GPU clock")):
        a, b = mean_condition(baseline, column), mean_condition(variant, column)
        if np.isfinite(a) and np.isfinite(b) and max(a, b) > 0 and abs(a - b) / max(a, b) > CLOCK_GAP:
            found.append(f"{what} {a:.0f} MHz during {names[1]}'s runs, {b:.0f} MHz during {names[0]}'s")
    return f"{CONDITIONS_DIFFERED}: " + "; ".join(found) if found else ""


def comparison(
    variant: Mapping, baseline: Mapping, kind: str, runs: pd.DataFrame | Sides | None, names: tuple[str, str]
):
    """The verdict of `variant` against `baseline` (scaling-table rows), with the comparison
    the data fit (Welch where both sides' repeats are near-normal, ranks otherwise; only the
    summaries known: Welch) and the checks that hold it back: sides not interleaved in time,
    clearly different conditions, contended runs (only the uncontended are compared where each side
    has 2), fewer than N_CHECKED runs a side without a justification (few_repeats).
    `statistical_verdict` keeps what the CI alone said. `runs`: the runs table, or its Sides
    (`variants` finds each side once)."""
    metric_name = variant["metric"]
    found = runs if isinstance(runs, Sides) else Sides(runs)
    everything = found.of(variant, metric_name), found.of(baseline, metric_name)
    together = found.together(*everything)
    sides = together or everything
    contended_counts = [int(contended_mask(side).sum()) for side in sides]
    measured = sides
    quiet = uncontended(sides)
    sides = quiet or sides
    values = [pd.to_numeric(side[metric_name], errors="coerce").to_numpy(float) if len(side) else np.array([])
              for side in sides]  # fmt: skip
    known = all(len(v) >= 2 for v in values)
    method = WELCH if not known or all(near_normal(v) for v in values) else RANKS
    if together or quiet:
        # Only the runs measured together (and uncontended): their own statistics, by the study's estimator.
        variant, baseline = ({**row, **summarize(v, estimator=row.get("estimator", MEAN))}
                             for row, v in zip((variant, baseline), values, strict=True))  # fmt: skip
    result = speed_ratio(variant, baseline, kind) if method == WELCH else rank_ratio(values[0], values[1], kind)
    out = {**result, "method": METHOD_NAMES[method], "statistical_verdict": result["verdict"]}
    # How many were measured together is counted before the contended ones are left out (their own count below).
    out["runs_compared"] = f"{len(measured[0])} / {len(measured[1])} measured together" if together else ""
    for column in ("other_cpu_share", "steal_share"):
        out[column] = mean_condition(sides[0], column)
        out[column + "_baseline"] = mean_condition(sides[1], column)
    held_back = [interleaving(*sides), conditions_differed(*sides, names)] if known else []
    out["interleaved"] = not held_back[0] if held_back else np.nan
    out["conditions"] = held_back[1] if held_back else ""
    out["contended_runs"], out["contended_runs_baseline"] = contended_counts
    out["contended"] = contended_text(contended_counts, measured, names)
    if quiet is not None:
        out["runs_compared"] = "; ".join(
            filter(None, [out["runs_compared"], f"{len(values[0])} / {len(values[1])} uncontended"])
        )
        out["contended"] = ""
    out["justification"], waits = few_repeats(variant, baseline) if out["verdict"] in ("faster", "slower") else ("", "")
    reasons = [reason for reason in [*held_back, out["contended"], waits] if reason]
    if reasons and out["verdict"] in VERDICTS:
        out["verdict"] = "; ".join(reasons)
    elif any(held_back):
        # No verdict from the method either (too few repeats for ranks): the sides' times or
        # conditions come first, since more repeats alone would not make them comparable.
        out["verdict"] = "; ".join([*filter(None, held_back), out["verdict"]])
    return out


def uncontended(sides: tuple[pd.DataFrame, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Where some runs were contended and each side has 2 or more that were not: those; else None."""
    if not any(contended_mask(side).any() for side in sides):
        return None
    quiet = tuple(side[~contended_mask(side)] for side in sides)
    return quiet if all(len(side) >= 2 for side in quiet) else None


def contended_text(counts: list[int], sides, names: tuple[str, str]) -> str:
    """Why a verdict is held back for contended runs (counts: the variant's, the baseline's), or ''."""
    if not any(counts):
        return ""
    totals = [len(side) for side in sides]
    marked = [side[contended_mask(side)] for side in sides]
    waits = [mean_condition(side, "ranks_wait_share") for side in marked]
    shares = [mean_condition(side, "other_cpu_share") for side in marked]
    # Runs judged by the older rule (records without run-queue figures) are counted and said so.
    older = sum(int(pd.to_numeric(side.get("ranks_wait_share", pd.Series(np.nan, index=side.index)),
                                  errors="coerce").isna().sum()) for side in marked)  # fmt: skip
    if older:
        figures = f"mean share of the CPUs {percent(shares[1])} and {percent(shares[0])}; {older} by {OLDER_RULE}"
    else:
        figures = f"they waited for a CPU {percent(waits[1])} and {percent(waits[0])} of their run"
    return (
        f"{CONTENDED}: other processes held the CPUs the ranks needed in {counts[1]} of {totals[1]} runs of "
        f"{names[1]} and {counts[0]} of {totals[0]} of {names[0]} ({figures}); {MEASURE_AGAIN}"
    )


def percent(value: float) -> str:
    return f"{value:.0%}" if np.isfinite(value) else "–"


def two_run_spread(row: Mapping) -> float:
    """Largest over smallest, less 1, of the two values a row of 2 used runs summarizes
    (mean ± std/√2); nan for any other count."""
    mean, std = row.get("mean"), row.get("std")
    if used_count(row) != 2 or missing_number(mean) or missing_number(std):
        return np.nan
    low, high = mean - std / math.sqrt(2), mean + std / math.sqrt(2)
    return high / low - 1 if low > 0 else math.inf


def missing_number(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def few_repeats(variant: Mapping, baseline: Mapping) -> tuple[str, str]:
    """(justification, reason to wait) of a verdict on fewer than N_CHECKED runs a side (only
    two can have a CI): it stands where each side's two runs agree within N2_SPREAD, else it
    waits for more repeats. ('', '') where both sides have N_CHECKED or more."""
    counts = used_count(variant), used_count(baseline)
    if min(counts) >= N_CHECKED:
        return "", ""
    spreads = [two_run_spread(row) if used_count(row) < N_CHECKED else 0.0 for row in (variant, baseline)]
    shown = " and ".join(f"{s:.1%}" for s, n in zip(spreads, counts, strict=True) if n < N_CHECKED)
    if all(s <= N2_SPREAD for s in spreads):
        return f"n = {counts[0]} / {counts[1]}: the two runs of a side agree within {N2_SPREAD:.0%} ({shown})", ""
    return "", (
        f"{WAITS}: n = {counts[0]} / {counts[1]}, and two runs of a side {shown} apart "
        f"(> {N2_SPREAD:.0%}): raise repeats to {N_CHECKED} or more"
    )


def variants(scaling_table: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every MPI flag set, NCCL env set and placement (VARIANT_AXES) against its baseline, and
    every value of an app's compared parameter axis against its baseline value (torch-parallel:
    strategies against ddp), at each scale, per metric; every other axis (sets, placement
    fields, parameters) held fixed. `runs`: where given, the app's quality figures (accuracy,
    loss) of both sides, beside the verdict."""
    if scaling_table.empty:
        return pd.DataFrame()
    rows = []
    sides = Sides(runs)
    params = [c for c in scaling_table.columns if c.startswith(AXIS_PREFIX)]
    axes = [(axis, column, baseline) for axis, column, baseline in VARIANT_AXES if column in scaling_table.columns]
    # (axis, column, baseline value, the one app it applies to or None)
    comparisons = [(axis, column, baseline, None) for axis, column, baseline in axes]
    for app_name in scaling_table["app"].dropna().unique():
        for name, base_value in getattr(APPS.get(app_name), "compared", {}).items():
            if AXIS_PREFIX + name in params:
                comparisons.append((name, AXIS_PREFIX + name, base_value, app_name))
    for axis, column, baseline, only_app in comparisons:
        table = scaling_table if only_app is None else scaling_table[scaling_table["app"] == only_app]
        if table[column].nunique() < 2:
            continue
        # A variant and its baseline on one MPI (a curve run on two is two curves: records.one_mpi_a_curve).
        same_mpi = [MPI_COLUMN] if MPI_COLUMN in table.columns else []
        held = [c for c in curve_columns(table, named=False) if c != column] + same_mpi + [*SCALE_COLUMNS, "metric"]
        for _, group in table.groupby(held, dropna=False, sort=True):
            base = group[group[column].astype(str) == str(baseline)]
            if base.empty:
                continue
            base_row = base.iloc[0]
            for _, row in group[group[column].astype(str) != str(baseline)].iterrows():
                rows.append(
                    {
                        **{k: row[k] for k in held},
                        "metric_label": row["metric_label"],
                        "kind": row["kind"],
                        "primary": row.get("primary", False),
                        "axis": axis,
                        "set": row[column],
                        "baseline": baseline,
                        "variant": row["variant"],
                        "baseline_variant": base_row["variant"],
                        "n": int(row["n"]),
                        "n_baseline": int(base_row["n"]),
                        "estimator": row.get("estimator", MEAN),
                        **comparison(row, base_row, row["kind"], sides, (f"{row[column]}", f"{baseline}")),
                        **quality_beside(runs, row, base_row),
                    }
                )
    return pd.DataFrame(rows)


def quality_beside(runs: pd.DataFrame | None, row: Mapping, base_row: Mapping) -> dict:
    """Mean of the app's quality figures (final accuracy, loss) over the successful repeats of
    the variant and of its baseline at the same scale: `<figure>` and `<figure>_baseline`."""
    app = APPS.get(row["app"])
    if runs is None or runs.empty or app is None or not app.quality or "variant" not in runs.columns:
        return {}
    out = {}
    ok = runs[(runs["status"] == "ok") & (runs["study"] == row["study"]) & (runs["ranks"] == row["ranks"])]
    ok = ok[ok["nodes"] == row["nodes"]]
    for figure in app.quality:
        if figure not in ok.columns:
            continue
        for suffix, variant in (("", row["variant"]), ("_baseline", base_row["variant"])):
            values = pd.to_numeric(ok.loc[ok["variant"] == variant, figure], errors="coerce").dropna()
            out[figure + suffix] = float(values.mean()) if len(values) else np.nan
    return out


def write_variants_table(
    table: pd.DataFrame, runs: pd.DataFrame, variants_out: str | Path, note: Callable[[str], None] | None = None
) -> pd.DataFrame:
    """The scaling rule's step after analysis.scaling.write_scaling_table: variants.csv from the
    scaling table and the runs it was made from. `note`: the rule's log (model.steplog)."""
    compared = variants(table, runs=runs)
    write_table(compared, variants_out)
    if note is not None:
        note(f"{variants_out}: {len(compared)} rows")
    return compared
