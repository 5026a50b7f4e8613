"""Facts about the machine a study runs on (config/clusters/<name>.yaml)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .sweep import MPI_FLAVOURS, REPO_ROOT, SweepError, read_yaml

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
    # Launchers of other MPI flavours, for apps built against them (config: mpi.<flavour>).
    other_mpis: Mapping[str, MpiLauncher] = field(default_factory=dict)
    # Site modules per app (config: modules.<app>: [name, ...]), loaded under --sdm env-modules.
    modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def launcher_for(self, flavour: str) -> MpiLauncher:
        """The launcher of the MPI an app is built against; never a guess from PATH order."""
        if self.mpi.flavour == flavour:
            return self.mpi
        if flavour in self.other_mpis:
            return self.other_mpis[flavour]
        raise SweepError(
            [
                f"cluster: config/clusters/{self.name}.yaml has no launcher for {flavour} "
                f"(mpi.flavour is {self.mpi.flavour}); add mpi.{flavour}.launcher"
            ]
        )


def physical_memory_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3


def from_mapping(data: Mapping[str, Any]) -> Cluster:
    cores = data.get("cores_per_node", "auto")
    memory = data.get("mem_per_node_gb", "auto")
    mpi = dict(data.get("mpi") or {})
    others = {flavour: mpi.pop(flavour) for flavour in MPI_FLAVOURS if isinstance(mpi.get(flavour), Mapping)}
    mpi["extra_args"] = tuple(str(a) for a in mpi.get("extra_args") or ())
    return Cluster(
        name=data["name"],
        scheduler=data.get("scheduler", "none"),
        cores_per_node=(os.cpu_count() or 1) if cores == "auto" else int(cores),
        gpus_per_node=int(data.get("gpus_per_node", 0)),
        mem_per_node_gb=round(physical_memory_gb(), 1) if memory == "auto" else float(memory),
        charge_rate=None if data.get("charge_rate") is None else float(data["charge_rate"]),
        mpi=MpiLauncher(**mpi),
        modules={app: tuple(map(str, names or ())) for app, names in (data.get("modules") or {}).items()},
        other_mpis={
            flavour: MpiLauncher(
                **{**settings, "flavour": flavour, "extra_args": tuple(map(str, settings.get("extra_args") or ()))}
            )
            for flavour, settings in others.items()
        },
    )


def load(name: str) -> Cluster:
    path = CLUSTERS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in CLUSTERS_DIR.glob("*.yaml")))
        raise SweepError([f"cluster: unknown cluster {name!r}; defined in config/clusters/: {known}"])
    return from_mapping(read_yaml(path))
