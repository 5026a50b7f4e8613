"""Nothing lost, nothing spent by surprise: what is finished is read from the results
themselves, and a point measured again keeps its earlier record.

Planning (`survey`, read-only, once per invocation) reads every point's metrics.json and
sorts the points:

- new: no record. The study target asks for these records, so they run even where
  Snakemake has no metadata (a fresh clone, `rm -rf .snakemake`): Snakemake 9 does not
  rerun a job whose output exists for a missing input, so a table whose recorded inputs
  are unknown would otherwise never ask for a new repeat or study.
- changed: the record's definition (scalestudy.model.record) is not the point's current
  one, e.g. a param that is not an axis changed. The point's run job gets an extra input,
  `<run dir>/history/<tag>/definition.json`, made by the workflow's keep rule (`keep`)
  beside a copy of the old record, its log and the other files of the run directory: the
  definition the record measured, the one replacing it, what changed. The note is newer
  than the old record and the study target asks for it, so the point reruns with or
  without metadata, after its record is safe. <tag> is the old record's start time and a
  digest of its definition.
- retry: `--config retry_failed=true` and a failed record (scalestudy.bookkeeping.retry). Its
  record is kept in history/ by the keep rule too (so that it reruns without metadata),
  besides the copy under attempts/ that the retry makes.
- inputs: a file the workflow made for the point (an asset) is newer than its record;
  Snakemake reruns it.
- finished: none of these.

The kept records stay inputs of their point's run job for good (listed from history/):
Snakemake compares the set of a job's inputs with the set it recorded, and a set that
shrank after the rerun would rerun the point once more.

Snakemake may rerun a point for reasons of its own (a changed interpreter path, an
asset made again, --forcerun). Its record is kept as well, before any job starts
(`keep_before_rerun`, from the workflow's `onstart`), in `history/<tag>-rerun/`, which
is not an input of anything. A dry run keeps nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..apps.registry import APPS, app_for
from ..config.forecast import same_point
from ..model.metrics import WALLTIME_USED
from ..model.paths import DEFINITION_FILE, HISTORY, METRICS, RUNS_SEGMENT, Layout
from ..model.point import Point
from ..model.record import definition, definition_changes, digest, recorded_definition, same_definition
from ..model.steplog import step_log
from . import retry

# Why a point runs (Survey.counts), in the order the summary line names them.
NEW, CHANGED, RETRY, INPUTS = "new", "changed", "retry", "inputs"
REASONS = {NEW: "not run yet", CHANGED: "definition changed", RETRY: "to retry", INPUTS: "inputs made again"}
# Finished points Snakemake was told to run again.
FORCED = "forced (--forceall, --forcerun or --force)"
# Folders of records kept before a rerun Snakemake chose (not inputs of anything).
RERUN_SUFFIX = "-rerun"


@dataclass(frozen=True)
class PointState:
    """What planning found for one point (only points with something to say have one)."""

    reason: str | None = None  # why it runs (REASONS), None: finished
    kept: tuple[str, ...] = ()  # its kept records, inputs of its run job (the pending one included)
    keep: str | None = None  # the kept record still to make (its definition.json)
    retry: int = 0  # its retry number (scalestudy.bookkeeping.retry)
    failed: dict | None = None  # a failed record to archive under attempts/ before it reruns


@dataclass
class Survey:
    points: Counter = field(default_factory=Counter)  # points per study
    counts: Counter = field(default_factory=Counter)  # points to run, per reason
    states: dict[tuple[str, str], PointState] = field(default_factory=dict)
    first_missing: dict[str, str] = field(default_factory=dict)  # per study, a metrics.json not made yet
    to_keep: list[str] = field(default_factory=list)  # kept records still to make (definition.json)
    keeping: list[str] = field(default_factory=list)  # metrics.json of the points with a keep job
    retry_archives: dict[str, dict] = field(default_factory=dict)  # metrics.json -> failed record
    # Walltimes the ok records measured, by forecast.same_point (the cost forecast's expected SU).
    walltimes: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    fresh: set[str] = field(default_factory=set)  # studies without a runs folder: every point is new

    def measured(self) -> dict[tuple[str, str], float]:
        """The mean measured walltime of each point's earlier ok runs (any of its repeats)."""
        return {key: sum(values) / len(values) for key, values in self.walltimes.items()}

    def to_submit(self, points: Iterable[Point]) -> list[Point]:
        """The points this invocation runs (not run yet, changed, to retry)."""
        return [point for point in points if point.study in self.fresh or self.state(point.study, point.id).reason]

    def state(self, study: str, point_id: str) -> PointState:
        return self.states.get((study, point_id), FINISHED)

    @property
    def to_run(self) -> int:
        return sum(self.counts.values())

    def only(self, points: Iterable[Point]) -> Survey:
        """This survey narrowed to `points` (those the given targets need): their counts per
        study and per reason; what was read of the others stays (measured walltimes, states)."""
        narrowed = replace(self, points=Counter(), counts=Counter())
        for point in points:
            narrowed.points[point.study] += 1
            reason = NEW if point.study in self.fresh else self.state(point.study, point.id).reason
            if reason:
                narrowed.counts[reason] += 1
        return narrowed


