"""`--config retry_failed=true`: rerun the points whose metrics.json says failed, never an ok one.

A finished point is never rerun because its metrics.json exists. To rerun only failed
ones, the run rules' `point` param (common.smk `point_json`), which Snakemake's params
rerun-trigger compares with the value recorded when the point last ran, carries a retry
number once a point has been retried:

- a point never retried has the plain point JSON, so ok points and results made before
  this switch existed keep their records;
- with the switch on, a failed point's record (metrics.json, stdout.log) is copied to
  `<run dir>/attempts/` and its point JSON gains `"retry": <number of archived attempts>`:
  new, so the point reruns;
- afterwards the number stays (it is counted from the attempts folder, which the rerun
  does not touch), so the next invocation, with or without the switch, sees no change.

The number rides in the point JSON rather than in a param of its own because a new param
would change the recorded params of every finished point (all would rerun once), and a
value Snakemake does not record cannot reach batch jobs' properties.
A dry run (`-n`) copies nothing; it shows the number the real run would use.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ATTEMPTS_DIR = "attempts"
# The key of the retry number in a retried point's JSON (sweep.Point.from_json drops it).
RETRY_KEY = "retry"


def failed_record(metrics_path: Path) -> dict | None:
    """The record of a point that ran and failed (an unreadable record counts as failed)."""
    try:
        record = json.loads(metrics_path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"status": "failed", "reason": "metrics.json unreadable"}
    return record if record.get("status") != "ok" else None


def attempt_stamp(record: dict, metrics_path: Path) -> str:
    stamp = record.get("started") or record.get("finished") or str(int(metrics_path.stat().st_mtime))
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in str(stamp))


def archived(run_dir: Path) -> list[Path]:
    """Earlier failed attempts of a point, oldest first."""
    folder = run_dir / ATTEMPTS_DIR
    return sorted(folder.glob("*.metrics.json")) if folder.is_dir() else []


def archive(metrics_path: Path, record: dict) -> Path:
    """Copy a failed attempt's record and log under attempts/ (once per attempt)."""
    folder = metrics_path.parent / ATTEMPTS_DIR
    folder.mkdir(exist_ok=True)
    stamp = attempt_stamp(record, metrics_path)
    target = folder / f"{stamp}.metrics.json"
    if not target.exists():
        log = metrics_path.parent / "stdout.log"
        if log.is_file():
            shutil.copy2(log, folder / f"{stamp}.stdout.log")
        shutil.copy2(metrics_path, target)
    return target


def retry_number(metrics_path: str | Path, retry_failed: bool, dry_run: bool = False) -> int:
    """How many failed attempts of the point are (or, in a dry run, would be) archived."""
    metrics_path = Path(metrics_path)
    attempts = archived(metrics_path.parent)
    record = failed_record(metrics_path) if retry_failed else None
    if record is not None:
        planned = metrics_path.parent / ATTEMPTS_DIR / f"{attempt_stamp(record, metrics_path)}.metrics.json"
        if not dry_run:
            archive(metrics_path, record)
            attempts = archived(metrics_path.parent)
        elif planned not in attempts:
            attempts = [*attempts, planned]
    return len(attempts)


def with_retry(point_json: str, number: int) -> str:
    """The point JSON of a point retried `number` times (unchanged when never retried)."""
    if not number:
        return point_json
    return json.dumps({**json.loads(point_json), RETRY_KEY: number}, sort_keys=True)
