"""From metrics.json files to tidy tables: runs.csv (one row per run, finished
or not), scaling.csv (one row per curve x scale x metric) and variants.csv
(every MPI flag set / NCCL env set against `default`, per scale).

Definitions (also printed beside every table and plot):
- p: total MPI ranks (nodes x ranks per node; one rank per GPU on GPU runs);
  p0: the smallest p of the curve with at least one successful run; q = p/p0.
- repeats: mean, sample standard deviation, 95% confidence interval of the
  mean (Student t, n - 1 degrees of freedom), n = successful repeats; with a
  study's `estimator: trimmed_mean` (MLPerf's rule) the fastest and the slowest
  run are dropped first (n >= 3) and the statistics are those of the rest; a run is
  flagged as an outlier when its modified z-score |0.6745 (x - median) / MAD|
  exceeds 3.5 (Iglewicz & Hoaglin; needs n >= 3), with the MAD taken as at
  least 1% of the median. Outliers are flagged, not dropped.
- strong scaling: speedup S(p) = T(p0)/T(p) for times, R(p)/R(p0) for rates;
  parallel efficiency E(p) = S(p) * p0/p; the per-core figure S(p)/cores that
  some published tables call efficiency is given separately, under that name;
  Karp-Flatt serial fraction e(p) = (1/S - 1/q)/(1 - 1/q); Amdahl fit: the
  serial fraction f minimising the squared error of 1/S = f + (1 - f)/q over
  the successful scales, and the speedup ceiling 1/f it implies.
- weak scaling: efficiency T(p0)/T(p) for times, (R(p)/p)/(R(p0)/p0) for
  rates; scaled speedup = efficiency * q.
- variants: speed ratio of a set (or placement: hyperthreads, binding, mapping)
  against `default` (the launcher's own placement) at the same scale (> 1 =
  faster), with a 95% CI from Welch's t on the log ratio, or where the repeats
  are not near-normal the Hodges-Lehmann ratio with its Mann-Whitney CI;
  "faster"/"slower" only when the CI excludes 1, the two sides' runs were
  interleaved in time and their conditions (launch.conditions) were alike. An app's compared parameter (torch-parallel's
  strategy) is compared with its baseline value (ddp) the same way, with the
  app's quality figures (final accuracy and loss) of both beside the verdict.
- cost: service units (SU) per run, from the job's resource-usage record or
  estimated from request x charge rate (the source is kept); SU per million
  units of a rate metric = SU per hour of the job x 1e6 / rate / 3600.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..apps import APPS, App, app_of, app_of_row
from ..model.contention import CONTENDED_SLACK_CPUS, contended_hosts, contention
from ..model.metrics import HIGHER_IS_BETTER, SIZE_TABLE, WALLTIME_USED, Metric
from ..model.paths import study_and_point
from ..model.point import AXIS_PREFIX, PLACEMENT_DEFAULTS, PROGRAM
from ..model.record import INVALID_RECORD, record_problems
from ..model.repeats import Repeats, t_half_width
from ..model.repeats import limits as repeat_limits
from ..model.repeats import needed as repeats_needed
from ..model.steplog import step_log
from ..results.history import history_of
from .accounting import site_resources

CONFIDENCE = 0.95
OUTLIER_Z = 3.5
# With 3 repeats, two that nearly coincide make the MAD tiny and any third one an
# "outlier" (10.00, 10.01, 10.4 s scored 26). Run-to-run noise of timings on shared
# machines is rarely below 1%, so a smaller spread is not a yardstick.
MAD_FLOOR = 0.01
# Cut-off of the one-sentence summary: "parallel efficiency stays >= 70% up to ...".
GOOD_EFFICIENCY = 0.7

# Clearly different conditions: the mean share of the CPUs that other processes used (or the
# hypervisor stole) during the two sides' runs differs by more than this many of the CPUs, or
# their mean CPU or GPU clocks by more than CLOCK_GAP of the faster's.
OTHER_CPU_GAP = 0.25
CLOCK_GAP = 0.10
# Runs interleaved round by round put at most two runs of one side next to each other in time
# (the last of a round, the first of the next); three or more were measured with the other
# side absent (analysis.measured_together).
ALONE_RUNS = 3
# Two runs a side cannot show whether they fit Welch's assumption (near_normal needs three);
# a verdict on fewer than N_CHECKED stands only where each side's runs agree within
# N2_SPREAD (the larger over the smaller, less 1): two runs of one point 4x apart (5,759 and
# 1,430 us, README "Contended runs") say the runs are not one distribution, whatever the CI.
N_CHECKED = 3
N2_SPREAD = 0.10

# How a point's repeats become its figure (a study's `estimator:`; the schema holds the default).
MEAN, TRIMMED_MEAN = "mean", "trimmed_mean"
ESTIMATOR_NAMES = {MEAN: "mean", TRIMMED_MEAN: "trimmed mean (MLPerf: fastest and slowest run dropped)"}

# Message-size bands of a figure that is a curve over message size (scalestudy.analysis.sizes): (name,
# smallest size, largest) in bytes. Below 8 KiB a message goes eagerly in one packet on most
# networks (latency-bound); above 1 MiB rendezvous and segmented algorithms run (bandwidth-bound).
KIB, MIB = 1024, 1024 * 1024
SIZE_BANDS = (("small", 1, 8 * KIB - 1), ("medium", 8 * KIB, MIB), ("large", MIB + 1, math.inf))

DEFINITIONS = {
    "mean ± CI (n)": "mean of the n successful repeats ± half-width of its 95% confidence interval (Student t)",
    "trimmed mean": (
        "estimator: trimmed_mean (MLPerf's rule): the fastest and the slowest successful run dropped (n ≥ 3), "
        "the mean ± 95% CI of the rest; n counts every successful repeat"
    ),
    "outlier": (
        "modified z-score |0.6745 (x − median)/MAD| > 3.5 among the repeats (n ≥ 3; MAD ≥ 1% of the median); "
        "flagged, kept"
    ),
    "speedup": "S(p) = T(p0)/T(p) (times) or R(p)/R(p0) (rates), p0 = smallest successful scale",
    "parallel_efficiency": "E(p) = S(p) · p0/p",
    "speedup_per_core": "S(p)/cores: what some published tables call 'efficiency'; not parallel efficiency",
    "karp_flatt": "e(p) = (1/S − 1/q)/(1 − 1/q), q = p/p0",
    "amdahl_fit": "serial fraction f of the least-squares fit 1/S = f + (1 − f)/q; speedup ceiling 1/f",
    "weak_efficiency": "T(p0)/T(p) (times) or (R(p)/p)/(R(p0)/p0) (rates)",
    "scaled_speedup": "weak efficiency · p/p0",
    "variant_ratio": "speed ratio of a set, placement or strategy vs its baseline (default; the launcher's own"
    " placement; ddp) at the same scale (> 1 faster), 95% CI by the comparison the repeats fit (named in the"
    " table): Welch t on the log ratio where both sides look near-normal (no outlier, Shapiro–Wilk on the logs"
    " not rejected at 5%), else the Hodges–Lehmann ratio with its Mann–Whitney CI (ranks; needs n ≥ 4 each);"
    " a verdict only when the CI excludes 1, the sides ran interleaved and under like conditions; accuracy"
    " and loss (mean of the repeats) beside where the app reports them",
    "median": "median of the successful repeats with its distribution-free 95% CI: the order statistics"
    " x(k), x(n+1−k) of the largest k with binomial(n, ½) coverage ≥ 95% (none below n = 6)",
    "run_order": "points run round by round (repeat 1 of every point, then repeat 2, ...), each round in a random"
    " order drawn from the sweep's order_seed; each run records its seed, round and key",
    "not_interleaved": "a verdict is held back when one side's runs all ended before the other's began (e.g. a"
    " set added to a sweep that had run): the machine may have changed in between; where both sides also have"
    " runs measured together (the study's repeats raised), only those are compared (runs_compared)",
    "conditions_differed": "a verdict is held back when the two sides ran under clearly different conditions:"
    f" the mean share of the CPUs used by other processes (or stolen by the hypervisor) differs by more than"
    f" {OTHER_CPU_GAP:.0%} of the CPUs, or the mean CPU or GPU clock by more than {CLOCK_GAP:.0%}; per run,"
    " other processes' share = (busy CPU time of the machine from /proc/stat − the run's own process tree's)"
    " / (CPUs × wall time)",
    "contended": "a run is contended when other processes (and the hypervisor's steal) took more CPUs than it left"
    f" free: (other processes' share + steal share) × the machine's CPUs > the CPUs less its ranks on the host ×"
    f" threads per rank, by more than {CONTENDED_SLACK_CPUS} of a CPU, on the machine that ran the launcher or on"
    " any host of a multi-node run (the same rule over the CPUs the host's ranks may use: contended_hosts names it);"
    " a verdict compares only the uncontended runs"
    " of each side (where each has 2 or more), else it is held back; speedup and efficiency count the contended"
    " runs of each point (n_contended)",
    "few_repeats": f"a verdict on fewer than {N_CHECKED} runs a side (whose shape cannot be checked) stands only"
    f" where each side's runs agree within {N2_SPREAD:.0%} (largest / smallest − 1), said in its justification;"
    " else it waits for more repeats",
    "repeats_until_clear": "repeats: {min, max, ci}: min repeats first, then one more per point and invocation"
    " while the 95% CI of its mean primary figure is wider than ± ci of the mean and max is not reached",
    "memory_ratio": "measured peak of tensor bytes per rank (CPU: malloc's held bytes over the model build and the"
    " warm-up steps, less MKL's own GEMM buffers, not RSS; GPU: CUDA max allocated) / the memory model's tensor"
    " bytes (weights + gradients + optimizer + activations + transient; the CUDA context left out)",
    "service_units": "SU per run: the job's own record where the site prints one, else charge rate × cores ×"
    " the job's walltime as the scheduler reports it (PBS: resources_used.walltime; Slurm: the job's Elapsed),"
    " else × the launch's walltime (marked estimated)",
    "su_per_million": "SU per million units of a rate metric: SU per job-hour × 10⁶ / rate / 3600",
    "size_bands": "message sizes (nccl-tests' size: the bytes of a rank's whole buffer): small < 8 KiB ≤ medium"
    " ≤ 1 MiB < large",
    "band_figure": "a run's figure in a size band: geometric mean of its per-size figure over the band's sizes;"
    " mean ± CI over the repeats and verdicts against the baseline as for every figure",
    "busbw": "bus bandwidth (nccl-tests): algbw × factor, allreduce 2(n−1)/n, reduce_scatter, allgather and"
    " alltoall (n−1)/n, bcast, reduce and point-to-point 1; algbw = size / latency (bibw: both directions)",
}

# What tells one curve from another (a curve: one study's points at every scale), with its
# parameter axes (the AXIS_PREFIX columns beside): the runs.csv columns of model.point.Point.as_record.
# Every table groups, pairs (scalestudy.presentation.compare) and holds fixed (variants) by these. VARIANT is
# the same curve named in one text (Point.variant), carried in every table; never a key between
# two results (a published record's names no parameter axes).
VARIANT = "variant"
CURVE_COLUMNS = ("study", "app", "scaling", VARIANT, "mpi_flag_set", "nccl_env_set", *PLACEMENT_DEFAULTS)
# Where a point is on its curve.
SCALE_COLUMNS = ["nodes", "ranks_per_node", "gpus_per_node", "ranks"]
# What a variant is compared along, each against its baseline at the same scale with every
# other axis held: the MPI and NCCL sets against `default`, the placement fields against the
# launcher's default placement.
VARIANT_AXES = (
    ("MPI flag set", "mpi_flag_set", "default"),
    ("NCCL env set", "nccl_env_set", "default"),
    *((name.replace("_", " "), name, default) for name, default in PLACEMENT_DEFAULTS.items()),
)
# Per-scale means of these resources go into scaling.csv beside every metric.
RESOURCE_COLUMNS = [
    "cores_allocated",
    "gpus_allocated",
    "memory_requested_gb",
    "memory_used_gb",
    "walltime_requested_s",
    WALLTIME_USED.name,
    "service_units",
]
STATUS_PENDING = "pending"


# ---------------------------------------------------------------- runs.csv


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
        taken = run_contention(row)
        if taken is not None:
            row["contended_cpus"] = round(taken, 4)
            row["contended"] = taken > CONTENDED_SLACK_CPUS
        # A multi-node run is contended where any of its hosts was (a slow host, by name).
        slow = contended_hosts(conditions.get("hosts"))
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
    if path is not None:
        row["metrics_path"] = str(path)
        row.update(remeasured(path))
    return row


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
    """Earlier records of the point, kept when it was measured again (results.history): how
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
    return runs


