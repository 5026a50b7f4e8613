"""runs.csv: one row per run, finished or not, from each point's metrics.json (checked against
the record schema, scalestudy.model.record), a site's usage record of its job
(scalestudy.analysis.accounting) and the records kept when it was measured again
(scalestudy.bookkeeping.history); the CSV tables' reading and writing.

- cost: service units (SU) per run, from the job's resource-usage record or
  estimated from request x charge rate (the source is kept).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ..apps.registry import app_of
from ..bookkeeping.history import history_of
from ..model.contention import (
    CONTENDED_SLACK_CPUS,
    OLDER_RULE,
    RUN_QUEUE_RULE,
    RUN_QUEUE_WAIT_SHARE,
    contended_hosts,
    contention,
    run_queue_figures,
    workflow_cpus,
)
from ..model.metrics import SIZE_TABLE
from ..model.mpi import run_mpi
from ..model.paths import study_and_point
from ..model.point import PLACEMENT_DEFAULTS, PROGRAM
from ..model.rank_probe import cpu_list
from ..model.record import INVALID_RECORD, record_problems
from ..model.steplog import step_log
from .accounting import site_resources

STATUS_PENDING = "pending"
# The MPI a run used (model.mpi.run_mpi): a curve's, like its flag set (analysis.scaling).
MPI_COLUMN = "mpi"

DEFINITIONS = {
    "contended": "a run is contended when its ranks waited for a CPU: on any of its hosts, the seconds the ranks'"
    " threads were runnable but waited on a run queue (the kernel's schedstat) over the CPU seconds they needed"
    f" (wall time × ranks on the host × threads per rank), less what their own oversubscription explains, exceed"
    f" {RUN_QUEUE_WAIT_SHARE:.0%} (ranks_wait_share) while processes neither of the run nor of the workflow held"
    f" more than {CONTENDED_SLACK_CPUS} of a CPU of the host's CPUs, or the hypervisor stole more than"
    f" {CONTENDED_SLACK_CPUS} of a CPU (contended_hosts names the host); the workflow's own orchestration (Snakemake"
    " and its job step, the watcher) and CPU time that made no rank wait do not count. A record without the"
    " run-queue figures (written before them) is judged by the older rule and says so (contention_rule): other"
    " processes' and steal's share × the machine's CPUs > the CPUs less its ranks on the host × threads per rank,"
    f" by more than {CONTENDED_SLACK_CPUS} of a CPU. A verdict compares only the uncontended runs"
    " of each side (where each has 2 or more), else it is held back; speedup and efficiency count the contended"
    " runs of each point (n_contended)",
    "memory_ratio": "measured peak of tensor bytes per rank (CPU: malloc's held bytes over the model build and the"
    " warm-up steps, less MKL's own GEMM buffers, not RSS; GPU: CUDA max allocated) / the memory model's tensor"
    " bytes (weights + gradients + optimizer + activations + transient; the CUDA context left out)",
    "service_units": "SU per run: the job's own record where the site prints one, else charge rate × cores ×"
    " the job's walltime as the scheduler reports it (PBS: resources_used.walltime; Slurm: the job's Elapsed),"
    " else × the launch's walltime (marked estimated)",
}


def read_metrics(path: Path, expected: Mapping | None = None) -> dict:
    """A run's record, checked against the record schema (scalestudy.model.record): one that
    cannot be read, or lacks what its status claims (an ok record without its app's primary
    figure), is a failed run that says so and names the file. `expected`: the point's own
    columns, where the caller knows them (the app, when the record lost it)."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return invalid_record(path, f"metrics.json unreadable at {path}: {error}", {}, expected)
    point = record.get("point") if isinstance(record, Mapping) else None
    app = (point or {}).get("app") if isinstance(point, Mapping) else None
    app = app or (expected or {}).get("app")
    program = (point.get(PROGRAM) if isinstance(point, Mapping) else None) or (expected or {}).get(PROGRAM)
    found = app_of(app, program)
    problems = record_problems(record, found.primary_metric if found is not None else None)
    if problems:
        return invalid_record(path, f"metrics.json at {path} {problems[0]}", record, expected)
    return record


def invalid_record(path: Path, reason: str, record, expected: Mapping | None) -> dict:
    """A failed row for a record that fails the check: what it holds that can be read (its
    cost, figures kept for the record), the point's columns, and its study and point id from
    the path (the record may have lost them)."""
    readable = record if isinstance(record, Mapping) else {}
    kept = {k: v for k, v in readable.items() if k not in ("point", "figures", "resources") or isinstance(v, Mapping)}
    point = kept.get("point") or {}
    kept.update(
        status="failed",
        reason=reason,
        category=INVALID_RECORD,
        point={**(expected or {}), **point, **study_and_point(path)},
    )
    return kept


