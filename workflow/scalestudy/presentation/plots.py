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

from ..analysis import breakdown, intervals  # noqa: E402
from ..analysis.breakdown import curves, part_of, parts_table, whole_name, without_breakdown  # noqa: E402
from ..analysis.scaling import CI_COLUMNS, curve_name, efficiency_threshold  # noqa: E402
from ..analysis.scaling_models import MAX_DRAWN, curve_fits, is_part  # noqa: E402
from ..analysis.sizes import has_size_tables, size_curves, size_declarations, size_text, study_size_figures  # noqa: E402
from ..analysis.statistics import CONFIDENCE  # noqa: E402
from ..model.metrics import WALLTIME_USED
from ..model.paths import PLOT_KINDS
from ..model.steplog import step_log  # noqa: E402
from .glossary import DEFINITIONS


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


# Why a study has no plot over message size although some run finished: its app measures none.
NO_SIZE_CURVE = "its app measures no curve over message size"


def missing_plots(
    scaling: pd.DataFrame, variants: pd.DataFrame, study: str, runs: pd.DataFrame | None = None
) -> dict[str, str]:
    """kind -> why the study's plot of that kind has nothing to draw. Such a plot is a file
    with that one line (the plots rule's output); the report says the line instead of
    showing an empty box. `runs`: the study's runs.csv, which holds its size tables."""
    table = primary_table(scaling, study)
    if table.empty or (table["n"] == 0).all():
        state = "no run finished yet" if not table.empty and (table["n_failed"] == 0).all() else "no successful run"
        return {kind: state for kind in PLOT_KINDS}
    why = {} if runs is not None and has_size_tables(runs) else {"sizes": NO_SIZE_CURVE}
    scales = sorted({int(r) for r in table.loc[table["n"] > 0, "ranks"]})
    if len(scales) == 1:
        for kind in ("speedup", "efficiency"):
            why[kind] = f"one scale succeeded (p = {scales[0]}), so nothing to scale against"
    metric = table["metric"].iloc[0]
    compared = (
        variants[(variants["study"] == study) & (variants["metric"] == metric)] if not variants.empty else variants
    )
    if compared.empty:
        why["variants"] = "one MPI flag set, one NCCL env set and one placement, so no variant to compare with default"
    elif compared["ratio"].notna().sum() == 0:
        why["variants"] = "no set other than default has a successful run at a scale where default has one"
    su = table["su_per_run"] if "su_per_run" in table.columns else pd.Series(np.nan, index=table.index)
    if ((table["n"] > 0) & su.notna()).sum() == 0 or WALLTIME_USED.name not in table.columns:
        why["cost"] = "no service units recorded (no charge rate on this cluster)"
    if parts_table(scaling, study).empty:
        why["breakdown"] = no_breakdown_reason(table)
    no_model = no_model_reason(scaling, study, str(table["metric"].iloc[0]))
    if no_model:
        why["models"] = no_model
    return why


def no_breakdown_reason(table: pd.DataFrame) -> str:
    """Why a study has no breakdown to draw: its app's own word, or no run recorded one."""
    note = without_breakdown(str(table["app"].iloc[0])) if "app" in table.columns else None
    return note or "no successful run recorded the parts of its time"


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


def ci_bars(rows: pd.DataFrame, column: str) -> np.ndarray:
    """Asymmetric error bars of a speedup or efficiency curve (`curve`'s order): its CI's distance
    below and above the figure; 0 where a scale has no interval (one repeat, unbounded)."""
    rows = rows.sort_values("ranks")
    y = rows[column].to_numpy(float) if column in rows.columns else np.full(len(rows), np.nan)
    low_column, high_column = CI_COLUMNS[column]
    if low_column not in rows.columns:
        return np.zeros((2, len(rows)))
    low, high = rows[low_column].to_numpy(float), rows[high_column].to_numpy(float)
    return np.nan_to_num(np.vstack([y - low, high - y]), nan=0.0).clip(min=0)


def plot_from_files(
    scaling_csv: str,
    variants_csv: str,
    study: str,
    out: Mapping[str, Path | str],
    budget_su=None,
    log=None,
    runs_csv: str | None = None,
) -> None:
    """The plots rule's entry: the study's tables in, its plots out."""
    from ..analysis.records import read_table

    with step_log(log) as note:
        runs = read_table(runs_csv) if runs_csv else None
        plot_study(read_table(scaling_csv), read_table(variants_csv), study, out, budget_su, runs)
        note(f"{study}: {', '.join(str(path) for path in out.values())}")


