"""A run's record (metrics.json): what it must hold to be believed, and the definition of
the point it measured.

The runner writes one JSON object per run:

    status        "ok" or "failed"; a failed record says why (`reason`, `category`)
    point         the point's columns (Point.as_record): study, app, nodes, ranks, ...
    definition    what defines the result (`definition`): the point JSON and the cluster
    params, mpi_flags, nccl_env, figures, resources, provenance, started, finished, attempt

Every reader checks it (`record_problems`): an ok record without its app's primary figure
(a hand-edited file, a bug) is not a success. Planning compares a record's definition with
the point's current one (`same_definition`): a changed point is measured again and its old
record kept (`scalestudy.bookkeeping.history`). Records written before `definition` existed
carry the same facts in `point`, `params`, `mpi_flags` and `nccl_env`; they are read back
from there.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from .point import AXIS_PREFIX, Point

STATUSES = ("ok", "failed")
# The category of a record that fails the check: found when the tables are built.
INVALID_RECORD = "invalid_record"
DEFINITION = "definition"
CLUSTER = "cluster"
# The point's columns that, with its params, flag and env sets, make up its definition
# (every field of Point.to_json but the params' axes, which are the AXIS_PREFIX columns).
DEFINING_COLUMNS = (
    "study",
    "app",
    "scaling",
    "nodes",
    "ranks_per_node",
    "gpus_per_node",
    "threads_per_rank",
    "mpi_flag_set",
    "nccl_env_set",
    "repeat",
)


def definition(point: Point, cluster: str | None = None) -> dict[str, Any]:
    """What defines the point's result: its JSON (walltime and queue left out) and the cluster."""
    data = json.loads(point.to_json())
    if cluster is not None:
        data[CLUSTER] = cluster
    return data


def recorded_definition(record: Any) -> dict[str, Any] | None:
    """The definition a record was measured under; None when it cannot be told."""
    if not isinstance(record, Mapping):
        return None
    if isinstance(record.get(DEFINITION), Mapping):
        return dict(record[DEFINITION])
    columns = record.get("point")
    if not isinstance(columns, Mapping) or any(key not in columns for key in DEFINING_COLUMNS):
        return None
    if any(not isinstance(record.get(key), Mapping) for key in ("params", "mpi_flags", "nccl_env")):
        return None
    return {
        **{key: columns[key] for key in DEFINING_COLUMNS},
        "params": dict(record["params"]),
        "axes": [name[len(AXIS_PREFIX) :] for name in columns if name.startswith(AXIS_PREFIX)],
        "mpi_flags": dict(record["mpi_flags"]),
        "nccl_env": dict(record["nccl_env"]),
    }


def same_definition(recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> bool:
    """Does a record measure the current definition? Keys only one side has (an older record
    without the cluster, a field added since) are not a change: unknown is not different,
    and a finished point is never rerun on a guess."""
    if recorded is None:
        return True
    return all(recorded[key] == current[key] for key in recorded.keys() & current.keys())


def definition_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two definitions, one 'key: old → new' per value, e.g.
    'params.iterations: 50 → 100'."""
    changes = []
    for key in sorted(old.keys() & new.keys()):
        before, after = old[key], new[key]
        if before == after:
            continue
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            for name in sorted(before.keys() | after.keys()):
                if before.get(name) != after.get(name):
                    changes.append(f"{key}.{name}: {text(before.get(name))} → {text(after.get(name))}")
        else:
            changes.append(f"{key}: {text(before)} → {text(after)}")
    return changes


def text(value: Any) -> str:
    return "(none)" if value is None else json.dumps(value) if isinstance(value, list | dict) else str(value)


def digest(data: Mapping[str, Any]) -> str:
    """A short name of a definition (names the folder an earlier record is kept in)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


def is_figure(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def record_problems(record: Any, primary: str | None) -> list[str]:
    """What is wrong with a record, each as the end of 'metrics.json at <path> ...'; [] if
    nothing. `primary` is the primary figure of the point's app (None: app unknown).

    The schema: a JSON object; `status` ok or failed; `point`, `figures`, `resources`
    objects where present; an ok record holds its app's primary figure as a finite number."""
    if not isinstance(record, Mapping):
        return [f"is not a JSON object but {type(record).__name__}"]
    status = record.get("status")
    if status not in STATUSES:
        return [f"has status {status!r}, not one of {', '.join(STATUSES)}"]
    problems = [
        f"has '{key}' that is not an object"
        for key in ("point", "figures", "resources")
        if record.get(key) is not None and not isinstance(record[key], Mapping)
    ]
    if status == "ok" and not problems:
        if primary is None:
            problems.append("lacks point.app: which app's figures it should hold is unknown")
        elif not is_figure((record.get("figures") or {}).get(primary)):
            problems.append(f"lacks figure {primary}")
    return problems
