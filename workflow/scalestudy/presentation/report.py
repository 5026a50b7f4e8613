"""The report's content, as the blocks of one page (scalestudy.presentation.page writes it and its
Markdown twin). First an overview (one row per study, linking to its section); then per
study: a one-sentence summary, a table in the shape HPC teams publish (scaling_section),
variant verdicts (variants_section), cost, plots, failures and per-run provenance
(runs_section: inline for a small study; always in a side file, one JSON line per run, that
the page links to); the definitions last (glossary). A study whose every run failed for one
reason is one short section: the reason and how to fix it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from ..analysis.breakdown import part_of
from ..analysis.records import STATUS_PENDING, read_table
from ..analysis.scaling import apps_of
from ..analysis.statistics import MEAN
from ..bookkeeping.retry import RETRY_FAILED
from ..model.paths import PLOT_KINDS
from ..model.steplog import step_log
from .glossary import DEFINITIONS
from .ladder_section import ladder_blocks, read_ladder
from .page import Bullets, Details, Heading, Image, Link, Para, Table, scale_text, write_page
from .plots import NO_SIZE_CURVE, missing_plots, primary_table
from .runs_section import contended_line, provenance_link_blocks, remeasured_runs, run_blocks, write_provenance
from .scaling_models_page import model_blocks
from .scaling_section import (
    amdahl_lines,
    breakdown_blocks,
    cost_lines,
    estimator_name,
    hpc_table,
    mean_ci,
    memory_blocks,
    summary_sentence,
    with_ci,
)
from .variants_section import choice, size_blocks, variant_blocks


def study_blocks(
    study: str,
    runs: pd.DataFrame,
    scaling: pd.DataFrame,
    variants: pd.DataFrame,
    plots: Sequence[Path],
    budget_su: float | None = None,
    provenance_link: str | None = None,
    ladder: Mapping | None = None,
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
        blocks += ladder_blocks(ladder or {})
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
    fixes = fixes or [f"Fix what the reason names, then rerun the failed points with `{RETRY_FAILED}`."]
    every = "Its one run failed: " if len(runs) == 1 else f"All {len(runs)} runs failed for one reason: "
    return [
        Heading(2, study),
        Para(f"{every}{reason}" + (f" ({category})." if category else "."), "summary"),
        Para("How to fix: " + " ".join(fixes)),
    ]


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
    return [figure, f"{with_ci(top, column)} ({name})"]


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
    ladders: Mapping[str, Mapping] | None = None,
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
            (ladders or {}).get(study),
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
    ladder_json: list[str] | None = None,
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
        # A laddered study's ladder.json lies in its own folder (model.paths.Layout.ladder_file).
        ladders = {Path(path).parent.name: read_ladder(path) for path in ladder_json or []}
        build(runs, scaling, variants, plots, Path(out_html), Path(out_md) if out_md else None, budgets, sides, ladders)
        total = sum(len(table) for table in runs.values())
        note(f"{out_html}: {len(studies)} studies, {total} runs")
