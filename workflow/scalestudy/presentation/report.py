"""The report's content, as the blocks of one page (scalestudy.presentation.page writes it and its
Markdown twin). First an overview (one row per study, linking to its section); then per
study: a one-sentence summary, a table in the shape HPC teams publish, variant verdicts,
cost, plots, failures and per-run provenance (inline for a small study; always in a side
file, one JSON line per run, that the page links to). A study whose every run failed for
one reason is one short section: the reason and how to fix it."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from ..analysis.breakdown import DEFINITIONS as BREAKDOWN_DEFINITIONS
from ..analysis.breakdown import curves, growth_sentence, part_of, parts_table, wholes
from ..analysis.records import STATUS_PENDING, contended_mask, read_table
from ..analysis.scaling import GOOD_EFFICIENCY, apps_of
from ..analysis.sizes import band_text, band_verdicts, size_curves, size_declarations, size_text, study_size_figures
from ..analysis.statistics import ESTIMATOR_NAMES, MEAN
from ..analysis.verdicts import CONDITIONS_DIFFERED, CONTENDED, MEASURE_AGAIN, NOT_INTERLEAVED, VARIANT_AXES, WAITS
from ..model.metrics import WALLTIME_USED, metric
from ..model.paths import PLOT_KINDS
from ..model.steplog import step_log
from ..model.units import MEMORY_UNIT
from .glossary import DEFINITIONS
from .page import (
    Bullets,
    Details,
    Heading,
    Image,
    Link,
    Para,
    Pre,
    Table,
    duration,
    fmt,
    missing,
    scale_text,
    write_page,
)
from .plots import NO_SIZE_CURVE, missing_plots, no_breakdown_reason, primary_table
from .scaling_models_page import model_blocks

# Up to this much a study's provenance is also on the page (each run's is about 1 KB, plus
# 0.7 KB per rank: 10,000 runs made a page of tens of MB); the side file always has it.
INLINE_PROVENANCE_BYTES = 1_000_000
# What a run's provenance record holds, on the page and in the side file.
PROVENANCE_KEYS = ("point", "status", "reason", "params", "mpi_flags", "nccl_env", "provenance", "started", "finished")
# Up to this many failed runs are listed one by one; more are grouped by category and reason.
INLINE_FAILURES = 50


# ---------------------------------------------------------------- a table's cells


def mean_ci(row) -> str:
    if row["n"] == 0:
        return "not run yet" if row.get("n_failed", 0) == 0 and row.get("n_pending", 0) > 0 else "no successful run"
    ci = f" ± {fmt(row['ci95'], 2)}" if not missing(row.get("ci95")) else ""
    return f"{fmt(row['mean'])}{ci} (n={int(row['n'])})"


def estimator_name(table: pd.DataFrame) -> str:
    """How the table's figures were made from the repeats: 'mean', or the trimmed mean named."""
    used = set(table["estimator"].dropna()) if "estimator" in table.columns else set()
    return ESTIMATOR_NAMES[sorted(used - {MEAN})[0]] if used - {MEAN} else ESTIMATOR_NAMES[MEAN]


def truthy(value) -> bool:
    return not missing(value) and bool(value)


def get(row, column):
    value = row.get(column) if hasattr(row, "get") else None
    return None if missing(value) else value


# ---------------------------------------------------------------- a study's blocks


def summary_sentence(table: pd.DataFrame) -> str:
    """E.g. 'strong scaling of throughput holds >= 70% parallel efficiency up to 8 nodes (p = 384) ...'."""
    ok = table[table["n"] > 0]
    if ok.empty:
        return "No successful run yet, so no scaling figure."
    label, weak = table["metric_label"].iloc[0], table["scaling"].iloc[0] == "weak"
    column, name = ("weak_efficiency", "weak-scaling efficiency") if weak else ("parallel_efficiency", "efficiency")
    parts = []
    for variant, rows in ok.groupby("variant"):
        rows = rows.sort_values("ranks")
        prefix = f"{variant}: " if table["variant"].nunique() > 1 else ""
        if len(rows) == 1:
            parts.append(f"{prefix}only p = {int(rows['ranks'].iloc[0])} succeeded, nothing to scale against")
            continue
        good = rows[column] >= GOOD_EFFICIENCY
        holds = rows[good.cummin()]
        top = rows.iloc[-1]
        speed = top["scaled_speedup"] if weak else top["speedup"]
        reach = (
            f"holds ≥ {GOOD_EFFICIENCY:.0%} {name} up to {scale_text(holds.iloc[-1])}"
            if not holds.empty and len(holds) > 1
            else f"falls below {GOOD_EFFICIENCY:.0%} {name} already at {scale_text(rows.iloc[1])}"
        )
        parts.append(
            f"{prefix}{'weak' if weak else 'strong'} scaling of {label} {reach}; at {scale_text(top)} "
            f"{'scaled ' if weak else ''}speedup {speed:.3g}, {name} {top[column]:.3g} (n = {int(top['n'])})"
        )
    contended = int(pd.to_numeric(ok.get("n_contended", pd.Series(dtype=float)), errors="coerce").fillna(0).sum())
    rests = f" (on {contended} contended runs of {int(ok['n'].sum())}: see the notes)" if contended else ""
    return "; ".join(parts) + rests + "."


