"""The scaling rule's one entry: a study's runs.csv -> scaling.csv (analysis.scaling), then
variants.csv from that table (analysis.verdicts), then the scaling models' columns
(analysis.scaling_models). It sits above the three in the analysis package's layers so that the
rule (workflow/rules/analyze.smk) calls one function and holds no steps of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model.steplog import step_log
from .scaling import write_scaling_table
from .scaling_models import add_to_scaling_csv
from .statistics import MEAN
from .verdicts import write_variants_table


def write_study_tables(
    runs_csv: str | Path,
    scaling_out: str | Path,
    variants_out: str | Path,
    log: str | Path | None = None,
    *,
    budget_su: float | None = None,
    estimator: str = MEAN,
    repeats: Any = None,
    efficiency_threshold: float | None = None,
    predict_up_to: float | None = None,
) -> None:
    """scaling.csv and variants.csv of one study, each row counted in `log`; the settings are
    the study's (model.settings.StudySettings), as the rule's params pass them."""
    with step_log(log) as note:
        table, runs = write_scaling_table(runs_csv, scaling_out, budget_su, estimator, repeats, note)
        write_variants_table(table, runs, variants_out, note)
    add_to_scaling_csv(scaling_out, efficiency_threshold, predict_up_to)
