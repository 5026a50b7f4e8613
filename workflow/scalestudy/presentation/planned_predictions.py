"""What a sweep being planned may give at the scales it has not measured yet: from a study
measured at smaller scales (a results directory, or a published record standing for every
study of its app), each larger planned scale's predicted figure, efficiency and cost
(prediction_lines). Read by `python -m scalestudy plan --predict-from PATH`
(under the cost forecast) and by the Snakefile's summary line (`--config predict_from=PATH`).
Above the report's modules (it reads a published record) and below the command line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.intervals import KINDS
from ..analysis.records import read_table
from ..analysis.scaling import scaling
from ..analysis.scaling_models import curve_fits
from ..model.paths import Layout
from ..model.scaling_figures import falls_below
from . import published
from .scaling_models_page import measure_next_sentence, reliability


def predictions(source: str | Path) -> Callable[[object], list[str]]:
    """The lines of prediction_lines for a loaded study (`study.Study`)."""

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
        runs = published.read_record(path)
        frames = []
        for study in studies:
            if app_of.get(study) in set(runs["app"]):
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


def prediction_lines(scaling: pd.DataFrame, points, cluster, source: str) -> list[str]:
    """For a sweep being planned, from a study measured at smaller scales (`scaling`: its
    scaling.csv, or a published record's): each planned scale beyond the measured ones, what
    the primary figure's model predicts there (with its interval and efficiency) and what one
    run may cost (the model of the job's walltime used x the request's charge); a scale
    predicted below the efficiency threshold is named. `points`: the planned points."""
    from ..config.forecast import point_service_units
    from ..model.metrics import WALLTIME_USED

    lines = []
    seen = set()
    for point in points:
        rows = scaling[scaling["study"] == point.study] if not scaling.empty else scaling
        if rows.empty or "primary" not in rows.columns:
            continue
        primary = str(rows.loc[rows["primary"].astype(bool), "metric"].iloc[0])
        found_fits = curve_fits(rows, point.study, [primary, WALLTIME_USED.name])
        # The point's own curve, or the one curve a record (or a study of one variant) has.
        alone = len({c.variant for c in found_fits}) == 1
        fits = {cf.metric: cf for cf in found_fits if alone or cf.variant == point.variant}
        cf = fits.get(primary)
        key = (point.study, point.ranks, point.nodes)
        if cf is None or key in seen or point.ranks <= cf.p.max():
            continue
        seen.add(key)
        where = f"{point.study} {point.nodes} node{'s' if point.nodes != 1 else ''} (p = {point.ranks:,})"
        if cf.fit.best is None:
            lines.append(f"predicted from {source}: {where}: none ({cf.fit.reason})")
            continue
        at = np.array([float(point.ranks)])
        found = cf.prediction(at)
        if found.value[0] <= 0:
            lines.append(f"predicted from {source}: {where}: the model of {cf.label} is at or below zero here:"
                         f" it leaves the figure's range ({reliability(cf) or 'no prediction'})")  # fmt: skip
            continue
        efficiency = float(cf.efficiency(found.value, at)[0])
        kind = "weak" if cf.scaling == "weak" else "parallel"
        band = cf.calibrated(at) if cf.kind in KINDS else None
        if band is not None and band.reasons[0]:  # the interval says too little: why, not a number
            text = (f"predicted from {source}: {where}: {cf.label} about {found.value[0]:,.4g}, {kind} efficiency"
                    f" {efficiency:.2f}, but {band.reasons[0]}")  # fmt: skip
        else:
            text = (f"predicted from {source}: {where}: {cf.label} {found.value[0]:,.4g} [{max(found.low[0], 0):,.4g}–"
                    f"{found.high[0]:,.4g}], {kind} efficiency {efficiency:.2f}")  # fmt: skip
        wall = fits.get(WALLTIME_USED.name)
        if wall is not None and wall.fit.best is not None:
            seconds = float(max(wall.fit.best(at)[0], 0.0))
            cost = point_service_units(point, cluster, seconds)
            text += f"; walltime used ≈ {seconds:,.0f} s" + (f", ≈ {cost:,.3g} SU a run" if cost else "")
        if falls_below(efficiency, cf.threshold):
            text += f"; below the {cf.threshold:.0%} efficiency threshold: a point to drop?"
        weak = reliability(cf)
        lines.append(text + (f" ({weak})" if weak else ""))
    return lines + next_lines(scaling, points, cluster, source)


def next_lines(scaling: pd.DataFrame, points, cluster, source: str) -> list[str]:
    """Per study: for its largest planned scale beyond the measured ones, which planned scale
    between measured first narrows that scale's interval most, with its cost (one run: the model of
    the job's walltime used x the request's charge), from scaling_models_page.measure_next_sentence."""
    from ..config.forecast import point_service_units
    from ..model.metrics import WALLTIME_USED

    lines = []
    for study in dict.fromkeys(point.study for point in points):
        rows = scaling[scaling["study"] == study] if not scaling.empty else scaling
        if rows.empty or "primary" not in rows.columns:
            continue
        primary = str(rows.loc[rows["primary"].astype(bool), "metric"].iloc[0])
        found = curve_fits(rows, study, [primary, WALLTIME_USED.name])
        cf = next((c for c in found if c.metric == primary and c.fit.best is not None), None)
        if cf is None:
            continue
        wall = next((c for c in found if c.metric == WALLTIME_USED.name and c.variant == cf.variant), None)
        planned = {point.ranks: point for point in points if point.study == study and point.ranks > cf.p.max()}
        if len(planned) < 2:
            continue
        target = max(planned)
        choices = sorted(p for p in planned if p < target)

        def cost(p: float, wall=wall, planned=planned) -> float | None:
            if wall is None or wall.fit.best is None:
                return None
            seconds = float(max(wall.fit.best(np.array([p]))[0], 0.0))
            return point_service_units(planned[int(p)], cluster, seconds) or None

        sentence = measure_next_sentence(cf, float(target), cost, choices)
        if sentence:
            lines.append(f"predicted from {source}: {study}: {sentence}")
    return lines
