"""Where scaling will stop, before it is measured: a performance model (analysis.pmnf, Extra-P's
PMNF and its way of choosing one) of every curve of scaling.csv (a figure's mean against p) and
of every part of a run's time (scalestudy.analysis.breakdown), with what it predicts at scales not
measured: the figure with its interval, the parallel (or weak) efficiency, the scale where
efficiency falls below the study's `efficiency_threshold`, and the scale where one part of the
time overtakes the largest one.

scaling.csv gains the model columns (`add_model_columns`, in the scaling rule); the report and
its plot recompute the intervals from the table (`curve_fits`: the fits are deterministic, the
bootstrap seeded). What the models say in words and pictures is the presentation's: the
sentences and the models' section (presentation.scaling_models_page), the `models` plot
(presentation.plots.plot_models), a planned sweep's predicted scales
(presentation.planned_predictions.prediction_lines).

Definitions (also printed beside the models): see DEFINITIONS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..config.sweep import defaults
from ..model import scaling_figures as figures
from ..model.metrics import DECLARED
from . import intervals, pmnf
from .breakdown import part_of
from .scaling import THRESHOLD_KEY, curve_columns, efficiency_threshold

BEYOND_KEY = "predict_up_to"
# Scales on which a prediction is drawn and searched, from the smallest measured to `predict_up_to`
# times the largest (geometric).
GRID = 160
# The predictions scaling.csv carries: at these multiples of the largest measured scale.
MULTIPLES = (2, 4)
# The most curves the models plot draws (beyond: the default curve alone; the page has them all).
MAX_DRAWN = 6
# A model whose leave-one-out SMAPE is above this (%) predicts its own scales badly: said so.
POOR_FIT = 20.0
# A step between two scales whose speedup per unit of p exceeds this is superlinear (HOOMD-blue on
# Gadi, 1 to 2 nodes: 2.50x); the interval then also spans the fit without the scales before it.
SUPERLINEAR = 1.05

DEFINITIONS = {
    "scaling_model": (
        "the performance model normal form (Extra-P's PMNF) f(p) = c + a·p^i·log2(p)^j, p = MPI ranks (one per"
        " GPU), i and j from Extra-P's building blocks (i from 0 to 3 in quarters and thirds, j 0 to 2; for a"
        " figure that falls with p also negative i and j), fitted by least squares to the mean of the repeats"
        " at each scale; chosen among every such hypothesis and the constant by the leave-one-out SMAPE (each"
        " scale predicted from the others), a term contributing under 0.05% of every value dropped, fewer"
        f" terms preferred at equal error; no model below {pmnf.MIN_SCALES} scales"
    ),
    "smape": "symmetric mean absolute percentage error: mean over the scales of 2|f(p) − y|/(|f(p)| + |y|), in %;"
    " leave-one-out: each scale's f fitted without it",
    "adjusted_r2": "1 − (RSS/TSS)·(n − 1)/(n − k − 1) over the n scales, k terms (in-sample)",
    "prediction_interval": (
        f"for a rate or a time: the {pmnf.CONFIDENCE:.0%} interval, in log space, of the figure modelled as a rate"
        " (a time inverted, so that its interval is exactly the inverse of the rate's and never reaches zero):"
        " the bootstrap's half-width (below) plus a distance term per doubling beyond the largest measured"
        " scale, the larger of the one calibrated on held-out published strong-scaling series"
        f" (analysis/{intervals.CALIBRATION_FILE.name}, written by benchmarks/calibrate_intervals.py) and the one the"
        " study's own leave-future-out backtest asks for; for strong scaling, the first doubling instead: the"
        " centre corrected by the calibration series' median miss per doubling (their models promised more than"
        " was published) and a term below and one above it, each holding all but an equal share of those"
        " series' misses on its side; an interval spanning more than"
        f" ×{intervals.USEFUL_SPAN:g} is said in words, not as a number. The bootstrap (and another figure's"
        f" interval): {pmnf.BOOTSTRAP} refits of each model within tolerance of the"
        f" best (leave-one-out SMAPE ≤ {pmnf.CHOICE_TOLERANCE[0]}× the best's or + {pmnf.CHOICE_TOLERANCE[1]:g}"
        " points; up to 5: the choice's uncertainty), each on its fit plus its residuals (scaled for the"
        " fitted coefficients) times a standard normal, a residual no smaller than the repeats' standard"
        " error at that scale (their noise); for another figure, after a superlinear start (a step from one"
        f" scale to the next whose speedup exceeds {SUPERLINEAR}× the ratio of the scales) it also spans the"
        " fit without the scales before that step"
    ),
    "efficiency_threshold": "the smallest scale where the model's parallel (weak) efficiency, against the"
    " measured figure at the smallest scale, falls below the study's efficiency_threshold; its interval:"
    " where the two edges of the figure's calibrated interval (prediction interval) cross it",
    "overtakes": "the smallest scale where a part's modelled time passes the part that was largest at the"
    " smallest scale; its interval: the same for paired bootstrap refits of both",
}


def setting(key: str):
    """A study's model setting as the schema defaults it (a published record has none)."""
    return defaults()["study"][key]


