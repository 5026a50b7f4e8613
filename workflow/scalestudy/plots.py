"""Seaborn plots of one study's scaling table. Each plot names its definition
and the number of repeats its points rest on."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from .analysis import DEFINITIONS  # noqa: E402
from .apps import APPS  # noqa: E402


def repeats_note(table: pd.DataFrame) -> str:
    counts = sorted(set(table.loc[table["n"] > 0, "n"].astype(int)))
    text = "n = " + (", ".join(map(str, counts)) if counts else "0") + " successful run(s) per point"
    failed = int((table["n"] == 0).sum())
    return text + (f"; {failed} scale(s) with no successful run (x)" if failed else "")


def primary_table(scaling: pd.DataFrame, study: str) -> pd.DataFrame:
    table = scaling[scaling["study"] == study] if not scaling.empty else scaling
    if table.empty:
        return table
    primary = APPS[table["app"].iloc[0]].primary_metric
    chosen = table[table["metric"] == primary]
    return chosen if not chosen.empty else table[table["metric"] == table["metric"].iloc[0]]


def empty_plot(path: Path, message: str) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_study(scaling: pd.DataFrame, study: str, out: dict[str, Path]) -> None:
    """Write the three plots of `study` to out['metric'|'speedup'|'efficiency']."""
    sns.set_theme(style="whitegrid", context="notebook")
    table = primary_table(scaling, study)
    for path in out.values():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    if table.empty or (table["n"] == 0).all():
        for path in out.values():
            empty_plot(path, f"{study}: no successful run yet")
        return
    label = f"{table['metric_label'].iloc[0]} [{table['unit'].iloc[0]}]"
    ranks = sorted(int(r) for r in table["ranks"].unique())
    weak = table["scaling"].iloc[0] == "weak"
    note = repeats_note(table)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ok = table[table["n"] > 0]
    for variant, rows in ok.groupby("variant"):
        ax.errorbar(rows["ranks"], rows["mean"], yerr=rows["std"].fillna(0), marker="o", capsize=4, label=variant)
    failed = table[table["n"] == 0]
    if not failed.empty:
        ax.scatter(
            failed["ranks"], [ok["mean"].min()] * len(failed), marker="x", color="red", s=80, label="no successful run"
        )
    finish(ax, fig, out["metric"], f"{study}: {label} vs ranks", f"mean ± 1 std; {note}", label, ranks)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    column, name = ("scaled_speedup", "scaled speedup") if weak else ("speedup", "speedup")
    sns.lineplot(data=ok, x="ranks", y=column, hue="variant", marker="o", ax=ax)
    p0 = ok["p0"].min()
    ax.plot(ranks, [r / p0 for r in ranks], "k--", label="ideal (p/p0)")
    definition = DEFINITIONS["scaled_speedup" if weak else "speedup"]
    finish(ax, fig, out["speedup"], f"{study}: {name} of {label} vs ranks", f"{definition}; {note}", name, ranks)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    column, name = (
        ("weak_efficiency", "weak-scaling efficiency") if weak else ("parallel_efficiency", "parallel efficiency")
    )
    sns.lineplot(data=ok, x="ranks", y=column, hue="variant", marker="o", ax=ax)
    ax.axhline(1.0, color="k", linestyle="--", label="ideal")
    ax.set_ylim(bottom=0)
    definition = DEFINITIONS["weak_efficiency" if weak else "parallel_efficiency"]
    finish(ax, fig, out["efficiency"], f"{study}: {name} of {label} vs ranks", f"{definition}; {note}", name, ranks)


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
