"""What a sweep being planned may give at the scales it has not measured yet: from a study
measured at smaller scales (a results directory, or a published record standing for every
study of its app), each larger planned scale's predicted figure, efficiency and cost
(scaling_models.prediction_lines). Read by `python -m scalestudy plan --predict-from PATH`
(under the cost forecast) and by the Snakefile's summary line (`--config predict_from=PATH`).
Above the report's modules (it reads a published record) and below the command line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..analysis.scaling_models import prediction_lines
from ..analysis.tables import read_table, scaling
from ..model.paths import Layout
from .published import APP as RECORD_APP
from .published import read_record


def predictions(source: str | Path) -> Callable[[object], list[str]]:
    """The lines of scaling_models.prediction_lines for a loaded study (`study.Study`)."""

    def notes(study) -> list[str]:
        names = list(study.sweep.studies)
        apps = {name: settings.app for name, settings in study.sweep.studies.items()}
        return prediction_lines(measured_scaling(source, names, apps), study.points, study.cluster, str(source))

    return notes


def measured_scaling(path: str | Path, studies: list[str], app_of: dict[str, str]) -> pd.DataFrame:
    """The scaling tables a prediction starts from: a results directory's <study>/scaling.csv
    (computed from runs.csv where missing), or a published record (.csv) standing for every
    study of its app."""
    path = Path(path)
    if path.is_file():
        runs = read_record(path)
        frames = []
        for study in studies:
            if app_of.get(study) == RECORD_APP:
                frames.append(scaling(runs.assign(study=study)))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    layout = Layout(str(path))
    frames = []
    for study in studies:
        table_path = Path(layout.table(study, "scaling"))
        runs_path = Path(layout.table(study, "runs"))
        if table_path.is_file():
            frames.append(read_table(table_path))
        elif runs_path.is_file():
            frames.append(scaling(read_table(runs_path)))
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
