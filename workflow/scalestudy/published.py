"""Regenerate a published scaling table from its record, through the same analysis
and report code as a study run here, and say where its figures and ours differ.

A record is a CSV (lines starting with '#' are notes) with one row per run:
nodes, cores_per_node, steps_per_s, walltime_used (as PBS prints it: hh:mm:ss, or mm:ss
for short jobs; read by scalestudy.model.timefmt, so '0:55' is 55 s), and optional
memory_used_gb, warmup_steps, benchmark_steps. Published HPC tables often give a
"speedup" from the whole job's wall time and an "efficiency" that is that speedup
divided by total cores; the benchmark's own rate tells a different story when the
job's wall time is mostly start-up, or when the work per run changes with scale.

A record is checked against itself first: a job cannot time-step for longer than it ran,
so (warm-up + benchmark steps) / steps/s must not exceed the walltime used. Where it
does, the steps/s and walltime columns cannot come from the same runs, and the page says
so instead of explaining the gap between them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .analysis import scaling
from .apps import APPS
from .model.metrics import WALLTIME_USED, metric
from .model.paths import PLOT_KINDS
from .model.timefmt import hms_seconds
from .plots import plot_study
from .report import Bullets, Heading, Para, Table, definition_blocks, duration, fmt, study_blocks
from .report import write_page as write_report_page

APP = "hoomd"
# The figure as the app declares it (a per-step rate: weak efficiency compares it as is).
STEPS_PER_S = metric(APPS[APP].primary_metric)
# The figures' columns (in the runs and in the comparison), by their declared names.
RATE, WALL = STEPS_PER_S.name, WALLTIME_USED.name


def read_record(path: str | Path, study: str | None = None) -> pd.DataFrame:
    """The record as runs.csv rows (one successful run per line)."""
    record = pd.read_csv(path, comment="#")
    study = study or Path(path).stem
    runs = pd.DataFrame(
        {
            "study": study,
            "app": APP,
            "scaling": "strong",
            "point": [f"nodes{n}" for n in record["nodes"]],
            "variant": "mpi-default/nccl-default",
            "mpi_flag_set": "default",
            "nccl_env_set": "default",
            "nodes": record["nodes"],
            "ranks_per_node": record["cores_per_node"],
            "gpus_per_node": 0,
            "ranks": record["nodes"] * record["cores_per_node"],
            "repeat": 1,
            "status": "ok",
            "reason": "",
            RATE: record["steps_per_s"].astype(float),
            WALL: record["walltime_used"].map(hms_seconds).astype(float),
            "cores_allocated": record["nodes"] * record["cores_per_node"],
            "gpus_allocated": 0,
        }
    )
    for column in ("memory_used_gb", "warmup_steps", "benchmark_steps"):
        if column in record.columns:
            runs[column] = record[column]
    return runs


def record_scaling(runs: pd.DataFrame) -> pd.DataFrame:
    return scaling(runs, metrics={APP: [STEPS_PER_S, WALLTIME_USED]}, primary={APP: RATE})


def comparison(runs: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """One row per node count: the published view (wall-time speedup, S/cores) beside what
    the rate says (speedup, parallel efficiency), and how much of the job was time-stepping."""
    wall = table[table["metric"] == WALL].set_index("nodes")
    rate = table[table["metric"] == RATE].set_index("nodes")
    out = pd.DataFrame(
        {
            "nodes": rate.index,
            "cores": rate["cores_allocated"].to_numpy(),
            RATE: rate["mean"].to_numpy(),
            WALL: wall["mean"].reindex(rate.index).to_numpy(),
            "walltime_speedup": wall["speedup"].reindex(rate.index).to_numpy(),
            "walltime_speedup_per_core": wall["speedup_per_core"].reindex(rate.index).to_numpy(),
            "rate_speedup": rate["speedup"].to_numpy(),
            "rate_parallel_efficiency": rate["parallel_efficiency"].to_numpy(),
        }
    )
    by_nodes = runs.set_index("nodes")
    if {"warmup_steps", "benchmark_steps"} <= set(runs.columns):
        steps = (by_nodes["warmup_steps"] + by_nodes["benchmark_steps"]).reindex(out["nodes"]).to_numpy()
        out["warmup_steps"] = by_nodes["warmup_steps"].reindex(out["nodes"]).to_numpy()
        out["benchmark_steps"] = by_nodes["benchmark_steps"].reindex(out["nodes"]).to_numpy()
        # Warm-up runs at about the measured rate; the rest of the job is start-up, set-up and I/O.
        out["stepping_s"] = steps / out[RATE]
        out["stepping_share"] = out["stepping_s"] / out[WALL]
        # A job cannot time-step for longer than it ran.
        out["consistent"] = out["stepping_s"] <= out[WALL]
    if "memory_used_gb" in runs.columns:
        out["memory_used_gb"] = by_nodes["memory_used_gb"].reindex(out["nodes"]).to_numpy()
    return out


def why_they_disagree(compared: pd.DataFrame) -> list[str]:
    """The reasons, in numbers, that the wall-time and rate views differ."""
    notes = []
    last = compared.iloc[-1]
    notes.append(
        f"At {int(last['nodes'])} nodes the wall time gives speedup {last['walltime_speedup']:.2f} "
        f"(S/cores {last['walltime_speedup_per_core']:.3f}), the benchmark's steps/s give "
        f"{last['rate_speedup']:.1f} (parallel efficiency {last['rate_parallel_efficiency']:.3f})."
    )
    if "stepping_share" in compared.columns:
        first = compared.iloc[0]
        impossible = compared[~compared["consistent"]]
        if not impossible.empty:
            # The columns disagree with each other: no explanation of the gap can rest on both.
            cases = "; ".join(
                f"{int(r['nodes'])} node(s): {int(r['warmup_steps'] + r['benchmark_steps']):,} steps at "
                f"{r[RATE]:,.0f} steps/s take {r['stepping_s']:.0f} s, more than the "
                f"{r[WALL]:.0f} s of walltime used"
                for _, r in impossible.iterrows()
            )
            notes.append(
                f"The record contradicts itself at {len(impossible)} of {len(compared)} scales ({cases}). "
                "A job cannot time-step for longer than it ran, so its steps/s and walltime columns cannot come "
                "from the same runs: the wall-time speedup says nothing about the steps/s one, and this page does "
                "not explain the gap between them."
            )
        else:
            notes.append(
                "The wall time is mostly not time-stepping: warm-up + benchmark steps at the measured rate take "
                f"{first['stepping_s']:.0f} s of {first[WALL]:.0f} s ({first['stepping_share']:.0%}) "
                f"at {int(first['nodes'])} node(s) and {last['stepping_s']:.0f} s of {last[WALL]:.0f} s"
                f" ({last['stepping_share']:.0%}) at {int(last['nodes'])}; the rest (start-up, initial state, I/O) "
                "does not shrink with nodes, so the wall-time speedup flattens."
            )
        work = compared[["warmup_steps", "benchmark_steps"]].drop_duplicates()
        if len(work) > 1:
            changes = [
                f"{int(r.warmup_steps):,}/{int(r.benchmark_steps):,} at {nodes_of(compared, r)}"
                for r in work.itertuples()
            ]
            notes.append(
                "The work per job is not constant (warm-up/benchmark steps: "
                + "; ".join(changes)
                + "), so wall times at different scales do not measure the same job: a wall-time "
                "speedup is not a strong-scaling speedup."
            )
    cores0 = int(compared["cores"].iloc[0])
    notes.append(
        f"S/cores divides by all cores ({cores0} at the base scale), so even a perfect code shows "
        f"1/{cores0} = {1 / cores0:.3f} there; parallel efficiency S·p0/p is 1.0 there by definition."
    )
    return notes


def nodes_of(compared: pd.DataFrame, work) -> str:
    nodes = compared[
        (compared["warmup_steps"] == work.warmup_steps) & (compared["benchmark_steps"] == work.benchmark_steps)
    ]["nodes"]
    return ", ".join(str(int(n)) for n in nodes) + " node(s)"


def comparison_table(compared: pd.DataFrame) -> Table:
    def cell(value, digits=3):
        return fmt(value, digits)

    headers = ["nodes", "cores", "memory used (GB)", "walltime used (hh:mm:ss)", "steps/s (n=1)",
               "published: wall-time speedup", "published: 'efficiency' = S/cores",
               "steps/s speedup S", "parallel efficiency S·p0/p", "warm-up / benchmark steps",
               "time-stepping share of wall time (steps ÷ steps/s ÷ walltime; > 100%: impossible)"]  # fmt: skip
    rows = []
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
                cell(r[RATE]),
                f"{r['walltime_speedup']:.2f}",
                f"{r['walltime_speedup_per_core']:.3f}",
                f"{r['rate_speedup']:.2f}",
                f"{r['rate_parallel_efficiency']:.3f}",
                steps,
                share,
            ]
        )
    return Table(headers, rows)


def write_page(record_path: str | Path, out_dir: str | Path, study: str | None = None) -> Path:
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
    write_report_page(blocks, f"scalestudy: published record {study}", out_html, out_dir / "index.md")
    return out_html
