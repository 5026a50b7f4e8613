"""A report page of two studies built through the real analysis, plots and report code: a
LAMMPS study (two MPI flag sets, three scales, the trimmed-mean estimator) and a HOOMD-blue
study whose every run failed because HOOMD-blue is not installed (the local study's case)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scalestudy.analysis.scaling import scaling
from scalestudy.analysis.statistics import TRIMMED_MEAN
from scalestudy.analysis.verdicts import variants
from scalestudy.apps.hoomd.app import MISSING_HOOMD
from scalestudy.model.paths import PLOT_KINDS, Layout
from scalestudy.presentation.plots import plot_study
from scalestudy.presentation.report import build


def md_runs(study="md", repeats=5, seed=0, rates=None) -> pd.DataFrame:
    """steps/s per (flag set, ranks) with 1% noise; `fast` is 10% faster at 4 ranks."""
    rng = np.random.default_rng(seed)
    rates = rates or {("fast", 4): 1.1 * 100.0 * 4**0.9}
    rows = []
    for flag_set in ("default", "fast"):
        for ranks in (1, 2, 4):
            rate = rates.get((flag_set, ranks), 100.0 * ranks**0.9)
            for repeat in range(1, repeats + 1):
                rows.append({
                    "study": study, "app": "lammps", "scaling": "strong", "variant": f"mpi-{flag_set}/nccl-default",
                    "point": f"nodes1-rpn{ranks}/mpi-{flag_set}/nccl-default/rep{repeat}",
                    "mpi_flag_set": flag_set, "nccl_env_set": "default", "param.N": 8000, "nodes": 1,
                    "ranks_per_node": ranks, "gpus_per_node": 0, "ranks": ranks, "repeat": repeat, "status": "ok",
                    "reason": "", "category": "", "steps_per_s": rate * (1 + 0.01 * rng.standard_normal()),
                    "walltime_used_s": 10.0 + rng.random(), "provenance": '{"hosts": ["n1"]}',
                })  # fmt: skip
    return pd.DataFrame(rows)


def failed_runs(study="hoomd-wca") -> pd.DataFrame:
    rows = [
        {"study": study, "app": "hoomd", "scaling": "strong", "variant": "mpi-default/nccl-default",
         "point": f"N4000/nodes1-rpn{ranks}/mpi-default/nccl-default/rep{repeat}", "mpi_flag_set": "default",
         "nccl_env_set": "default", "param.N": 4000, "nodes": 1, "ranks_per_node": ranks, "gpus_per_node": 0,
         "ranks": ranks, "repeat": repeat, "status": "failed", "reason": MISSING_HOOMD,
         "category": "dependency_missing"}
        for ranks in (1, 2) for repeat in (1, 2)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def overview_page(out: Path) -> Path:
    """index.html (and index.md, plots, provenance side files) of both studies under `out`."""
    layout = Layout(str(out))
    runs = {"md": md_runs(), "hoomd-wca": failed_runs()}
    estimators = {"md": TRIMMED_MEAN, "hoomd-wca": "mean"}
    tables = {study: scaling(table, estimator=estimators[study]) for study, table in runs.items()}
    compared = {study: variants(table) for study, table in tables.items()}
    plots = {}
    for study in runs:
        paths = {kind: Path(layout.plot(study, kind)) for kind in PLOT_KINDS}
        plot_study(tables[study], compared[study], study, paths)
        plots[study] = list(paths.values())
    provenance = {study: Path(layout.provenance(study)) for study in runs}
    html = Path(layout.report_html)
    build(runs, tables, compared, plots, html, Path(layout.report_markdown), provenance=provenance)
    return html
