"""The directory the PBS commands share, and every file in it; nowhere else names them.

    <cache>/jobs.jsonl    every submitted job: id, its run, metrics.json, point (submit appends)
    <cache>/states.json   the last qstat answer per job, shared by the status calls of a round
    <cache>/lock          held while a status call reads or refreshes states.json
    <cache>/cancelled     job ids already passed to qdel (cancel command, sidecar)
    <cache>/qdel.log      what qdel said
    <cache>/logs/         batch logs of jobs that are not points (they have no run directory)
    <cache>/packs.json    the points of each pack (a Snakemake group: one batch job), written
                          by the workflow before the first job; read by submit

<cache> is $SCALESTUDY_PBS_CACHE, else .snakemake/scalestudy-pbs in the directory Snakemake
runs in. The status and cancel commands import this module on every call: standard library
only.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

CACHE_ENV = "SCALESTUDY_PBS_CACHE"
DEFAULT_CACHE = ".snakemake/scalestudy-pbs"
REGISTRY = "jobs.jsonl"
STATES = "states.json"
LOCK = "lock"
CANCELLED = "cancelled"
QDEL_LOG = "qdel.log"
LOGS = "logs"
PACKS = "packs.json"


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get(CACHE_ENV) or DEFAULT_CACHE)


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def register(directory: Path, job_id: str, **facts: object) -> None:
    """Remember a submitted job (its run, metrics.json, point) for the status command and the sidecar."""
    with locked(directory), open(directory / REGISTRY, "a") as registry_file:
        registry_file.write(json.dumps({"id": job_id, "submitted": time.time(), **facts}) + "\n")


def registry(directory: Path) -> dict[str, dict]:
    path = directory / REGISTRY
    if not path.exists():
        return {}
    return {entry["id"]: entry for entry in map(json.loads, path.read_text().splitlines()) if entry}


def load_states(directory: Path) -> dict:
    """{"refreshed": time of the last qstat, "jobs": {id: {"state", "exit_status", "comment", "served"}}}."""
    try:
        return json.loads((directory / STATES).read_text())
    except (OSError, ValueError):
        return {"refreshed": 0.0, "jobs": {}}


def save_states(directory: Path, states: dict) -> None:
    # Written aside and renamed: a reader never sees half a file.
    tmp = directory / f".{STATES}.tmp"
    tmp.write_text(json.dumps(states))
    os.replace(tmp, directory / STATES)


def note_cancelled(directory: Path, job_ids: Iterable[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / CANCELLED, "a") as cancelled_file:
        cancelled_file.write("".join(f"{job_id}\n" for job_id in job_ids))


def cancelled(directory: Path) -> set[str]:
    try:
        return set((directory / CANCELLED).read_text().split())
    except OSError:
        return set()


def save_packs(directory: Path, packs: Mapping[str, list[dict]], add: bool = False) -> None:
    """{group id: [{"metrics", "point", "walltime_s", "queue"} in the order they run]}; `add`:
    beside those saved before (a later round's packs), else instead of them."""
    with locked(directory):
        saved = load_packs(directory) if add else {}
        tmp = directory / f".{PACKS}.tmp"
        tmp.write_text(json.dumps({**saved, **packs}))
        os.replace(tmp, directory / PACKS)


def load_packs(directory: Path) -> dict[str, list[dict]]:
    try:
        return json.loads((directory / PACKS).read_text())
    except (OSError, ValueError):
        return {}
