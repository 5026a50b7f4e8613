"""A study's scaling table on a page, and what it says: the table in the shape HPC teams
publish (one row per curve and scale: the figure with its CI, speedup, efficiency, cost), its
one-sentence summary, the Amdahl fit, cost, where the time goes (the breakdown) and memory per
rank, predicted against measured."""

from __future__ import annotations

import math

import pandas as pd

from ..analysis import breakdown
from ..analysis.breakdown import curves, growth_sentence, parts_table, wholes
from ..analysis.scaling import CI_COLUMNS, RATIO_NOTE, efficiency_threshold
from ..analysis.statistics import CONFIDENCE, ESTIMATOR_NAMES, MEAN
from ..model.metrics import WALLTIME_USED, metric
from ..model.scaling_figures import BELOW, HOLDS, UNDECIDED, judge
from ..model.units import MEMORY_UNIT
from .glossary import DEFINITIONS
from .page import Bullets, Details, Heading, Para, Table, duration, fmt, missing, scale_text
from .plots import no_breakdown_reason

# ---------------------------------------------------------------- a table's cells


def mean_ci(row) -> str:
    if row["n"] == 0:
        return "not run yet" if row.get("n_failed", 0) == 0 and row.get("n_pending", 0) > 0 else "no successful run"
    ci = f" ± {fmt(row['ci95'], 2)}" if not missing(row.get("ci95")) else ""
    return f"{fmt(row['mean'])}{ci} (n={int(row['n'])})"


def interval(row, column: str) -> tuple[float, float] | None:
    """The row's confidence interval of a speedup or efficiency column (None where it has none)."""
    low, high = (get(row, c) for c in CI_COLUMNS.get(column, ("", "")))
    return None if low is None or high is None else (float(low), float(high))


def with_ci(row, column: str, digits: int = 3) -> str:
    """A speedup or efficiency with its CI: '0.702 [0.41–1.18]'; at p0 (1 by definition) the
    figure alone; '0.702 (no CI)' where the repeats give none (the notes say why)."""
    value = get(row, column)
    if value is None:
        return "–"
    found = interval(row, column)
    if is_baseline(row):
        return fmt(value, digits)
    if found is None:
        return f"{fmt(value, digits)} (no CI)" if ratio_note(row) else fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(found[0])}–{fmt(found[1])}]"


def ratio_note(row) -> str:
    return str(get(row, RATIO_NOTE) or "")


def is_baseline(row) -> bool:
    return get(row, "p0") is not None and get(row, "ranks") == get(row, "p0") and ratio_note(row).startswith("p0")


def estimator_name(table: pd.DataFrame) -> str:
    """How the table's figures were made from the repeats: 'mean', or the trimmed mean named."""
    used = set(table["estimator"].dropna()) if "estimator" in table.columns else set()
    return ESTIMATOR_NAMES[sorted(used - {MEAN})[0]] if used - {MEAN} else ESTIMATOR_NAMES[MEAN]


def truthy(value) -> bool:
    return not missing(value) and bool(value)


def get(row, column):
    value = row.get(column) if hasattr(row, "get") else None
    return None if missing(value) else value


# ---------------------------------------------------------------- the blocks


def summary_sentence(table: pd.DataFrame) -> str:
    """E.g. 'strong scaling of throughput holds ≥ 70% efficiency up to 8 nodes (p = 384) ...',
    judged against the study's efficiency threshold by each scale's efficiency CI
    (model.scaling_figures.judge): a scale holds it or is below it only where its whole interval
    is; otherwise the sentence says it cannot tell, with the interval and n."""
    ok = table[table["n"] > 0]
    threshold = efficiency_threshold(table)
    if ok.empty:
        return "No successful run yet, so no scaling figure."
    label, weak = table["metric_label"].iloc[0], table["scaling"].iloc[0] == "weak"
    column, name = ("weak_efficiency", "weak-scaling efficiency") if weak else ("parallel_efficiency", "efficiency")
    speed_column = "scaled_speedup" if weak else "speedup"
    parts = []
    for variant, rows in ok.groupby("variant"):
        rows = rows.sort_values("ranks")
        prefix = f"{variant}: " if table["variant"].nunique() > 1 else ""
        if len(rows) == 1:
            parts.append(f"{prefix}only p = {int(rows['ranks'].iloc[0])} succeeded, nothing to scale against")
            continue
        reach = threshold_words(rows, column, name, threshold)
        top = rows.iloc[-1]
        parts.append(
            f"{prefix}{'weak' if weak else 'strong'} scaling of {label}{':' if reach.startswith(UNDECIDED) else ''}"
            f" {reach}; at {scale_text(top)} "
            f"{'scaled ' if weak else ''}speedup {with_ci(top, speed_column)}, {name} {with_ci(top, column)}"
            f" (n = {int(top['n'])})"
        )
    contended = int(pd.to_numeric(ok.get("n_contended", pd.Series(dtype=float)), errors="coerce").fillna(0).sum())
    rests = f" (on {contended} contended runs of {int(ok['n'].sum())}: see the notes)" if contended else ""
    return "; ".join(parts) + rests + "."


