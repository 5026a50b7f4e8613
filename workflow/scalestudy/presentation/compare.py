"""Two runs of the same studies, compared: did it get slower, and where?

    python -m scalestudy compare BASELINE CANDIDATE --out DIR [--fail-slower 5%] [--study NAME]

BASELINE and CANDIDATE are results directories (each study's runs.csv, and its scaling.csv
where the analysis wrote one) or, for the baseline, a published record (scalestudy.presentation.published:
a team checks its cluster against a paper's table; `--study` names the study it stands for).

For every study, curve (MPI flag set, NCCL env set, parameter axes) and scale present in both,
and every figure: the speed ratio candidate / baseline (> 1: the candidate is faster; the
figure's direction is its kind's, scalestudy.model.metrics) with its 95% CI and verdict, by the
same code as the MPI flag-set verdicts (analysis.verdicts.speed_ratio). Then what changed in the shape
of each curve (parallel efficiency per scale, the Amdahl serial fraction), the points only one
side has, and what differs in the runs' provenance (modules, MPI and NCCL versions, hosts,
package versions and hash), since that is usually the cause. What is compared is found in
scalestudy.presentation.comparison; this module writes the page and is the command's and the
compare rule's entry.

`--fail-slower 5%`: exit 1 when the primary figure of any point is slower with the whole CI
below 1 - 5% (the candidate at most 95% as fast as the baseline, with 95% confidence).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ..analysis.breakdown import part_of, whole_name
from ..analysis.records import write_table
from ..analysis.scaling import curve_name
from ..analysis.statistics import CONFIDENCE, MEAN
from ..model.paths import compare_outputs
from ..model.point import AXIS_PREFIX
from ..model.steplog import step_log
from .comparison import (
    BASELINE,
    BOTH,
    CANDIDATE,
    CompareError,
    Side,
    curve_changes,
    load_side,
    point_keys,
    points,
    provenance_changes,
    slower_beyond,
    studies_of,
)
from .glossary import DEFINITIONS
from .page import Bullets, Heading, Image, Para, Table, fmt, missing, scale_text, write_page
from .plots import message_plot, plot_ratios
from .scaling_models_page import model_change_blocks

VERDICTS_HEADING = Heading(2, "Verdicts of the primary figures")
RATIO_DEFINITION = (
    "candidate / baseline at the same study, curve, scale and figure (> 1: the candidate is faster), 95% CI "
    "(Welch t on the log ratio, as the MPI flag-set verdicts); a verdict only when the CI excludes 1"
)


# ---------------------------------------------------------------- the page


def ratio_text(row: Mapping) -> str:
    ratio = row["ratio"]
    if missing(ratio):
        return "–"
    times = f"{ratio:.3g}× as fast" if ratio >= 1 else f"{1 / ratio:.3g}× as slow"
    return f"{fmt(ratio)} ({times})"


def stat_text(row: Mapping, side: str) -> str:
    mean, n = row.get(f"mean_{side}"), row.get(f"n_{side}")
    if missing(n) or missing(mean) or int(n) == 0:
        return "no successful run" if not missing(n) else "–"
    ci = row.get(f"ci95_{side}")
    trimmed = (
        " trimmed"
        if row.get(f"estimator_{side}") not in (None, MEAN) and not missing(row.get(f"estimator_{side}"))
        else ""
    )
    return f"{fmt(mean)}" + ("" if missing(ci) else f" ± {fmt(ci, 2)}") + f" (n={int(n)}{trimmed})"


def point_name(row: Mapping) -> str:
    return f"{curve_name(row)} at {scale_text({'nodes': float(row['nodes']), 'ranks': float(row['ranks'])})}"


def verdict_line(row: Mapping) -> str:
    """E.g. 'pp mpi-fabric/nccl-default at 1 node (p = 2): latency slower: speed ratio 0.0123 ...'."""
    if row["verdict"] in ("faster", "slower"):
        return (
            f"{point_name(row)}: {row['metric_label']} {row['verdict']}: speed ratio {ratio_text(row)}, 95% CI "
            f"{fmt(row['ci_low'])}–{fmt(row['ci_high'])}; {stat_text(row, BASELINE)} → {stat_text(row, CANDIDATE)} "
            f"{row['unit']}."
        )
    return f"{point_name(row)}: {row['metric_label']}: {row['verdict']}."


def part_change_blocks(shared: pd.DataFrame) -> list:
    """Which part of a run's time changed (scalestudy.analysis.breakdown): per point both sides measured,
    each part whose time differs measurably (the speed ratio's 95% CI excludes 1), with its share
    of the whole on each side. Nothing when no figure compared is a part."""
    if shared.empty:
        return []
    declared = shared["metric"].map(part_of)
    rows = shared[declared.notna()].assign(declared=declared[declared.notna()])
    if rows.empty:
        return []
    lines = []
    at_point = [c for c in point_keys(rows, rows) if c != "metric"]
    for _, point in rows.groupby(at_point, dropna=False, sort=False):
        stacked = point[~point["declared"].map(lambda m: m.beside)]
        totals = {side: pd.to_numeric(stacked[f"mean_{side}"], errors="coerce").sum() for side in (BASELINE, CANDIDATE)}
        for row in point[point["verdict"].isin(["faster", "slower"])].to_dict("records"):
            shares = " → ".join(
                f"{row[f'mean_{side}'] / totals[side]:.0%}" if totals[side] > 0 else "–"
                for side in (BASELINE, CANDIDATE)
            )
            lines.append(
                f"{point_name(row)}: {row['declared'].part} {row['verdict']} ({ratio_text(row)}): "
                f"{stat_text(row, BASELINE)} → {stat_text(row, CANDIDATE)} {row['unit']}; share of the "
                f"{whole_name(row['declared'].whole)} {shares}."
            )
    blocks: list = [Heading(2, "Which part of the time changed")]
    if lines:
        return blocks + [Bullets(lines)]
    return blocks + [Para("No part of a run's time differs measurably at any point (every 95% CI includes 1).")]


def points_table(rows: pd.DataFrame) -> Table:
    headers = ["point", "figure", "direction", "baseline mean ± 95% CI (n)", "candidate mean ± 95% CI (n)",
               "speed ratio candidate/baseline (> 1 faster)", "95% CI", "verdict"]  # fmt: skip
    body = []
    for r in rows.to_dict("records"):
        ci = "–" if missing(r["ci_low"]) else f"{fmt(r['ci_low'])} – {fmt(r['ci_high'])}"
        figure = f"{r['metric_label']} [{r['unit']}]" + (" (primary)" if r["primary"] else "")
        body.append([point_name(r), figure, r["direction"], stat_text(r, BASELINE), stat_text(r, CANDIDATE),
                     ratio_text(r), ci, str(r["verdict"])])  # fmt: skip
    return Table(headers, body)


def estimator_note(table: pd.DataFrame) -> str | None:
    """Which figures are trimmed means, and a warning where the two sides used different estimators."""
    sides = [f"estimator_{side}" for side in (BASELINE, CANDIDATE)]
    if not set(sides) <= set(table.columns):
        return None
    estimators = table[sides].fillna(MEAN).astype(str)
    if (estimators == MEAN).all().all():
        return None
    note = f"Figures marked 'trimmed' are trimmed means: {DEFINITIONS['trimmed mean']}."
    differ = table.loc[estimators[sides[0]] != estimators[sides[1]], "study"].unique()
    if len(differ):
        note += (f" The two sides summarize their repeats differently in {', '.join(map(str, differ))} "
                 "(estimator: in the sweep): their ratios compare a mean with a trimmed mean.")  # fmt: skip
    return note


def blocks_of(base: Side, cand: Side, table: pd.DataFrame, threshold: float | None) -> list:
    blocks: list = [
        Para(f"Baseline: the {base.what} {base.source}. Candidate: the {cand.what} {cand.source}."),
    ]
    if table.empty:
        blocks.append(Para("Nothing to compare: one side has no scaling table (no successful run)."))
        return blocks
    shared = table[table["present"] == BOTH]
    primary = shared[shared["primary"]]
    counts = primary["verdict"].value_counts()
    summary = ", ".join(f"{int(n)} {verdict}" for verdict, n in counts.items())
    blocks.append(Para(f"Primary figures at {len(primary)} points present in both: {summary or 'none'}.", "summary"))
    if threshold is not None:
        failing = slower_beyond(table, threshold)
        blocks.append(
            Para(
                f"--fail-slower {threshold:.0%}: {len(failing)} point(s) slower with the whole 95% CI below "
                f"{1 - threshold:.3g}" + (" (exit status 1)." if len(failing) else ".")
            )
        )
    note = estimator_note(table)
    if note:
        blocks.append(Para(note))
    blocks += [VERDICTS_HEADING, Bullets([verdict_line(r) for r in primary.to_dict("records")])]
    blocks += part_change_blocks(shared)
    blocks += [Heading(2, "Every figure"), points_table(shared)]
    rows, amdahl = curve_changes(table)
    blocks.append(Heading(2, "Whole curves"))
    if rows:
        sides = [f"{side} [{CONFIDENCE:.0%} CI]" for side in ("baseline", "candidate")]
        blocks.append(Table(["curve", "nodes", "figure", *sides, "change"], rows))
        blocks.append(
            Para(
                f"Each side against its own smallest scale p0: {DEFINITIONS['parallel_efficiency']}; its CI:"
                f" {DEFINITIONS['speedup and efficiency CI']}."
            )
        )
    else:
        blocks.append(Para("No curve has two scales on both sides: no efficiency to compare."))
    blocks += [Bullets(amdahl)] if amdahl else []
    blocks += model_change_blocks(base.scaling, cand.scaling)
    alone = table[table["present"] != BOTH]
    blocks.append(Heading(2, f"Points only one side has ({len(alone[alone['primary']])})"))
    if alone.empty:
        blocks.append(Para("None: both sides measured the same points."))
    else:
        blocks.append(Bullets([f"{point_name(r)}: {r['present']}" for r in alone[alone["primary"]].to_dict("records")]))
    ignored = sorted({c for side in (base.scaling, cand.scaling) for c in side.columns if c.startswith(AXIS_PREFIX)}
                     - {c for c in table.columns if c.startswith(AXIS_PREFIX)})  # fmt: skip
    if ignored:
        blocks.append(Para(f"Parameter columns only one side has, not used to match points: {', '.join(ignored)}."))
    changes = provenance_changes(base, cand, sorted(set(shared["study"])))
    blocks.append(Heading(2, "What differs in the runs' provenance"))
    if changes:
        blocks.append(Table(["study", "what", "baseline", "candidate"], changes))
    else:
        blocks.append(Para("Nothing: the same modules, MPI, NCCL, hosts, package versions and package hash."))
    blocks += [
        Heading(2, "Definitions"),
        Bullets(
            [
                f"speed ratio: {RATIO_DEFINITION}",
                "direction: a rate is better higher, a time lower (the figure's declared kind).",
                f"mean ± CI (n): {DEFINITIONS['mean ± CI (n)']}.",
            ]
        ),
    ]
    return blocks


# ---------------------------------------------------------------- entries


def compare(
    baseline: str | Path,
    candidate: str | Path,
    out_dir: str | Path,
    threshold: float | None = None,
    study: str | None = None,
    candidate_studies: Iterable[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write index.html, index.md and compare.csv to `out_dir`; return (every point, the primary
    figures slower beyond `threshold`)."""
    base, cand = load_side(baseline, study), load_side(candidate, study)
    if candidate_studies is not None:
        wanted = set(candidate_studies)
        cand.runs = cand.runs[cand.runs["study"].isin(wanted)] if not cand.runs.empty else cand.runs
        cand.scaling = cand.scaling[cand.scaling["study"].isin(wanted)] if not cand.scaling.empty else cand.scaling
    if not studies_of(base) & studies_of(cand):
        raise CompareError(
            f"no study in common: the baseline has {', '.join(sorted(studies_of(base))) or 'none'}, the candidate "
            f"{', '.join(sorted(studies_of(cand))) or 'none'}; compare results of the same studies (a published "
            "record stands for the study --study names, else the one its file is named after)"
        )
    table = points(base.scaling, cand.scaling)
    outputs = compare_outputs(out_dir)
    write_table(table, outputs["csv"])
    blocks = blocks_of(base, cand, table, threshold)
    plot = Path(outputs["plot"])
    if plot_ratios(table, plot, f"speed ratio {RATIO_DEFINITION}"):
        blocks.insert(blocks.index(VERDICTS_HEADING) + 2, [Image(plot, plot.name)])
    else:
        # The rule's output, and no empty box on the page: the file says why.
        message_plot(plot, "No point has a speed ratio (no successful run on one side, or one run only).")
    write_page(blocks, "scalestudy: baseline against candidate", Path(outputs["html"]), Path(outputs["markdown"]))
    failing = slower_beyond(table, threshold) if threshold is not None else table.iloc[0:0]
    return table, failing


def compare_from_files(baseline: str, results: str, studies: list[str], out_dir: str, log=None) -> None:
    """The compare rule's entry: this results directory's studies against `baseline`."""
    with step_log(log) as note:
        table, _ = compare(baseline, results, out_dir, candidate_studies=studies)
        for line in summary_lines(table):
            note(line)


def summary_lines(table: pd.DataFrame) -> list[str]:
    """The verdict of every primary figure present in both, one line each."""
    if table.empty:
        return ["nothing to compare"]
    shared = table[(table["present"] == BOTH) & table["primary"]]
    return [verdict_line(r) for r in shared.to_dict("records")]