@dataclass(frozen=True)
class Shown:
    """A model as shown: the fitted PMNF model, or (a time) the inverse of its rate's model."""

    model: pmnf.Model
    inverted: bool = False

    def __call__(self, p) -> np.ndarray:
        value = self.model(p)
        if not self.inverted:
            return value
        with np.errstate(divide="ignore"):
            return 1.0 / value

    def symbols(self, digits: int = 4) -> str:
        return f"1/({self.model.symbols(digits)})" if self.inverted else self.model.symbols(digits)

    def form(self) -> str:
        return f"1/({self.model.form()})" if self.inverted else self.model.form()

    def words(self) -> str:
        return f"the inverse of a rate that {self.model.words()}" if self.inverted else self.model.words()

    @property
    def lead(self) -> pmnf.Term | None:
        return self.model.lead

    @property
    def smape_loo(self) -> float:
        return self.model.smape_loo

    @property
    def smape(self) -> float:
        return self.model.smape

    @property
    def adj_r2(self) -> float:
        return self.model.adj_r2


@dataclass
class CurveFit:
    """One figure of one curve: its scales and means, the fit, and the settings in force."""

    curve: dict
    metric: str
    label: str
    unit: str
    kind: str
    scaling: str
    p: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    ranks_per_node: float | None
    fit: pmnf.Fit
    threshold: float
    beyond: float
    spread: np.ndarray | None = None  # the repeats' standard deviation / mean per scale

    @property
    def shown_fit(self) -> pmnf.Fit:
        """The fit whose best model is the centre of the prediction: for a time, the fit of its
        rate (the calibrated interval is made on the rate: analysis.intervals.orient), not the
        fit of the time; for another figure, `fit`."""
        if self.kind == "time":
            return pmnf.fit(self.p, intervals.orient(self.mean, self.kind))
        return self.fit

    @property
    def shown(self) -> Shown | None:
        """The model the page, scaling.csv and the plot show (`shown_fit`'s; a time's inverted)."""
        best = self.shown_fit.best
        return None if best is None else Shown(best, inverted=self.kind == "time")

    @property
    def variant(self) -> str:
        return str(self.curve.get("variant", ""))

    def grid(self) -> np.ndarray:
        return np.unique(np.geomspace(self.p.min(), self.p.max() * self.beyond, GRID).round(6))

    def superlinear(self) -> int:
        """How many of the smallest scales are followed by a superlinear step (speedup per
        doubling above SUPERLINEAR: a cache effect, which no PMNF term of p describes)."""
        if self.kind not in ("rate", "time") or self.scaling == "weak":
            return 0
        count = 0
        for k in range(len(self.p) - 1):
            low, high = (self.mean[k], self.mean[k + 1]) if self.kind == "rate" else (self.mean[k + 1], self.mean[k])
            if not low > 0 or high / low / (self.p[k + 1] / self.p[k]) <= SUPERLINEAR:
                break
            count += 1
        return count

    def without_superlinear(self) -> pmnf.Fit | None:
        """The fit from the scales after the superlinear steps, where enough remain."""
        skip = self.superlinear()
        if not skip or self.fit.best is None or len(self.p) - skip < pmnf.MIN_SCALES:
            return None
        found = pmnf.fit(self.p[skip:], self.mean[skip:])
        return found if found.best is not None else None

    def fits(self) -> list[tuple[pmnf.Fit, np.ndarray]]:
        """The fit and, after a superlinear start, the fit without it (each with its scales' errors)."""
        out = [(self.fit, self.se)]
        other = self.without_superlinear()
        if other is not None:
            out.append((other, self.se[self.superlinear() :]))
        return out

    def calibrated(self, at, level: float = pmnf.CONFIDENCE) -> intervals.Interval:
        """The calibrated interval (analysis.intervals) of a rate or a time at `at`: the figure
        modelled as a rate, its interval widened with the distance beyond the largest measured
        scale as the published series' held-out errors say; with why there is no useful one."""
        return intervals.interval(self.p, self.mean, at, self.kind, self.se, self.spread, level, scaling=self.scaling)

    def prediction(self, at) -> pmnf.Prediction:
        """The figure at `at` with its interval: a rate's or a time's calibrated (`calibrated`);
        another figure's the best model's, its interval spanning every fit's (`fits`)."""
        if self.kind in intervals.KINDS and self.fit.best is not None:
            found = self.calibrated(at)
            return pmnf.Prediction(found.at, found.value, found.low, found.high)
        found = [pmnf.predict(fit, at, se) for fit, se in self.fits()]
        low = np.min([f.low for f in found], axis=0)
        high = np.max([f.high for f in found], axis=0)
        return pmnf.Prediction(found[0].at, found[0].value, low, high)

    def draws(self, at) -> np.ndarray:
        """Bootstrap predictions of every fit (`fits`); nan below the scales a fit was made on
        (a fit without a superlinear start says nothing of the scales before it)."""
        at = np.asarray(at, dtype=float)
        out = []
        for fit, se in self.fits():
            sample = pmnf.draws(fit, at, se)
            sample[:, at < fit.best.p.min()] = np.nan
            out.append(sample)
        return np.concatenate(out)

    def efficiency(self, values: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Parallel (weak) efficiency of a predicted figure against the measured smallest scale
        (model.scaling_figures' definitions)."""
        p0, y0 = self.p[0], self.mean[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.scaling == "weak":
                extensive = DECLARED[self.metric].extensive if self.metric in DECLARED else True
                return figures.weak_efficiency(y0, values, self.kind, at / p0, extensive)
            return figures.parallel_efficiency(figures.speedup(y0, values, self.kind), at / p0)

    def scale_words(self, p: float) -> str:
        """'24 nodes (p = 1,152)' where a curve has several nodes, else 'p = 12' (a crossing
        between two scales is a real number: 'p = 1.4')."""
        rank_text = f"{p:,.0f}" if p >= 10 or float(p).is_integer() else f"{p:.2g}"
        if self.ranks_per_node and self.ranks_per_node > 0 and self.p.max() > self.ranks_per_node:
            nodes = p / self.ranks_per_node
            return f"{nodes:,.3g} nodes (p = {rank_text})"
        return f"p = {rank_text}"

    def nodes_words(self, p: float) -> str:
        """The number alone, in the unit scale_words uses (nodes where a curve has several)."""
        if self.ranks_per_node and self.ranks_per_node > 0 and self.p.max() > self.ranks_per_node:
            return f"{p / self.ranks_per_node:,.3g}"
        return f"{p:,.0f}" if p >= 10 or float(p).is_integer() else f"{p:.2g}"


def curve_fits(
    scaling: pd.DataFrame, study: str | None = None, metrics: list[str] | None = None, terms: int = 1
) -> list[CurveFit]:
    """A fit per curve and figure (with at least one successful scale) of `study`, `metrics`."""
    if scaling.empty or "metric" not in scaling.columns:
        return []
    table = scaling if study is None else scaling[scaling["study"] == study]
    if metrics is not None:
        table = table[table["metric"].isin(metrics)]
    table = table[table["n"] > 0]
    keys = [*curve_columns(table), "metric"]
    out = []
    for key, rows in table.groupby(keys, dropna=False, sort=False):
        rows = rows.sort_values("ranks")
        by_p = rows.groupby("ranks", sort=True)
        p = np.asarray(list(by_p.groups), dtype=float)
        mean = by_p["mean"].mean().to_numpy(float)
        std = by_p["std"].mean().to_numpy(float) if "std" in rows.columns else np.full(p.shape, np.nan)
        n = by_p["n"].sum().to_numpy(float)
        rpn = rows["ranks_per_node"].unique() if "ranks_per_node" in rows.columns else []
        first = rows.iloc[0]
        beyond = first.get(BEYOND_KEY) if BEYOND_KEY in rows.columns else None
        out.append(
            CurveFit(
                curve=dict(zip(keys, key, strict=True)),
                metric=str(first["metric"]),
                label=str(first.get("metric_label", first["metric"])),
                unit=str(first.get("unit", "")),
                kind=str(first.get("kind", "")),
                scaling=str(first.get("scaling", "strong")),
                p=p,
                mean=mean,
                se=std / np.sqrt(n),
                spread=std / mean,
                ranks_per_node=float(rpn[0]) if len(rpn) == 1 and rpn[0] > 0 else None,
                fit=pmnf.fit(p, mean, terms=terms),
                threshold=efficiency_threshold(first),
                beyond=float(beyond) if beyond is not None and pd.notna(beyond) else setting(BEYOND_KEY),
            )
        )
    return out


def first_below(curve: np.ndarray, floor: float, at: np.ndarray) -> float:
    """The first scale of `at` where `curve` falls below `floor` (model.scaling_figures.falls_below;
    inf where none)."""
    below = np.nonzero(figures.falls_below(curve, floor))[0]
    return float(at[below[0]]) if below.size else math.inf


def interval(values: np.ndarray) -> tuple[float, float]:
    """The CONFIDENCE interval of crossing scales, inf counted as beyond every finite one."""
    tail = (1 - pmnf.CONFIDENCE) / 2 * 100
    finite = values[np.isfinite(values)]
    ceiling = (finite.max() if finite.size else 1.0) * 2
    low, high = np.percentile(np.where(np.isfinite(values), values, ceiling), [tail, 100 - tail], method="nearest")
    return tuple(math.inf if v >= ceiling else float(v) for v in (low, high))


def efficiency_limit(cf: CurveFit) -> dict | None:
    """Where the model's efficiency falls below the threshold: {at, low, high} (inf: not within
    predict_up_to × the largest scale); None without a model or a speedup (size figures)."""
    if cf.fit.best is None or cf.kind not in ("rate", "time"):
        return None
    at = cf.grid()
    at = at[at > cf.p[0]]  # at p0 the efficiency is 1 by definition
    band = cf.calibrated(at)
    if np.isfinite(band.value).all():
        # The calibrated band, as efficiency: the crossing of its central, pessimistic and optimistic edges.
        edges = [cf.efficiency(v, at) for v in (band.value, band.low, band.high)]
        best = first_below(edges[0], cf.threshold, at)
        low, high = sorted(first_below(e, cf.threshold, at) for e in edges[1:])
        return {"at": best, "low": low, "high": high, "up_to": float(at[-1])}
    best = first_below(cf.efficiency(cf.fit.best(at), at), cf.threshold, at)
    crossings = np.array([first_below(cf.efficiency(row, at), cf.threshold, at) for row in cf.draws(at)])
    low, high = interval(crossings)
    return {"at": best, "low": low, "high": high, "up_to": float(at[-1])}


def predictions(cf: CurveFit) -> dict:
    """The figure and its efficiency at MULTIPLES of the largest scale, with intervals."""
    at = np.array([cf.p.max() * m for m in MULTIPLES])
    found = cf.prediction(at)
    notes = cf.calibrated(at).reasons if cf.kind in intervals.KINDS else [""] * len(at)
    return {
        "at": at,
        "value": found.value,
        "low": found.low,
        "high": found.high,
        "efficiency": cf.efficiency(found.value, at),
        "note": notes,  # why the interval is no useful prediction ('' where it is one)
    }


def overtaking(parts: list[CurveFit]) -> list[dict]:
    """For the parts of one breakdown: each part that passes the largest part at the smallest
    scale, where (the first scale of the grid), with the interval of paired bootstrap draws."""
    # A time beside the parts (communication hidden behind compute) overlaps them: not one of them.
    fitted = [cf for cf in parts if cf.fit.best is not None and not getattr(part_of(cf.metric), "beside", False)]
    if len(fitted) < 2:
        return []
    largest = max(fitted, key=lambda cf: cf.mean[0])
    at = largest.grid()
    out = []
    big = largest.fit.best(at)
    big_draws = largest.draws(at)
    for cf in fitted:
        if cf is largest:
            continue
        gap = big - cf.fit.best(at)
        best = first_below(gap, 0.0, at)
        if math.isinf(best):
            continue
        mine = cf.draws(at)
        rows = min(len(mine), len(big_draws))
        crossings = np.array([first_below(big_draws[k] - mine[k], 0.0, at) for k in range(rows)])
        low, high = interval(crossings)
        out.append({"part": cf, "over": largest, "at": best, "low": low, "high": high, "measured": best <= cf.p.max()})
    return out


def is_part(metric: str) -> bool:
    return part_of(metric) is not None


# ---------------------------------------------------------------- scaling.csv's columns

MODEL_COLUMNS = (
    "model", "model_form", "model_words", "model_lead_i", "model_lead_j", "model_smape_loo", "model_smape",
    "model_adj_r2", "model_value", "model_status", THRESHOLD_KEY, BEYOND_KEY,
    "model_efficiency_below_p", "model_efficiency_below_low", "model_efficiency_below_high",
)  # fmt: skip


def add_model_columns(
    scaling: pd.DataFrame, threshold: float | None = None, beyond: float | None = None
) -> pd.DataFrame:
    """scaling.csv with each row's model: its curve and figure's formula, form, words, lead term,
    errors, value at the row's scale, and why there is none; the primary figure's rows also the
    scale where efficiency falls below the threshold, and its predictions at MULTIPLES of the
    largest scale (`model_at_<m>x` with `_low`, `_high`, and `_note`: why the interval is no useful
    prediction, '' where it is one)."""
    if scaling.empty or "metric" not in scaling.columns:
        return scaling
    table = scaling.copy()
    table[THRESHOLD_KEY] = figures.EFFICIENCY_THRESHOLD if threshold is None else float(threshold)
    table[BEYOND_KEY] = setting(BEYOND_KEY) if beyond is None else float(beyond)
    for column in MODEL_COLUMNS:
        if column not in table.columns:
            table[column] = np.nan
    for column in ("model", "model_form", "model_words", "model_status"):
        table[column] = table[column].astype(object)
    keys = [*curve_columns(table), "metric"]
    for cf in curve_fits(table):
        mask = np.ones(len(table), dtype=bool)
        for key in keys:
            value = cf.curve[key]
            mask &= table[key].isna().to_numpy() if pd.isna(value) else (table[key] == value).to_numpy()
        best = cf.shown
        if best is None:
            table.loc[mask, "model_status"] = cf.fit.reason
            continue
        lead = best.lead
        table.loc[mask, "model"] = best.symbols()
        table.loc[mask, "model_form"] = best.form()
        table.loc[mask, "model_words"] = best.words()
        table.loc[mask, "model_lead_i"] = float(lead.i) if lead else 0.0
        table.loc[mask, "model_lead_j"] = lead.j if lead else 0
        table.loc[mask, "model_smape_loo"] = best.smape_loo
        table.loc[mask, "model_smape"] = best.smape
        table.loc[mask, "model_adj_r2"] = best.adj_r2
        table.loc[mask, "model_value"] = best(table.loc[mask, "ranks"].to_numpy(float))
        table.loc[mask, "model_status"] = f"fitted: {cf.shown_fit.candidates} hypotheses, {len(cf.p)} scales"
        primary = bool(table.loc[mask, "primary"].astype(bool).any()) if "primary" in table.columns else False
        if primary:
            limit = efficiency_limit(cf)
            if limit is not None:
                table.loc[mask, "model_efficiency_below_p"] = limit["at"]
                table.loc[mask, "model_efficiency_below_low"] = limit["low"]
                table.loc[mask, "model_efficiency_below_high"] = limit["high"]
            found = predictions(cf)
            for m, value, low, high, note in zip(
                MULTIPLES, found["value"], found["low"], found["high"], found["note"], strict=True
            ):
                table.loc[mask, f"model_at_{m}x"] = value
                table.loc[mask, f"model_at_{m}x_low"] = low
                table.loc[mask, f"model_at_{m}x_high"] = high
                column = f"model_at_{m}x_note"
                if column not in table.columns:
                    table[column] = ""
                table[column] = table[column].astype(object)
                table.loc[mask, column] = note
    return table


def add_to_scaling_csv(path: str | Path, threshold: float | None = None, beyond: float | None = None) -> None:
    """The scaling rule's step after analysis.verdicts.write_variants_table: the model columns, in place."""
    from .records import read_table, write_table

    write_table(add_model_columns(read_table(Path(path)), threshold, beyond), path)