def notes_of(row) -> str:
    notes = []
    if row.get("n_outliers", 0):
        notes.append(f"outlier: {row['outlier_repeats']}")
    if row.get("n_failed", 0):
        notes.append(f"{int(row['n_failed'])} failed")
    if row.get("n_contended", 0):
        notes.append(f"{int(row['n_contended'])} of {int(row['n'])} contended")
    if row.get("n_pending", 0):
        notes.append(f"{int(row['n_pending'])} not run yet")
    if truthy(row.get("cost_optimal")):
        notes.append("cost-optimal")
    if truthy(row.get("fastest_within_budget")):
        notes.append("fastest within budget")
    return "; ".join(notes)


def hpc_table(table: pd.DataFrame) -> Table:
    """The table HPC teams publish, for one metric: one row per variant and scale."""
    weak = (table["scaling"] == "weak").any()
    unit, kind = table["unit"].iloc[0], table["kind"].iloc[0]
    columns: list[tuple[str, object]] = []
    if table["variant"].nunique() > 1:
        columns.append(("variant", lambda r: str(r["variant"])))
    columns += [("nodes", lambda r: fmt(r["nodes"])), ("cores", lambda r: fmt(get(r, "cores_allocated")))]
    if (table.get("gpus_allocated", pd.Series(0)).fillna(0) > 0).any():
        columns.append(("GPUs", lambda r: fmt(get(r, "gpus_allocated"))))
    columns.append(("p (ranks)", lambda r: fmt(r["ranks"])))
    for column, what in (("memory_requested_gb", "memory requested"), ("memory_used_gb", "memory used")):
        name = f"{what} [{MEMORY_UNIT}]"
        if column in table.columns and table[column].notna().any():
            columns.append((name, lambda r, c=column: fmt(get(r, c), 4)))
    if WALLTIME_USED.name in table.columns:
        columns.append(("walltime used (hh:mm:ss)", lambda r: duration(get(r, WALLTIME_USED.name))))
    columns.append((f"{table['metric_label'].iloc[0]} [{unit}] {estimator_name(table)} ± 95% CI (n)", mean_ci))
    if "median" in table.columns and table["median"].notna().any():
        columns.append(("median [95% CI, distribution-free]", median_cell))
    if "repeats_stop" in table.columns and table["repeats_stop"].notna().any():
        columns.append(("repeats: why no more", lambda r: str(get(r, "repeats_stop") or "–")))
    if weak:
        columns += [
            ("scaled speedup", lambda r: fmt(get(r, "scaled_speedup"))),
            ("weak efficiency", lambda r: fmt(get(r, "weak_efficiency"))),
        ]
    else:
        columns += [
            ("speedup S", lambda r: fmt(get(r, "speedup"))),
            ("parallel efficiency S·p0/p", lambda r: fmt(get(r, "parallel_efficiency"))),
            ("S/cores", lambda r: fmt(get(r, "speedup_per_core"), 2)),
            ("Karp–Flatt e", lambda r: fmt(get(r, "karp_flatt_serial_fraction"), 2)),
        ]
    if "su_per_run" in table.columns and table["su_per_run"].notna().any():
        columns.append(("SU per run", su_cell))
        if kind == "rate" and "su_per_million" in table.columns:
            columns.append((f"SU per 10⁶ {unit.split('/')[0]}", lambda r: fmt(get(r, "su_per_million"))))
    columns.append(("notes", notes_of))
    rows = [[cell(row) for _, cell in columns] for _, row in table.sort_values(["variant", "ranks"]).iterrows()]
    return Table([name for name, _ in columns], rows)


def median_cell(row) -> str:
    """The median with its order-statistic CI (none below 6 repeats: '–')."""
    low, high = get(row, "median_ci_low"), get(row, "median_ci_high")
    return fmt(get(row, "median")) + ("" if low is None else f" [{fmt(low)} – {fmt(high)}]")


def su_cell(row) -> str:
    value = get(row, "su_per_run")
    if value is None:
        return "–"
    return fmt(value) + (" (estimated)" if "estimated" in str(row.get("service_units_source", "")) else "")


