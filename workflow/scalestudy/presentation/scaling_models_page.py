"""The scaling models on a page (scalestudy.analysis.scaling_models): one sentence per study, a table of
each curve's model of its primary figure and of each part of its time with the predictions at
2x and 4x the largest measured scale, where efficiency falls below the threshold, where one
part overtakes another, and how the models were chosen. The report's study section and the
published record's page show it; compare names a model whose lead term changed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.breakdown import part_of
from ..analysis.scaling import curve_columns
from ..analysis.scaling_models import (
    DEFINITIONS,
    MULTIPLES,
    CurveFit,
    curve_fits,
    efficiency_sentence,
    is_part,
    overtake_sentence,
    overtaking,
    study_sentence,
)
from .page import Bullets, Details, Heading, Para, Table, fmt

HEADING = "Where scaling will stop: scaling models"


def predicted_cell(cf: CurveFit, at: float) -> str:
    """'5,418 [5,266–5,566]' at p = at; the efficiency beside where the figure scales."""
    found = cf.prediction(np.array([at]))
    if found.value[0] <= 0:
        return "≤ 0: the model leaves the figure's range"
    text = f"{fmt(found.value[0])} [{fmt(max(found.low[0], 0.0))}–{fmt(found.high[0])}]"
    if cf.kind in ("rate", "time") and not is_part(cf.metric):
        text += f", E {cf.efficiency(found.value, np.array([at]))[0]:.2f}"
    return text


def row_of(cf: CurveFit, named: bool) -> list[str]:
    declared = part_of(cf.metric)
    name = (
        (f"{declared.part} (beside the parts)" if declared.beside else f"{declared.part} (part)")
        if declared
        else cf.label
    )
    first = [cf.variant] if named else []
    best = cf.fit.best
    if best is None:
        return [*first, name, cf.fit.reason, "–", "–", "–", str(len(cf.p)), *("–" for _ in MULTIPLES)]
    predictions = [predicted_cell(cf, cf.p.max() * m) for m in MULTIPLES]
    return [*first, name, best.symbols(), best.words(), f"{best.smape_loo:.2g}%", fmt(best.adj_r2), str(len(cf.p)),
            *predictions]  # fmt: skip


def model_blocks(scaling: pd.DataFrame, study: str, table: pd.DataFrame) -> list:
    """The study's models: its sentence, the table, the efficiency and overtaking sentences,
    the definitions. Nothing where no run succeeded."""
    if table.empty or (table["n"] == 0).all():
        return []
    primary = str(table["metric"].iloc[0])
    fits = curve_fits(scaling, study, [primary])
    parts = [cf for cf in curve_fits(scaling, study) if is_part(cf.metric)]
    if not fits:
        return []
    named = len({cf.variant for cf in fits}) > 1
    blocks: list = [Heading(3, HEADING), Para(study_sentence(scaling, study, primary), "summary")]
    largest = max(cf.p.max() for cf in fits)
    headers = (["curve"] if named else []) + ["figure", "model", "in words", "leave-one-out SMAPE",
                                              "adjusted R²", "scales"]  # fmt: skip
    headers += [f"at {m}× the largest scale (p = {fmt(largest * m)}), 95% interval" for m in MULTIPLES]
    rows = [row_of(cf, named) for cf in fits]
    for cf in parts:
        rows.append(row_of(cf, named))
    blocks.append(Table(headers, rows))
    lines = []
    if named:
        lines += [f"{cf.variant}: {efficiency_sentence(cf)}" for cf in fits if cf.fit.best is not None]
    by_curve: dict[str, list[CurveFit]] = {}
    for cf in parts:
        by_curve.setdefault(cf.variant, []).append(cf)
    for variant, group in by_curve.items():
        found = overtaking(group)
        prefix = f"{variant}: " if named else ""
        lines += [prefix + overtake_sentence(item) for item in found]
        if not found and any(cf.fit.best is not None for cf in group):
            lines.append(prefix + "no part of the time is predicted to pass the largest one within"
                         f" {fmt(max(cf.beyond for cf in group))}× the largest scale.")  # fmt: skip
    if lines:
        blocks.append(Bullets(lines))
    if any(cf.fit.best is None for cf in fits + parts):
        blocks.append(Para(limits(fits + parts)))
    definitions = [f"{k.replace('_', ' ')}: {v}" for k, v in DEFINITIONS.items()]
    blocks.append(Details("How the scaling models are chosen", [Bullets(definitions)]))
    return blocks


def limits(fits: list[CurveFit]) -> str:
    """What the scales measured allow (few scales: no model, so no prediction)."""
    scales = sorted({len(cf.p) for cf in fits if cf.fit.best is None})
    return (
        f"Too few scales for a model where {', '.join(map(str, scales))} were measured: a prediction needs"
        " scales enough to tell one term from another (more nodes, or more ranks per node where the machine has"
        " the cores); the measured points stand as they are."
    )


def exponent_lines(base: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """Per curve and figure of both scaling tables (paired as compare pairs points:
    analysis.scaling.curve_columns without the variant text): where the lead term of the model changed
    ('Comm went from log2 p to p')."""
    if base.empty or new.empty:
        return []
    keys = [*curve_columns(base, new, named=False), "metric"]

    def leads(table: pd.DataFrame) -> dict:
        out = {}
        for cf in curve_fits(table):
            if cf.fit.best is not None:
                lead = cf.fit.best.lead
                out[tuple(str(cf.curve.get(k, "")) for k in keys)] = (cf, lead)
        return out

    before, after = leads(base), leads(new)
    lines = []
    for key, (cf, lead) in after.items():
        if key not in before:
            continue
        old = before[key][1]
        if old == lead:
            continue
        declared = part_of(cf.metric)
        name = declared.part if declared else cf.label
        where = cf.variant + (f", {cf.curve.get('study')}" if cf.curve.get("study") else "")
        lines.append(f"{name} went from {term_text(old)} to {term_text(lead)} ({where})")
    return lines


def term_text(term) -> str:
    return "a constant" if term is None else term.symbol()


def model_change_blocks(base: pd.DataFrame, new: pd.DataFrame) -> list:
    """Compare's section: the models whose lead term changed between the two sides."""
    lines = exponent_lines(base, new)
    if not lines:
        return []
    return [Heading(2, "Scaling models whose lead term changed"), Bullets(lines),
            Para(f"Scaling model: {DEFINITIONS['scaling_model']}.")]  # fmt: skip
