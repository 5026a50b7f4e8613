"""Plots of one study's scaling and variant tables (primary metric). Each plot names
its definition and the number of repeats its points rest on; scales where no run
succeeded are gaps marked with a red x, scales not run yet a grey o."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from .analysis import DEFINITIONS, GOOD_EFFICIENCY  # noqa: E402
from .model.paths import PLOT_KINDS
from .model.steplog import step_log  # noqa: E402


def repeats_note(table: pd.DataFrame) -> str:
    counts = sorted(set(table.loc[table["n"] > 0, "n"].astype(int)))
    text = "n = " + (", ".join(map(str, counts)) if counts else "0") + " successful run(s) per point"
    failed = int(((table["n"] == 0) & (table["n_failed"] > 0)).sum())
    pending = int(((table["n"] == 0) & (table["n_pending"] > 0) & (table["n_failed"] == 0)).sum())
    if failed:
        text += f"; x = {failed} scale(s) with no successful run"
    if pending:
        text += f"; o = {pending} scale(s) not run yet"
    return text


def primary_table(scaling: pd.DataFrame, study: str) -> pd.DataFrame:
    """The study's rows of its app's primary metric (the first metric if it has none)."""
    if scaling.empty:
        return scaling
    table = scaling[scaling["study"] == study]
    if table.empty:
        return table
    chosen = table[table["primary"].astype(bool)] if "primary" in table.columns else table.iloc[0:0]
    return chosen if not chosen.empty else table[table["metric"] == table["metric"].iloc[0]]


def message_plot(path: Path, message: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 1.6))
    ax.text(0.5, 0.5, textwrap.fill(message, 70), ha="center", va="center")
    ax.set_axis_off()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def mark_missing(ax, table: pd.DataFrame) -> None:
    """Failed and not-yet-run scales on the x axis (the curves have gaps there)."""
    at_bottom = blended_transform_factory(ax.transData, ax.transAxes)
    missing = table[table["n"] == 0]
    failed = missing[missing["n_failed"] > 0]
    pending = missing[(missing["n_failed"] == 0) & (missing["n_pending"] > 0)]
    if not failed.empty:
        ax.scatter(failed["ranks"], [0.03] * len(failed), marker="x", color="red", s=90, transform=at_bottom,
                   label="no successful run", zorder=5, clip_on=False)  # fmt: skip
    if not pending.empty:
        ax.scatter(pending["ranks"], [0.03] * len(pending), marker="o", facecolors="none", edgecolors="grey", s=70,
                   transform=at_bottom, label="not run yet", zorder=5, clip_on=False)  # fmt: skip


def curve(rows: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """x, y of one curve with NaN where no run succeeded, so the line breaks there."""
    rows = rows.sort_values("ranks")
    y = rows[column].where(rows["n"] > 0) if column in rows.columns else pd.Series(np.nan, index=rows.index)
    return rows["ranks"].to_numpy(float), y.to_numpy(float)


def plot_from_files(
    scaling_csv: str, variants_csv: str, study: str, out: Mapping[str, Path | str], budget_su=None, log=None
) -> None:
    """The plots rule's entry: the study's tables in, its plots out."""
    from .analysis import read_table

    with step_log(log) as note:
        plot_study(read_table(scaling_csv), read_table(variants_csv), study, out, budget_su)
        note(f"{study}: {', '.join(str(path) for path in out.values())}")


def plot_study(
    scaling: pd.DataFrame, variants: pd.DataFrame, study: str, out: Mapping[str, Path | str], budget_su=None
) -> None:
    """Write the plots of `study` to out[kind] for every kind in PLOT_KINDS."""
    sns.set_theme(style="whitegrid", context="notebook")
    for path in out.values():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    table = primary_table(scaling, study)
    if table.empty or (table["n"] == 0).all():
        state = "no run finished yet" if not table.empty and (table["n_failed"] == 0).all() else "no successful run"
        for kind in PLOT_KINDS:
            message_plot(Path(out[kind]), f"{study}: {state}, so no {kind} plot.")
        return
    label = f"{table['metric_label'].iloc[0]} [{table['unit'].iloc[0]}]"
    ranks = sorted(int(r) for r in table["ranks"].unique())
    weak = table["scaling"].iloc[0] == "weak"
    note = repeats_note(table)
    palette = dict(
        zip(sorted(table["variant"].unique()), sns.color_palette(n_colors=table["variant"].nunique()), strict=True)
    )

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant, rows in table.groupby("variant"):
        x, y = curve(rows, "mean")
        err = rows.sort_values("ranks")["ci95"].fillna(0).to_numpy(float)
        ax.errorbar(x, y, yerr=err, marker="o", capsize=4, label=variant, color=palette[variant])
    mark_missing(ax, table)
    subtitle = f"mean ± 95% CI (Student t; no bar when n = 1); {note}"
    finish(ax, fig, out["metric"], f"{study}: {label} vs ranks", subtitle, label, ranks)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    column, name = ("scaled_speedup", "scaled speedup") if weak else ("speedup", "speedup")
    for variant, rows in table.groupby("variant"):
        ax.plot(*curve(rows, column), marker="o", label=variant, color=palette[variant])
    p0 = table["p0"].min()
    ax.plot(ranks, [r / p0 for r in ranks], "k--", label="ideal (p/p0)")
    if not weak:
        for variant, rows in table.groupby("variant"):
            serial = rows["amdahl_serial_fraction"].iloc[0]
            if np.isfinite(serial) and serial > 0:
                q = np.geomspace(1, max(ranks) / p0, 50)
                ax.plot(q * p0, 1 / (serial + (1 - serial) / q), ":", color=palette[variant],
                        label=f"Amdahl fit f = {serial:.3g} ({variant})")  # fmt: skip
    mark_missing(ax, table)
    # Log-log: ideal speedup is a straight line.
    ax.set_yscale("log", base=2)
    definition = DEFINITIONS["scaled_speedup" if weak else "speedup"]
    finish(ax, fig, out["speedup"], f"{study}: {name} of {label}", f"{definition}; {note}", name, ranks)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    column, name = (
        ("weak_efficiency", "weak-scaling efficiency") if weak else ("parallel_efficiency", "parallel efficiency")
    )
    for variant, rows in table.groupby("variant"):
        ax.plot(*curve(rows, column), marker="o", label=variant, color=palette[variant])
    ax.axhline(1.0, color="k", linestyle="--", label="ideal")
    ax.axhline(GOOD_EFFICIENCY, color="grey", linestyle=":", label=f"{GOOD_EFFICIENCY:.0%}")
    ax.set_ylim(bottom=0)
    mark_missing(ax, table)
    definition = DEFINITIONS["weak_efficiency" if weak else "parallel_efficiency"]
    finish(ax, fig, out["efficiency"], f"{study}: {name} of {label}", f"{definition}; {note}", name, ranks)

    plot_variants(variants, table, study, Path(out["variants"]), ranks)
    plot_cost(table, study, Path(out["cost"]), budget_su)


def plot_variants(variants: pd.DataFrame, table: pd.DataFrame, study: str, path: Path, ranks: list[int]) -> None:
    metric = table["metric"].iloc[0]
    rows = variants[(variants["study"] == study) & (variants["metric"] == metric)] if not variants.empty else variants
    if rows.empty:
        message_plot(path, f"{study}: one MPI flag set and one NCCL env set, so no variant to compare with default.")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (axis, name, fixed), group in rows.groupby(["axis", "set", "baseline_variant"]):
        group = group.sort_values("ranks")
        ratio = group["ratio"].to_numpy(float)
        low = np.nan_to_num(ratio - group["ci_low"].to_numpy(float))
        high = np.nan_to_num(group["ci_high"].to_numpy(float) - ratio)
        ax.errorbar(group["ranks"], ratio, yerr=[low, high], marker="o", capsize=4, label=f"{axis} {name} vs {fixed}")
    ax.axhline(1.0, color="k", linestyle="--", label="no difference")
    # Log scale: "twice as fast" and "twice as slow" are the same distance from 1.
    ax.set_yscale("log")
    label = table["metric_label"].iloc[0]
    counts = sorted(set(rows["n"]) | set(rows["n_baseline"]))
    subtitle = f"{DEFINITIONS['variant_ratio']}; n = {', '.join(map(str, counts))} run(s) per side"
    baselines = ", ".join(sorted(set(rows["baseline"].astype(str))))
    title = f"{study}: speed ratio vs {baselines} ({label})"
    finish(ax, fig, path, title, subtitle, "speed ratio (> 1 faster)", ranks)


def plot_cost(table: pd.DataFrame, study: str, path: Path, budget_su=None) -> None:
    costed = table[(table["n"] > 0) & table.get("su_per_run", pd.Series(np.nan, index=table.index)).notna()]
    if costed.empty or "walltime_used_s" not in costed.columns:
        message_plot(path, f"{study}: no service units recorded (no charge rate on this cluster), so no cost plot.")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant, rows in costed.groupby("variant"):
        rows = rows.sort_values("ranks")
        ax.plot(rows["walltime_used_s"] / 3600, rows["su_per_run"], marker="o", label=variant)
        for row in rows.itertuples():
            ax.annotate(f"{int(row.nodes)}n", (row.walltime_used_s / 3600, row.su_per_run), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")  # fmt: skip
    best = costed[costed["cost_optimal"].astype(bool)]
    ax.scatter(best["walltime_used_s"] / 3600, best["su_per_run"], s=160, facecolors="none", edgecolors="green",
               label="cost-optimal scale")  # fmt: skip
    if budget_su is not None:
        ax.axhline(budget_su, color="red", linestyle=":", label=f"budget {budget_su:g} SU")
    source = "+".join(sorted(set("+".join(costed["service_units_source"].dropna().astype(str)).split("+")) - {""}))
    subtitle = f"{DEFINITIONS['service_units']} (here: {source or 'unknown'}); {repeats_note(table)}"
    ax.set_title(f"{study}: cost per run vs wall time per run\n" + textwrap.fill(subtitle, 90), fontsize=9)
    ax.set_xlabel("walltime used per run [h] (labels: nodes)")
    ax.set_ylabel("service units per run")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def finish(ax, fig, path: Path, title: str, subtitle: str, ylabel: str, ranks: list[int]) -> None:
    ax.set_title(f"{title}\n" + textwrap.fill(subtitle, 90), fontsize=9)
    ax.set_xlabel("p = MPI ranks (nodes x ranks per node)")
    ax.set_ylabel(ylabel)
    ax.set_xscale("log", base=2)
    # Label the scales that ran, as plain numbers (not 2^k).
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.minorticks_off()
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