def amdahl_lines(table: pd.DataFrame) -> list[str]:
    if (table["scaling"] == "weak").any() or "amdahl_serial_fraction" not in table.columns:
        return []
    lines = []
    for variant, rows in table[table["n"] > 0].groupby("variant"):
        serial, ceiling = rows["amdahl_serial_fraction"].iloc[0], rows["amdahl_max_speedup"].iloc[0]
        if missing(serial):
            continue
        scales = len(rows)
        if serial >= 1:
            # 1/S >= 1 at every scale: adding ranks did not help at all; Amdahl has no ceiling to give.
            lines.append(
                f"{variant}: Amdahl fit over {scales} scales gives f = {serial:.3g} ≥ 1: more ranks made it "
                "slower (a slowdown, not a serial fraction), no speedup ceiling implied."
            )
        elif serial > 0:
            lines.append(
                f"{variant}: Amdahl fit over {scales} scales: serial fraction f = {serial:.3g}, "
                f"speedup ceiling 1/f = {ceiling:.3g} (relative to p0 = {int(rows['p0'].iloc[0])})."
            )
        else:
            lines.append(
                f"{variant}: Amdahl fit over {scales} scales gives f = {serial:.3g} ≤ 0 (speedup at or above "
                "ideal somewhere): no serial part seen, no ceiling implied."
            )
    return lines


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


def breakdown_blocks(scaling: pd.DataFrame, study: str, table: pd.DataFrame) -> list:
    """Where each scale spends its time: per curve, the sentence naming the part that grows
    fastest with p, and each part's fraction (and time) per scale; the parts' definitions and
    how they were measured. A study whose app measures no parts says why, in its app's word."""
    parts = parts_table(scaling, study)
    if parts.empty:
        if (table["n"] == 0).all():
            return []
        return [Heading(3, "Where the time goes"), Para(f"No time breakdown: {no_breakdown_reason(table)}.")]
    groups = curves(parts, beside=True)
    named = len(groups) > 1
    sentences = [growth_sentence(rows, named) for _v, _w, rows in curves(parts)]
    stacked = list(dict.fromkeys(parts.loc[~parts["beside"].astype(bool), "part"]))
    beside = list(dict.fromkeys(parts.loc[parts["beside"].astype(bool), "part"]))
    headers = (["curve"] if named else []) + ["p (ranks)", *stacked, "sum of the parts (per step)"]
    headers += [f"{name} (beside)" for name in beside]
    cells = []
    for variant, _whole, rows in groups:
        for ranks, at in rows.groupby("ranks", sort=True):
            by_part = at.set_index("part")
            row = [variant] if named else []
            row.append(fmt(ranks))
            row += [part_cell(by_part, name) for name in stacked]
            row.append(seconds(at.loc[~at["beside"].astype(bool), "mean"].sum()))
            row += [part_cell(by_part, name) for name in beside]
            cells.append(row)
    blocks: list = [Heading(3, "Where the time goes")]
    blocks += [Para(sentences[0], "summary")] if not named else [Bullets(sentences)]
    blocks.append(Table(headers, cells))
    for whole, declared in wholes(parts).items():
        definitions = [m.label + (" (beside the parts, not one of them)" if m.beside else "") for m in declared]
        blocks.append(Details(f"The parts of a {whole}", [Bullets(definitions)]))
    blocks.append(
        Para(f"Fraction: {BREAKDOWN_DEFINITIONS['fraction']}. Grows fastest: {BREAKDOWN_DEFINITIONS['grows_fastest']}.")
    )
    return blocks


def part_cell(by_part: pd.DataFrame, name: str) -> str:
    if name not in by_part.index:
        return "–"
    row = by_part.loc[name]
    return f"{row['fraction']:.0%} ({seconds(row['mean'])})" if not missing(row["fraction"]) else seconds(row["mean"])


def seconds(value: float) -> str:
    """A time per step, in the unit that reads best (steps take micro- to milliseconds)."""
    if missing(value):
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{fmt(value / scale)} {unit}"
    return f"{fmt(value / 1e-6)} µs"


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


