"""The scaling models on a page (scalestudy.analysis.scaling_models), and what they say in
words: one sentence per study, a table of each curve's model of its primary figure and of each
part of its time with the predictions at 2x and 4x the largest measured scale, where efficiency
falls below the threshold, where one part overtakes another, and how the models were chosen.
The report's study section and the published record's page show it; compare names a model
whose lead term changed; a planned sweep's predictions (planned_predictions) say how reliable
a model is in its words.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..analysis.breakdown import part_of
from ..analysis.intervals import KINDS, LEVELS, candidates, measure_next, target_problem
from ..analysis.scaling import curve_columns
from ..analysis.scaling_models import (
    DEFINITIONS,
    MULTIPLES,
    POOR_FIT,
    CurveFit,
    curve_fits,
    efficiency_limit,
    is_part,
    overtaking,
)
from ..model.scaling_figures import falls_below
from .page import Bullets, Details, Heading, Para, Table, fmt

HEADING = "Where scaling will stop: scaling models"


# ---------------------------------------------------------------- sentences


def scale_range(cf: CurveFit, found: dict) -> str:
    """'about 24 nodes (p = 1,152), 16-40' or 'beyond p = 96' where it is not reached."""
    if math.isinf(found["at"]):
        return f"not within {cf.scale_words(found['up_to'] if 'up_to' in found else cf.p.max() * cf.beyond)}"
    high = "beyond the range" if math.isinf(found["high"]) else cf.nodes_words(found["high"])
    return f"about {cf.scale_words(found['at'])}, {cf.nodes_words(found['low'])}–{high}"


def efficiency_sentence(cf: CurveFit) -> str:
    name = "weak efficiency" if cf.scaling == "weak" else "parallel efficiency"
    if cf.fit.best is None:
        return f"{cf.label}: {cf.fit.reason}."
    found = efficiency_limit(cf)
    if found is None:
        return ""
    if math.isinf(found["at"]):
        return (
            f"The model keeps {name} above {cf.threshold:.0%} up to {cf.scale_words(found['up_to'])}"
            f" ({cf.beyond:g}× the largest measured scale)"
            + ("." if math.isinf(found["low"]) else f"; its interval reaches it from {cf.scale_words(found['low'])}.")
        )
    measured = cf.efficiency(cf.mean, cf.p)
    below = np.nonzero(falls_below(measured, cf.threshold))[0]
    if below.size:
        k = below[0]
        return (
            f"{name.capitalize()} is already below {cf.threshold:.0%} at {cf.scale_words(cf.p[k])} as measured"
            f" ({measured[k]:.2f}); the model puts the crossing at {scale_range(cf, found)}."
        )
    return f"{name.capitalize()} falls below {cf.threshold:.0%} at {scale_range(cf, found)}."


def reliability(cf: CurveFit) -> str:
    """'' for a model that predicts its own scales well; else why its predictions are weak."""
    best = cf.shown
    if best is not None and best.smape_loo > POOR_FIT:
        return (
            f"a poor fit: each scale left out is missed by {best.smape_loo:.0f}% (SMAPE) on average, so its"
            " predictions say little"
        )
    return ""


def model_sentence(cf: CurveFit) -> str:
    """'Steps/s ≈ −1,246 + 1,662·p^(1/2) (grows with the square root of p; leave-one-out SMAPE 4.6%,
    adjusted R² 0.998, 4 scales).'"""
    best = cf.shown
    if best is None:
        return f"{cf.label}: {cf.fit.reason}."
    weak = reliability(cf)
    return (
        f"{cf.label} ≈ {best.symbols()} ({best.words()}; leave-one-out SMAPE {best.smape_loo:.2g}%,"
        f" adjusted R² {best.adj_r2:.3g}, {len(cf.p)} scales{'; ' + weak if weak else ''})."
    )


def overtake_sentence(found: dict) -> str:
    part, over = part_of(found["part"].metric), part_of(found["over"].metric)
    cf = found["part"]
    name = part.part if part else found["part"].label
    other = over.part if over else found["over"].label
    if found["measured"]:
        passed = cf.mean > found["over"].mean[: len(cf.mean)] if len(cf.mean) == len(found["over"].mean) else None
        if passed is not None and passed.any():
            return f"{name} has passed {other} by {cf.scale_words(cf.p[np.nonzero(passed)[0][0]])} as measured."
        return f"{name} passes {other} within the measured scales (the model: at about {cf.scale_words(found['at'])})."
    return f"{name} passes {other} at {scale_range(cf, found)}."