# ---------------------------------------------------------------- statistics of repeats


def summarize(values: Iterable[float], confidence: float = CONFIDENCE, estimator: str = MEAN) -> dict:
    """n, mean, sample std and the Student-t confidence interval of the mean. With
    `trimmed_mean` (n >= 3) the lowest and highest value are dropped first: mean, std and CI
    are those of the rest, whose count is `n_used` (n stays the successful repeats)."""
    x = np.sort(np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float))
    n = int(x.size)
    if estimator == TRIMMED_MEAN and n >= 3:
        x = x[1:-1]
    used = int(x.size)
    out = {"n": n, "n_used": used, "mean": np.nan, "std": np.nan, "ci95": np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "median": np.nan, "median_ci_low": np.nan, "median_ci_high": np.nan}  # fmt: skip
    if used == 0:
        return out
    out["mean"] = float(x.mean())
    out.update(median_ci(x, confidence))
    if used > 1:
        out["std"] = float(x.std(ddof=1))
        half = t_half_width(out["std"], used, confidence)
        out.update(ci95=half, ci_low=out["mean"] - half, ci_high=out["mean"] + half)
    return out


def median_ci(sorted_values: np.ndarray, confidence: float = CONFIDENCE) -> dict:
    """The median and its distribution-free confidence interval: the order statistics
    x(k), x(n+1-k) with the largest k whose binomial(n, 1/2) coverage is at least `confidence`
    (no assumption about the shape of the repeats; needs n >= 6 for 95%, else no interval)."""
    x = sorted_values
    n = int(x.size)
    out = {"median": float(np.median(x)) if n else np.nan, "median_ci_low": np.nan, "median_ci_high": np.nan}
    # P(x(k) <= median < x(n+1-k)) = 1 - 2 P(B <= k-1), B ~ binomial(n, 1/2)
    best = 0
    for k in range(1, n // 2 + 1):
        if 1 - 2 * stats.binom.cdf(k - 1, n, 0.5) >= confidence:
            best = k
    if best:
        out.update(median_ci_low=float(x[best - 1]), median_ci_high=float(x[n - best]))
    return out


def outlier_mask(values: pd.Series) -> pd.Series:
    """Modified z-score > 3.5 (median/MAD: with 3 repeats a mean/std rule can never fire)."""
    x = values.astype(float)
    if x.notna().sum() < 3:
        return pd.Series(False, index=values.index)
    median = x.median()
    mad = max((x - median).abs().median(), MAD_FLOOR * abs(median))
    if mad == 0:
        # All at zero, or half the repeats or more identical at zero: no yardstick.
        return pd.Series(False, index=values.index)
    return (0.6745 * (x - median) / mad).abs() > OUTLIER_Z


# ---------------------------------------------------------------- scaling.csv


def curve_columns(*tables: pd.DataFrame, named: bool = True) -> list[str]:
    """What identifies a curve in every one of `tables`: the CURVE_COLUMNS they all have, then
    the parameter axes they all have. `named=False` leaves out the VARIANT text (two results'
    tables may name one curve differently)."""
    shared = set.intersection(*(set(table.columns) for table in tables))
    curve = [c for c in CURVE_COLUMNS if c in shared and (named or c != VARIANT)]
    return curve + sorted(c for c in shared if c.startswith(AXIS_PREFIX))


def curve_name(curve: Mapping) -> str:
    """E.g. 'md mpi-fast/nccl-default (N=8000, binding=core)': the curve's parameter axes, and
    its placement where not the launcher's own. The cells are text (compare's key cells)."""
    chosen = [(name, curve[name]) for name, default in PLACEMENT_DEFAULTS.items()
              if curve.get(name, "") not in ("", str(default))]  # fmt: skip
    axes = [(k[len(AXIS_PREFIX) :], v) for k, v in curve.items() if k.startswith(AXIS_PREFIX) and v != ""]
    params = ", ".join(f"{k}={v}" for k, v in [*axes, *chosen])
    sets = f"mpi-{curve.get('mpi_flag_set', '?')}/nccl-{curve.get('nccl_env_set', '?')}"
    return f"{curve['study']} {sets}" + (f" ({params})" if params else "")


def metrics_of(app: App) -> list[Metric]:
    """The figures a curve is scaled by: the app's rates and times, then the job's wall time."""
    return [m for m in app.metrics if m.scaled] + [WALLTIME_USED]


def apps_of(runs: pd.DataFrame) -> list[App]:
    """The apps of the runs, once per app and program (apps.app_of_row: a command study's own)."""
    if runs.empty or "app" not in runs.columns:
        return []
    rows = runs.drop_duplicates([c for c in ("app", PROGRAM) if c in runs.columns]).to_dict("records")
    return [app for row in rows if (app := app_of_row(row)) is not None]


def scaling(
    runs: pd.DataFrame,
    budget_su: float | None = None,
    metrics: Mapping[str, list[Metric]] | None = None,
    primary: Mapping[str, str] | None = None,
    estimator: str = MEAN,
    repeats: Any = None,
) -> pd.DataFrame:
    """Statistics, speedup, efficiency and cost per curve, scale and metric (long format).

    `metrics`/`primary` (by app name) default to the registered apps'; a published record
    of an app this checkout does not have passes its own. `estimator`: the study's
    (`mean` or `trimmed_mean`), named in every row. `repeats`: the study's setting; where
    adaptive, the primary figure's rows say how many repeats each point ran and why it
    stopped (`repeats_run`, `repeats_stop`, model.repeats.needed)."""
    if runs.empty or "app" not in runs.columns:
        return pd.DataFrame()
    frames = []
    keys = curve_columns(runs)
    known = metrics or {}
    # A run whose record was lost has no app: it is listed as failed, but draws no curve.
    runs = runs[runs["app"].isin(list(known) or list(APPS))]
    for curve, group in runs.groupby(keys, dropna=False, sort=True):
        app_name = group["app"].iloc[0]
        app = app_of_row(group.iloc[0])
        app_metrics = known.get(app_name) or metrics_of(app)
        primary_name = (primary or {}).get(app_name) or app.primary_metric
        for metric in app_metrics:
            if metric.name not in group.columns or group[metric.name].notna().sum() == 0:
                continue
            table = curve_table(group, dict(zip(keys, curve, strict=True)), metric, estimator)
            table["primary"] = metric.name == primary_name
            if table["primary"].all() and repeats is not None and repeat_limits(repeats).adaptive:
                add_repeat_stops(table, group, metric.name, repeat_limits(repeats))
            frames.append(table)
    if not frames:
        return pd.DataFrame()
    table = pd.concat(frames, ignore_index=True)
    return add_cost_choices(table, budget_su)


def add_repeat_stops(table: pd.DataFrame, group: pd.DataFrame, metric_name: str, limits: Repeats) -> None:
    """Per scale: the repeats recorded and why no more are planned (or that one more is)."""
    for index, row in table.iterrows():
        at_scale = group[(group["nodes"] == row["nodes"]) & (group["ranks"] == row["ranks"])]
        recorded = int((at_scale["status"] != STATUS_PENDING).sum())
        ok = at_scale[at_scale["status"] == "ok"]
        values = pd.to_numeric(ok[metric_name], errors="coerce").dropna().tolist()
        table.loc[index, "repeats_run"] = recorded
        table.loc[index, "repeats_stop"] = repeats_needed(limits, recorded, values)[1]


def curve_table(group: pd.DataFrame, curve: dict, metric: Metric, estimator: str = MEAN) -> pd.DataFrame:
    ok = group[(group["status"] == "ok") & group[metric.name].notna()]
    rows = []
    for scale, at_scale in group.groupby(SCALE_COLUMNS, sort=True):
        values = ok.loc[at_scale.index.intersection(ok.index), metric.name].astype(float)
        outliers = outlier_mask(values)
        repeats = ok.loc[values.index[outliers], "repeat"] if "repeat" in ok.columns else []
        statuses = at_scale["status"]
        row = {
            **curve,
            **dict(zip(SCALE_COLUMNS, scale, strict=True)),
            "metric": metric.name,
            "metric_label": metric.label,
            "unit": metric.unit,
            "kind": metric.kind,
            **summarize(values, estimator=estimator),
            "estimator": estimator,
            "n_failed": int((statuses == "failed").sum() + ((statuses == "ok") & at_scale[metric.name].isna()).sum()),
            "n_pending": int((statuses == STATUS_PENDING).sum()),
            "n_outliers": int(outliers.sum()),
            # The successful runs behind the figure measured while others held their CPUs.
            "n_contended": int(contended_mask(ok.loc[values.index]).sum()),
            # Text, not numbers: "rep2 rep3" stays as it is through the CSV.
            "outlier_repeats": " ".join(f"rep{int(r)}" for r in repeats),
        }
        succeeded = ok.loc[values.index]
        for column in RESOURCE_COLUMNS:
            if column in succeeded.columns and pd.to_numeric(succeeded[column], errors="coerce").notna().any():
                row[column] = pd.to_numeric(succeeded[column], errors="coerce").mean()
        if "service_units_source" in succeeded.columns:
            sources = sorted(set(succeeded["service_units_source"].dropna().astype(str)))
            row["service_units_source"] = "+".join(sources)
        if "service_units" in at_scale.columns:
            # Failed runs burnt allocation too.
            row["su_spent"] = pd.to_numeric(at_scale["service_units"], errors="coerce").sum(min_count=1)
        rows.append(row)
    table = pd.DataFrame(rows).sort_values(["ranks", "nodes"]).reset_index(drop=True)
    if "cores_allocated" not in table.columns:
        threads = group["threads_per_rank"].iloc[0] if "threads_per_rank" in group.columns else 1
        table["cores_allocated"] = table["ranks"] * threads
    add_cost_per_work(table, metric)
    return add_scaling_laws(table, metric, curve.get("scaling") == "weak")


def add_cost_per_work(table: pd.DataFrame, metric: Metric) -> None:
    """SU per run, and for a rate metric SU per million of its units."""
    if "service_units" not in table.columns:
        return
    su = table["service_units"].where(table["service_units"] > 0)
    table["su_per_run"] = su
    if metric.kind == "rate" and WALLTIME_USED.name in table.columns:
        su_per_hour = su / (table[WALLTIME_USED.name] / 3600)
        table["su_per_million"] = su_per_hour * 1e6 / table["mean"] / 3600


def add_scaling_laws(table: pd.DataFrame, metric: Metric, weak: bool) -> pd.DataFrame:
    succeeded = table[table["n"] > 0]
    if succeeded.empty:
        table["p0"] = np.nan
        return table
    base = succeeded.iloc[0]
    p0, base_mean = base["ranks"], base["mean"]
    ratio = base_mean / table["mean"] if metric.kind == "time" else table["mean"] / base_mean
    q = table["ranks"] / p0
    table["p0"] = p0
    if weak:
        # T(p0)/T(p) for times and per-step rates (MD steps/s); throughputs divide by p/p0.
        efficiency = ratio if metric.kind == "time" or not metric.extensive else ratio / q
        table["weak_efficiency"] = efficiency
        table["scaled_speedup"] = efficiency * q
        return table
    table["speedup"] = ratio
    table["parallel_efficiency"] = ratio / q
    table["speedup_per_core"] = ratio / table["cores_allocated"]
    with np.errstate(divide="ignore", invalid="ignore"):
        karp_flatt = (1 / ratio - 1 / q) / (1 - 1 / q)
    table["karp_flatt_serial_fraction"] = karp_flatt.where(q > 1)
    serial, ceiling = amdahl_fit(q[table["n"] > 0], ratio[table["n"] > 0])
    table["amdahl_serial_fraction"] = serial
    table["amdahl_max_speedup"] = ceiling
    return table


def amdahl_fit(q: Iterable[float], speedup: Iterable[float]) -> tuple[float, float]:
    """Least squares of 1/S - 1/q = f (1 - 1/q) (Amdahl, linear in f); needs 2 scales.
    Returns (f, 1/f); the ceiling is infinite when f <= 0 (no serial part seen)."""
    q, s = np.asarray(list(q), dtype=float), np.asarray(list(speedup), dtype=float)
    keep = (q > 1) & np.isfinite(s) & (s > 0)
    if not keep.any():
        return np.nan, np.nan
    x, y = 1 - 1 / q[keep], 1 / s[keep] - 1 / q[keep]
    serial = float((x * y).sum() / (x * x).sum())
    return serial, (1 / serial if serial > 0 else math.inf)


def add_cost_choices(table: pd.DataFrame, budget_su: float | None) -> pd.DataFrame:
    """Per curve and metric: the cost-optimal scale (least SU per run) and the fastest scale
    whose SU per run fits the study's budget."""
    table["cost_optimal"] = False
    table["fastest_within_budget"] = False
    if "su_per_run" not in table.columns:
        return table
    keys = [*curve_columns(table), "metric"]
    for _, rows in table.groupby(keys, dropna=False):
        costed = rows[rows["su_per_run"].notna() & (rows["n"] > 0)]
        if costed.empty:
            continue
        table.loc[costed["su_per_run"].idxmin(), "cost_optimal"] = True
        if budget_su is not None:
            fits = costed[costed["su_per_run"] <= budget_su]
            if not fits.empty:
                best = fits["mean"].idxmin() if fits["kind"].iloc[0] == "time" else fits["mean"].idxmax()
                table.loc[best, "fastest_within_budget"] = True
    return table


# ---------------------------------------------------------------- variants.csv


def used_count(row: Mapping) -> int:
    """The values a point's figure rests on: n_used (a trimmed mean drops two), else n."""
    used = row.get("n_used")
    return int(row["n"]) if used is None or (isinstance(used, float) and math.isnan(used)) else int(used)


VERDICTS = ("faster", "slower", "no measurable difference")
TOO_FEW = "too few repeats for a verdict (need n ≥ 2 each)"
NO_RUN = "no successful run to compare"


def speed_ratio(variant: Mapping, baseline: Mapping, kind: str) -> dict:
    """How many times faster `variant` is than `baseline` (> 1 faster), with a 95% CI from
    Welch's t on the log ratio (delta method: se^2 = s1^2/(n1 m1^2) + s0^2/(n0 m0^2)). The
    direction is the figure's kind's (model.metrics.HIGHER_IS_BETTER)."""
    m1, s1, n1 = variant["mean"], variant["std"], used_count(variant)
    m0, s0, n0 = baseline["mean"], baseline["std"], used_count(baseline)
    out = {"ratio": np.nan, "ci_low": np.nan, "ci_high": np.nan, "verdict": NO_RUN}
    if n1 == 0 or n0 == 0 or not (m1 > 0 and m0 > 0):
        return out
    out["ratio"] = m1 / m0 if HIGHER_IS_BETTER[kind] else m0 / m1
    if n1 < 2 or n0 < 2:
        out["verdict"] = TOO_FEW
        return out
    v1, v0 = s1**2 / (n1 * m1**2), s0**2 / (n0 * m0**2)
    se = math.sqrt(v1 + v0)
    if se == 0:
        out.update(ci_low=out["ratio"], ci_high=out["ratio"])
    else:
        dof = se**4 / (v1**2 / (n1 - 1) + v0**2 / (n0 - 1))
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof)) * se
        out.update(ci_low=out["ratio"] * math.exp(-half), ci_high=out["ratio"] * math.exp(half))
    if out["ci_low"] > 1:
        out["verdict"] = "faster"
    elif out["ci_high"] < 1:
        out["verdict"] = "slower"
    else:
        out["verdict"] = "no measurable difference"
    return out


