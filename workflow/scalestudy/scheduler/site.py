"""The study as a site will take it: `study.load` with the scheduler backend's own
refusals (PBS Pro: its resource dialect's, e.g. Gadi's whole nodes past one node).

The one loader of the Snakefile (through scalestudy.planning.plan.load_plan) and of
`python -m scalestudy plan` (`dry_plan`), so that a dry run and the qsub lines agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..config import study
from ..config.clusters import Cluster
from ..config.packing import Pack
from ..config.requests import request_problems
from .pbs.dialects import site_rules


def load_study(config: Mapping[str, Any], **options: Any) -> study.Study:
    """study.load (its `files`, `submits` options) plus the site's rules; raises SweepError,
    every problem one line."""
    return study.load(config, site_rules=site_rules, **options)


def pack_problems(packs: Iterable[Pack], cluster: Cluster) -> list[str]:
    """What the site would refuse of a pack's one batch job (its walltime is its points'
    summed): one line each, naming the study's `pack`."""
    problems: dict[str, None] = {}
    for pack in packs:
        for problem in request_problems(pack.request_point(), cluster, site_rules(cluster)):
            problems[f"{problem} (pack: the walltimes of its {len(pack.points)} points summed in {pack.name}; "
                     "use a smaller pack)"] = None  # fmt: skip
    return list(problems)
