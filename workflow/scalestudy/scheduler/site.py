"""The study as a site will take it: `study.load` with the refusals of the cluster's own
scheduler backend (scheduler_for: PBS Pro's dialect's, e.g. Gadi's whole nodes past one node;
a project to charge; Slurm's none beyond the queue's limits).

The one loader of the Snakefile (through scalestudy.planning.plan.load_plan) and of
`python -m scalestudy plan` (`dry_plan`), so that a dry run and the submit lines agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import study
from . import scheduler_for


def load_study(config: Mapping[str, Any], **options: Any) -> study.Study:
    """study.load (its `files`, `submits` options) plus the cluster's scheduler's rules;
    raises SweepError, every problem one line."""
    return study.load(config, site=scheduler_for, **options)