def study_sentence(scaling: pd.DataFrame, study: str, primary: str) -> str:
    """One sentence per study: the primary figure's model and where its efficiency falls below the
    threshold (its default curve, else its first)."""
    fits = curve_fits(scaling, study, [primary])
    if not fits:
        return ""
    default = [cf for cf in fits if cf.variant == "mpi-default/nccl-default"]
    cf = (default or fits)[0]
    if cf.fit.best is None:
        return f"{cf.label}: {cf.fit.reason}; no prediction beyond the measured scales."
    limit = efficiency_sentence(cf)
    return f"{model_sentence(cf)[:-1]}; {limit[:1].lower()}{limit[1:]}"


# ---------------------------------------------------------------- the section


def predicted_cell(cf: CurveFit, at: float) -> str:
    """'5,418 [4,200–6,990]' at p = at (a rate's or a time's interval calibrated, analysis.intervals);
    the efficiency beside where the figure scales; where the interval says too little, why in words
    (and the 80% interval where that one is useful)."""
    if cf.kind in KINDS:
        band = cf.calibrated(np.array([at]))
        if band.reasons[0]:
            text = band.reasons[0][:1].upper() + band.reasons[0][1:]
            narrower = cf.calibrated(np.array([at]), level=min(LEVELS))
            if np.isfinite(narrower.value[0]) and not narrower.reasons[0]:
                text += (f"; its {narrower.level:.0%} interval: {fmt(narrower.low[0])}–{fmt(narrower.high[0])}"
                         f" (median {fmt(narrower.value[0])})")  # fmt: skip
            return text
    found = cf.prediction(np.array([at]))
    if found.value[0] <= 0:
        return "≤ 0: the model leaves the figure's range"
    text = f"{fmt(found.value[0])} [{fmt(max(found.low[0], 0.0))}–{fmt(found.high[0])}]"
    if cf.kind in ("rate", "time") and not is_part(cf.metric):
        text += f", E {cf.efficiency(found.value, np.array([at]))[0]:.2f}"
    return text


def plus_minus(span: float) -> str:
    """An interval's high/low as '±30%' (its half-width in log space), 'without bound' where infinite."""
    return "without bound" if not math.isfinite(span) else f"±{(math.sqrt(span) - 1) * 100:.0f}%"


def measure_next_sentence(cf: CurveFit, target: float | None = None, cost=None, choices=None) -> str:
    """'Where to measure next for p = 64: p = 48 (96 SU): the 95% interval there goes from ±30% to
    about ±9%.' (target: 2x the largest measured scale unless named; cost(p): the SU of one run
    at p where a forecast has it; choices: the scales one could measure, default
    intervals.candidates in whole nodes)."""
    if cf.kind not in KINDS or cf.fit.best is None:
        return ""
    largest = float(cf.p.max())
    target = largest * 2 if target is None else float(target)
    problem = target_problem(target, largest, cf.beyond)
    if problem:
        return f"Where to measure next: {problem}."
    if choices is None:
        choices = candidates(largest, target, cf.ranks_per_node or 1.0)
    found = measure_next(cf.p, cf.mean, cf.kind, target, cf.se, choices=choices, scaling=cf.scaling)
    if not math.isfinite(found.scale) or found.after is None:
        return ""
    price = cost(found.scale) if cost is not None else None
    priced = f" ({price:,.3g} SU a run)" if price else ""
    return (
        f"Where to measure next for {cf.scale_words(target)}: {cf.scale_words(found.scale)}{priced}: the"
        f" {found.before.level:.0%} interval there goes from {plus_minus(found.before.span[0])} to about"
        f" {plus_minus(found.after.span[0])} (measured as the model expects it; of {len(found.widths)} scale"
        f"{'s' if len(found.widths) != 1 else ''} between, the one that narrows it most)."
    )


def row_of(cf: CurveFit, named: bool) -> list[str]:
    declared = part_of(cf.metric)
    name = (
        (f"{declared.part} (beside the parts)" if declared.beside else f"{declared.part} (part)")
        if declared
        else cf.label
    )
    first = [cf.variant] if named else []
    best = cf.shown
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
    for cf in fits:
        sentence = measure_next_sentence(cf)
        if sentence:
            lines.append((f"{cf.variant}: " if named else "") + sentence)
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
