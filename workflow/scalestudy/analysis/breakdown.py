"""Where each scale spends its time: the parts of a run that an app declares
(`model.metrics.declare(..., part=..., whole=...)`, a time per step of the run) read from
scaling.csv, as fractions of their sum, and the part whose share grows fastest with p.

Definitions (also printed beside the table and the plot):
- part: a time per `whole` (a time step, a training step) the app measures on its own; the
  parts of one breakdown are disjoint and add up to the whole, each defined by its declaration.
  A time `beside` the parts (communication hidden behind compute) overlaps them: it is shown
  beside, as a fraction of the same whole, never stacked.
- fraction: mean of the part over the repeats / the sum of the parts' means, at one scale.
- grows fastest: the part whose fraction rises most (in points) from the smallest to the largest
  successful scale; a time scales as p^a between those two scales, a = log(t(p1)/t(p0)) /
  log(p1/p0) (a = -1: it falls as 1/p; a = 0: constant); the sentence gives the exponent of the
  part that grows fastest and of the largest part at the smallest scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ..apps.registry import APPS
from ..model.metrics import DECLARED, Metric
from .scaling import SCALE_COLUMNS, curve_columns

DEFINITIONS = {
    "fraction": "mean time of a part over the repeats / the sum of the parts' means at that scale",
    "grows_fastest": "the part whose fraction rises most from the smallest to the largest successful scale;"
    " a time t scales as p^a between them, a = log(t(p1)/t(p0)) / log(p1/p0) (−1: falls as 1/p)",
}


def part_of(name: str) -> Metric | None:
    """The declaration of a part of a breakdown, or None (not a part, or not declared here)."""
    declared = DECLARED.get(name)
    return declared if declared is not None and declared.part else None


def parts_table(scaling: pd.DataFrame, study: str | None = None) -> pd.DataFrame:
    """One row per curve, scale and part (with n > 0): the part's mean and its fraction of the
    whole at that scale. Empty when no figure of `study` is a declared part."""
    if scaling.empty or "metric" not in scaling.columns:
        return pd.DataFrame()
    table = scaling if study is None else scaling[scaling["study"] == study]
    parts = {name: part_of(name) for name in table["metric"].unique()}
    parts = {name: m for name, m in parts.items() if m is not None}
    rows = table[table["metric"].isin(list(parts)) & (table["n"] > 0)].copy()
    if rows.empty:
        return pd.DataFrame()
    rows["part"] = rows["metric"].map(lambda name: parts[name].part)
    rows["whole"] = rows["metric"].map(lambda name: parts[name].whole)
    rows["beside"] = rows["metric"].map(lambda name: parts[name].beside)
    at_scale = [c for c in curve_keys(rows) if c != "metric"] + ["whole"]
    stacked = rows["mean"].where(~rows["beside"], 0.0)
    total = stacked.groupby([rows[c] for c in at_scale], dropna=False).transform("sum")
    rows["fraction"] = rows["mean"] / total.where(total > 0)
    order = {name: i for i, name in enumerate(parts)}
    rows["order"] = rows["metric"].map(order)
    return rows.sort_values([*at_scale, "order"]).drop(columns="order").reset_index(drop=True)


def curve_keys(rows: pd.DataFrame) -> list[str]:
    """What tells a curve and a scale apart in scaling.csv (its curve columns and the scale)."""
    return [*curve_columns(rows), *SCALE_COLUMNS]


def curves(parts: pd.DataFrame, beside: bool = False) -> list[tuple[str, str, pd.DataFrame]]:
    """(variant, whole, its rows) per curve and breakdown, in the table's order; the times
    beside the parts only with `beside`."""
    if parts.empty:
        return []
    keys = [*curve_columns(parts), "whole"]
    parts = parts if beside else parts[~parts["beside"].astype(bool)]
    return [(str(rows["variant"].iloc[0]), str(rows["whole"].iloc[0]), rows)
            for _, rows in parts.groupby(keys, dropna=False, sort=False)]  # fmt: skip


def whole_name(whole: str) -> str:
    """'time step (LAMMPS's ...)' -> 'time step': the whole without how it is measured."""
    return whole.split(" (", 1)[0]


