"""A published record's page: the published view beside what the rate says (the table and
the notes of scalestudy.presentation.published), then the record as a study section of the report
(report.study_blocks, the same code as a study run here) and its plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..model.paths import PLOT_KINDS
from ..model.units import MEMORY_UNIT
from .page import Bullets, Heading, Para, Table, duration, fmt, write_page
from .plots import plot_study
from .published import WALL, comparison, rate_of, read_record, record_scaling, why_they_disagree
from .report import definition_blocks, study_blocks


def comparison_table(compared: pd.DataFrame) -> Table:
    def cell(value, digits=3):
        return fmt(value, digits)

    headers = ["nodes", "cores", f"memory used [{MEMORY_UNIT}]", "walltime used (hh:mm:ss)", "steps/s (n=1)",
               "published: wall-time speedup", "published: 'efficiency' = S/cores",
               "steps/s speedup S", "parallel efficiency S·p0/p", "warm-up / benchmark steps",
               "time-stepping share of wall time (steps ÷ steps/s ÷ walltime; > 100%: impossible)"]  # fmt: skip
    rows, rate = [], rate_of(compared)
    for _, r in compared.iterrows():
        steps = f"{int(r['warmup_steps']):,} / {int(r['benchmark_steps']):,}" if "warmup_steps" in r else "–"
        share = "–"
        if "stepping_share" in r:
            share = f"{r['stepping_share']:.0%}" + ("" if r["consistent"] else " (impossible)")
        rows.append(
            [
                cell(r["nodes"]),
                cell(r["cores"]),
                cell(r.get("memory_used_gb"), 4),
                duration(r[WALL]),
                cell(r[rate]),
                f"{r['walltime_speedup']:.2f}",
                f"{r['walltime_speedup_per_core']:.3f}",
                f"{r['rate_speedup']:.2f}",
                f"{r['rate_parallel_efficiency']:.3f}",
                steps,
                share,
            ]
        )
    return Table(headers, rows)


def write_record_page(record_path: str | Path, out_dir: str | Path, study: str | None = None) -> Path:
    """The record as a report page (index.html + index.md + plots) in `out_dir`."""
    out_dir = Path(out_dir)
    runs = read_record(record_path, study)
    study = runs["study"].iloc[0]
    table = record_scaling(runs)
    plots = {kind: out_dir / "plots" / f"{study}.{kind}.png" for kind in PLOT_KINDS}
    plot_study(table, pd.DataFrame(), study, plots)
    compared = comparison(runs, table)
    blocks = [
        Heading(2, f"{study}: the published table, regenerated"),
        Para(f"From the record {Path(record_path).name}, through the same analysis and report code as a study."),
        comparison_table(compared),
        Bullets(why_they_disagree(compared)),
        *study_blocks(study, runs, table, pd.DataFrame(), list(plots.values())),
        *definition_blocks(),
    ]
    out_html = out_dir / "index.html"
    write_page(blocks, f"scalestudy: published record {study}", out_html, out_dir / "index.md")
    return out_html
