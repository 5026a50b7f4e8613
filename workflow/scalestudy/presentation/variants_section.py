"""Variants against their baseline on a page: each set, placement or compared parameter's
speed ratio with its CI and verdict, the verdicts held back and why, and the verdicts per
message-size band with each curve's figures per size."""

from __future__ import annotations

import pandas as pd

from ..analysis.sizes import band_text, band_verdicts, size_curves, size_declarations, size_text, study_size_figures
from ..analysis.statistics import ESTIMATOR_NAMES, MEAN
from ..analysis.verdicts import CONDITIONS_DIFFERED, CONTENDED, NOT_INTERLEAVED, VARIANT_AXES, WAITS
from ..model.metrics import metric
from .page import Bullets, Details, Heading, Para, Table, fmt, missing, scale_text
from .scaling_section import estimator_name, mean_ci


def variant_blocks(variants: pd.DataFrame, table: pd.DataFrame) -> list:
    if variants.empty:
        return []
    rows = variants[(variants["study"] == table["study"].iloc[0]) & (variants["metric"] == table["metric"].iloc[0])]
    if rows.empty:
        return []
    quality = [c for c in ("final_accuracy", "final_loss") if c in rows.columns and rows[c].notna().any()]
    out = Table(
        [
            "set",
            "vs",
            "nodes",
            "p (ranks)",
            f"speed ratio (> 1 faster), {estimator_name(table)}",
            "95% CI",
            "n (set / baseline)",
            "comparison",
            "verdict",
        ]  # fmt: skip
        + [f"{metric(c).label} (set / baseline)" for c in quality],
        [
            [
                f"{r['axis']} {choice(r['set'])}",
                str(r["baseline_variant"]),
                fmt(r["nodes"]),
                fmt(r["ranks"]),
                fmt(r["ratio"]),
                "–" if missing(r["ci_low"]) else f"{fmt(r['ci_low'])} – {fmt(r['ci_high'])}",
                f"{int(r['n'])} / {int(r['n_baseline'])}",
                str(r.get("method") or "Welch t on the log ratio"),
                str(r["verdict"]),
            ]
            + [f"{fmt(r[c])} / {fmt(r[c + '_baseline'])}" for c in quality]
            for _, r in rows.sort_values(["axis", "set", "ranks"]).iterrows()
        ],
    )
    sentences = [verdict_sentence(r) for _, r in rows.iterrows() if r["verdict"] in ("faster", "slower")]
    label = table["metric_label"].iloc[0]
    axes = sorted(set(rows["axis"]))
    what = (
        "MPI / NCCL / placement variants against default"
        if set(axes) <= {axis for axis, _column, _baseline in VARIANT_AXES}
        else (f"Variants ({', '.join(axes)}) against their baseline")
    )
    blocks: list = [Heading(3, f"{what} ({label})"), out]
    held = held_back_lines(rows)
    if sentences:
        blocks.append(Bullets(sentences))
    elif not held:
        blocks.append(Para("No variant differs measurably from its baseline at any scale (every 95% CI includes 1)."))
    if held:
        why = "the two sides were not measured alike, their runs were contended, or two runs a side disagree"
        blocks += [Para(f"No verdict where {why}:"), Bullets(held)]
    return blocks


def verdict_sentence(row) -> str:
    ratio = row["ratio"]
    times = f"{ratio:.3g}× as fast" if ratio >= 1 else f"{1 / ratio:.3g}× as slow"
    return (
        f"{row['axis']} {choice(row['set'])} is {row['verdict']} than default at {scale_text(row)}: speed ratio of "
        f"{row['metric_label']} {ratio:.3g} ({times}; 95% CI {row['ci_low']:.3g}–{row['ci_high']:.3g}, "
        f"n = {int(row['n'])} vs {int(row['n_baseline'])}"
        + (f"; {row['justification']}" if isinstance(row.get("justification"), str) and row["justification"] else "")
        + ")."
    )


def held_back_lines(rows: pd.DataFrame) -> list[str]:
    """The verdicts held back: sides not interleaved in time, under clearly different conditions,
    on contended runs, or on two runs a side too far apart."""
    held = rows[rows["verdict"].astype(str).str.startswith((NOT_INTERLEAVED, CONDITIONS_DIFFERED, CONTENDED, WAITS))]
    return [
        f"{r['axis']} {choice(r['set'])} vs {r['baseline']} at {scale_text(r)}: {r['verdict']} (the CI alone said: "
        f"{r.get('statistical_verdict', '–')})"
        for _, r in held.sort_values(["axis", "set", "ranks"]).iterrows()
    ]