# ---------------------------------------------------------------- verdicts that hold

# The comparison chosen by the data (every table names it): Welch's t on the log ratio when the
# repeats of both sides look near-normal, the rank-based one otherwise.
WELCH, RANKS = "welch", "ranks"
METHOD_NAMES = {
    WELCH: "Welch t on the log ratio",
    RANKS: "Hodges–Lehmann ratio, Mann–Whitney CI (ranks)",
}
# Near-normal: no outlier among the repeats and Shapiro–Wilk on their logs not rejected at 5%.
NORMALITY_ALPHA = 0.05
TOO_FEW_FOR_RANKS = "too few repeats for a rank-based verdict (need n ≥ 4 each)"
NOT_INTERLEAVED = "not interleaved"
CONDITIONS_DIFFERED = "conditions differed"
CONTENDED = "contended"
WAITS = "waits for more repeats"
# How to measure contended runs again (the report says it where any run was contended).
MEASURE_AGAIN = "raise repeats (the uncontended runs are compared once each side has 2) or measure on a quiet machine"
# The per-run conditions (launch.conditions) the checks read, as runs.csv has them.
CONDITION_COLUMNS = ("other_cpu_share", "steal_share", "cpu_mhz_mean", "gpu_sm_clock_mhz")


def near_normal(values: np.ndarray) -> bool:
    """Do these repeats fit a comparison that assumes normal (log) values? No outlier (modified
    z-score) and Shapiro–Wilk on the logs not rejected; fewer than 3 cannot tell (Welch)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if x.size < 3:
        return True
    if outlier_mask(pd.Series(x)).any():
        return False
    logs = np.log(x)
    if np.ptp(logs) == 0:
        return True
    return bool(stats.shapiro(logs).pvalue >= NORMALITY_ALPHA)


@functools.cache
def mann_whitney_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) rankings give each value of U (exact, no ties)."""
    if m == 0 or n == 0:
        return (1,)
    a, b = mann_whitney_counts(m - 1, n), mann_whitney_counts(m, n - 1)
    counts = [0] * (m * n + 1)
    for u, c in enumerate(a):
        counts[u + n] += c
    for u, c in enumerate(b):
        counts[u] += c
    return tuple(counts)


