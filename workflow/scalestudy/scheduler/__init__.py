"""Scheduler backends: how a point's request (scalestudy.config.requests) reaches a batch
system and how its jobs are followed. PBS Pro goes through Snakemake's cluster-generic
executor and the commands of scalestudy.scheduler.pbs; Slurm through Snakemake's own
plugin, which needs nothing here. scalestudy.scheduler.site loads a study with the
backend's own refusals (the Snakefile's loader).

Imports nothing: the PBS status and cancel commands import this package on every call.
"""