FINISHED = PointState()


def tag(record: Mapping[str, Any], mtime: float) -> str:
    """The folder name of a kept record: when it started, and a digest of what it measured."""
    stamp = record.get("started") or record.get("finished") or dt.datetime.fromtimestamp(mtime, dt.UTC).isoformat()
    stamp = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(stamp))
    return f"{stamp}-{digest(recorded_definition(record) or {})}"


def kept_records(run_dir: str) -> list[str]:
    """The point's kept records that are inputs of its run job (history/<tag>/definition.json)."""
    try:
        names = os.listdir(os.path.join(run_dir, HISTORY))
    except (FileNotFoundError, NotADirectoryError):
        return []
    notes = (
        f"{run_dir}/{HISTORY}/{name}/{DEFINITION_FILE}" for name in sorted(names) if not name.endswith(RERUN_SUFFIX)
    )
    return [note for note in notes if os.path.isfile(note)]


def read(path: str) -> tuple[dict | None, float]:
    """(record, mtime) of a metrics.json; (None, 0) when there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            text, mtime = handle.read(), os.fstat(handle.fileno()).st_mtime
    except FileNotFoundError:
        return None, 0.0
    except OSError:
        return dict(retry.UNREADABLE), 0.0
    try:
        record = json.loads(text)
    except ValueError:
        return dict(retry.UNREADABLE), mtime
    return (record if isinstance(record, dict) else dict(retry.UNREADABLE)), mtime


def survey(
    points: Iterable[Point],
    layout: Layout,
    cluster: str,
    retry_failed: bool = False,
    made_inputs: Callable[[Point], Sequence[str]] | None = None,
) -> Survey:
    """Read what every point's run directory holds; reads only. A study without a runs
    folder costs one stat, not one per point (planning 100,000 new points stays cheap)."""
    found = Survey()
    present: dict[str, bool] = {}
    mtimes: dict[str, float | None] = {}
    for point in points:
        found.points[point.study] += 1
        if point.study not in present:
            present[point.study] = os.path.isdir(os.path.join(layout.results, point.study, RUNS_SEGMENT))
        metrics = layout.metrics(point.study, point.id)
        if not present[point.study]:
            found.fresh.add(point.study)
            found.first_missing.setdefault(point.study, metrics)
            found.counts[NEW] += 1
            continue
        state = survey_point(point, layout, cluster, retry_failed, made_inputs, mtimes, found.walltimes)
        if state.reason == NEW:
            found.first_missing.setdefault(point.study, metrics)
        if state.reason:
            found.counts[state.reason] += 1
        if state.keep:
            found.to_keep.append(state.keep)
            found.keeping.append(metrics)
        if state.failed is not None:
            found.retry_archives[metrics] = state.failed
        if state != FINISHED:
            found.states[(point.study, point.id)] = state
    return found


def survey_point(
    point: Point,
    layout: Layout,
    cluster: str,
    retry_failed: bool,
    made_inputs: Callable[[Point], Sequence[str]] | None,
    mtimes: dict[str, float | None],
    walltimes: dict[tuple[str, str], list[float]] | None = None,
) -> PointState:
    run_dir = layout.run_dir(point.study, point.id)
    metrics = f"{run_dir}/{METRICS}"
    record, mtime = read(metrics)
    kept = kept_records(run_dir)
    if record is None:
        return PointState(NEW, tuple(kept)) if kept else PointState(NEW)
    primary = app_for(point).primary_metric if point.app in APPS else None
    current = definition(point, cluster)
    if not same_definition(recorded_definition(record), current):
        keep = layout.kept(point.study, point.id, tag(record, mtime))
        number, _ = retry.planned_retry(metrics, False)
        return PointState(CHANGED, tuple(sorted({*kept, keep})), keep, number)
    # Only a record of the point as it is now defined tells its walltime: one measured on another
    # cluster, or with other params, in the same directory says nothing of this one's.
    used = (record.get("resources") or {}).get(WALLTIME_USED.name) if record.get("status") == "ok" else None
    if walltimes is not None and isinstance(used, int | float):
        walltimes.setdefault(same_point(point), []).append(float(used))
    number, failed = retry.planned_retry(metrics, retry_failed, record, primary)
    if failed is not None:
        # Kept in history/ as well as attempts/: the keep job is what reruns it without metadata.
        keep = layout.kept(point.study, point.id, tag(record, mtime))
        return PointState(RETRY, tuple(sorted({*kept, keep})), keep, number, failed)
    # Its inputs: the files the workflow made for it, and its kept records (one newer than the
    # record: an interrupted rerun, which Snakemake completes).
    inputs = [*(made_inputs(point) if made_inputs is not None else ()), *kept]
    if newer_input(inputs, mtime, mtimes):
        return PointState(INPUTS, tuple(kept), None, number)
    if not kept and not number:
        return FINISHED
    return PointState(None, tuple(kept), None, number)


def newer_input(paths: Sequence[str], since: float, mtimes: dict[str, float | None]) -> bool:
    """Is a made input newer than the record (Snakemake reruns the point then)? A missing one
    is not: it is made again only for a point that runs anyway."""
    for path in paths:
        if path not in mtimes:
            try:
                mtimes[path] = os.stat(path).st_mtime
            except OSError:
                mtimes[path] = None
        if mtimes[path] is not None and mtimes[path] > since:
            return True
    return False


def summary_line(found: Survey, report_only: bool = False, forced: int = 0, excluded: int = 0) -> str:
    """One line before Snakemake's own output: points per study and in total, and how many
    run jobs (batch jobs on a cluster) the invocation submits, and why. `forced`: finished
    points Snakemake was told to run again (--forceall, --forcerun, --force); `excluded`:
    points the studies' `exclude` and `zip` left out of their cross products."""
    studies = ", ".join(f"{name} {n}" for name, n in found.points.items())
    if excluded:
        studies += f"; {excluded} left out by exclude/zip"
    counts = [f"{found.counts[reason]} {text}" for reason, text in REASONS.items() if found.counts[reason]]
    if forced and not report_only:
        counts.append(f"{forced} {FORCED}")
    why = ", ".join(counts)
    to_run = found.to_run + (0 if report_only else forced)
    line = f"scalestudy: {sum(found.points.values())} points ({studies}); "
    if report_only:
        line += "report from the finished runs only: 0 run jobs"
    else:
        line += f"{to_run} run jobs to submit"
    line += f" ({why})" if why else ""
    if to_run and not report_only:
        line += "; `report` alone submits none"
    return line