def rank_cut(m: int, n: int, confidence: float = CONFIDENCE) -> int:
    """C: the CI of the Hodges–Lehmann shift is the C-th smallest and largest of the m·n
    pairwise differences, C the largest with P(U < C) <= (1 - confidence)/2 (0: none exists)."""
    alpha = (1 - confidence) / 2
    if m * n > 2500:  # the normal approximation of U
        z = stats.norm.ppf(1 - alpha)
        return max(0, int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12))))
    counts = mann_whitney_counts(m, n)
    total, below, cut = sum(counts), 0, 0
    for u, c in enumerate(counts):
        if (below + c) / total > alpha:
            break
        below += c
        cut = u + 1
    return cut


def rank_ratio(variant: np.ndarray, baseline: np.ndarray, kind: str) -> dict:
    """The speed ratio as the Hodges–Lehmann estimate of the shift of the logs (the median of
    every pairwise log ratio), with the distribution-free CI from Mann–Whitney's U."""
    x1 = np.log(np.asarray(variant, dtype=float))
    x0 = np.log(np.asarray(baseline, dtype=float))
    sign = 1 if HIGHER_IS_BETTER[kind] else -1
    differences = np.sort(sign * (x1[:, None] - x0[None, :]).ravel())
    out = {"ratio": float(np.exp(np.median(differences))), "ci_low": np.nan, "ci_high": np.nan}
    cut = rank_cut(x1.size, x0.size)
    if cut == 0:
        out["verdict"] = TOO_FEW_FOR_RANKS
        return out
    out.update(ci_low=float(np.exp(differences[cut - 1])), ci_high=float(np.exp(differences[-cut])))
    out["verdict"] = "faster" if out["ci_low"] > 1 else "slower" if out["ci_high"] < 1 else "no measurable difference"
    return out


