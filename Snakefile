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
include: "workflow/rules/litgpt.smk"
include: "workflow/rules/hoomd.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/report.smk"


# Runs every point not run yet (and reruns the changed ones), then builds the report.
# `snakemake report` builds the report from what has finished and runs no point.
rule all:
    default_target: True
    input:
        study_target,
