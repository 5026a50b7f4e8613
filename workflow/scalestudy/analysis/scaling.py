"""scaling.csv: one row per curve x scale x metric: the statistics of the repeats
(scalestudy.analysis.statistics), speedup, efficiency, Karp–Flatt, the Amdahl fit, cost per run
and per unit of work, the cost-optimal scale and the fastest within the budget.

- p: total MPI ranks (nodes x ranks per node; one rank per GPU on GPU runs);
  p0: the smallest p of the curve with at least one successful run; q = p/p0.
- speedup, parallel efficiency (strong and weak), scaled speedup, Karp–Flatt and the efficiency
  threshold: as model.scaling_figures defines them (applied here to the table's columns); the
  per-core figure S(p)/cores that some published tables call efficiency is given separately,
  under that name.
- their confidence intervals (analysis.statistics.CONFIDENCE) (`<figure>_ci_low`, `<figure>_ci_high`: speedup and
  parallel efficiency, or weak efficiency and scaled speedup) from the repeats at p0 and at p
  (analysis.statistics.ratio_ci: Fieller's interval), and why a row has none
  (`ratio_ci_note`: one repeat at a scale, an unbounded ratio; at p0 itself the ratio is 1).
- Amdahl fit: the serial fraction f minimising the squared error of 1/S = f + (1 - f)/q over
  the successful scales, and the speedup ceiling 1/f it implies.
- cost: SU per million units of a rate metric = SU per hour of the job x 1e6 / rate / 3600.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..apps.registry import APPS, App, app_of_row
from ..model import scaling_figures as figures
from ..model.metrics import WALLTIME_USED, Metric
from ..model.point import AXIS_PREFIX, PLACEMENT_DEFAULTS, PROGRAM
from ..model.repeats import Repeats, limits, needed
from .records import MPI_COLUMN, STATUS_PENDING, contended_mask, read_table, write_table
from .statistics import CONFIDENCE, MEAN, RATIO_CI_METHOD, outlier_mask, ratio_ci, summarize

# The study's efficiency threshold as scaling.csv carries it in every row (the scaling rule
# writes it: analysis.scaling_models.add_model_columns).
THRESHOLD_KEY = "efficiency_threshold"

# What tells one curve from another (a curve: one study's points at every scale), with its
# parameter axes (the AXIS_PREFIX columns beside): the runs.csv columns of model.point.Point.as_record.
# Every table groups, pairs (scalestudy.presentation.compare) and holds fixed (variants) by these. VARIANT is
# the same curve named in one text (Point.variant), carried in every table; never a key between
# two results (a published record's names no parameter axes).
VARIANT = "variant"
# MPI_COLUMN: the MPI the runs used (records.one_mpi_a_curve): repeats on two MPIs are two curves.
CURVE_COLUMNS = ("study", "app", "scaling", VARIANT, MPI_COLUMN, "mpi_flag_set", "nccl_env_set", *PLACEMENT_DEFAULTS)
# Where a point is on its curve.
SCALE_COLUMNS = ["nodes", "ranks_per_node", "gpus_per_node", "ranks"]
# Per-scale means of these resources go into scaling.csv beside every metric.
RESOURCE_COLUMNS = [
    "cores_allocated",
    "gpus_allocated",
    "memory_requested_gb",
    "memory_used_gb",
    "walltime_requested_s",
    WALLTIME_USED.name,
    "service_units",
]

DEFINITIONS = {
    **figures.DEFINITIONS,
    "speedup_per_core": "S(p)/cores: what some published tables call 'efficiency'; not parallel efficiency",
    "speedup and efficiency CI": f"their {CONFIDENCE:.0%} CI from the repeats at p0 and at p: {RATIO_CI_METHOD}"
    " of the two means (ratio CI, below), the same interval scaled for the efficiency; none with one repeat"
    " at either scale",
    "amdahl_fit": "serial fraction f of the least-squares fit 1/S = f + (1 − f)/q; speedup ceiling 1/f",
    "repeats_until_clear": "repeats: {min, max, ci}: min repeats first, then one more per point and invocation"
    " while the 95% CI of its mean primary figure is wider than ± ci of the mean and max is not reached",
    "su_per_million": "SU per million units of a rate metric: SU per job-hour × 10⁶ / rate / 3600",
}


def efficiency_threshold(table: pd.DataFrame | Mapping) -> float:
    """The efficiency a study's scales are judged against (model.scaling_figures.falls_below): its
    `efficiency_threshold` as its scaling.csv records it; a table without one (an older record, a
    published one) has the default, model.scaling_figures.EFFICIENCY_THRESHOLD."""
    if isinstance(table, pd.DataFrame):
        known = table[THRESHOLD_KEY].dropna() if THRESHOLD_KEY in table.columns else ()
        return float(known.iloc[0]) if len(known) else figures.EFFICIENCY_THRESHOLD
    value = table.get(THRESHOLD_KEY)
    return float(value) if value is not None and pd.notna(value) else figures.EFFICIENCY_THRESHOLD


def curve_columns(*tables: pd.DataFrame, named: bool = True) -> list[str]:
    """What identifies a curve in every one of `tables`: the CURVE_COLUMNS they all have, then
    the parameter axes they all have. `named=False` leaves out the VARIANT text and the MPI (two
    results' tables may name one curve differently, and compare one curve across two MPIs)."""
    shared = set.intersection(*(set(table.columns) for table in tables))
    curve = [c for c in CURVE_COLUMNS if c in shared and (named or c not in (VARIANT, MPI_COLUMN))]
    return curve + sorted(c for c in shared if c.startswith(AXIS_PREFIX))


def curve_name(curve: Mapping) -> str:
    """E.g. 'md mpi-fast/nccl-default (N=8000, binding=core)': the curve's parameter axes, and
    its placement where not the launcher's own. The cells are text (compare's key cells)."""
    chosen = [(name, curve[name]) for name, default in PLACEMENT_DEFAULTS.items()
              if curve.get(name, "") not in ("", str(default))]  # fmt: skip
    axes = [(k[len(AXIS_PREFIX) :], v) for k, v in curve.items() if k.startswith(AXIS_PREFIX) and v != ""]
    params = ", ".join(f"{k}={v}" for k, v in [*axes, *chosen])
    sets = f"mpi-{curve.get('mpi_flag_set', '?')}/nccl-{curve.get('nccl_env_set', '?')}"
    return f"{curve['study']} {sets}" + (f" ({params})" if params else "")


def metrics_of(app: App) -> list[Metric]:
    """The figures a curve is scaled by: the app's rates and times, then the job's wall time."""
    return [m for m in app.metrics if m.scaled] + [WALLTIME_USED]


def apps_of(runs: pd.DataFrame) -> list[App]:
    """The apps of the runs, once per app and program (apps.app_of_row: a command study's own)."""
    if runs.empty or "app" not in runs.columns:
        return []
    rows = runs.drop_duplicates([c for c in ("app", PROGRAM) if c in runs.columns]).to_dict("records")
    return [app for row in rows if (app := app_of_row(row)) is not None]


def scaling(
    runs: pd.DataFrame,
    budget_su: float | None = None,
    metrics: Mapping[str, list[Metric]] | None = None,
    primary: Mapping[str, str] | None = None,
    estimator: str = MEAN,
    repeats: Any = None,
) -> pd.DataFrame:
    """Statistics, speedup, efficiency and cost per curve, scale and metric (long format).

    `metrics`/`primary` (by app name) default to the registered apps'; a published record
    of an app this checkout does not have passes its own. `estimator`: the study's
    (`mean` or `trimmed_mean`), named in every row. `repeats`: the study's setting; where
    adaptive, the primary figure's rows say how many repeats each point ran and why it
    stopped (`repeats_run`, `repeats_stop`, model.repeats.needed)."""
    if runs.empty or "app" not in runs.columns:
        return pd.DataFrame()
    frames = []
    keys = curve_columns(runs)
    known = metrics or {}
    # A run whose record was lost has no app: it is listed as failed, but draws no curve.
    runs = runs[runs["app"].isin(list(known) or list(APPS))]
    for curve, group in runs.groupby(keys, dropna=False, sort=True):
        app_name = group["app"].iloc[0]
        app = app_of_row(group.iloc[0])
        app_metrics = known.get(app_name) or metrics_of(app)
        primary_name = (primary or {}).get(app_name) or app.primary_metric
        for metric in app_metrics:
            if metric.name not in group.columns or group[metric.name].notna().sum() == 0:
                continue
            table = curve_table(group, dict(zip(keys, curve, strict=True)), metric, estimator)
            table["primary"] = metric.name == primary_name
            if table["primary"].all() and repeats is not None and limits(repeats).adaptive:
                add_repeat_stops(table, group, metric.name, limits(repeats))
            frames.append(table)
    if not frames:
        return pd.DataFrame()
    table = pd.concat(frames, ignore_index=True)
    return add_cost_choices(table, budget_su)


def add_repeat_stops(table: pd.DataFrame, group: pd.DataFrame, metric_name: str, repeats: Repeats) -> None:
    """Per scale: the repeats recorded and why no more are planned (or that one more is)."""
    for index, row in table.iterrows():
        at_scale = group[(group["nodes"] == row["nodes"]) & (group["ranks"] == row["ranks"])]
        recorded = int((at_scale["status"] != STATUS_PENDING).sum())
        ok = at_scale[at_scale["status"] == "ok"]
        values = pd.to_numeric(ok[metric_name], errors="coerce").dropna().tolist()
        table.loc[index, "repeats_run"] = recorded
        table.loc[index, "repeats_stop"] = needed(repeats, recorded, values)[1]


def curve_table(group: pd.DataFrame, curve: dict, metric: Metric, estimator: str = MEAN) -> pd.DataFrame:
    ok = group[(group["status"] == "ok") & group[metric.name].notna()]
    rows = []
    for scale, at_scale in group.groupby(SCALE_COLUMNS, sort=True):
        values = ok.loc[at_scale.index.intersection(ok.index), metric.name].astype(float)
        outliers = outlier_mask(values)
        repeats = ok.loc[values.index[outliers], "repeat"] if "repeat" in ok.columns else []
        statuses = at_scale["status"]
        row = {
            **curve,
            **dict(zip(SCALE_COLUMNS, scale, strict=True)),
            "metric": metric.name,
            "metric_label": metric.label,
            "unit": metric.unit,
            "kind": metric.kind,
            **summarize(values, estimator=estimator),
            "estimator": estimator,
            "n_failed": int((statuses == "failed").sum() + ((statuses == "ok") & at_scale[metric.name].isna()).sum()),
            "n_pending": int((statuses == STATUS_PENDING).sum()),
            "n_outliers": int(outliers.sum()),
            # The successful runs behind the figure measured while others held their CPUs.
            "n_contended": int(contended_mask(ok.loc[values.index]).sum()),
            # Text, not numbers: "rep2 rep3" stays as it is through the CSV.
            "outlier_repeats": " ".join(f"rep{int(r)}" for r in repeats),
        }
        succeeded = ok.loc[values.index]
        for column in RESOURCE_COLUMNS:
            if column in succeeded.columns and pd.to_numeric(succeeded[column], errors="coerce").notna().any():
                row[column] = pd.to_numeric(succeeded[column], errors="coerce").mean()
        if "service_units_source" in succeeded.columns:
            sources = sorted(set(succeeded["service_units_source"].dropna().astype(str)))
            row["service_units_source"] = "+".join(sources)
        if "service_units" in at_scale.columns:
            # Failed runs burnt allocation too.
            row["su_spent"] = pd.to_numeric(at_scale["service_units"], errors="coerce").sum(min_count=1)
        rows.append(row)
    table = pd.DataFrame(rows).sort_values(["ranks", "nodes"]).reset_index(drop=True)
    if "cores_allocated" not in table.columns:
        threads = group["threads_per_rank"].iloc[0] if "threads_per_rank" in group.columns else 1
        table["cores_allocated"] = table["ranks"] * threads
    add_cost_per_work(table, metric)
    return add_scaling_laws(table, metric, curve.get("scaling") == "weak")


def add_cost_per_work(table: pd.DataFrame, metric: Metric) -> None:
    """SU per run, and for a rate metric SU per million of its units."""
    if "service_units" not in table.columns:
        return
    su = table["service_units"].where(table["service_units"] > 0)
    table["su_per_run"] = su
    if metric.kind == "rate" and WALLTIME_USED.name in table.columns:
        su_per_hour = su / (table[WALLTIME_USED.name] / 3600)
        table["su_per_million"] = su_per_hour * 1e6 / table["mean"] / 3600


def add_scaling_laws(table: pd.DataFrame, metric: Metric, weak: bool) -> pd.DataFrame:
    succeeded = table[table["n"] > 0]
    if succeeded.empty:
        table["p0"] = np.nan
        return table
    base = succeeded.iloc[0]
    p0, base_mean = base["ranks"], base["mean"]
    q = table["ranks"] / p0
    table["p0"] = p0
    low, high, table[RATIO_NOTE] = ratio_intervals(table, succeeded.index[0], metric.kind)
    if weak:
        efficiency = figures.weak_efficiency(base_mean, table["mean"], metric.kind, q, metric.extensive)
        table["weak_efficiency"] = efficiency
        table["scaled_speedup"] = figures.scaled_speedup(efficiency, q)
        for end, ratio_end in (("low", low), ("high", high)):
            weak_end = figures.weak_efficiency_of(ratio_end, metric.kind, q, metric.extensive)
            table[f"weak_efficiency_ci_{end}"] = weak_end
            table[f"scaled_speedup_ci_{end}"] = figures.scaled_speedup(weak_end, q)
        return table
    ratio = figures.speedup(base_mean, table["mean"], metric.kind)
    table["speedup"] = ratio
    table["parallel_efficiency"] = figures.parallel_efficiency(ratio, q)
    for end, ratio_end in (("low", low), ("high", high)):
        table[f"speedup_ci_{end}"] = ratio_end
        table[f"parallel_efficiency_ci_{end}"] = figures.parallel_efficiency(ratio_end, q)
    table["speedup_per_core"] = ratio / table["cores_allocated"]
    with np.errstate(divide="ignore", invalid="ignore"):
        karp_flatt = figures.karp_flatt(ratio, q)
    table["karp_flatt_serial_fraction"] = karp_flatt.where(q > 1)
    serial, ceiling = amdahl_fit(q[table["n"] > 0], ratio[table["n"] > 0])
    table["amdahl_serial_fraction"] = serial
    table["amdahl_max_speedup"] = ceiling
    return table


# Why a row's speedup and efficiency have no interval ('' where they have one).
RATIO_NOTE = "ratio_ci_note"
# Each interval column beside its figure: (figure, low, high).
CI_COLUMNS = {
    figure: (f"{figure}_ci_low", f"{figure}_ci_high")
    for figure in ("speedup", "parallel_efficiency", "weak_efficiency", "scaled_speedup")
}


def ratio_intervals(table: pd.DataFrame, base: int, kind: str) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Per row, the CONFIDENCE interval of figure(p)/figure(p0) oriented as model.scaling_figures'
    speedup (the baseline's mean over this scale's for a time, the other way for a rate) from both
    scales' repeats (analysis.statistics.ratio_ci, on the estimator's values: `n_used`, `std`; cut
    at 0 below), and why none. The baseline row itself: 1, exactly (its ratio to itself)."""
    low = pd.Series(np.nan, index=table.index)
    high = pd.Series(np.nan, index=table.index)
    notes = pd.Series("", index=table.index, dtype=object)
    used = "n_used" if "n_used" in table.columns else "n"

    def side(row) -> tuple[float, float, int]:
        return float(row["mean"]), float(row.get("std", np.nan)), int(row[used]) if pd.notna(row[used]) else 0

    b = table.loc[base]
    for index, row in table.iterrows():
        if row["n"] == 0:
            continue
        if index == base:
            low[index] = high[index] = 1.0
            notes[index] = "p0: the ratio of the baseline to itself, 1 by definition"
            continue
        (a_mean, a_sd, a_n), (d_mean, d_sd, d_n) = figures.ratio_order(side(b), side(row), kind)
        low[index], high[index], why = ratio_ci(a_mean, a_sd, a_n, d_mean, d_sd, d_n)
        if why:
            ones = [scale for scale, n in ((b["ranks"], side(b)[2]), (row["ranks"], side(row)[2])) if n < 2]
            where = " and ".join(f"p = {int(p)}" for p in ones)
            notes[index] = f"fewer than 2 repeats at {where}: {why}" if ones else why
    # A time or a rate is never negative, so neither is their ratio: Fieller's set, which can
    # reach below 0 where the numerator's repeats spread widely, is cut at 0 (the part of it the
    # ratio can take; its coverage of the true ratio is the same). No interval (NaN) stays none.
    return low.clip(lower=0.0), high, notes


def amdahl_fit(q: Iterable[float], speedup: Iterable[float]) -> tuple[float, float]:
    """Least squares of 1/S - 1/q = f (1 - 1/q) (Amdahl, linear in f); needs 2 scales.
    Returns (f, 1/f); the ceiling is infinite when f <= 0 (no serial part seen)."""
    q, s = np.asarray(list(q), dtype=float), np.asarray(list(speedup), dtype=float)
    keep = (q > 1) & np.isfinite(s) & (s > 0)
    if not keep.any():
        return np.nan, np.nan
    x, y = 1 - 1 / q[keep], 1 / s[keep] - 1 / q[keep]
    serial = float((x * y).sum() / (x * x).sum())
    return serial, (1 / serial if serial > 0 else math.inf)


def add_cost_choices(table: pd.DataFrame, budget_su: float | None) -> pd.DataFrame:
    """Per curve and metric: the cost-optimal scale (least SU per run) and the fastest scale
    whose SU per run fits the study's budget."""
    table["cost_optimal"] = False
    table["fastest_within_budget"] = False
    if "su_per_run" not in table.columns:
        return table
    keys = [*curve_columns(table), "metric"]
    for _, rows in table.groupby(keys, dropna=False):
        costed = rows[rows["su_per_run"].notna() & (rows["n"] > 0)]
        if costed.empty:
            continue
        table.loc[costed["su_per_run"].idxmin(), "cost_optimal"] = True
        if budget_su is not None:
            fits = costed[costed["su_per_run"] <= budget_su]
            if not fits.empty:
                best = fits["mean"].idxmin() if fits["kind"].iloc[0] == "time" else fits["mean"].idxmax()
                table.loc[best, "fastest_within_budget"] = True
    return table


def write_scaling_table(
    runs_csv: str | Path,
    scaling_out: str | Path,
    budget_su=None,
    estimator: str = MEAN,
    repeats: Any = None,
    note: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scaling rule's entry: scaling.csv from runs.csv. The rule then writes variants.csv
    from the table (analysis.verdicts.write_variants_table) and adds the model columns
    (analysis.scaling_models.add_to_scaling_csv). `repeats`: the study's setting (as JSON text,
    a param); `note`: the rule's log (model.steplog). Returns the table and the runs read."""
    runs = read_table(runs_csv)
    repeats = json.loads(repeats) if isinstance(repeats, str) else repeats
    table = scaling(runs, budget_su=budget_su, estimator=estimator, repeats=repeats)
    write_table(table, scaling_out)
    if note is not None:
        note(f"{scaling_out}: {len(table)} rows")
    return table, runs
