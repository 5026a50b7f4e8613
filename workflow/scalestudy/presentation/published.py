"""A published scaling table's record, read as runs and scaled through the same analysis
as a study run here, and where its figures and ours differ (its page: published_page;
a comparison's baseline: compare).

A record is a CSV (lines starting with '#' are notes) with one row per run:
nodes, cores_per_node, the primary figure of an app that reads published records (an app's
App.published_record, found from its folder: HOOMD-blue's steps_per_s), walltime_used (as PBS
prints it: hh:mm:ss, or mm:ss for short jobs; read by scalestudy.model.timefmt, so '0:55' is 55 s), and optional
memory_used_gib (PBS's "Memory Used" as printed: 2^30 bytes; shown in GB of 10^9 bytes),
warmup_steps, benchmark_steps. Published HPC tables often give a
"speedup" from the whole job's wall time and an "efficiency" that is that speedup
divided by total cores; the benchmark's own rate tells a different story when the
job's wall time is mostly start-up, or when the work per run changes with scale.

A record is checked against itself first: a job cannot time-step for longer than it ran,
so (warm-up + benchmark steps) / steps/s must not exceed the walltime used. Where it
does, the steps/s and walltime columns cannot come from the same runs, and the notes say
so instead of explaining the gap between them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analysis.scaling import scaling
from ..apps.registry import APPS, App
from ..model.errors import SweepError
from ..model.metrics import WALLTIME_USED, metric
from ..model.timefmt import hms_seconds
from ..model.units import gib_in_gb

# The wall time's column (in the runs and in the comparison), by its declared name; the rate's is
# the record's app's primary figure (rate_of).
WALL = WALLTIME_USED.name


def reader_apps() -> list[App]:
    """The apps a published record may be of (App.published_record: HOOMD-blue's), as registered."""
    return [app for app in APPS.values() if app.published_record]


def record_columns() -> tuple[str, ...]:
    """The columns every record has (the optional ones are read where present): the figure column
    is one of the reader apps' primary figures (each a rate: weak efficiency compares it as is)."""
    return ("nodes", "cores_per_node", " or ".join(app.primary_metric for app in reader_apps()), "walltime_used")


def record_hint() -> str:
    return f"a published record is a CSV with the columns {', '.join(record_columns())}"


def rate_of(runs: pd.DataFrame) -> str:
    """The rate column of a record's runs (or their comparison's rows): its app's primary figure."""
    return next(app.primary_metric for app in reader_apps() if app.primary_metric in runs.columns)


class RecordError(SweepError):
    """A record that cannot be read as one: one line naming the file, what is wrong and what a record is."""

    def __init__(self, path: str | Path, problem: str):
        super().__init__([f"{path}: {problem}; {record_hint()}"])


def record_app(path: str | Path, columns) -> App:
    """The app whose primary figure is a column of the record (the first registered, if several)."""
    readers = reader_apps()
    if not readers:
        raise RecordError(path, "no app reads published records (none declares published_record)")
    found = [app for app in readers if app.primary_metric in columns]
    if not found:
        raise RecordError(path, f"no column {' or '.join(app.primary_metric for app in readers)}")
    return found[0]


def record_table(path: str | Path) -> pd.DataFrame:
    """The record's rows, checked: a file, CSV text, the columns, at least one run, numbers
    where numbers go and walltimes of the form H:M:S. Raises RecordError (one line)."""
    path = Path(path)
    if path.is_dir():
        raise RecordError(path, "is a directory, not a record")
    try:
        record = pd.read_csv(path, comment="#")
    except FileNotFoundError:
        raise RecordError(path, "no such file") from None
    except UnicodeDecodeError:
        raise RecordError(path, "is not text (binary?)") from None
    except pd.errors.EmptyDataError:
        raise RecordError(path, "is empty") from None
    except (pd.errors.ParserError, OSError) as error:
        raise RecordError(path, f"cannot be read as CSV ({str(error).strip().splitlines()[-1]})") from None
    figures = [app.primary_metric for app in reader_apps()]
    missing = [column for column in record_columns() if column not in record.columns]
    if any(figure in record.columns for figure in figures):
        missing = [column for column in missing if column != " or ".join(figures)]
    if missing:
        raise RecordError(path, f"no column {', '.join(missing)}")
    if record.empty:
        raise RecordError(path, "has a header but no runs")
    for column in ("nodes", "cores_per_node", record_app(path, record.columns).primary_metric):
        numbers = pd.to_numeric(record[column], errors="coerce")
        bad = record[column][numbers.isna() | (numbers <= 0)]
        if len(bad):
            row = int(bad.index[0]) + 1
            raise RecordError(path, f"run {row}: {column} {bad.iloc[0]!r} is not a positive number")
    for row, text in enumerate(record["walltime_used"], start=1):
        try:
            hms_seconds(text)
        except ValueError as error:
            raise RecordError(path, f"run {row}: walltime_used {error}") from None
    return record


def read_record(path: str | Path, study: str | None = None) -> pd.DataFrame:
    """The record as runs.csv rows (one successful run per line); raises RecordError."""
    record = record_table(path)
    app = record_app(path, record.columns)
    rate = app.primary_metric
    study = study or Path(path).stem
    runs = pd.DataFrame(
        {
            "study": study,
            "app": app.name,
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
            rate: record[rate].astype(float),
            WALL: record["walltime_used"].map(hms_seconds).astype(float),
            "cores_allocated": record["nodes"] * record["cores_per_node"],
            "gpus_allocated": 0,
        }
    )
    for column in ("warmup_steps", "benchmark_steps"):
        if column in record.columns:
            runs[column] = record[column]
    if "memory_used_gib" in record.columns:
        # As PBS prints it ("Memory Used"): 2^30 bytes; ours is 10^9.
        runs["memory_used_gb"] = record["memory_used_gib"].map(gib_in_gb)
    return runs


def record_scaling(runs: pd.DataFrame) -> pd.DataFrame:
    app, rate = runs["app"].iloc[0], rate_of(runs)
    return scaling(runs, metrics={app: [metric(rate), WALLTIME_USED]}, primary={app: rate})


def comparison(runs: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """One row per node count: the published view (wall-time speedup, S/cores) beside what
    the rate says (speedup, parallel efficiency), and how much of the job was time-stepping."""
    RATE = rate_of(runs)
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
    RATE = rate_of(compared)
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
