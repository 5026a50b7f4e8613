"""What a study will run, as plain values: the points, their jobs and resources, packed into
batch jobs; the dry-run listings; and the one adapter between Snakemake and the plan.

plan.py               Plan: plain data decided once at load, each field made by one builder
summary.py            the lines before the first job, the forecast, the budget
run_rules.py          the run rules' inputs, param, priority, group, resources; the targets
tables.py             the tables', rounds', report's and compare's inputs and params
start.py              what onstart does: a list of steps, one owner each
dry_plan.py           what `plan` and `memory` print (nothing submitted)
snakemake_adapter.py  every Snakemake internal the workflow touches, in one place
"""
