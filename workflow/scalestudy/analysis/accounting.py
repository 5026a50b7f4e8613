"""A site's own record of a batch job's resource use, read after the job: the analysis
takes the actual service units, memory and wall time from it instead of the estimate.

Gadi (NCI) appends a "Resource Usage on <date>" block to every job's output (-o, the run
directory's batch.log): Job Id, Project, Exit Status, Service Units, NCPUs Requested/Used,
CPU Time Used, Memory Requested/Used, Walltime requested/Used, JobFS requested/used.
Reading it needs no scheduler backend, only the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..model.paths import BATCH_LOG
from ..model.timefmt import hms_seconds
from ..model.units import KIB, gb

USAGE_FIELDS = {
    "Job Id": "job_id",
    "Project": "project",
    "Exit Status": "exit_status",
    "Service Units": "service_units",
    "NCPUs Requested": "ncpus_requested",
    "NCPUs Used": "ncpus_used",
    "CPU Time Used": "cpu_time_used",
    "Memory Requested": "memory_requested",
    "Memory Used": "memory_used",
    "Walltime requested": "walltime_requested",
    "Walltime Used": "walltime_used",
    "JobFS requested": "jobfs_requested",
    "JobFS used": "jobfs_used",
}
# Bytes of each size suffix the block writes: PBS's are binary ("12.3GB" is 12.3 x 2^30 bytes).
SIZE_UNITS = {"B": 1, "KB": KIB, "MB": KIB**2, "GB": KIB**3, "TB": KIB**4, "PB": KIB**5}


def size_gb(text: str) -> float:
    """A size the block prints ("187.65GB", PBS's binary units) in GB (10^9 bytes)."""
    match = re.fullmatch(r"([\d.]+)\s*([KMGTP]?B)", text.strip(), re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return gb(float(match.group(1)) * SIZE_UNITS[match.group(2).upper()])


def parse_resource_usage(text: str) -> dict[str, Any] | None:
    """The last "Resource Usage on <date>" block of a Gadi job's output, or None."""
    start = text.rfind("Resource Usage on")
    if start < 0:
        return None
    block = text[start:]
    date = re.match(r"Resource Usage on ([^:]+:\d\d:\d\d)", block)
    raw: dict[str, str] = {}
    labels = "|".join(re.escape(label) for label in USAGE_FIELDS)
    for match in re.finditer(rf"({labels}):\s+(\S+)", block):
        raw.setdefault(USAGE_FIELDS[match.group(1)], match.group(2))
    if "service_units" not in raw:
        return None
    usage: dict[str, Any] = {"source": "site", "date": date.group(1).strip() if date else None}
    for key, value in raw.items():
        if key in ("job_id", "project"):
            usage[key] = value
        elif key in ("exit_status", "ncpus_requested", "ncpus_used"):
            usage[key] = int(value)
        elif key == "service_units":
            usage[key] = float(value)
        elif key.startswith(("memory", "jobfs")):
            usage[f"{key}_gb"] = round(size_gb(value), 4)
        else:
            usage[f"{key}_s"] = hms_seconds(value)
    return usage


def site_resources(run_dir: Path) -> dict[str, Any]:
    """`resources` keys from the site's own record of the job, when it printed one."""
    log = Path(run_dir) / BATCH_LOG
    usage = parse_resource_usage(log.read_text(errors="replace")) if log.exists() else None
    if not usage:
        return {}
    found = {
        "service_units": usage["service_units"],
        "service_units_source": "site",
        "batch_job_id": usage.get("job_id"),
        "batch_exit_status": usage.get("exit_status"),
    }
    for key in (
        "ncpus_requested",
        "ncpus_used",
        "cpu_time_used_s",
        "memory_requested_gb",
        "memory_used_gb",
        "walltime_requested_s",
        "walltime_used_s",
        "jobfs_requested_gb",
        "jobfs_used_gb",
    ):
        if key in usage:
            found[f"batch_{key}" if key.startswith("walltime") else key] = usage[key]
    return found