def memory_blocks(runs: pd.DataFrame) -> list:
    """The memory model's prediction against the measured peak per rank, per curve and scale."""
    if runs.empty or "predicted_memory_gb" not in runs.columns:
        return []
    ok = runs[(runs["status"] == "ok") & runs["predicted_memory_gb"].notna()]
    if ok.empty:
        return []
    # Each app's measured figures: tensor bytes (what the prediction is held to), then max RSS beside.
    measured_figures = (
        "memory_growth_gb",
        "peak_memory_gb",
        "gpu_memory_gb",
        "tensor_memory_peak_gb",
        "host_memory_peak_gb",
    )
    measured = [c for c in measured_figures if c in ok]
    rows = []
    for (variant, ranks), group in ok.groupby(["variant", "ranks"], sort=True):
        ratio = pd.to_numeric(group.get("memory_ratio"), errors="coerce") if "memory_ratio" in group else None
        rows.append(
            [
                str(variant),
                fmt(ranks),
                fmt(group["predicted_memory_gb"].mean(), 4),
                *(fmt(pd.to_numeric(group[c], errors="coerce").mean(), 4) for c in measured),
                "–" if ratio is None or ratio.isna().all() else fmt(ratio.mean()),
                str(len(group)),
            ]
        )
    return [
        Heading(3, "Memory per rank: predicted against measured"),
        Table(
            [
                "curve",
                "p (ranks)",
                f"predicted [{MEMORY_UNIT}]",
                *(f"{metric(c).label} [{metric(c).unit}]" for c in measured),
                "measured / predicted",
                "n",
            ],
            rows,
        ),
        Para(
            DEFINITIONS["memory_ratio"] + ". Means over the successful repeats. Models of a few MB show ratios"
            " above 1: what the runtime allocates once training starts (communication buffers) is then not small"
            " beside them (docs/MEMORY.md: within 0.8-1.2 from 200 MB a rank)."
        ),
    ]


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


def cost_lines(table: pd.DataFrame, budget_su: float | None) -> list[str]:
    if "su_per_run" not in table.columns or table["su_per_run"].isna().all():
        return ["No service units recorded (no charge rate on this cluster, or none in the record): no cost figures."]
    lines = []
    for variant, rows in table.groupby("variant"):
        best = rows[rows["cost_optimal"].map(truthy)]
        if not best.empty:
            b = best.iloc[0]
            lines.append(
                f"{variant}: cost-optimal at {scale_text(b)}: {su_cell(b)} SU per run (mean of n = {int(b['n'])})."
            )
        if budget_su is None:
            continue
        fast = rows[rows["fastest_within_budget"].map(truthy)]
        if fast.empty:
            lines.append(f"{variant}: no scale runs within the budget of {budget_su:g} SU per run.")
        else:
            f = fast.iloc[0]
            lines.append(
                f"{variant}: fastest within the budget of {budget_su:g} SU per run: {scale_text(f)}, "
                f"{f['metric_label']} {fmt(f['mean'])} {f['unit']} for {su_cell(f)} SU (means of n = {int(f['n'])})."
            )
    return lines


def provenance_records(runs: pd.DataFrame) -> list[dict]:
    """Each run's status, settings and provenance, as the side file and the page show them."""
    keys = [k for k in PROVENANCE_KEYS if k in runs.columns]
    records = []
    for run in runs[keys].to_dict("records"):
        records.append(
            {
                key: json.loads(value) if isinstance(value, str) and value.startswith("{") else value
                for key, value in run.items()
                if not missing(value) and value != ""
            }
        )
    return records


