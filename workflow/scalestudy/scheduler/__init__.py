"""Scheduler backends: how a point's request (scalestudy.config.requests) reaches a batch
system and how its jobs are followed. Every backend is a scheduler.interface.Scheduler
subclass in a module of this package, found by `backends()` (no list to edit: a new
scheduler is one module); `scheduler_for(cluster)` below is the one place that picks a
cluster's. PBS Pro (scheduler.pbs.pbspro.PbsPro, its dialects subclasses of it) goes
through Snakemake's cluster-generic executor and the commands of scalestudy.scheduler.pbs;
Slurm (scheduler.slurm.Slurm) through Snakemake's own plugin; `scheduler: none`
(scheduler.local) runs points in the workflow's process. scalestudy.scheduler.site loads a
study with the backend's own refusals (the Snakefile's loader).

Imports nothing at its top: the PBS status and cancel commands import this package on every
call (the backends are imported inside `backends`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .interface import Scheduler

# Modules that are no backend's (commands run as `python -m`).
NOT_BACKENDS = ("__main__",)


def backends() -> dict[str, type[Scheduler]]:
    """Every backend by its `scheduler:` name: each module of this package and its
    subpackages imported once, each Scheduler subclass naming a `scheduler` registered as it
    is defined (interface.BACKENDS)."""
    import importlib
    import pkgutil

    from .interface import BACKENDS

    for module in pkgutil.walk_packages(__path__, f"{__name__}."):
        if module.name.rsplit(".", 1)[-1] not in NOT_BACKENDS:
            importlib.import_module(module.name)
    return BACKENDS


def scheduler_for(cluster: Any) -> Scheduler:
    """The backend of `cluster` (a config.clusters.Cluster): the one its `scheduler:` names, in
    the variant the backend picks from the cluster file (PBS Pro: its `pbs_dialect:`).
    SweepError, naming the file and what is allowed, for a name no backend serves."""
    found = backends()
    if cluster.scheduler not in found:
        from ..model.errors import SweepError
        from ..model.paths import cluster_file

        raise SweepError(
            [f"{cluster_file(cluster.name)}: scheduler {cluster.scheduler!r} is not known; allowed: "
             f"{', '.join(sorted(found))}"]
        )  # fmt: skip
    return found[cluster.scheduler].for_cluster(cluster)
