"""A study's runs on a page: failures (with category and reason), points not run yet, points
measured again, points that shared a batch job, the settings proof, the contended runs; and
every run's provenance: on the page for a small study, and always in the side file one JSON
line per run (`write_provenance`) that the page links to."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..analysis.records import STATUS_PENDING, contended_mask
from ..analysis.verdicts import MEASURE_AGAIN
from ..model.contention import OLDER_RULE
from .page import Bullets, Details, Heading, Link, Para, Pre, Table, missing
from .scaling_section import truthy

# Up to this much a study's provenance is also on the page (each run's is about 1 KB, plus
# 0.7 KB per rank: 10,000 runs made a page of tens of MB); the side file always has it.
INLINE_PROVENANCE_BYTES = 1_000_000
# What a run's provenance record holds, on the page and in the side file.
PROVENANCE_KEYS = ("point", "status", "reason", "params", "mpi_flags", "nccl_env", "provenance", "started", "finished")
# Up to this many failed runs are listed one by one; more are grouped by category and reason.
INLINE_FAILURES = 50


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
            str(r.get("mpi_flag_set") or "–"),
            str(r.get("mpi_library") or "–"),
            str(r.get("modules") or "–"),
            placement_text(r),
            "yes" if truthy(r.get("settings_verified")) else "no",
            str(r.get("bindings") or "–"),
        ]
        for r in proven.to_dict("records")
    ]
    title = f"Settings proof, the MPI each rank ran on and the CPUs it could run on ({len(rows)} runs)"
    # Like the per-run provenance: for the page, not for a paper. The library is the ranks' own
    # word (MPI_Get_library_version), beside the flag set it was asked to apply.
    headers = ["point", "MPI flag set", "MPI library (ranks)", "modules", "placement asked", "proven", "rank@host:CPUs"]
    table = Table(headers, rows)
    blocks.append(Details(title, [table], in_markdown=False))
    return blocks


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
    empty = pd.Series(float("nan"), index=marked.index)
    waited = pd.to_numeric(marked.get("ranks_wait_share", empty), errors="coerce")
    share = pd.to_numeric(marked.get("other_cpu_share", empty), errors="coerce")[waited.isna()]
    figures = []
    if waited.notna().any():
        figures.append(f"they waited for a CPU {waited.min():.0%}–{waited.max():.0%} of their run")
    if share.notna().any():
        # Records written before the run-queue figures: judged by the older rule, and said so.
        figures.append(f"their share of the CPUs {share.min():.0%}–{share.max():.0%}, by {OLDER_RULE}")
    # The hosts of multi-node runs whose CPUs others shared (analysis: contended_hosts), by name.
    named = marked.get("contended_hosts", pd.Series(dtype=object)).dropna().astype(str)
    slow = pd.Series([h for cell in named for h in cell.split(", ") if h]).value_counts()
    figures += [f"host {host}'s CPUs shared in {count} of them" for host, count in sorted(slow.items())]
    return (
        f"{len(marked)} of the {len(ok)} successful runs were contended: other processes held the CPUs their ranks "
        f"needed ({'; '.join(figures)}). The tables mark figures that rest on them and no verdict rests on them; to "
        f"measure them again, {MEASURE_AGAIN}."
    )


def provenance_link_blocks(runs: pd.DataFrame, link: str | None) -> list:
    if not link:
        return []
    return [Para(f"Per-run provenance ({len(runs)} runs, one JSON line each):", link=Link(link, link))]


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
