"""`--config retry_failed=true`: rerun the points whose metrics.json says failed, never an ok one.

A finished point is never rerun because its metrics.json exists. To rerun only failed
ones, the run rules' `point` param (`planning.run_rules.point_json`), which Snakemake's params
rerun-trigger compares with the value recorded when the point last ran, carries a retry
number once a point has been retried:

- a point never retried has the plain point JSON, so ok points and results made before
  this switch existed keep their records;
- with the switch on, a failed point's point JSON gains `"retry": <number of attempts
  archived once this one is>`: new, so the point reruns; its record (metrics.json,
  stdout.log) is copied to `<run dir>/attempts/` before any job runs (`archive`, called
  from the workflow's `onstart`: planning the DAG writes nothing);
- afterwards the number stays (it is counted from the attempts folder, which the rerun
  does not touch), so the next invocation, with or without the switch, sees no change.

The number rides in the point JSON rather than in a param of its own because a new param
would change the recorded params of every finished point (all would rerun once), and a
value Snakemake does not record cannot reach batch jobs' properties.
A dry run (`-n`) copies nothing (Snakemake runs no `onstart` then); it shows the number
the real run uses.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from ..model.paths import ATTEMPTS, METRICS, STDOUT
from ..model.point import RETRY_KEY
from ..model.record import record_problems

# The option that reruns the failed points (and only them), as a user types it.
RETRY_FAILED = "--config retry_failed=true"

UNREADABLE = {"status": "failed", "reason": "metrics.json unreadable"}


def read_record(metrics_path: str | Path) -> dict | None:
    """A point's record as found (None: there is none; an unreadable one reads as failed)."""
    try:
        record = json.loads(Path(metrics_path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return dict(UNREADABLE)
    return record if isinstance(record, dict) else dict(UNREADABLE)


def failed_record(metrics_path: Path, primary: str | None = None) -> dict | None:
    """The record of a point that ran and failed (an unreadable record counts as failed)."""
    return failed(read_record(metrics_path), primary)


def failed(record: dict | None, primary: str | None = None) -> dict | None:
    """`record` if it is a failed run's: status failed, or (given the app's primary figure)
    an ok record that does not hold it (scalestudy.model.record)."""
    if record is None:
        return None
    if record.get("status") != "ok" or (primary and record_problems(record, primary)):
        return record
    return None


def attempt_stamp(record: dict, metrics_path: Path) -> str:
    stamp = record.get("started") or record.get("finished") or str(int(metrics_path.stat().st_mtime))
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in str(stamp))


def archived(run_dir: Path) -> list[Path]:
    """Earlier failed attempts of a point, oldest first."""
    folder = run_dir / ATTEMPTS
    return sorted(folder.glob(f"*.{METRICS}")) if folder.is_dir() else []


def attempt_path(metrics_path: Path, record: dict) -> Path:
    return metrics_path.parent / ATTEMPTS / f"{attempt_stamp(record, metrics_path)}.{METRICS}"


def planned_retry(
    metrics_path: str | Path, retry_failed: bool, record: dict | None = None, primary: str | None = None
) -> tuple[int, dict | None]:
    """The point's retry number, and the failed record still to archive (None: nothing).
    `record`: the point's record if already read. Reads only: the archiving itself is
    `archive`, once the run starts."""
    metrics_path = Path(metrics_path)
    attempts = archived(metrics_path.parent)
    if retry_failed:
        record = failed(read_record(metrics_path) if record is None else record, primary)
    else:
        record = None
    if record is not None and attempt_path(metrics_path, record) not in attempts:
        return len(attempts) + 1, record
    return len(attempts), None


def archive(records: Mapping[str, dict]) -> None:
    """Copy each failed attempt's record and log (by its metrics.json path) under attempts/."""
    for metrics, record in records.items():
        metrics_path = Path(metrics)
        target = attempt_path(metrics_path, record)
        if target.exists():
            continue
        target.parent.mkdir(exist_ok=True)
        log = metrics_path.parent / STDOUT
        if log.is_file():
            shutil.copy2(log, target.with_name(target.name.replace(METRICS, STDOUT)))
        shutil.copy2(metrics_path, target)


def with_retry(point_json: str, number: int) -> str:
    """The point JSON of a point retried `number` times (unchanged when never retried)."""
    if not number:
        return point_json
    return json.dumps({**json.loads(point_json), RETRY_KEY: number}, sort_keys=True)