def threshold_words(rows: pd.DataFrame, column: str, name: str, threshold: float) -> str:
    """How far one curve (its successful scales, ascending) holds the threshold, judged by each
    scale's CI: 'holds ≥ 70% efficiency up to X', then the first scale that cannot be told
    ('cannot tell with n = 2 at Y: efficiency 0.70 [0.41–1.18]; raise repeats') and the first
    wholly below it ('below 70% at Z'), each where there is one."""
    later = rows.iloc[1:]
    verdicts = [judge(*(interval(row, column) or (math.nan, math.nan)), threshold) for _, row in later.iterrows()]
    held = 0
    while held < len(verdicts) and verdicts[held] == HOLDS:
        held += 1
    words = []
    if held:
        words.append(f"{HOLDS} ≥ {threshold:.0%} {name} up to {scale_text(later.iloc[held - 1])}")
    below = next((k for k in range(held, len(verdicts)) if verdicts[k] == BELOW), None)
    if held < len(verdicts) and verdicts[held] != BELOW:
        words.append(undecided_words(rows.iloc[0], later.iloc[held], column, name, threshold))
    if below is not None:
        already = "already " if held == 0 and below == 0 else ""
        words.append(f"falls {BELOW} {threshold:.0%} {name} {already}at {scale_text(later.iloc[below])}")
    return ", ".join(words[:1]) + "".join(f"; {w}" for w in words[1:])


def undecided_words(base, row, column: str, name: str, threshold: float) -> str:
    """'cannot tell with n = 2 whether it holds ≥ 70% efficiency at 1 node (p = 2): efficiency
    0.702 [0.41–1.18] (95% CI); raise repeats'."""
    n0, n = int(base["n"]), int(row["n"])
    counts = f"n = {n}" if n == n0 else f"n = {n0} at p0 and {n} here"
    found, value = interval(row, column), fmt(get(row, column))
    if found is not None:
        figure = f"{value} [{fmt(found[0])}–{fmt(found[1])}] ({CONFIDENCE:.0%} CI)"
    else:
        figure = f"{value} (no {CONFIDENCE:.0%} CI: {ratio_note(row) or 'none in this table'})"
    return (
        f"{UNDECIDED} with {counts} whether it {HOLDS} ≥ {threshold:.0%} {name} at {scale_text(row)}:"
        f" {name} {figure}; raise repeats"
    )


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
    if ratio_note(row) and not is_baseline(row):
        notes.append(f"no CI of speedup: {ratio_note(row)}")
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
            (f"scaled speedup [{CONFIDENCE:.0%} CI]", lambda r: with_ci(r, "scaled_speedup")),
            (f"weak efficiency [{CONFIDENCE:.0%} CI]", lambda r: with_ci(r, "weak_efficiency")),
        ]
    else:
        columns += [
            (f"speedup S [{CONFIDENCE:.0%} CI]", lambda r: with_ci(r, "speedup")),
            (f"parallel efficiency S·p0/p [{CONFIDENCE:.0%} CI]", lambda r: with_ci(r, "parallel_efficiency")),
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
        Para(f"Fraction: {breakdown.DEFINITIONS['fraction']}. Grows fastest: {breakdown.DEFINITIONS['grows_fastest']}.")
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
