"""What a study will run, as plain values: the points, their jobs and resources, packed into
batch jobs; the dry-run listings; and the one adapter between Snakemake and the plan.

plan.py               the plan of a study (points, jobs, resources, rounds) and its start
dry_plan.py           what `plan` and `memory` print (nothing submitted)
snakemake_adapter.py  every Snakemake internal the workflow touches, in one place
"""
