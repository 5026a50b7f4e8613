"""The study as a site will take it: `study.load` with the scheduler backend's own
refusals (PBS Pro: its resource dialect's, e.g. Gadi's whole nodes past one node).

The one loader of the Snakefile (workflow/rules/common.smk `load_study`) and of
`python -m scalestudy.scheduler.pbs plan`, so that a dry run and the qsub lines agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import study
from .pbs.dialects import site_rules


def load_study(config: Mapping[str, Any], **options: Any) -> study.Study:
    """study.load (its `files`, `submits` options) plus the site's rules; raises SweepError,
    every problem one line."""
    return study.load(config, site_rules=site_rules, **options)