def choice(value) -> str:
    """A set or placement value as the sweep file writes it (true, not True)."""
    return str(value).lower() if isinstance(value, bool) or str(value) in ("True", "False") else str(value)


def size_blocks(runs: pd.DataFrame, estimator: str = MEAN) -> list:
    """Variant verdicts per message-size band (scalestudy.analysis.sizes) of the app's latency and
    bandwidth curves: a row per variant, curve and scale, a cell per band, then one sentence
    per variant whose verdict differs between bands."""
    verdicts = band_verdicts(runs, estimator)
    if verdicts.empty:
        return []
    shown = verdicts[verdicts["figure"].isin(study_size_figures(runs)[:2])]
    declared = size_declarations(runs)
    bands = [band for band in ("small", "medium", "large") if band in set(shown["band"])]
    params = [c for c in shown.columns if c.startswith("param.")]
    rows, sentences = [], []
    keys = ["axis", "set", "baseline", *params, "ranks", "nodes", "figure"]
    for _, group in shown.groupby(keys, dropna=False, sort=True):
        first = group.iloc[0]
        held = ", ".join(f"{c[len('param.') :]}={first[c]}" for c in params if c != f"param.{first['axis']}")
        at = {r["band"]: r for _, r in group.iterrows()}
        label = declared[first["figure"]].label
        compared = f"{first['axis']} {choice(first['set'])} vs {choice(first['baseline'])}"
        rows.append([compared, held or "–", fmt(first["ranks"]), label] + [band_cell(at.get(band)) for band in bands])
        said = {
            band: at[band]["verdict"] for band in bands if band in at and at[band]["verdict"] in ("faster", "slower")
        }
        if said:
            parts = [f"{verdict} for {band} messages" for band, verdict in said.items()]
            rest = [band for band in bands if band not in said and band in at]
            parts += [f"no measurable difference for {', '.join(rest)} ones"] if rest else []
            where = f"{held}, p = {fmt(first['ranks'])}" if held else f"p = {fmt(first['ranks'])}"
            sentences.append(f"{compared} ({where}), {label}: " + "; ".join(parts) + ".")
    headers = ["compared", "held", "p", "figure"] + [
        f"{band_text(band)}: speed ratio ({ESTIMATOR_NAMES[estimator]}, > 1 faster) [95% CI]" for band in bands
    ]
    blocks: list = [
        Heading(3, "Verdicts per message-size band"),
        Para(
            "Each band's figure is a run's geometric mean over the band's message sizes; ratio, CI and verdict as"
            " for every variant (see the definitions: size bands, band figure)."
        ),
        Table(headers, rows),
    ]
    if sentences:
        blocks.append(Bullets(sentences))
    else:
        blocks.append(Para("No variant differs measurably from its baseline in any size band."))
    return blocks + size_table_blocks(runs, estimator)


def size_table_blocks(runs: pd.DataFrame, estimator: str = MEAN) -> list:
    """Each curve's figures per message size (mean ± CI (n) of the repeats), as OSU and
    nccl-tests print them."""
    curves = size_curves(runs, estimator)
    if curves.empty:
        return []
    tables = []
    declared = size_declarations(runs)
    for (variant, ranks), rows in curves.groupby(["variant", "ranks"], sort=True):
        names = [n for n in study_size_figures(runs) if n in set(rows["metric"])]
        headers = ["size"] + [f"{declared[n].label} [{declared[n].unit}]" for n in names]
        cells = [
            [size_text(size)]
            + [mean_ci(at[at["metric"] == n].iloc[0]) if (at["metric"] == n).any() else "–" for n in names]
            for size, at in rows.groupby("size_bytes", sort=True)
        ]
        tables += [Heading(4, f"{variant}, p = {fmt(ranks)}"), Table(headers, cells)]
    return [Details("Figures per message size", tables)]


def band_cell(row) -> str:
    if row is None:
        return "–"
    if missing(row["ratio"]):
        return str(row["verdict"])
    interval = "" if missing(row["ci_low"]) else f" [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}]"
    return f"{fmt(row['ratio'])}{interval} {row['verdict']}"