def plot_study(
    scaling: pd.DataFrame,
    variants: pd.DataFrame,
    study: str,
    out: Mapping[str, Path | str],
    budget_su=None,
    runs: pd.DataFrame | None = None,
) -> None:
    """Write the plots of `study` to out[kind] for every kind in PLOT_KINDS."""
    sns.set_theme(style="whitegrid", context="notebook")
    for path in out.values():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    table = primary_table(scaling, study)
    missing = missing_plots(scaling, variants, study, runs)
    for kind, why in missing.items():
        message_plot(Path(out[kind]), f"{study}: {why}, so no {kind} plot.")
    if len(missing) == len(PLOT_KINDS):
        return
    label = f"{table['metric_label'].iloc[0]} [{table['unit'].iloc[0]}]"
    ranks = sorted(int(r) for r in table["ranks"].unique())
    note = repeats_note(table)
    palette = dict(
        zip(sorted(table["variant"].unique()), sns.color_palette(n_colors=table["variant"].nunique()), strict=True)
    )

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant, rows in table.groupby("variant"):
        x, y = curve(rows, "mean")
        err = rows.sort_values("ranks")["ci95"].fillna(0).to_numpy(float)
        ax.errorbar(x, y, yerr=clipped_at_zero(y, err), marker="o", capsize=4, label=variant, color=palette[variant])
    mark_missing(ax, table)
    estimator = "trimmed mean (fastest and slowest run dropped)" if trimmed(table) else "mean"
    subtitle = f"{estimator} ± 95% CI (Student t; no bar when n = 1; cut at 0, which no figure goes below); {note}"
    finish(ax, fig, out["metric"], f"{study}: {label} vs ranks", subtitle, label, ranks)

    if "speedup" not in missing:
        plot_speedup(table, study, out, palette, ranks, label, note)
    if "efficiency" not in missing:
        plot_efficiency(table, study, out, palette, ranks, label, note)
    if "variants" not in missing:
        plot_variants(variants, table, study, Path(out["variants"]), ranks)
    if "cost" not in missing:
        plot_cost(table, study, Path(out["cost"]), budget_su)
    if "breakdown" not in missing:
        plot_breakdown(scaling, table, study, Path(out["breakdown"]))
    if "sizes" not in missing:
        plot_sizes(runs, study, Path(out["sizes"]))
    if "models" not in missing:
        plot_models(scaling, study, str(table["metric"].iloc[0]), Path(out["models"]))