def growth(rows: pd.DataFrame) -> dict | None:
    """The part whose fraction grows most from the smallest to the largest scale of one curve,
    with both fractions and the exponent of its time; None with fewer than two scales."""
    rows = rows[~rows["beside"].astype(bool)]
    scales = sorted(rows["ranks"].unique())
    if len(scales) < 2:
        return None
    low, high = scales[0], scales[-1]
    first = rows[rows["ranks"] == low].set_index("part")
    last = rows[rows["ranks"] == high].set_index("part")
    shared = [part for part in first.index if part in last.index]
    if not shared:
        return None
    rise = {part: last.at[part, "fraction"] - first.at[part, "fraction"] for part in shared}
    part = max(shared, key=lambda name: rise[name])
    largest = max(shared, key=lambda name: first.at[name, "mean"])
    return {
        "part": part,
        "from": first.at[part, "fraction"],
        "to": last.at[part, "fraction"],
        "p_from": int(low),
        "p_to": int(high),
        "exponent": exponent(first.at[part, "mean"], last.at[part, "mean"], low, high),
        "largest": largest,
        "largest_exponent": exponent(first.at[largest, "mean"], last.at[largest, "mean"], low, high),
    }


def exponent(t0: float, t1: float, p0: float, p1: float) -> float:
    """a in t ∝ p^a between two scales (nan where a time is not positive)."""
    if not (t0 > 0 and t1 > 0) or p1 == p0:
        return math.nan
    return math.log(t1 / t0) / math.log(p1 / p0)


def growth_sentence(rows: pd.DataFrame, named: bool = False) -> str:
    """One sentence per curve: the part that grows fastest with p, and how the largest part at
    the smallest scale goes, e.g. 'Comm grows fastest with p: from 12% of the time step at p = 1
    to 47% at p = 2 (its time as p^0.9); Pair, the largest part at p = 1, goes as p^−0.95.'"""
    variant, whole = str(rows["variant"].iloc[0]), whole_name(str(rows["whole"].iloc[0]))
    prefix = f"{variant}: " if named else ""
    found = growth(rows)
    if found is None:
        scales = ", ".join(str(int(p)) for p in sorted(rows["ranks"].unique()))
        return f"{prefix}one scale (p = {scales}), so no part's growth with p to name."
    text = (
        f"{prefix}{found['part']} grows fastest with p: from {found['from']:.0%} of the {whole} at p = "
        f"{found['p_from']} to {found['to']:.0%} at p = {found['p_to']}"
    )
    if found["from"] > 0:
        text += f" (its time as {power(found['exponent'])})"
    if found["largest"] != found["part"]:
        largest = f"{found['largest']}, the largest part at p = {found['p_from']}"
        text += f"; {largest}, goes as {power(found['largest_exponent'])}"
    return text + "."


def power(a: float) -> str:
    return "p^?" if math.isnan(a) else f"p^{a:.2g}".replace("-", "−")


def wholes(parts: pd.DataFrame) -> Mapping[str, list[Metric]]:
    """Each breakdown's whole -> its parts' declarations (for the definitions beside it)."""
    out: dict[str, list[Metric]] = {}
    for name in parts["metric"].unique():
        declared = part_of(name)
        if declared is not None:
            out.setdefault(declared.whole, []).append(declared)
    return out


def without_breakdown(app_name: str) -> str | None:
    """Why an app's runs have no breakdown (its own word, `App.breakdown_note`), or None when
    the app declares one."""
    app = APPS.get(app_name)
    if app is None or any(m.part for m in app.metrics):
        return None
    return app.breakdown_note or "its app declares no parts of a run"