def side_runs(runs: pd.DataFrame | None, row: Mapping, metric_name: str) -> pd.DataFrame:
    """The successful runs behind a row of the scaling table (its study, curve and scale)."""
    if runs is None or runs.empty or metric_name not in runs.columns or "variant" not in runs.columns:
        return pd.DataFrame()
    ok = runs[(runs["status"] == "ok") & (runs["study"] == row["study"]) & (runs["variant"] == row["variant"])]
    ok = ok[(ok["nodes"] == row["nodes"]) & (ok["ranks"] == row["ranks"])]
    return ok[pd.to_numeric(ok[metric_name], errors="coerce") > 0]


def time_span(side: pd.DataFrame) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    if side.empty or "started" not in side.columns or "finished" not in side.columns:
        return None
    started = pd.to_datetime(side["started"], utc=True, errors="coerce").dropna()
    finished = pd.to_datetime(side["finished"], utc=True, errors="coerce").dropna()
    if started.empty or finished.empty:
        return None
    return started.min(), finished.max()


def interleaving(variant: pd.DataFrame, baseline: pd.DataFrame) -> str:
    """'' when the two sides' runs were measured interleaved (their time spans overlap) or
    their times are unknown; else why not, with when each side ran."""
    spans = time_span(variant), time_span(baseline)
    if None in spans:
        return ""
    (v0, v1), (b0, b1) = spans
    if v0 <= b1 and b0 <= v1:
        return ""
    when = lambda a, b: f"{a:%Y-%m-%d %H:%M}–{b:%H:%M}" if a.date() == b.date() else f"{a:%Y-%m-%d}–{b:%Y-%m-%d}"  # noqa: E731
    return (
        f"{NOT_INTERLEAVED}: the baseline ran {when(b0, b1)} UTC, the set {when(v0, v1)} UTC; "
        "raise the study's repeats: the new repeats of both sides run interleaved and are compared"
    )


