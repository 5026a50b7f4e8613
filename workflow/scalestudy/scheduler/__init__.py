"""Scheduler backends: how a point's request (scalestudy.config.requests) reaches a batch
system and how its jobs are followed. PBS Pro goes through Snakemake's cluster-generic
executor and the commands of scalestudy.scheduler.pbs; Slurm through Snakemake's own
plugin, which needs nothing here.
"""
