#!/bin/bash
# A scalestudy batch job (PBS). Resources are on the qsub line; the submit command
# replaces the marker below with the cluster file's `module load` and environment.
# properties = {properties}
# scalestudy: site environment
{exec_job}
