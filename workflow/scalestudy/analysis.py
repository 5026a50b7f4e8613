"""From metrics.json files to tidy tables: runs.csv (one row per run) and
scaling.csv (one row per curve x scale x metric).

Definitions (also printed beside every table and plot):
- p: total MPI ranks (nodes x ranks per node; one rank per GPU on GPU runs);
  p0: the smallest p of the curve with at least one successful run.
- strong scaling: speedup S(p) = T(p0)/T(p) for times, R(p)/R(p0) for rates;
  parallel efficiency E(p) = S(p) * p0/p;
  Karp-Flatt serial fraction e(p) = (1/S - 1/q) / (1 - 1/q), q = p/p0.
- weak scaling: efficiency = T(p0)/T(p) for times, (R(p)/p)/(R(p0)/p0) for
  rates; scaled speedup = efficiency * p/p0.
Means are over the successful repeats of a scale; n says how many.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from .apps import APPS

DEFINITIONS = {
    "speedup": "S(p) = T(p0)/T(p) (times) or R(p)/R(p0) (rates), p0 = smallest successful scale",
    "parallel_efficiency": "E(p) = S(p) * p0/p",
    "karp_flatt": "e(p) = (1/S - 1/q)/(1 - 1/q), q = p/p0",
    "weak_efficiency": "T(p0)/T(p) (times) or (R(p)/p)/(R(p0)/p0) (rates)",
    "scaled_speedup": "weak efficiency * p/p0",
}

POINT_COLUMNS = ["study", "app", "scaling", "variant", "mpi_flag_set", "nccl_env_set"]
SCALE_COLUMNS = ["nodes", "ranks_per_node", "gpus_per_node", "ranks"]


def read_metrics(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        return {"status": "failed", "reason": f"metrics.json unreadable: {error}", "point": point_from_path(path)}


def point_from_path(path: Path) -> dict:
    """results/<study>/runs/<point id>/metrics.json -> the study and point id, for a record that lost them."""
    parts = Path(path).parts
    if "runs" not in parts:
        return {}
    at = len(parts) - 1 - parts[::-1].index("runs")
    return {"study": parts[at - 1], "point": "/".join(parts[at + 1 : -1])}


def run_row(metrics: dict, path: Path | None = None) -> dict:
    row = dict(metrics.get("point", {}))
    row["status"] = metrics.get("status", "failed")
    row["reason"] = metrics.get("reason") or ""
    for name, value in (metrics.get("figures") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            row[name] = value
    for name, value in (metrics.get("resources") or {}).items():
        row[name] = value
    if path is not None:
        row["metrics_path"] = str(path)
    return row


def aggregate(metrics_paths: Iterable[Path]) -> pd.DataFrame:
    rows = [run_row(read_metrics(Path(p)), Path(p)) for p in metrics_paths]
    return pd.DataFrame(rows)


def curve_columns(runs: pd.DataFrame) -> list[str]:
    """What identifies a curve: study, app, MPI/NCCL sets and every parameter axis."""
    params = sorted(c for c in runs.columns if c.startswith("param."))
    return [c for c in POINT_COLUMNS if c in runs.columns] + params


def scaling(runs: pd.DataFrame) -> pd.DataFrame:
    """Speedup and efficiency per curve, scale and metric (long format)."""
    if runs.empty or "app" not in runs.columns:
        return pd.DataFrame()
    frames = []
    keys = curve_columns(runs)
    # A run whose record was lost has no app: it is listed as failed, but draws no curve.
    known = runs[runs["app"].isin(list(APPS))]
    for curve, group in known.groupby(keys, dropna=False, sort=True):
        app = APPS[group["app"].iloc[0]]
        for metric in app.metrics:
            if metric.kind not in ("rate", "time"):
                continue
            if metric.name not in group.columns or group[metric.name].notna().sum() == 0:
                continue
            frames.append(curve_table(group, dict(zip(keys, curve, strict=True)), metric))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def curve_table(group: pd.DataFrame, curve: dict, metric) -> pd.DataFrame:
    ok = group[(group["status"] == "ok") & group[metric.name].notna()]
    rows = []
    for scale, at_scale in group.groupby(SCALE_COLUMNS, sort=True):
        values = ok.loc[at_scale.index.intersection(ok.index), metric.name].astype(float)
        rows.append(
            {
                **curve,
                **dict(zip(SCALE_COLUMNS, scale, strict=True)),
                "metric": metric.name,
                "metric_label": metric.label,
                "unit": metric.unit,
                "kind": metric.kind,
                "n": int(values.size),
                "n_failed": int(len(at_scale) - values.size),
                "mean": values.mean() if values.size else np.nan,
                "std": values.std(ddof=1) if values.size > 1 else np.nan,
            }
        )
    table = pd.DataFrame(rows).sort_values(["ranks", "nodes"]).reset_index(drop=True)
    succeeded = table[table["n"] > 0]
    if succeeded.empty:
        table["p0"] = np.nan
        return table
    base = succeeded.iloc[0]
    p0, base_mean = base["ranks"], base["mean"]
    ratio = base_mean / table["mean"] if metric.kind == "time" else table["mean"] / base_mean
    q = table["ranks"] / p0
    table["p0"] = p0
    if curve.get("scaling") == "weak":
        # Weak: T(p0)/T(p) for times and for per-step rates (steps/s); throughputs divide by p/p0.
        efficiency = ratio if metric.kind == "time" or not metric.extensive else ratio / q
        table["weak_efficiency"] = efficiency
        table["scaled_speedup"] = efficiency * q
    else:
        table["speedup"] = ratio
        table["parallel_efficiency"] = ratio / q
        with np.errstate(divide="ignore", invalid="ignore"):
            karp_flatt = (1 / ratio - 1 / q) / (1 - 1 / q)
        table["karp_flatt_serial_fraction"] = karp_flatt.where(q > 1)
    return table


def read_table(path: Path) -> pd.DataFrame:
    """A CSV written by aggregate/scaling; an empty table (no successful run) reads as empty."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
