"""Scheduler backends: how a point's request (scalestudy.config.requests) reaches a batch
system and how its jobs are followed. Every backend is a scheduler.interface.Scheduler
(submit, status, cancel, cost, hosts); `scheduler_for(cluster)` below is the one place that
picks a cluster's. PBS Pro (scheduler.pbs.pbspro.PbsPro, its dialects subclasses of it) goes
through Snakemake's cluster-generic executor and the commands of scalestudy.scheduler.pbs;
Slurm (scheduler.slurm.Slurm) through Snakemake's own plugin. scalestudy.scheduler.site
loads a study with the backend's own refusals (the Snakefile's loader).

Imports nothing at its top: the PBS status and cancel commands import this package on every
call (the backends are imported inside `scheduler_for`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .interface import Scheduler


def scheduler_for(cluster: Any) -> Scheduler | None:
    """The backend of `cluster` (a config.clusters.Cluster): its `scheduler:`, and for PBS Pro
    its `pbs_dialect:`'s class (SweepError for a dialect none is registered under). None for
    a cluster without a scheduler (`scheduler: none`: points run in the workflow's process)."""
    if cluster.scheduler == "pbspro":
        from .pbs.dialects import dialect_of

        return dialect_of(cluster)
    if cluster.scheduler == "slurm":
        from .slurm import Slurm

        return Slurm(cluster)
    return None