def write_provenance(runs: pd.DataFrame, path: Path) -> None:
    """The side file: one JSON line per run, the same keys as on the page. The JSON columns of
    runs.csv (written by analysis.records.run_row) are spliced in as they are: parsing and writing
    again 10,000 runs' provenance would cost seconds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = [k for k in PROVENANCE_KEYS if k in runs.columns]
    with path.open("w", encoding="utf-8") as out:
        for run in runs[keys].itertuples(index=False, name=None):
            fields = []
            for key, value in zip(keys, run, strict=True):
                if missing(value) or value == "":
                    continue
                json_text = isinstance(value, str) and value.startswith("{")
                fields.append(f"{json.dumps(key)}: {value if json_text else json.dumps(value, default=str)}")
            out.write("{" + ", ".join(fields) + "}\n")


def provenance_bytes(runs: pd.DataFrame) -> int:
    keys = [k for k in PROVENANCE_KEYS if k in runs.columns]
    return int(sum(runs[k].astype(str).str.len().sum() for k in keys))


def provenance_link_blocks(runs: pd.DataFrame, link: str | None) -> list:
    if not link:
        return []
    return [Para(f"Per-run provenance ({len(runs)} runs, one JSON line each):", link=Link(link, link))]


def run_blocks(runs: pd.DataFrame, provenance_link: str | None = None) -> list:
    """Failures (with category and reason), points not run yet, and every run's provenance:
    on the page for a small study, and in the side file `provenance_link` names."""
    blocks: list = []
    if runs.empty or "status" not in runs.columns:
        return blocks
    failed = runs[runs["status"] == "failed"]
    if not failed.empty:
        blocks.append(Heading(3, f"Failed runs ({len(failed)}): excluded from the figures, shown as x in the plots"))
        blocks.append(failure_table(failed))
    if "exit_failure" in runs.columns:
        said = runs["exit_failure"].notna() & (runs["exit_failure"].astype(str) != "")  # an all-empty column is float
        late = runs[(runs["status"] == "ok") & said]
        if not late.empty:
            title = f"Runs that failed at exit after their complete result ({len(late)}): their figures are kept"
            blocks.extend([Heading(3, title), failure_table(late)])
    pending = runs[runs["status"] == STATUS_PENDING]
    if not pending.empty:
        blocks.append(Heading(3, f"Not run yet ({len(pending)})"))
        blocks.append(Bullets([str(p) for p in pending["point"]]))
    again = remeasured_runs(runs)
    if not again.empty:
        blocks.append(Heading(3, f"Re-measured ({len(again)}): earlier records kept in the point's history/"))
        blocks.append(
            Bullets(
                [
                    f"{r.get('point', '?')}: {r.get('remeasured') or 'measured again'} ({int(r['kept_records'])} kept)"
                    for r in again.astype(object).where(again.notna(), None).to_dict("records")
                ]
            )
        )
    shared = shared_batch_jobs(runs)
    if shared:
        points = sum(len(members) for members in shared.values())
        blocks.append(Heading(3, f"Packed ({points} runs in {len(shared)} batch jobs): points that shared a batch job"))
        blocks.append(Bullets([f"batch job {job}: {', '.join(members)}" for job, members in shared.items()]))
    blocks += proof_blocks(runs)
    blocks += provenance_link_blocks(runs, provenance_link)
    if provenance_bytes(runs) <= INLINE_PROVENANCE_BYTES:
        provenance = [
            Details(f"{record.pop('point', '?')}: {record.get('status')}", [Pre(json.dumps(record, indent=1))])
            for record in provenance_records(runs)
        ]
        blocks.append(Details(f"Per-run provenance ({len(runs)} runs)", provenance, in_markdown=False))
    return blocks


def placement_text(run: Mapping) -> str:
    """The placement a run asked for, e.g. 'binding core, mapping default' (+ 'hardware threads')."""
    if missing(run.get("binding")):
        return "–"
    text = f"binding {run.get('binding')}, mapping {run.get('mapping')}"
    return text + (", hardware threads" if truthy(run.get("hyperthreads")) else "")


def proof_blocks(runs: pd.DataFrame) -> list:
    """Per run: did what it asked for (MPI flags, NCCL variables, binding) take effect, and the
    CPUs each rank could run on (the rank probe's affinity). Unproven runs are listed openly."""
    if "settings_verified" not in runs.columns:
        return []
    proven = runs[runs["settings_verified"].notna()]
    proven = proven.astype(object).where(proven.notna(), None)
    if proven.empty:
        return []
    blocks: list = []
    unproven = [r for r in proven.to_dict("records") if not truthy(r.get("settings_verified"))]
    if unproven:
        blocks.append(Heading(3, f"Settings not proven ({len(unproven)}): asked for, but no evidence they took effect"))
        blocks.append(
            Table(
                ["point", "problems"],
                [[str(r.get("point", "?")), str(r.get("settings_problems") or "")] for r in unproven],
            )
        )
    rows = [
        [
            str(r.get("point", "?")),
            placement_text(r),
            "yes" if truthy(r.get("settings_verified")) else "no",
            str(r.get("bindings") or "–"),
        ]
        for r in proven.to_dict("records")
    ]
    title = f"Settings proof and the CPUs each rank could run on ({len(rows)} runs)"
    # Like the per-run provenance: for the page, not for a paper.
    table = Table(["point", "placement asked", "proven", "rank@host:CPUs"], rows)
    blocks.append(Details(title, [table], in_markdown=False))
    return blocks


def failure_table(failed: pd.DataFrame) -> Table:
    """One row per failed run; beyond INLINE_FAILURES, one row per category and reason."""
    failed = failed.astype(object).fillna("")
    for column in ("point", "category", "reason"):
        if column not in failed.columns:
            failed[column] = ""
    if len(failed) <= INLINE_FAILURES:
        rows = [[str(r.get("point", "?")), str(r.get("category") or "–"), str(r.get("reason", ""))]
                for r in failed.to_dict("records")]  # fmt: skip
        return Table(["point", "category", "reason"], rows)
    rows = []
    for (category, reason), group in failed.groupby(["category", "reason"], sort=True):
        points = list(group["point"].astype(str))
        shown = ", ".join(points[:3]) + (f" and {len(points) - 3} more" if len(points) > 3 else "")
        rows.append([str(len(group)), str(category or "–"), str(reason), shown])
    return Table(["runs", "category", "reason", "points"], rows)


def shared_batch_jobs(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Batch job -> the points it ran, in the order they started, where it ran more than one
    (a study's `pack:`)."""
    if "batch_job" not in runs.columns:
        return {}
    ran = runs[runs["batch_job"].notna() & (runs["batch_job"].astype(str) != "")]
    if "started" in ran.columns:
        ran = ran.sort_values("started", na_position="last")
    groups = {str(job): [str(p) for p in group["point"]] for job, group in ran.groupby("batch_job", sort=False)}
    return {job: members for job, members in groups.items() if len(members) > 1}


def remeasured_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs of points measured again (their definition changed, or Snakemake reran them)."""
    if "kept_records" not in runs.columns:
        return runs.iloc[0:0]
    return runs[pd.to_numeric(runs["kept_records"], errors="coerce").fillna(0) > 0]


def contended_line(runs: pd.DataFrame) -> str:
    """How many successful runs were contended (DEFINITIONS['contended']) and how to measure them
    again; '' where none was."""
    if runs.empty or "status" not in runs.columns:
        return ""
    ok = runs[runs["status"] == "ok"]
    marked = ok[contended_mask(ok)]
    if marked.empty:
        return ""
    share = pd.to_numeric(marked.get("other_cpu_share"), errors="coerce")
    # The hosts of multi-node runs whose CPUs others shared (analysis: contended_hosts), by name.
    named = marked.get("contended_hosts", pd.Series(dtype=object)).dropna().astype(str)
    slow = pd.Series([h for cell in named for h in cell.split(", ") if h]).value_counts()
    hosts = "; ".join(f"host {host}'s CPUs shared in {count} of them" for host, count in sorted(slow.items()))
    return (
        f"{len(marked)} of the {len(ok)} successful runs were contended: other processes held the CPUs their ranks "
        f"needed (their share of the CPUs {share.min():.0%}–{share.max():.0%}{'; ' + hosts if hosts else ''}). "
        f"The tables mark figures that rest on them and no verdict rests on them; to measure them again, "
        f"{MEASURE_AGAIN}."
    )


def run_counts(runs: pd.DataFrame) -> dict[str, int]:
    counts = runs["status"].value_counts() if not runs.empty and "status" in runs.columns else pd.Series(dtype=int)
    return {status: int(counts.get(status, 0)) for status in ("ok", "failed", STATUS_PENDING)}


def one_reason(runs: pd.DataFrame) -> tuple[str, str] | None:
    """(category, reason) when every run of the study failed for the same reason."""
    if runs.empty or "status" not in runs.columns or not (runs["status"] == "failed").all():
        return None
    found = {(str(r.get("category") or ""), str(r.get("reason") or "")) for r in runs.to_dict("records")}
    return found.pop() if len(found) == 1 else None


def all_failed_blocks(study: str, runs: pd.DataFrame, why: tuple[str, str]) -> list:
    """A study whose every run failed for one reason: the reason, and how to fix it."""
    category, reason = why
    fixes = [fix for app in apps_of(runs) if (fix := app.how_to_fix(reason))]
    fixes = fixes or ["Fix what the reason names, then rerun the failed points with `--config retry_failed=true`."]
    every = "Its one run failed: " if len(runs) == 1 else f"All {len(runs)} runs failed for one reason: "
    return [
        Heading(2, study),
        Para(f"{every}{reason}" + (f" ({category})." if category else "."), "summary"),
        Para("How to fix: " + " ".join(fixes)),
    ]


def study_blocks(
    study: str,
    runs: pd.DataFrame,
    scaling: pd.DataFrame,
    variants: pd.DataFrame,
    plots: Sequence[Path],
    budget_su: float | None = None,
    provenance_link: str | None = None,
) -> list:
    why = one_reason(runs)
    if why is not None:
        return all_failed_blocks(study, runs, why) + provenance_link_blocks(runs, provenance_link)
    blocks: list = [Heading(2, study)]
    counts = run_counts(runs)
    names = (("ok", "succeeded"), ("failed", "failed"), (STATUS_PENDING, "not run yet"))
    state = ", ".join(f"{counts[s]} {name}" for s, name in names if counts[s])
    again = len(remeasured_runs(runs)) if not runs.empty else 0
    blocks.append(Para(f"{len(runs)} runs: {state or 'none'}" + (f"; {again} re-measured" if again else "") + "."))
    contended = contended_line(runs)
    if contended:
        blocks.append(Para(contended))
    table = primary_table(scaling, study)
    if table.empty:
        blocks.append(Para("No run has a figure yet: no scaling table."))
    else:
        blocks.append(Para(summary_sentence(table), "summary"))
        blocks.append(Heading(3, f"Scaling of {table['metric_label'].iloc[0]} [{table['unit'].iloc[0]}]"))
        blocks.append(hpc_table(table))
        blocks += [Para(line) for line in amdahl_lines(table)]
        blocks += breakdown_blocks(scaling, study, table)
        blocks += model_blocks(scaling, study, table)
        blocks += variant_blocks(variants, table)
        used = set(table["estimator"].dropna()) - {MEAN} if "estimator" in table.columns else set()
        blocks += size_blocks(runs, min(used, default=MEAN))
        blocks += [Heading(3, "Cost"), Bullets(cost_lines(table, budget_su))]
    blocks += plot_blocks(study, scaling, variants, plots, runs)
    if not table.empty:
        others = scaling[(scaling["study"] == study) & (scaling["metric"] != table["metric"].iloc[0])]
        others = others[others["metric"].map(part_of).isna()]  # the breakdown's section has the parts
        details = []
        for _metric, rows in others.groupby("metric", sort=False):
            details += [Heading(4, f"{rows['metric_label'].iloc[0]} [{rows['unit'].iloc[0]}]"), hpc_table(rows)]
        if details:
            blocks.append(Details("Other metrics", details))
    blocks += memory_blocks(runs)
    blocks += run_blocks(runs, provenance_link)
    return blocks


def plot_blocks(
    study: str, scaling: pd.DataFrame, variants: pd.DataFrame, plots: Sequence[Path], runs: pd.DataFrame | None = None
) -> list:
    """The plots that have something to draw; one line for those that do not (none for a
    curve over message size the app never measures)."""
    why = missing_plots(scaling, variants, study, runs)
    if why.get("sizes") == NO_SIZE_CURVE and len(why) < len(PLOT_KINDS):
        del why["sizes"]
        plots = [p for p in plots if Path(p).name != f"{study}.sizes.png"]
    kinds = {f"{study}.{kind}.png": kind for kind in PLOT_KINDS}
    images = [Image(p, Path(p).name) for p in plots if Path(p).is_file() and kinds.get(Path(p).name) not in why]
    blocks: list = [images] if images else []
    if len(why) == len(PLOT_KINDS):
        blocks.append(Para(f"No plots: {next(iter(why.values()))}."))
    elif why:
        blocks.append(
            Para("Not drawn: " + "; ".join(f"the {kind} plot: {reason}" for kind, reason in why.items()) + ".")
        )
    return blocks


# ---------------------------------------------------------------- the overview


def overview_row(study: str, runs: pd.DataFrame, scaling: pd.DataFrame, variants: pd.DataFrame) -> list:
    counts = run_counts(runs)
    app = str(runs["app"].dropna().iloc[0]) if "app" in runs.columns and runs["app"].notna().any() else "–"
    kind = str(runs["scaling"].dropna().iloc[0]) if "scaling" in runs.columns and runs["scaling"].notna().any() else "–"
    cells = [Link(study, f"#{study}"), app, kind, scales_run(runs)]
    why = one_reason(runs)
    table = primary_table(scaling, study)
    if why is not None:
        cells += [f"every run failed: {why[1]}", "–", "–"]
    elif table.empty or (table["n"] == 0).all():
        cells += ["no successful run" if counts["failed"] else "not run yet", "–", "–"]
    else:
        cells += largest_scale_cells(table) + [best_variant(variants, table)]
    return cells + [f"{counts['ok']} / {counts['failed']} / {counts[STATUS_PENDING]}"]


def scales_run(runs: pd.DataFrame) -> str:
    """The scales with a finished run (p, and nodes where more than one)."""
    if runs.empty or "ranks" not in runs.columns:
        return "–"
    done = runs[runs["status"] != STATUS_PENDING] if "status" in runs.columns else runs
    ranks = sorted({int(r) for r in done["ranks"].dropna()})
    nodes = sorted({int(n) for n in done["nodes"].dropna()}) if "nodes" in done.columns else []
    if not ranks:
        return "none yet"
    text = "p = " + ", ".join(map(str, ranks))
    return text + (f" ({', '.join(map(str, nodes))} nodes)" if len(nodes) > 1 else "")


def largest_scale_cells(table: pd.DataFrame) -> list[str]:
    """The primary figure at the largest successful scale (of the default variant where it
    ran), and the parallel (or weak) efficiency there."""
    ok = table[table["n"] > 0]
    default = ok[ok["variant"] == "mpi-default/nccl-default"]
    ok = default if not default.empty else ok
    top = ok.sort_values(["ranks", "variant"]).iloc[-1]
    variant = "" if table["variant"].nunique() == 1 else f", {top['variant']}"
    figure = (f"{top['metric_label']} [{top['unit']}] {estimator_name(table)}: {mean_ci(top)} "
              f"at {scale_text(top)}{variant}")  # fmt: skip
    column, name = ("weak_efficiency", "weak") if top["scaling"] == "weak" else ("parallel_efficiency", "parallel")
    if ok["ranks"].nunique() == 1:
        return [figure, "– (one scale: nothing to scale against)"]
    return [figure, f"{fmt(get(top, column))} ({name})"]


def best_variant(variants: pd.DataFrame, table: pd.DataFrame) -> str:
    """The largest measurable gain of an MPI flag set, NCCL env set or placement over default, if any."""
    alone = "one MPI flag set, one NCCL env set and one placement"
    if variants.empty:
        return alone
    rows = variants[(variants["study"] == table["study"].iloc[0]) & (variants["metric"] == table["metric"].iloc[0])]
    if rows.empty:
        return alone
    faster = rows[rows["verdict"] == "faster"]
    if not faster.empty:
        best = faster.loc[faster["ratio"].idxmax()]
        return f"{best['axis']} {choice(best['set'])} faster: {best['ratio']:.3g}× at {scale_text(best)}"
    slower = rows[rows["verdict"] == "slower"]
    if not slower.empty:
        names = sorted(set(slower["axis"] + " " + slower["set"].map(choice)))
        return f"none faster; {', '.join(names)} slower somewhere"
    if (rows["verdict"] == "no measurable difference").any():
        return "no measurable difference from default"
    return str(rows["verdict"].iloc[0])


def overview_blocks(runs: Mapping[str, pd.DataFrame], scaling, variants) -> list:
    headers = ["study", "app", "scaling", "scales run", "primary figure at the largest scale (n)", "efficiency there",
               "best variant vs default (MPI/NCCL set, placement)", "runs ok / failed / not run"]  # fmt: skip
    rows = [
        overview_row(study, runs[study], scaling.get(study, pd.DataFrame()), variants.get(study, pd.DataFrame()))
        for study in runs
    ]
    return [Heading(2, "Overview"), Table(headers, rows, css="overview")]


def definition_blocks() -> list:
    items = [f"{k.replace('_', ' ')}: {v}" for k, v in DEFINITIONS.items()]
    items.insert(0, "p = total MPI ranks (nodes × ranks per node; one rank per GPU); p0 = smallest successful p.")
    return [Heading(2, "Definitions"), Bullets(items)]


def build(
    runs: Mapping[str, pd.DataFrame],
    scaling: Mapping[str, pd.DataFrame],
    variants: Mapping[str, pd.DataFrame],
    plots: Mapping[str, list[Path]],
    out_html: Path,
    out_md: Path | None = None,
    budgets: Mapping[str, float | None] | None = None,
    provenance: Mapping[str, Path] | None = None,
) -> None:
    """The page: the overview, then each study's section. `provenance`: study -> the side file
    its runs' provenance is written to (the page links to it)."""
    blocks: list = overview_blocks(runs, scaling, variants)
    for study in runs:
        link = None
        if provenance and study in provenance:
            write_provenance(runs[study], Path(provenance[study]))
            link = os.path.relpath(provenance[study], Path(out_html).parent)
        blocks += study_blocks(
            study,
            runs[study],
            scaling.get(study, pd.DataFrame()),
            variants.get(study, pd.DataFrame()),
            plots.get(study, []),
            (budgets or {}).get(study),
            link,
        )
    write_page(blocks + definition_blocks(), "scalestudy report", out_html, out_md)


def build_from_files(
    studies: list[str],
    runs_csv: list[str],
    scaling_csv: list[str],
    variants_csv: list[str],
    plot_pngs: list[str],
    out_html: str | Path,
    out_md: str | Path | None = None,
    budgets: Mapping[str, float | None] | None = None,
    log: str | Path | None = None,
    provenance: list[str] | None = None,
) -> None:
    """The report rule's entry: files in, one page (and its Markdown twin) out; the
    table inputs (and the provenance side files) are ordered as `studies`."""
    with step_log(log) as note:
        runs = dict(zip(studies, map(read_table, runs_csv), strict=True))
        scaling = dict(zip(studies, map(read_table, scaling_csv), strict=True))
        variants = dict(zip(studies, map(read_table, variants_csv), strict=True))
        plots = {
            study: [Path(p) for kind in PLOT_KINDS for p in plot_pngs if Path(p).name == f"{study}.{kind}.png"]
            for study in studies
        }
        sides = dict(zip(studies, map(Path, provenance), strict=True)) if provenance else None
        build(runs, scaling, variants, plots, Path(out_html), Path(out_md) if out_md else None, budgets, sides)
        total = sum(len(table) for table in runs.values())
        note(f"{out_html}: {len(studies)} studies, {total} runs")
