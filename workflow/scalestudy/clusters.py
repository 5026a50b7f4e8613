"""Facts about the machine a study runs on (config/clusters/<name>.yaml)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .sweep import REPO_ROOT, SweepError, read_yaml

CLUSTERS_DIR = REPO_ROOT / "config" / "clusters"


@dataclass(frozen=True)
class MpiLauncher:
    flavour: str = "openmpi"
    launcher: str = "mpirun"
    oversubscribe: bool = False
    allow_run_as_root: bool = False
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cluster:
    name: str
    scheduler: str
    cores_per_node: int
    gpus_per_node: int
    mem_per_node_gb: float
    charge_rate: float | None
    mpi: MpiLauncher = field(default_factory=MpiLauncher)


def physical_memory_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3


def from_mapping(data: Mapping[str, Any]) -> Cluster:
    cores = data.get("cores_per_node", "auto")
    memory = data.get("mem_per_node_gb", "auto")
    mpi = dict(data.get("mpi") or {})
    mpi["extra_args"] = tuple(str(a) for a in mpi.get("extra_args") or ())
    return Cluster(
        name=data["name"],
        scheduler=data.get("scheduler", "none"),
        cores_per_node=(os.cpu_count() or 1) if cores == "auto" else int(cores),
        gpus_per_node=int(data.get("gpus_per_node", 0)),
        mem_per_node_gb=round(physical_memory_gb(), 1) if memory == "auto" else float(memory),
        charge_rate=None if data.get("charge_rate") is None else float(data["charge_rate"]),
        mpi=MpiLauncher(**mpi),
    )


def load(name: str) -> Cluster:
    path = CLUSTERS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in CLUSTERS_DIR.glob("*.yaml")))
        raise SweepError([f"cluster: unknown cluster {name!r}; defined in config/clusters/: {known}"])
    return from_mapping(read_yaml(path))
