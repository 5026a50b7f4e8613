# scalestudy: an HPC scaling study as one Snakemake workflow.
# Edit config/sweep.yaml; run `snakemake --profile profiles/<site>`; `... report` builds the
# report from what has finished, running nothing.
from snakemake.utils import min_version

min_version("9.0")


# The sweep: config/sweep.yaml (scalestudy.model.paths.DEFAULT_SWEEP), unless --configfile
# or a profile's configfiles name others; workflow/rules/common.smk reads it and loads the
# study (every problem one line, before any job).


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/run.smk"


# Each app's own rules (the inputs the workflow makes for it), from its folder:
# workflow/scalestudy/apps/<pkg>/rules.smk (scalestudy.apps.registry.rules_files).
for APP_RULES in rules_files():

    include: APP_RULES


include: "workflow/rules/analyze.smk"
include: "workflow/rules/report.smk"


# Runs every point not run yet (and reruns the changed ones), then builds the report.
# `snakemake report` builds the report from what has finished and runs no point.
rule all:
    default_target: True
    input:
        study_target,