def run_row(metrics: dict, path: Path | None = None) -> dict:
    row = dict(metrics.get("point", {}))
    row["status"] = metrics.get("status", "failed")
    row["reason"] = metrics.get("reason") or ""
    row["category"] = metrics.get("category") or ""
    # An ok run whose launch failed after its complete result: the failure's category.
    row["exit_failure"] = (metrics.get("exit_failure") or {}).get("category") or ""
    for name, value in (metrics.get("figures") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            row[name] = value
    for name, value in (metrics.get("resources") or {}).items():
        row[name] = value
    if path is not None:
        # The site's own record of the job (PBS writes it after the job, so after metrics.json)
        # replaces the estimate: actual service units, memory used, the batch job's wall time.
        row.update(site_resources(Path(path).parent))
    # The batch job that ran it: points packed into one job share it (config/packing.py).
    job_id = (metrics.get("provenance") or {}).get("job_id")
    if job_id:
        row["batch_job"] = str(job_id)
    # Kept whole (as JSON) for the report's per-run provenance.
    if isinstance((metrics.get("figures") or {}).get(SIZE_TABLE), list):
        # A curve over message size (scalestudy.analysis.sizes), one JSON cell per run.
        row[SIZE_TABLE] = json.dumps(metrics["figures"][SIZE_TABLE])
    for key in ("params", "mpi_flags", "nccl_env", "provenance"):
        if metrics.get(key):
            row[key] = json.dumps(metrics[key], sort_keys=True, default=str)
    conditions = metrics.get("conditions")
    if isinstance(conditions, Mapping):
        # What the machine did during the run (launch.conditions), for the verdicts' checks.
        for name, value in conditions.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                row[name] = value
        # Judged again from its figures, by the rule its record has them for (model.contention):
        # the ranks' run-queue waits, else (an older record) others' share of the CPUs, said so.
        waits = run_queue_figures(conditions.get("hosts"))
        taken = run_contention(row)
        if taken is not None:
            row["contended_cpus"] = round(taken, 4)
            if not waits:
                row["contended"] = taken > CONTENDED_SLACK_CPUS
        if waits:
            row["contended"] = False
        if "contended" in row:
            row["contention_rule"] = RUN_QUEUE_RULE if waits else OLDER_RULE
        # A run is contended where any of its hosts was (a slow host, by name).
        slow = contended_hosts(conditions.get("hosts"), workflow_cpus(conditions))
        if slow:
            row["contended_hosts"] = ", ".join(slow)
            row["contended"] = True
        clocks = [g.get("sm_clock_mhz") for g in conditions.get("gpus") or [] if isinstance(g, Mapping)]
        clocks = [c for c in clocks if isinstance(c, int | float)]
        if clocks:
            row["gpu_sm_clock_mhz"] = sum(clocks) / len(clocks)
    order = metrics.get("order")
    if isinstance(order, Mapping):
        row.update({f"order_{k}": v for k, v in order.items()})
    for key in ("started", "finished", "exit_code"):
        if key in metrics:
            row[key] = metrics[key]
    proof = metrics.get("settings_proof")
    if isinstance(proof, Mapping):
        # Did what the point asked for (flags, variables, binding) take effect; where each rank ran.
        row["settings_verified"] = bool(proof.get("verified"))
        row["settings_problems"] = "; ".join(map(str, proof.get("problems") or []))
        row["bindings"] = proof.get("bindings") or ""
    row.update(mpi_columns(metrics.get("provenance") or {}))
    if path is not None:
        row["metrics_path"] = str(path)
        row.update(remeasured(path))
    return row


def mpi_columns(provenance: Mapping) -> dict:
    """The MPI library each rank loaded, as the library names itself ('Open MPI v4.1.4 (ranks 0-1)';
    apps whose ranks load MPI through mpi4py), and the modules the job had loaded (`module list`;
    'none' where a module system had none loaded)."""
    row = {}
    libraries = provenance.get("mpi_libraries")
    if isinstance(libraries, Mapping) and libraries:
        row["mpi_library"] = "; ".join(
            f"{str(text).split(',')[0]} (ranks {ranks_text(ranks)})" for text, ranks in libraries.items()
        )
    modules = provenance.get("modules")
    if isinstance(modules, list):
        row["modules"] = " ".join(map(str, modules)) or "none"
    # What a repeat shares with the point's other repeats (analysis.scaling.CURVE_COLUMNS).
    row[MPI_COLUMN] = run_mpi(provenance)
    return row


def ranks_text(ranks) -> str:
    """Rank numbers as ranges, as the kernel lists CPUs (rank_probe.cpu_list): [0, 1, 2, 5] -> '0-2, 5'."""
    return cpu_list(rank for rank in ranks if isinstance(rank, int)).replace(",", ", ") or "?"


def run_contention(row: Mapping) -> float | None:
    """The CPUs others took beyond those the run left free (launch.conditions.contention), from a
    runs.csv row: its conditions and the CPUs its ranks on a host needed."""
    threads = row.get("threads_per_rank", 1)
    needed = row.get("ranks_per_node", 0) * (1 if threads is None or threads != threads else threads)
    return contention(row.get("other_cpu_share"), row.get("steal_share", 0.0), row.get("machine_cpus"), needed)


def contended_mask(side: pd.DataFrame) -> pd.Series:
    """Which runs of a table were contended (records without conditions: not known, so not)."""
    if side.empty or "contended" not in side.columns:
        return pd.Series(False, index=side.index)
    return side["contended"].map(lambda v: v is True or v == 1 or str(v) == "True")


def remeasured(path: Path) -> dict:
    """Earlier records of the point, kept when it was measured again (bookkeeping.history): how
    many, and why each was superseded, oldest first ('params.iterations: 50 → 100')."""
    kept = history_of(path)
    if not kept:
        return {}
    why = [", ".join(entry.get("changes") or []) or str(entry.get("why", "")) for entry in kept]
    return {"kept_records": len(kept), "remeasured": "; then ".join(why)}


def pending_row(record: Mapping, path: Path | None = None) -> dict:
    """A point with no metrics.json yet (a partial report): listed, never dropped."""
    row = {**record, "status": STATUS_PENDING, "reason": "not run yet", "category": ""}
    if path is not None:
        row["metrics_path"] = str(path)
    return row


def aggregate(metrics_paths: Iterable[Path], expected: Iterable[tuple[Mapping, Path]] = ()) -> pd.DataFrame:
    """One row per run. `expected` (point record, metrics path) pairs whose file does not
    exist yet become `pending` rows; paths in `metrics_paths` are read as they are."""
    rows = [run_row(read_metrics(Path(p)), Path(p)) for p in metrics_paths]
    for record, path in expected:
        path = Path(path)
        rows.append(run_row(read_metrics(path, record), path) if path.is_file() else pending_row(record, path))
    runs = pd.DataFrame(rows)
    # Records written before placement existed ran at the default placement.
    for name, default in PLACEMENT_DEFAULTS.items():
        if name in runs.columns:
            runs[name] = runs[name].astype(object).where(runs[name].notna(), default)
    return one_mpi_a_curve(runs)


def one_mpi_a_curve(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's MPI (MPI_COLUMN) as its curve's: the repeats of a point on two MPIs are two
    curves (analysis.scaling.CURVE_COLUMNS), never one mean, each named with its MPI in the
    `variant` text ('.../nccl-default on openmpi 5.0.11'). A row that names no MPI (not run yet,
    failed before its launcher was asked, a record too old to say) is its curve's one MPI where
    the curve's other runs name just one; it stays its own row (MPI '') beside two."""
    if runs.empty or MPI_COLUMN not in runs.columns or not {"study", "variant"} <= set(runs.columns):
        return runs
    runs = runs.copy()
    runs[MPI_COLUMN] = runs[MPI_COLUMN].fillna("").astype(str)
    for _, group in runs.groupby(["study", "variant"], dropna=False, sort=False):
        known = sorted(set(group[MPI_COLUMN]) - {""})
        if len(known) == 1:
            runs.loc[group.index, MPI_COLUMN] = known[0]
        elif len(known) > 1:
            said = group[MPI_COLUMN].where(group[MPI_COLUMN] != "", "an MPI not recorded")
            runs.loc[group.index, "variant"] = group["variant"].astype(str) + " on " + said
    return runs


def write_runs_table(expected: Iterable[tuple[Mapping, Path]], out: str | Path, log: str | Path | None = None) -> None:
    """The aggregate rule's entry: runs.csv from every expected point, finished or not."""
    with step_log(log) as note:
        table = aggregate([], expected=expected)
        write_table(table, out)
        counts = table["status"].value_counts().to_dict() if "status" in table.columns else {}
        note(f"{out}: {len(table)} runs ({', '.join(f'{n} {status}' for status, n in sorted(counts.items()))})")


def read_table(path: Path) -> pd.DataFrame:
    """A CSV written by aggregate/scaling; an empty table (no successful run) reads as empty."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def write_table(table: pd.DataFrame, path: Path | str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