# ---------------------------------------------------------------- keeping records (jobs, onstart)


def keep(note: str, point: Point, cluster: str, log: str | None = None) -> None:
    """The keep rule's entry: copy the point's record and the other files of its run
    directory to `note`'s folder (history/<tag>/), then write `note` (definition.json). The
    record must still be the one planning saw (its tag); else nothing is copied and the job
    fails, so the point does not rerun over a record not kept."""
    with step_log(log) as say:
        target = Path(note).parent
        run_dir = target.parent.parent
        record, mtime = read(str(run_dir / METRICS))
        if record is None or tag(record, mtime) != target.name:
            raise RuntimeError(f"{run_dir / METRICS} is not the record planned to be kept in {target}; nothing copied")
        now_defined = definition(point, cluster)
        changed = not same_definition(recorded_definition(record), now_defined)
        why = "definition changed" if changed else "failed run retried (--config retry_failed=true)"
        copy_run(run_dir, target, record, now_defined, why)
        say(f"kept {run_dir / METRICS} in {target}: {why}")


def copy_run(run_dir: Path, target: Path, record: dict, now_defined: dict | None, why: str) -> None:
    """Copy the run directory's files (not its folders) to `target`, then write its
    definition.json last (whole or not at all), with a fresh modification time: newer than
    the record it keeps, the point reruns after it."""
    target.mkdir(parents=True, exist_ok=True)
    # definition.json is written last: without it, the folder is an interrupted copy of files
    # that are still in the run directory, and is made again.
    if (target / DEFINITION_FILE).exists():
        raise FileExistsError(f"{target} holds a kept record already; a kept record is never overwritten")
    for entry in sorted(run_dir.iterdir()):
        if entry.is_file() and not entry.name.startswith("."):
            shutil.copy2(entry, target / entry.name)
    old = recorded_definition(record)
    note = {
        "definition": old,
        "replaced_by": now_defined,
        "changes": definition_changes(old, now_defined) if old and now_defined else [],
        "why": why,
        "kept": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    text = json.dumps(note, indent=1, sort_keys=True, ensure_ascii=False, default=str)
    tmp = target / f".{DEFINITION_FILE}.tmp"
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, target / DEFINITION_FILE)


def keep_before_rerun(reruns: Mapping[str, str], planned: Iterable[str] = ()) -> list[str]:
    """Before any job starts: keep the record of every point Snakemake is about to rerun
    (`reruns`: metrics.json -> Snakemake's reason), except those a keep job or the retry
    archive already takes care of (`planned`). Returns the folders written."""
    skip = set(planned)
    written = []
    for metrics, why in sorted(reruns.items()):
        if metrics in skip:
            continue
        record, mtime = read(metrics)
        if record is None:
            continue
        run_dir = Path(metrics).parent
        target = run_dir / HISTORY / f"{tag(record, mtime)}{RERUN_SUFFIX}"
        if (target / DEFINITION_FILE).exists():
            continue
        copy_run(run_dir, target, record, None, f"rerun by Snakemake: {why}")
        written.append(str(target))
    return written


def history_of(metrics_path: str | Path) -> list[dict]:
    """The kept records of a point, oldest first: each folder's definition.json and path."""
    folder = Path(metrics_path).parent / HISTORY
    if not folder.is_dir():
        return []
    found = []
    for note in sorted(folder.glob(f"*/{DEFINITION_FILE}")):
        try:
            found.append({**json.loads(note.read_text()), "path": str(note.parent)})
        except (OSError, ValueError):
            found.append({"path": str(note.parent), "why": "definition.json unreadable"})
    return found
