"""One self-contained HTML page for every study (plots embedded, no external files)."""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from .analysis import DEFINITIONS, read_table
from .apps import APPS
from .sweep import PLOT_KINDS

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:0.9em;margin:0.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0}
.failed{color:#b00}
.defs{background:#f7f7f7;padding:0.5em 1em;font-size:0.9em}
img{max-width:32%;margin:2px;border:1px solid #ddd}
"""


def fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    return html.escape(str(value))


def mean_cell(row) -> str:
    if row["n"] == 0:
        return '<span class="failed">no successful run</span>'
    spread = f" ± {fmt(row['std'])}" if pd.notna(row["std"]) else ""
    return f"{fmt(row['mean'])}{spread} (n={int(row['n'])})"


def scaling_table(table: pd.DataFrame) -> str:
    weak = (table["scaling"] == "weak").any()
    headers = ["variant", "nodes", "ranks/node", "p (ranks)", "mean ± std (n)", "failed runs"]
    headers += (
        ["scaled speedup", "weak efficiency"]
        if weak
        else ["speedup S(p)", "parallel efficiency S·p0/p", "Karp–Flatt e(p)"]
    )
    lines = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in headers) + "</tr>"]
    for _, row in table.iterrows():
        cells = [
            html.escape(str(row["variant"])),
            fmt(row["nodes"]),
            fmt(row["ranks_per_node"]),
            fmt(row["ranks"]),
            mean_cell(row),
            fmt(row["n_failed"]),
        ]
        if weak:
            cells += [fmt(row.get("scaled_speedup")), fmt(row.get("weak_efficiency"))]
        else:
            cells += [
                fmt(row.get("speedup")),
                fmt(row.get("parallel_efficiency")),
                fmt(row.get("karp_flatt_serial_fraction")),
            ]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(lines + ["</table>"])


def summary_sentence(study: str, table: pd.DataFrame) -> str:
    ok = table[table["n"] > 0]
    if ok.empty:
        return f"{study}: no successful run, so no scaling figure."
    label, kind = table["metric_label"].iloc[0], table["scaling"].iloc[0]
    column = "weak_efficiency" if kind == "weak" else "parallel_efficiency"
    parts = []
    for variant, rows in ok.groupby("variant"):
        top = rows.sort_values("ranks").iloc[-1]
        p0 = int(top["p0"])
        if top["ranks"] == p0:
            parts.append(f"{variant}: only p = {p0} succeeded")
            continue
        speed = top["scaled_speedup"] if kind == "weak" else top["speedup"]
        parts.append(
            f"{variant}: {'scaled ' if kind == 'weak' else ''}speedup {speed:.2f} at p = {int(top['ranks'])} "
            f"vs p0 = {p0}, efficiency {top[column]:.2f}"
        )
    return f"{kind} scaling of {label}: " + "; ".join(parts) + "."


def runs_table(runs: pd.DataFrame, metrics: list[str]) -> str:
    columns = (
        ["point", "status", "reason"]
        + [m for m in metrics if m in runs.columns]
        + [c for c in ("walltime_used_s", "service_units") if c in runs.columns]
    )
    frame = runs[[c for c in columns if c in runs.columns]].copy()
    return frame.to_html(index=False, na_rep="–", float_format=lambda v: f"{v:.4g}", border=0)


def image_tag(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img alt="{html.escape(Path(path).name)}" src="data:image/png;base64,{data}">'


def build(
    runs: Mapping[str, pd.DataFrame], scaling: Mapping[str, pd.DataFrame], plots: Mapping[str, list[Path]], out: Path
) -> None:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>scalestudy report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>scalestudy report</h1>",
        f"<p>Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC}.</p>",
        "<div class='defs'><b>Definitions.</b> p = total MPI ranks; p0 = smallest p with a successful run.<ul>",
        *[f"<li><b>{html.escape(k.replace('_', ' '))}</b>: {html.escape(v)}</li>" for k, v in DEFINITIONS.items()],
        "<li>Some published tables divide speedup by total cores (S/cores) and call it efficiency; "
        "that is not parallel efficiency and is not used here.</li>",
        "<li>mean ± std over the successful repeats at a scale; n = how many.</li></ul></div>",
    ]
    for study in runs:
        study_runs, study_scaling = runs[study], scaling.get(study, pd.DataFrame())
        parts.append(f"<h2 id='{html.escape(study)}'>{html.escape(study)}</h2>")
        n_ok = int((study_runs.get("status") == "ok").sum()) if not study_runs.empty else 0
        parts.append(f"<p>{n_ok} of {len(study_runs)} runs succeeded.</p>")
        if study_scaling.empty:
            parts.append("<p class='failed'>No successful run: no scaling table.</p>")
            metric_names: list[str] = []
        else:
            app = APPS[study_scaling["app"].iloc[0]]
            metric_names = [m.name for m in app.metrics]
            for metric in app.metrics:
                table = study_scaling[study_scaling["metric"] == metric.name]
                if table.empty:
                    continue
                if metric.name == app.primary_metric:
                    parts.append(f"<p><b>{html.escape(summary_sentence(study, table))}</b></p>")
                parts.append(f"<h3>{html.escape(metric.label)} [{html.escape(metric.unit)}]</h3>")
                parts.append(scaling_table(table))
        parts += [image_tag(p) for p in plots.get(study, []) if Path(p).is_file()]
        failed = study_runs[study_runs["status"] != "ok"] if not study_runs.empty else study_runs
        if not failed.empty:
            parts.append(f"<h3 class='failed'>Failed runs ({len(failed)})</h3><ul>")
            parts += [
                f"<li><code>{html.escape(str(r.point))}</code>: {html.escape(str(r.reason))}</li>"
                for r in failed.itertuples()
            ]
            parts.append("</ul>")
        parts.append("<details><summary>All runs</summary>")
        parts.append(runs_table(study_runs, metric_names) if not study_runs.empty else "")
        parts.append("</details>")
    parts.append("</body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts), encoding="utf-8")


def build_from_files(
    studies: list[str], runs_csv: list[str], scaling_csv: list[str], plot_pngs: list[str], out: str | Path
) -> None:
    """The report rule's entry: files in, one page out (inputs are ordered as `studies`)."""
    runs = dict(zip(studies, map(read_table, runs_csv), strict=True))
    scaling = dict(zip(studies, map(read_table, scaling_csv), strict=True))
    plots = {
        study: [Path(p) for p in plot_pngs if Path(p).name in {f"{study}.{kind}.png" for kind in PLOT_KINDS}]
        for study in studies
    }
    build(runs, scaling, plots, Path(out))
