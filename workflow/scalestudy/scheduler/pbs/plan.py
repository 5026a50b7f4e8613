"""Dry mode: the exact qsub line of every point of the study a profile would run; nothing
is submitted.

    python -m scalestudy.scheduler.pbs plan --profile profiles/gadi
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ...config.files import load_files, read_yaml, with_overrides
from ...config.requests import job_request, request_problems
from ...config.sweep import setting
from ...model.paths import BATCH_LOG, DEFAULT_SWEEP
from ..site import load_study
from .submit import qsub_command


def plan(profile: Path, extra_configfiles: list[str] | None = None) -> list[str]:
    """The exact qsub line of every point of the study a profile would run (dry mode)."""
    profile_config = read_yaml(profile / "config.v8+.yaml")
    files = [*(profile_config.get("configfiles") or [DEFAULT_SWEEP]), *(extra_configfiles or [])]
    config = with_overrides(load_files(*files), profile_config.get("config") or [])
    loaded = load_study(config)
    cluster = loaded.cluster
    project = cluster.project_name() or "$PROJECT"
    results = setting(config, "results_dir")
    lines = []
    for point in loaded.sweep.points:
        problems = request_problems(point, cluster)
        if problems:
            lines += [f"# refused: {problem}" for problem in problems]
            continue
        argv = qsub_command(
            job_request(point, cluster),
            cluster,
            project=project,
            log_path=f"{results}/{point.study}/runs/{point.id}/{BATCH_LOG}",
            jobscript="<jobscript>",
        )
        lines.append(shlex.join(argv))
    return lines
