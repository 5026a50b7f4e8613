"""PBS Pro (Gadi, ASPIRE 2A) behind Snakemake's cluster-generic executor: the commands of
profiles/pbs/scalestudy-pbs (`python -m scalestudy.scheduler.pbs ...`), one module per
command, and what they share.

- dialects: how each site writes the request after `qsub -l`, and what only that refuses;
- submit: a Snakemake jobscript -> one `qsub` line in the site's dialect, or a refusal;
- status: one word per job, ONE `qstat` per polling round shared through the cache;
- cancel: qdel for the jobs Snakemake names on an interrupt, detached, returning at once;
- sidecar: deletes the run's unfinished jobs when Snakemake stops on an interrupt;
- plan: the qsub line of every point (dry mode);
- cache: the directory and the files the commands share.

The status command runs once per job per polling round and the cancel command within 2 s:
this package imports nothing, so each command pays only for its own module.
"""