def measured_together(variant: pd.DataFrame, baseline: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Where a side also has runs from a time the other side was not measured (a set added to a
    sweep after its baseline ran, and measured alone in the invocation that added it; then the
    study's repeats raised, and both sides' new repeats run interleaved), only the runs of each
    side measured while the other side was; else None (compare them as they are).

    Interleaved round by round (one run of each side a round, shuffled within it), at most
    two runs of one side follow each other with none of the other's between: the last of one
    round and the first of the next. A stretch of ALONE_RUNS or more in start order is a time
    that side was measured alone; those runs are left out (but one next to an interleaved
    stretch's run of its round), where each side keeps two or more."""
    sides = [variant, baseline]
    starts = [pd.to_datetime(side["started"], utc=True, errors="coerce") if "started" in side else None
              for side in sides]  # fmt: skip
    if any(when is None or when.isna().any() or len(when) < 2 for when in starts):
        return None
    # Records say when a run started to the second: runs in the same second go in their round's
    # order (repeat), as they ran, not one side before the other (which made 3 of a side "alone").
    merged = pd.DataFrame({
        "side": np.repeat([0, 1], [len(when) for when in starts]),
        "position": np.concatenate([np.arange(len(when)) for when in starts]),
        "started": pd.concat(starts, ignore_index=True),
        "repeat": np.concatenate([pd.to_numeric(side["repeat"], errors="coerce") if "repeat" in side
                                  else np.full(len(side), np.nan) for side in sides]),
    }).sort_values(["started", "repeat", "side"], kind="stable")  # fmt: skip
    stretch = merged["side"].ne(merged["side"].shift()).cumsum().to_numpy()
    size = pd.Series(stretch).map(pd.Series(stretch).value_counts()).to_numpy()
    alone = size >= ALONE_RUNS
    if not alone.any():
        return None
    # A stretch's run next to an interleaved stretch's, of the same round (repeat), is that
    # round's run; where repeats are unknown, it is taken to be.
    repeat = merged["repeat"].to_numpy()
    same_round = (repeat[1:] == repeat[:-1]) | np.isnan(repeat[1:]) | np.isnan(repeat[:-1])
    meets_short = (stretch[1:] != stretch[:-1]) & same_round
    previous_short = np.r_[False, ~alone[:-1] & meets_short]
    next_short = np.r_[~alone[1:] & meets_short, False]
    kept = merged[~alone | previous_short | next_short]
    together = tuple(side.iloc[sorted(kept.loc[kept["side"] == i, "position"])] for i, side in enumerate(sides))
    return together if all(len(side) >= 2 for side in together) else None


def mean_condition(side: pd.DataFrame, column: str) -> float:
    if side.empty or column not in side.columns:
        return np.nan
    values = pd.to_numeric(side[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else np.nan


def conditions_differed(variant: pd.DataFrame, baseline: pd.DataFrame, names: tuple[str, str]) -> str:
    """'' unless the two sides ran under clearly different conditions (OTHER_CPU_GAP, CLOCK_GAP);
    then what differed, in numbers (`names`: the variant's and the baseline's)."""
    found = []
    for column, what in (("other_cpu_share", "other processes used"), ("steal_share", "the hypervisor stole")):
        a, b = mean_condition(baseline, column), mean_condition(variant, column)
        if np.isfinite(a) and np.isfinite(b) and abs(a - b) > OTHER_CPU_GAP:
            found.append(f"{what} {a:.0%} of the CPUs during {names[1]}'s runs, {b:.0%} during {names[0]}'s")
    for column, what in (("cpu_mhz_mean", "CPU clock"), ("gpu_sm_clock_mhz", "GPU clock")):
        a, b = mean_condition(baseline, column), mean_condition(variant, column)
        if np.isfinite(a) and np.isfinite(b) and max(a, b) > 0 and abs(a - b) / max(a, b) > CLOCK_GAP:
            found.append(f"{what} {a:.0f} MHz during {names[1]}'s runs, {b:.0f} MHz during {names[0]}'s")
    return f"{CONDITIONS_DIFFERED}: " + "; ".join(found) if found else ""


def comparison(variant: Mapping, baseline: Mapping, kind: str, runs: pd.DataFrame | None, names: tuple[str, str]):
    """The verdict of `variant` against `baseline` (scaling-table rows), with the comparison
    the data fit (Welch where both sides' repeats are near-normal, ranks otherwise; only the
    summaries known: Welch) and the checks that hold it back: sides not interleaved in time,
    clearly different conditions, contended runs (only the uncontended are compared where each side
    has 2), fewer than N_CHECKED runs a side without a justification (few_repeats).
    `statistical_verdict` keeps what the CI alone said."""
    metric_name = variant["metric"]
    everything = side_runs(runs, variant, metric_name), side_runs(runs, baseline, metric_name)
    together = measured_together(*everything)
    sides = together or everything
    contended_counts = [int(contended_mask(side).sum()) for side in sides]
    measured = sides
    quiet = uncontended(sides)
    sides = quiet or sides
    values = [pd.to_numeric(side[metric_name], errors="coerce").to_numpy(float) if len(side) else np.array([])
              for side in sides]  # fmt: skip
    known = all(len(v) >= 2 for v in values)
    method = WELCH if not known or all(near_normal(v) for v in values) else RANKS
    if together or quiet:
        # Only the runs measured together (and uncontended): their own statistics, by the study's estimator.
        variant, baseline = ({**row, **summarize(v, estimator=row.get("estimator", MEAN))}
                             for row, v in zip((variant, baseline), values, strict=True))  # fmt: skip
    result = speed_ratio(variant, baseline, kind) if method == WELCH else rank_ratio(values[0], values[1], kind)
    out = {**result, "method": METHOD_NAMES[method], "statistical_verdict": result["verdict"]}
    # How many were measured together is counted before the contended ones are left out (their own count below).
    out["runs_compared"] = f"{len(measured[0])} / {len(measured[1])} measured together" if together else ""
    for column in ("other_cpu_share", "steal_share"):
        out[column] = mean_condition(sides[0], column)
        out[column + "_baseline"] = mean_condition(sides[1], column)
    held_back = [interleaving(*sides), conditions_differed(*sides, names)] if known else []
    out["interleaved"] = not held_back[0] if held_back else np.nan
    out["conditions"] = held_back[1] if held_back else ""
    out["contended_runs"], out["contended_runs_baseline"] = contended_counts
    out["contended"] = contended_text(contended_counts, measured, names)
    if quiet is not None:
        out["runs_compared"] = "; ".join(
            filter(None, [out["runs_compared"], f"{len(values[0])} / {len(values[1])} uncontended"])
        )
        out["contended"] = ""
    out["justification"], waits = few_repeats(variant, baseline) if out["verdict"] in ("faster", "slower") else ("", "")
    reasons = [reason for reason in [*held_back, out["contended"], waits] if reason]
    if reasons and out["verdict"] in VERDICTS:
        out["verdict"] = "; ".join(reasons)
    elif any(held_back):
        # No verdict from the method either (too few repeats for ranks): the sides' times or
        # conditions come first, since more repeats alone would not make them comparable.
        out["verdict"] = "; ".join([*filter(None, held_back), out["verdict"]])
    return out


def uncontended(sides: tuple[pd.DataFrame, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Where some runs were contended and each side has 2 or more that were not: those; else None."""
    if not any(contended_mask(side).any() for side in sides):
        return None
    quiet = tuple(side[~contended_mask(side)] for side in sides)
    return quiet if all(len(side) >= 2 for side in quiet) else None


def contended_text(counts: list[int], sides, names: tuple[str, str]) -> str:
    """Why a verdict is held back for contended runs (counts: the variant's, the baseline's), or ''."""
    if not any(counts):
        return ""
    totals = [len(side) for side in sides]
    shares = [mean_condition(side, "other_cpu_share") for side in sides]
    return (
        f"{CONTENDED}: other processes held the CPUs the ranks needed in {counts[1]} of {totals[1]} runs of "
        f"{names[1]} and {counts[0]} of {totals[0]} of {names[0]} (mean share of the CPUs {shares[1]:.0%} and "
        f"{shares[0]:.0%}); {MEASURE_AGAIN}"
    )


def two_run_spread(row: Mapping) -> float:
    """Largest over smallest, less 1, of the two values a row of 2 used runs summarizes
    (mean ± std/√2); nan for any other count."""
    mean, std = row.get("mean"), row.get("std")
    if used_count(row) != 2 or missing_number(mean) or missing_number(std):
        return np.nan
    low, high = mean - std / math.sqrt(2), mean + std / math.sqrt(2)
    return high / low - 1 if low > 0 else math.inf


def missing_number(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def few_repeats(variant: Mapping, baseline: Mapping) -> tuple[str, str]:
    """(justification, reason to wait) of a verdict on fewer than N_CHECKED runs a side (only
    two can have a CI): it stands where each side's two runs agree within N2_SPREAD, else it
    waits for more repeats. ('', '') where both sides have N_CHECKED or more."""
    counts = used_count(variant), used_count(baseline)
    if min(counts) >= N_CHECKED:
        return "", ""
    spreads = [two_run_spread(row) if used_count(row) < N_CHECKED else 0.0 for row in (variant, baseline)]
    shown = " and ".join(f"{s:.1%}" for s, n in zip(spreads, counts, strict=True) if n < N_CHECKED)
    if all(s <= N2_SPREAD for s in spreads):
        return f"n = {counts[0]} / {counts[1]}: the two runs of a side agree within {N2_SPREAD:.0%} ({shown})", ""
    return "", (
        f"{WAITS}: n = {counts[0]} / {counts[1]}, and two runs of a side {shown} apart "
        f"(> {N2_SPREAD:.0%}): raise repeats to {N_CHECKED} or more"
    )


def variants(scaling_table: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every MPI flag set, NCCL env set and placement (VARIANT_AXES) against its baseline, and
    every value of an app's compared parameter axis against its baseline value (torch-parallel:
    strategies against ddp), at each scale, per metric; every other axis (sets, placement
    fields, parameters) held fixed. `runs`: where given, the app's quality figures (accuracy,
    loss) of both sides, beside the verdict."""
    if scaling_table.empty:
        return pd.DataFrame()
    rows = []
    params = [c for c in scaling_table.columns if c.startswith(AXIS_PREFIX)]
    axes = [(axis, column, baseline) for axis, column, baseline in VARIANT_AXES if column in scaling_table.columns]
    # (axis, column, baseline value, the one app it applies to or None)
    comparisons = [(axis, column, baseline, None) for axis, column, baseline in axes]
    for app_name in scaling_table["app"].dropna().unique():
        for name, base_value in getattr(APPS.get(app_name), "compared", {}).items():
            if AXIS_PREFIX + name in params:
                comparisons.append((name, AXIS_PREFIX + name, base_value, app_name))
    for axis, column, baseline, only_app in comparisons:
        table = scaling_table if only_app is None else scaling_table[scaling_table["app"] == only_app]
        if table[column].nunique() < 2:
            continue
        held = [c for c in curve_columns(table, named=False) if c != column] + [*SCALE_COLUMNS, "metric"]
        for _, group in table.groupby(held, dropna=False, sort=True):
            base = group[group[column].astype(str) == str(baseline)]
            if base.empty:
                continue
            base_row = base.iloc[0]
            for _, row in group[group[column].astype(str) != str(baseline)].iterrows():
                rows.append(
                    {
                        **{k: row[k] for k in held},
                        "metric_label": row["metric_label"],
                        "kind": row["kind"],
                        "primary": row.get("primary", False),
                        "axis": axis,
                        "set": row[column],
                        "baseline": baseline,
                        "variant": row["variant"],
                        "baseline_variant": base_row["variant"],
                        "n": int(row["n"]),
                        "n_baseline": int(base_row["n"]),
                        "estimator": row.get("estimator", MEAN),
                        **comparison(row, base_row, row["kind"], runs, (f"{row[column]}", f"{baseline}")),
                        **quality_beside(runs, row, base_row),
                    }
                )
    return pd.DataFrame(rows)


def quality_beside(runs: pd.DataFrame | None, row: Mapping, base_row: Mapping) -> dict:
    """Mean of the app's quality figures (final accuracy, loss) over the successful repeats of
    the variant and of its baseline at the same scale: `<figure>` and `<figure>_baseline`."""
    app = APPS.get(row["app"])
    if runs is None or runs.empty or app is None or not app.quality or "variant" not in runs.columns:
        return {}
    out = {}
    ok = runs[(runs["status"] == "ok") & (runs["study"] == row["study"]) & (runs["ranks"] == row["ranks"])]
    ok = ok[ok["nodes"] == row["nodes"]]
    for figure in app.quality:
        if figure not in ok.columns:
            continue
        for suffix, variant in (("", row["variant"]), ("_baseline", base_row["variant"])):
            values = pd.to_numeric(ok.loc[ok["variant"] == variant, figure], errors="coerce").dropna()
            out[figure + suffix] = float(values.mean()) if len(values) else np.nan
    return out


# ---------------------------------------------------------------- helpers


def write_runs_table(expected: Iterable[tuple[Mapping, Path]], out: str | Path, log: str | Path | None = None) -> None:
    """The aggregate rule's entry: runs.csv from every expected point, finished or not."""
    with step_log(log) as note:
        table = aggregate([], expected=expected)
        write_table(table, out)
        counts = table["status"].value_counts().to_dict() if "status" in table.columns else {}
        note(f"{out}: {len(table)} runs ({', '.join(f'{n} {status}' for status, n in sorted(counts.items()))})")


def write_scaling_tables(
    runs_csv: str | Path,
    scaling_out: str | Path,
    variants_out: str | Path,
    budget_su=None,
    log=None,
    estimator: str = MEAN,
    repeats: Any = None,
) -> None:
    """The scaling rule's entry: scaling.csv and variants.csv from runs.csv. `repeats`: the
    study's setting (as JSON text, a param)."""
    with step_log(log) as note:
        runs = read_table(runs_csv)
        repeats = json.loads(repeats) if isinstance(repeats, str) else repeats
        table = scaling(runs, budget_su=budget_su, estimator=estimator, repeats=repeats)
        write_table(table, scaling_out)
        compared = variants(table, runs=runs)
        write_table(compared, variants_out)
        note(f"{scaling_out}: {len(table)} rows; {variants_out}: {len(compared)} rows")


def read_table(path: Path) -> pd.DataFrame:
    """A CSV written by aggregate/scaling; an empty table (no successful run) reads as empty."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def write_table(table: pd.DataFrame, path: Path | str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
