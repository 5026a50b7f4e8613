"""Figures that are curves over message size (the collectives' and the ping-pong's size
tables): per curve, scale and size the statistics of the repeats, and the variant verdicts per
size band, so that "flag set X helps large allreduces and hurts small ones" reads off a table.

A run's size table is figures[SIZE_TABLE] of its record, carried into runs.csv as JSON (one
cell per run, `analysis.records.run_row`); its columns are the app's declared `size_figures`.

- Size band of a message of s bytes (SIZE_BANDS, worded in DEFINITIONS below):
  small s < 8 KiB (latency-bound: eager protocols, one packet on most networks), medium
  8 KiB ≤ s ≤ 1 MiB, large s > 1 MiB (bandwidth-bound: rendezvous, pipelined and segmented
  algorithms).
- A run's figure in a band: the geometric mean of its per-size figure over the band's sizes
  (every size weighs the same whatever its magnitude; the ratio of two such means is the
  geometric mean of the per-size ratios). Its repeats, their CI and the verdicts against the
  baseline are the analysis' own (`statistics.summarize`, `verdicts.variants`), the band's figure
  named `<figure>@<band>`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..apps.registry import app_of_row
from ..model.metrics import SIZE_COLUMN, SIZE_TABLE, Metric
from ..model.units import KIB, MIB
from .scaling import SCALE_COLUMNS, apps_of, curve_columns
from .statistics import MEAN, summarize
from .verdicts import variants

# Message-size bands of a figure that is a curve over message size: (name,
# smallest size, largest) in bytes. Below 8 KiB a message goes eagerly in one packet on most
# networks (latency-bound); above 1 MiB rendezvous and segmented algorithms run (bandwidth-bound).
SIZE_BANDS = (("small", 1, 8 * KIB - 1), ("medium", 8 * KIB, MIB), ("large", MIB + 1, math.inf))

DEFINITIONS = {
    "size_bands": "message sizes (nccl-tests' size: the bytes of a rank's whole buffer): small < 8 KiB ≤ medium"
    " ≤ 1 MiB < large",
    "band_figure": "a run's figure in a size band: geometric mean of its per-size figure over the band's sizes;"
    " mean ± CI over the repeats and verdicts against the baseline as for every figure",
    "busbw": "bus bandwidth (nccl-tests): algbw × factor, allreduce 2(n−1)/n, reduce_scatter, allgather and"
    " alltoall (n−1)/n, bcast, reduce and point-to-point 1; algbw = size / latency (bibw: both directions)",
}

BAND_SEPARATOR = "@"


def band_of(size: float) -> str:
    return next(name for name, low, high in SIZE_BANDS if low <= size <= high)


def band_text(band: str) -> str:
    """'small (< 8 KiB)', 'medium (8 KiB–1 MiB)', 'large (> 1 MiB)'."""
    return {"small": "small (< 8 KiB)", "medium": "medium (8 KiB–1 MiB)", "large": "large (> 1 MiB)"}[band]


def size_text(size: float) -> str:
    """4 B, 8 KiB, 1 MiB."""
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{int(size // scale)} {unit}"
    return f"{int(size)} B"


def size_figures(run: Mapping) -> tuple[str, ...]:
    """The size figures of a run's app (a row of runs.csv: its app and, for a command study,
    the program that declares them)."""
    app = app_of_row(run)
    return app.size_figures if app is not None else ()


def study_size_figures(runs: pd.DataFrame) -> tuple[str, ...]:
    """The size figures of a study's runs (its first app that has any): latency first, then
    bandwidth, as the app (or the command study's order of figures) declares them."""
    return next((app.size_figures for app in apps_of(runs) if app.size_figures), ())


def size_declarations(runs: pd.DataFrame) -> dict[str, Metric]:
    """Each size figure of the runs' apps, declared (App.figure: a command study's own)."""
    return {name: app.figure(name) for app in apps_of(runs) for name in app.size_figures}


def has_size_tables(runs: pd.DataFrame) -> bool:
    return not runs.empty and SIZE_TABLE in runs.columns and runs[SIZE_TABLE].notna().any()


def size_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per successful run and message size: the curve's columns, the scale, the
    repeat, `size_bytes`, `band` and each of the app's size figures."""
    if not has_size_tables(runs):
        return pd.DataFrame()
    keys = [*curve_columns(runs), *SCALE_COLUMNS, "repeat"]
    rows = []
    for _, run in runs[(runs["status"] == "ok") & runs[SIZE_TABLE].notna()].iterrows():
        names = size_figures(run)
        try:
            table = json.loads(run[SIZE_TABLE])
        except (TypeError, ValueError):
            continue
        for entry in table if isinstance(table, list) else []:
            if not isinstance(entry, Mapping) or SIZE_COLUMN not in entry:
                continue
            row = {key: run[key] for key in keys if key in run}
            row.update({SIZE_COLUMN: int(entry[SIZE_COLUMN]), "band": band_of(entry[SIZE_COLUMN])})
            row.update({name: entry.get(name, np.nan) for name in names})
            rows.append(row)
    return pd.DataFrame(rows)


def size_curves(runs: pd.DataFrame, estimator: str = MEAN) -> pd.DataFrame:
    """Per curve, scale, message size and size figure: the statistics of the repeats (long
    format, as scaling.csv: metric, metric_label, unit, kind, n, mean, ci95, ...)."""
    rows = size_rows(runs)
    if rows.empty:
        return rows
    declared = size_declarations(runs)
    return long_statistics(rows, [SIZE_COLUMN, "band"], lambda name, _: declared[name], estimator)


def band_figures(runs: pd.DataFrame, estimator: str = MEAN) -> pd.DataFrame:
    """Per curve, scale, band and size figure: the statistics of the runs' band figures
    (geometric means over the band's sizes), the figure named `<figure>@<band>`."""
    rows = size_rows(runs)
    if rows.empty:
        return rows
    keys = [c for c in rows.columns if c in (*curve_columns(rows), *SCALE_COLUMNS, "repeat")] + ["band"]
    names = [c for c in rows.columns if c not in (*keys, SIZE_COLUMN)]
    with np.errstate(divide="ignore", invalid="ignore"):
        logged = rows[keys].assign(
            **{n: np.log(pd.to_numeric(rows[n], errors="coerce").where(rows[n] > 0)) for n in names}
        )
    per_run = logged.groupby(keys, dropna=False, sort=False)[names].mean().apply(np.exp).reset_index()

    declarations = size_declarations(runs)

    def declared(name: str, band: str):
        figure = declarations[name]
        return figure.__class__(
            f"{name}{BAND_SEPARATOR}{band}", f"{figure.label}, {band_text(band)} messages", figure.unit, figure.kind
        )

    return long_statistics(per_run, ["band"], declared, estimator)


def long_statistics(rows: pd.DataFrame, extra: list[str], declared, estimator: str) -> pd.DataFrame:
    curve = [c for c in curve_columns(rows) if c in rows.columns]
    keys = [*curve, *SCALE_COLUMNS, *extra]
    names = [c for c in rows.columns if c not in (*keys, "repeat", SIZE_COLUMN, "band")]
    out = []
    for values, group in rows.groupby(keys, dropna=False, sort=True):
        where = dict(zip(keys, values, strict=True))
        for name in names:
            figure = declared(name, where.get("band"))
            stats = summarize(pd.to_numeric(group[name], errors="coerce").dropna(), estimator=estimator)
            if stats["n"] == 0:
                continue
            out.append(
                {
                    **where,
                    "metric": figure.name,
                    "metric_label": figure.label,
                    "unit": figure.unit,
                    "kind": figure.kind,
                    **stats,
                    "estimator": estimator,
                }
            )
    return pd.DataFrame(out)


def band_verdicts(runs: pd.DataFrame, estimator: str = MEAN) -> pd.DataFrame:
    """Every variant (MPI and NCCL sets, placement, an app's compared axis: collectives' backend
    against mpi) against its baseline per scale, size band and size figure (`verdicts.variants`
    on the band figures), with `figure` and `band` split out of the metric's name."""
    table = band_figures(runs, estimator)
    if table.empty:
        return table
    table = table.drop(columns=["band"])
    compared = variants(table)
    if compared.empty:
        return compared
    split = compared["metric"].str.rsplit(BAND_SEPARATOR, n=1, expand=True)
    return compared.assign(figure=split[0], band=split[1])