def plot_sizes(runs: pd.DataFrame, study: str, path: Path) -> None:
    """Latency and bandwidth against message size, log axes: one row of two panels per
    operation (or the one curve family), a line per flag set / NCCL set / backend and scale,
    mean ± 95% CI of the repeats at each size."""
    curves = size_curves(runs)
    names = study_size_figures(runs)[:2]
    declared = size_declarations(runs)
    curves = curves[curves["metric"].isin(names)]
    facet = "param.operation" if "param.operation" in curves.columns else None
    facets = sorted(curves[facet].dropna().unique()) if facet else [None]
    fig, axes = plt.subplots(len(facets), len(names), figsize=(6 * len(names), 3.8 * len(facets)), squeeze=False)
    several_scales = curves["ranks"].nunique() > 1
    for row, value in enumerate(facets):
        rows = curves if facet is None else curves[curves[facet] == value]
        for column, name in enumerate(names):
            ax = axes[row][column]
            figure = declared[name]
            for variant, line in rows[rows["metric"] == name].groupby(["variant", "ranks"]):
                line = line.sort_values("size_bytes")
                label = str(variant[0]).replace(f"operation-{value}/", "") + (
                    f" p={variant[1]}" if several_scales else ""
                )
                y, err = line["mean"].to_numpy(float), line["ci95"].fillna(0).to_numpy(float)
                ax.errorbar(line["size_bytes"], y, yerr=clipped_at_zero(y, err), marker=".", capsize=2, label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ticks = sorted(rows["size_bytes"].unique())[:: max(1, len(rows["size_bytes"].unique()) // 6)]
            ax.set_xticks(ticks, [size_text(t) for t in ticks], fontsize=7)
            ax.minorticks_off()
            ax.set_xlabel("message size (nccl-tests' size: a rank's whole buffer)")
            ax.set_ylabel(f"{figure.label} [{figure.unit}]", fontsize=8)
            ax.set_title(f"{study}: {value or ''} {figure.label}".strip(), fontsize=9)
            ax.legend(fontsize=6)
    counts = sorted({int(n) for n in curves["n"]})
    fig.suptitle(f"mean ± 95% CI over n = {', '.join(map(str, counts))} run(s) per point; log axes", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_speedup(table, study, out, palette, ranks, label, note) -> None:
    weak = table["scaling"].iloc[0] == "weak"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    column, name = ("scaled_speedup", "scaled speedup") if weak else ("speedup", "speedup")
    for variant, rows in table.groupby("variant"):
        ax.errorbar(*curve(rows, column), yerr=ci_bars(rows, column), marker="o", capsize=3, label=variant,
                    color=palette[variant])  # fmt: skip
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
    # Log-log where scales double: ideal speedup is a straight line.
    if doubling(ranks):
        ax.set_yscale("log", base=2)
    definition = DEFINITIONS["scaled_speedup" if weak else "speedup"]
    bars = f"bars: {CONFIDENCE:.0%} CI (speedup and efficiency CI)"
    finish(ax, fig, out["speedup"], f"{study}: {name} of {label}", f"{definition}; {bars}; {note}", name, ranks)


def plot_efficiency(table, study, out, palette, ranks, label, note) -> None:
    weak = table["scaling"].iloc[0] == "weak"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    column, name = (
        ("weak_efficiency", "weak-scaling efficiency") if weak else ("parallel_efficiency", "parallel efficiency")
    )
    for variant, rows in table.groupby("variant"):
        ax.errorbar(*curve(rows, column), yerr=ci_bars(rows, column), marker="o", capsize=3, label=variant,
                    color=palette[variant])  # fmt: skip
    ax.axhline(1.0, color="k", linestyle="--", label="ideal")
    threshold = efficiency_threshold(table)
    ax.axhline(threshold, color="grey", linestyle=":", label=f"{threshold:.0%}")
    ax.set_ylim(bottom=0)
    mark_missing(ax, table)
    definition = DEFINITIONS["weak_efficiency" if weak else "parallel_efficiency"]
    bars = f"bars: {CONFIDENCE:.0%} CI (speedup and efficiency CI); none with one repeat at a scale"
    finish(ax, fig, out["efficiency"], f"{study}: {name} of {label}", f"{definition}; {bars}; {note}", name, ranks)


def plot_breakdown(scaling: pd.DataFrame, table: pd.DataFrame, study: str, path: Path) -> None:
    """Per curve, a stacked bar per scale (each part as a fraction of the whole it is a part
    of) with the curve's efficiency beside it on its own axis."""
    groups = curves(parts_table(scaling, study))
    names = list(dict.fromkeys(part for _v, _w, rows in groups for part in rows["part"]))
    colours = dict(zip(names, sns.color_palette("tab10", n_colors=max(len(names), 1)), strict=False))
    columns = min(3, len(groups))
    lines = -(-len(groups) // columns)
    width = max(7.0, 4.3 * columns)
    fig, axes = plt.subplots(lines, columns, figsize=(width, 3.3 * lines + 1.8), squeeze=False)
    weak = table["scaling"].iloc[0] == "weak"
    column, name = ("weak_efficiency", "weak efficiency") if weak else ("parallel_efficiency", "parallel efficiency")
    for ax, (variant, whole, rows) in zip(axes.flat, groups, strict=False):
        scales = sorted(int(r) for r in rows["ranks"].unique())
        x = np.arange(len(scales))
        bottom = np.zeros(len(scales))
        for part, at in rows.groupby("part", sort=False):
            share = at.set_index("ranks")["fraction"].reindex(scales).fillna(0).to_numpy(float)
            ax.bar(x, share, 0.6, bottom=bottom, color=colours[part], label=part)
            bottom += share
        ax.set_xticks(x, [f"p = {p}" for p in scales])
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"fraction of the {whole_name(whole)}", fontsize=8)
        ax.set_title(textwrap.fill(variant, 45), fontsize=8)
        efficiency = table[table["variant"] == variant].set_index("ranks")
        if column in efficiency.columns:
            twin = ax.twinx()
            values = efficiency[column].where(efficiency["n"] > 0).reindex(scales).to_numpy(float)
            twin.plot(x, values, "ko-", label=name)
            twin.set_ylim(0, max(1.05, float(np.nanmax(values)) * 1.05) if np.isfinite(values).any() else 1.05)
            twin.set_ylabel(name, fontsize=8)
            twin.grid(False)
    for ax in axes.flat[len(groups) :]:
        ax.set_axis_off()
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[n]) for n in names] + [
        plt.Line2D([], [], color="k", marker="o")
    ]
    fig.legend(handles, [*names, name], loc="lower center", ncol=min(len(names) + 1, 4), fontsize=8)
    wholes = "; ".join(sorted({whole for _v, whole, _r in groups}))
    subtitle = f"parts as fractions of the {wholes}; {breakdown.DEFINITIONS['fraction']}; {repeats_note(table)}"
    fig.suptitle(f"{study}: where the time goes, beside the {name}\n" + textwrap.fill(subtitle, int(13 * width)),
                 fontsize=9)  # fmt: skip
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def clipped_at_zero(y: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Asymmetric bars: a figure (a time, a rate) is never below zero, so the lower bar stops
    there even where mean - CI does not (n = 2 gives wide intervals)."""
    return np.vstack([np.minimum(err, np.nan_to_num(np.maximum(y, 0))), err])


def trimmed(table: pd.DataFrame) -> bool:
    return "estimator" in table.columns and (table["estimator"] == "trimmed_mean").any()


def plot_variants(variants: pd.DataFrame, table: pd.DataFrame, study: str, path: Path, ranks: list[int]) -> None:
    metric = table["metric"].iloc[0]
    rows = variants[(variants["study"] == study) & (variants["metric"] == metric)]
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
    if trimmed(table):
        subtitle += "; of trimmed means (fastest and slowest run dropped)"
    finish(ax, fig, path, f"{study}: speed ratio vs {baselines} ({label})", subtitle, "speed ratio (> 1 faster)", ranks)


def plot_cost(table: pd.DataFrame, study: str, path: Path, budget_su=None) -> None:
    costed = table[(table["n"] > 0) & table["su_per_run"].notna()]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant, rows in costed.groupby("variant"):
        rows = rows.sort_values("ranks")
        ax.plot(rows[WALLTIME_USED.name] / 3600, rows["su_per_run"], marker="o", label=variant)
        for row in rows.to_dict("records"):
            ax.annotate(f"{int(row['nodes'])}n", (row[WALLTIME_USED.name] / 3600, row["su_per_run"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")  # fmt: skip
    best = costed[costed["cost_optimal"].astype(bool)]
    ax.scatter(best[WALLTIME_USED.name] / 3600, best["su_per_run"], s=160, facecolors="none", edgecolors="green",
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


def doubling(ranks: list[int]) -> bool:
    """Scales that double (1, 2, 4, 8 ranks; 48, 96, 192) are evenly spaced on a log axis;
    others (1, 2, 3) are read better on a linear one."""
    return len(ranks) > 1 and all(b == 2 * a for a, b in zip(ranks, ranks[1:], strict=False))


def finish(ax, fig, path: Path, title: str, subtitle: str, ylabel: str, ranks: list[int]) -> None:
    ax.set_title(f"{title}\n" + textwrap.fill(subtitle, 90), fontsize=9)
    ax.set_xlabel("p = MPI ranks (nodes x ranks per node)")
    ax.set_ylabel(ylabel)
    if doubling(ranks):
        ax.set_xscale("log", base=2)
    # Label the scales that ran, as plain numbers (not 2^k).
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.minorticks_off()
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_ratios(points: pd.DataFrame, path: Path | str, definition: str) -> bool:
    """Two runs of the same studies compared (scalestudy.presentation.compare): the speed ratio candidate /
    baseline of each point's primary figure with its 95% CI, on a log axis (twice as fast and
    twice as slow are the same distance from 1). False, and no file, when no point has a ratio."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    rows = points[points["primary"].astype(bool) & points["ratio"].notna()] if not points.empty else points
    if rows.empty:
        return False
    names = [f"{curve_name(r)} p={r['ranks']}" for r in rows.to_dict("records")]
    ratio = rows["ratio"].to_numpy(float)
    low = np.nan_to_num(ratio - rows["ci_low"].to_numpy(float))
    high = np.nan_to_num(rows["ci_high"].to_numpy(float) - ratio)
    colours = rows["verdict"].map({"faster": "green", "slower": "red"}).fillna("grey").tolist()
    fig, ax = plt.subplots(figsize=(7, 1.5 + 0.35 * len(rows)))
    y = np.arange(len(rows))
    ax.errorbar(ratio, y, xerr=[low, high], fmt="none", ecolor="black", capsize=3)
    ax.scatter(ratio, y, c=colours, zorder=3)
    ax.axvline(1.0, color="k", linestyle="--")
    ax.set_xscale("log")
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    counts = sorted({int(n) for n in pd.concat([rows["n_baseline"], rows["n_candidate"]]).dropna()})
    subtitle = f"{definition}; n = {', '.join(map(str, counts))} run(s) per side; red slower, green faster"
    ax.set_title("speed ratio candidate / baseline, primary figures\n" + textwrap.fill(subtitle, 90), fontsize=9)
    ax.set_xlabel("speed ratio (> 1: the candidate is faster; log axis)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# ---------------------------------------------------------------- the scaling models


def plot_models(scaling: pd.DataFrame, study: str, primary: str, path: Path) -> None:
    """The primary figure of each curve, and each part of its breakdown: measured means with
    their CI, the model, the band of predictions up to predict_up_to × the largest scale."""
    fits = curve_fits(scaling, study, [primary])
    variants = [cf.variant for cf in fits]
    shown = "mpi-default/nccl-default" if "mpi-default/nccl-default" in variants else (variants or [""])[0]
    if len(fits) > MAX_DRAWN:  # more would be a tangle of bands: the default curve alone
        fits = [cf for cf in fits if cf.variant == shown]
    parts = [cf for cf in curve_fits(scaling, study) if is_part(cf.metric) and cf.variant == shown]
    panels = [("figure", fits)] + ([("parts", parts)] if parts else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.6), squeeze=False)
    for ax, (what, group) in zip(axes[0], panels, strict=True):
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, cf in enumerate(group):
            colour = colours[k % len(colours)]
            declared = part_of(cf.metric)
            name = declared.part if declared else (cf.variant if len(group) > 1 else cf.label.split(" (")[0])
            ax.errorbar(cf.p, cf.mean, yerr=1.96 * np.nan_to_num(cf.se), fmt="o", color=colour, capsize=3, label=name)
            if cf.fit.best is None:
                continue
            at = cf.grid()
            found = cf.prediction(at)
            # No figure here goes below zero: a model that does is drawn only while it stays above.
            value = np.where(found.value > 0, found.value, np.nan)
            form = cf.shown.form()  # a time's: the inverse of its rate's model, the centre of its interval
            ax.plot(at, value, "-", color=colour, lw=1.2, label=f"{name}: {form}")
            if cf.kind in intervals.KINDS:
                # The calibrated bands where they are useful (at most x2): 95% darker, 80% beyond it.
                for level, alpha in ((max(intervals.LEVELS), 0.22), (min(intervals.LEVELS), 0.10)):
                    band = cf.calibrated(at, level)
                    shown = band.useful()
                    ax.fill_between(at, np.where(shown, band.low, np.nan), np.where(shown, band.high, np.nan),
                                    color=colour, alpha=alpha, lw=0)  # fmt: skip
            else:
                ax.fill_between(at, np.fmax(found.low, 0), np.fmax(found.high, 0), color=colour, alpha=0.18, lw=0)
        ax.set_xscale("log", base=2)
        if what == "parts":
            ax.set_yscale("log")  # parts differ by orders of magnitude
        else:
            ax.set_ylim(bottom=0)
        if group and group[0].fit.best is not None:
            ax.axvline(group[0].p.max(), color="grey", ls=":", lw=1)
        unit = group[0].unit if group else ""
        label = group[0].label.split(" (")[0] if group else ""
        ax.set_ylabel(f"{label} [{unit}]" if what == "figure" else f"time per step [{unit}] (log scale)")
        ax.set_xlabel("p = MPI ranks (log scale); dotted: the largest measured")
        ax.legend(fontsize=7)
    reasons = sorted({cf.fit.reason for cf in fits + parts if cf.fit.best is None})
    subtitle = (
        "; ".join(reasons)
        if reasons
        else (
            "bands: the calibrated 95% (dark) and 80% (light) intervals where they span at most"
            f" x{intervals.USEFUL_SPAN:g}; past that, no useful prediction"
        )
    )
    fig.suptitle(f"{study}: scaling models (PMNF, leave-one-out SMAPE)\n{subtitle}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def no_model_reason(scaling: pd.DataFrame, study: str, primary: str) -> str | None:
    """Why a study has no model plot (no curve has a model), or None."""
    fits = curve_fits(scaling, study, [primary])
    if not fits:
        return "no successful run"
    if all(cf.fit.best is None for cf in fits):
        return fits[0].fit.reason
    return None
