"""Dry mode: the exact submit line (PBS Pro's qsub, Slurm's sbatch: the cluster's scheduler's
`submit_line`) of every point of the study a profile would run; nothing is submitted.

    python -m scalestudy plan --profile profiles/gadi [--configfile F ...] [--config k=v ...]

(`python -m scalestudy.scheduler.pbs plan` hands over to it.) The config is the one Snakemake
would hand the Snakefile under that profile, the study is loaded by the Snakefile's own
loader (scalestudy.scheduler.site.load_study), and what finished, what a run would submit
and what that may cost are the Snakefile's own plan (`plan.build_plan`, `summary`): a sweep the dry run refuses, a
budget it exceeds, is refused here with the same lines.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import packing
from ..config.files import load_files, read_yaml, with_overrides
from ..config.forecast import forecast, forecast_lines
from ..config.requests import job_request
from ..model.errors import SweepError
from ..model.ladder import Judge
from ..model.paths import BATCH_LOG, DEFAULT_SWEEP
from ..scheduler import scheduler_for
from ..scheduler.site import load_study
from .plan import build_plan
from .summary import budget_problems, ladder_lines

PROFILE_FILE = "config.v8+.yaml"


def config_files(profile: Path, configfiles: list[str] | None = None) -> list[str]:
    """The files Snakemake reads: the profile's `configfiles` (else the Snakefile's own,
    DEFAULT_SWEEP), REPLACED, not extended, by configfiles given on the command line."""
    return list(configfiles or read_yaml(profile / PROFILE_FILE).get("configfiles") or [DEFAULT_SWEEP])


def workflow_config(
    profile: Path, configfiles: list[str] | None = None, config: list[str] | None = None
) -> dict[str, Any]:
    """The config as Snakemake builds it: the files of `config_files`, merged in order; then the
    profile's `config:` entries (or, given, the command line's) over top-level keys."""
    entries = config if config else read_yaml(profile / PROFILE_FILE).get("config") or []
    return with_overrides(load_files(*config_files(profile, configfiles)), entries)


def plan(
    profile: Path,
    configfiles: list[str] | None = None,
    config: list[str] | None = None,
    notes: Callable[[Any], list[str]] | None = None,
    judge: Judge | None = None,
) -> list[str]:
    """The submit line of every point, in the order of the study, after the sweep's cost
    forecast (`# ` lines: the output stays a shell script). Raises SweepError with the lines
    the Snakefile would print (the files read strictly, as the Snakefile reads them).
    `notes(study)`: more `# ` lines after the forecast (the command line's predictions of
    the larger points from a measured study: scaling_models sits above planning)."""
    study = load_study(workflow_config(profile, configfiles, config), files=config_files(profile, configfiles))
    cluster = study.cluster
    scheduler = scheduler_for(cluster)
    if not scheduler.batch:
        raise SweepError(
            [f"--profile {profile}: its cluster {cluster.name!r} has no batch scheduler (scheduler: "
             f"{cluster.scheduler}), so nothing is submitted; give the profile of a cluster, e.g. profiles/gadi"]
        )  # fmt: skip
    # Every point's submit line, packed as a run of the whole sweep would pack it.
    packs = packing.packs(study.points, cluster, study.settings.studies, study.settings.order_seed)
    problems = scheduler.pack_problems(packs)
    if problems:
        raise SweepError(problems)
    # What a run would submit now, and whether the budget allows it: the Snakefile's plan.
    planned = build_plan(study, judge=judge)
    problems = budget_problems(planned)
    if problems:
        raise SweepError(problems)
    cost = forecast_lines(
        forecast(study.points, cluster, planned.survey.measured(), packs), f"the sweep ({len(study.points)} points)"
    )
    packed = {(point.study, point.id) for pack in packs for point in pack.points}
    lines = [f"# {line}" for line in cost] + [f"# scalestudy: {line}" for line in pack_counts(study, packs)]
    # A ladder's rungs above the first are listed too: they are submitted only as it climbs.
    lines += [f"# {line}" for line in ladder_lines(planned)]
    lines += [f"# scalestudy: {line}" for line in (notes(study) if notes else [])]

    def submit_line(point, name=None):
        request = job_request(point, cluster)
        if name:
            request = dataclasses.replace(request, name=name)
        log = f"{study.layout.run_dir(point.study, point.id)}/{BATCH_LOG}"
        return shlex.join(scheduler.submit_line(request, log_path=log, jobscript="<jobscript>"))

    first_of = {(pack.points[0].study, pack.points[0].id): pack for pack in packs}
    for point in study.points:
        pack = first_of.get((point.study, point.id))
        if pack is not None:
            lines.append(submit_line(pack.request_point(), pack.name))
        elif (point.study, point.id) not in packed:
            lines.append(submit_line(point))
    return lines


def pack_counts(study, packs) -> list[str]:
    """'hoomd-wca: 18 points in 3 batch jobs (pack: scale)' for each study that packs."""
    lines = []
    for name, settings in study.settings.studies.items():
        mine = [pack for pack in packs if pack.points[0].study == name]
        if not mine:
            continue
        points = len(study.sweep.points_of(name))
        alone = points - sum(len(pack.points) for pack in mine)
        lines.append(f"{name}: {points} points in {len(mine) + alone} batch jobs (pack: {settings.pack})")
    return lines
