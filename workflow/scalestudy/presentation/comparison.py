"""Two results compared point by point (scalestudy.presentation.compare writes the page): each
side read (a results directory's tables, or a published record standing for a study), the point
table (every study, curve, scale and figure on either side: both sides' statistics, the speed
ratio candidate / baseline with its 95% CI and verdict, analysis.verdicts.speed_ratio, held back
where a side rests on contended runs or two runs that disagree), what changed in the shape of
each curve, and what differs in the runs' provenance.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..analysis.records import read_table
from ..analysis.scaling import CI_COLUMNS, SCALE_COLUMNS, curve_columns, curve_name, scaling
from ..analysis.verdicts import CONTENDED, VERDICTS, few_repeats, speed_ratio
from ..model.errors import SweepError
from ..model.metrics import DECLARED, HIGHER_IS_BETTER, direction
from ..model.paths import Layout
from .glossary import DEFINITIONS
from .page import fmt, missing
from .published import read_record, record_scaling

BASELINE, CANDIDATE = "baseline", "candidate"
BOTH, ONLY_BASELINE, ONLY_CANDIDATE = "both", "baseline only", "candidate only"
STATS = ["mean", "std", "ci95", "n", "n_used", "estimator", "n_contended"]
# What differs between the two sides' runs, by where it is in a record's provenance.
PROVENANCE_KEYS = {
    "modules": lambda p: " ".join(p.get("modules") or []) or None,
    "MPI": lambda p: (p.get("mpi") or {}).get("version"),
    "NCCL": lambda p: p.get("nccl_version"),
    "hosts": lambda p: " ".join(p.get("node_list") or p.get("hosts") or []) or None,
    "python": lambda p: p.get("python"),
    "python packages (sha256 of the pip freeze list)": lambda p: p.get("python_packages_sha256"),
    "workflow commit": lambda p: p.get("workflow_commit"),
}
# Beyond this many values a provenance cell gives a count and the first few.
SHOWN_VALUES = 4


class CompareError(SweepError):
    """A side that cannot be read, or a threshold that cannot be parsed: one line, nothing written."""

    def __init__(self, problem: str):
        super().__init__([problem])


@dataclass
class Side:
    """One side of the comparison: where it came from, and its tables (all studies)."""

    source: str
    what: str  # "results directory" or "published record"
    runs: pd.DataFrame
    scaling: pd.DataFrame


# ---------------------------------------------------------------- reading a side


SIDE_HINT = "give a results directory (with <study>/runs.csv) or a published record (.csv)"


def side_studies(path: Path, study: str | None = None) -> list[str]:
    """The studies of a results directory that have a runs.csv (`study` only, where given);
    raises CompareError when it has none."""
    layout = Layout(str(path))
    studies = sorted(d.name for d in path.iterdir() if Path(layout.table(d.name, "runs")).is_file())
    if study is not None:
        studies = [s for s in studies if s == study]
    if not studies:
        named = f"study {study!r}" if study else "any study"
        raise CompareError(f"{path}: no runs.csv of {named} (<study>/runs.csv); has the study been aggregated?")
    return studies


def check_side(path: str | Path) -> list[str]:
    """The studies `load_side` would read, found without reading a results directory's tables
    (the compare target's baseline, checked before the DAG is built; a record stands for the
    study its file is named after); raises CompareError or RecordError with what it would refuse."""
    path = Path(path)
    if path.is_file() and path.suffix == ".csv":
        return list(read_record(path)["study"].unique())
    if path.is_dir():
        return side_studies(path)
    if path.exists():
        raise CompareError(f"{path}: not a results directory nor a .csv file; {SIDE_HINT}")
    raise CompareError(f"{path}: not found; {SIDE_HINT}")


def studies_of(side: Side) -> set[str]:
    return set(side.runs["study"]) if "study" in side.runs.columns else set()


def table_of(path: Path) -> pd.DataFrame:
    """One of a results directory's tables; raises CompareError when it cannot be read as one."""
    try:
        return read_table(path)
    except (UnicodeDecodeError, pd.errors.ParserError, OSError) as error:
        raise CompareError(f"{path}: cannot be read as a table ({type(error).__name__}); aggregate it again") from None


def load_side(path: str | Path, study: str | None = None) -> Side:
    """A results directory (every <study>/runs.csv in it; its scaling.csv where written, else
    computed from runs.csv) or a published record (a .csv file, one row per run). Raises
    CompareError or RecordError (one line)."""
    path = Path(path)
    if path.is_file() and path.suffix == ".csv":
        runs = read_record(path, study)
        return Side(str(path), "published record", runs, record_scaling(runs))
    if not path.is_dir():
        check_side(path)  # neither: says why
    layout = Layout(str(path))
    runs, tables = [], []
    for name in side_studies(path, study):
        study_runs = table_of(Path(layout.table(name, "runs")))
        scaling_csv = Path(layout.table(name, "scaling"))
        runs.append(study_runs)
        tables.append(table_of(scaling_csv) if scaling_csv.is_file() else scaling(study_runs))
    return Side(str(path), "results directory", concat(runs), concat(tables))


def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", str(text))
    value = float(match.group(1)) / (100 if match.group(2) else 1) if match else math.nan
    if not 0 <= value < 1:
        raise CompareError(f"--fail-slower: {text!r} is not a fraction below 100%; give e.g. 5% or 0.05")
    return value


# ---------------------------------------------------------------- the point table


def key_text(value) -> str:
    """A key cell as text, so that 4 and 4.0 (a CSV column with a gap reads as floats) match."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def point_keys(base: pd.DataFrame, cand: pd.DataFrame) -> list[str]:
    """The columns that name a point on both sides: the curve (analysis.scaling.curve_columns: sets,
    placement, the parameter axes both have), the scale and the figure. A published record has
    no parameter columns: its rows then match a candidate's curve whatever its parameters (the
    page says which were ignored)."""
    return curve_columns(base, cand, named=False) + SCALE_COLUMNS + ["metric"]


def direction_kind(name: str, kind) -> str:
    """The figure's kind as declared here (one place), else as its table says."""
    return DECLARED[name].kind if name in DECLARED else str(kind)


def points(base: pd.DataFrame, cand: pd.DataFrame) -> pd.DataFrame:
    """One row per study x curve x scale x figure present on either side: both sides' statistics,
    the speed ratio candidate/baseline with its 95% CI and verdict, and which side has it."""
    if base.empty or cand.empty:
        return pd.DataFrame()
    keys = point_keys(base, cand)
    intervals = [*CI_COLUMNS["parallel_efficiency"], *CI_COLUMNS["weak_efficiency"]]
    kept = keys + [c for c in ("metric_label", "unit", "kind", "primary", "parallel_efficiency",
                               "weak_efficiency", *intervals, "amdahl_serial_fraction", "p0", *STATS)
                   if c not in keys]  # fmt: skip

    def side(table: pd.DataFrame) -> pd.DataFrame:
        table = table[[c for c in kept if c in table.columns]].copy()
        for column in keys:
            table[column] = table[column].map(key_text)
        return table

    merged = side(base).merge(side(cand), on=keys, how="outer", suffixes=("_baseline", "_candidate"), indicator=True)
    merged["present"] = merged.pop("_merge").map(
        {"both": BOTH, "left_only": ONLY_BASELINE, "right_only": ONLY_CANDIDATE}
    )
    rows = []
    for row in merged.to_dict("records"):
        for column in ("metric_label", "unit", "kind", "primary"):
            a, b = row.pop(f"{column}_baseline", None), row.pop(f"{column}_candidate", None)
            row[column] = b if not missing(b) else a
        kind = direction_kind(row["metric"], row["kind"])
        row["direction"] = direction(kind)
        row.update(ratio=math.nan, ci_low=math.nan, ci_high=math.nan, verdict=row["present"])
        if row["present"] == BOTH and kind in HIGHER_IS_BETTER:
            stats = {side: {s: row.get(f"{s}_{side}") for s in STATS} for side in (BASELINE, CANDIDATE)}
            for values in stats.values():
                values["n"] = 0 if missing(values["n"]) else values["n"]
            row.update(speed_ratio(stats[CANDIDATE], stats[BASELINE], kind))
            row.update(held_back(row, stats))
        row["primary"] = bool(row["primary"]) if not missing(row["primary"]) else False
        rows.append(row)
    table = pd.DataFrame(rows)
    order = [c for c in keys if c != "metric"]
    return table.sort_values(
        [*order, "primary", "metric"], ascending=[True] * len(order) + [False, True], key=numbers_as_numbers
    ).reset_index(drop=True)


def held_back(row: Mapping, stats: Mapping[str, Mapping]) -> dict:
    """The statistical verdict kept as `statistical_verdict`; the verdict held back where a side's
    figure rests on contended runs (analysis DEFINITIONS['contended']: a summary cannot leave them
    out) or on two runs a side that do not agree (analysis.verdicts.few_repeats); else its justification."""
    out = {"verdict": row["verdict"], "statistical_verdict": row["verdict"], "justification": ""}
    if row["verdict"] not in VERDICTS:
        return out
    contended = {side: 0 if missing(values.get("n_contended")) else int(values["n_contended"])
                 for side, values in stats.items()}  # fmt: skip
    reasons = []
    if any(contended.values()):
        reasons.append(
            f"{CONTENDED}: {contended[BASELINE]} of the baseline's runs and {contended[CANDIDATE]} of the candidate's "
            "were measured while other processes held the CPUs their ranks needed; measure again on a quiet machine"
        )
    if row["verdict"] in ("faster", "slower"):
        out["justification"], waits = few_repeats(stats[CANDIDATE], stats[BASELINE])
        reasons += [waits] if waits else []
    if reasons:
        out["verdict"] = "; ".join(reasons)
    return out


def numbers_as_numbers(column: pd.Series) -> pd.Series:
    """Sort the scale columns (text, as keys) by their value: 2 before 16."""
    return pd.to_numeric(column, errors="coerce") if column.name in SCALE_COLUMNS else column


def slower_beyond(table: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Primary figures slower with the whole CI below 1 - threshold."""
    if table.empty:
        return table
    return table[table["primary"] & (table["verdict"] == "slower") & (table["ci_high"] < 1 - threshold)]


# ---------------------------------------------------------------- whole curves, provenance


def efficiency_cell(row: Mapping, column: str, side: str) -> str:
    """One side's efficiency with its CI, '0.702 [0.41–1.18]' (the figure alone where none)."""
    value = row.get(f"{column}_{side}")
    low, high = (row.get(f"{c}_{side}") for c in CI_COLUMNS[column])
    if missing(value) or missing(low) or missing(high):
        return fmt(value)
    return f"{fmt(value)} [{fmt(low)}–{fmt(high)}]"


def curve_changes(table: pd.DataFrame) -> tuple[list[list[str]], list[str]]:
    """Parallel (or weak) efficiency of the primary figure per scale, both sides, and each
    curve's Amdahl serial fraction, both sides."""
    rows: list[list[str]] = []
    amdahl: list[str] = []
    if table.empty:
        return rows, amdahl
    shared = table[(table["present"] == BOTH) & table["primary"]]
    curve = curve_columns(shared, named=False)
    for key, group in shared.groupby(curve, sort=True):
        name = curve_name(dict(zip(curve, key, strict=True)))
        weak = group["scaling"].iloc[0] == "weak"
        column = "weak_efficiency" if weak else "parallel_efficiency"
        group = group.sort_values(by="ranks", key=lambda s: s.astype(float))
        if len(group) > 1:
            for r in group.to_dict("records"):
                a, b = r.get(f"{column}_baseline"), r.get(f"{column}_candidate")
                change = "–" if missing(a) or missing(b) else f"{b - a:+.3f}"
                cells = [efficiency_cell(r, column, side) for side in ("baseline", "candidate")]
                rows.append([name, f"{r['nodes']} (p = {r['ranks']})", column.replace("_", " "), *cells, change])
        if not weak:
            f0 = (
                group["amdahl_serial_fraction_baseline"].iloc[0] if "amdahl_serial_fraction_baseline" in group else None
            )
            f1 = (
                group["amdahl_serial_fraction_candidate"].iloc[0]
                if "amdahl_serial_fraction_candidate" in group
                else None
            )
            if not (missing(f0) and missing(f1)):
                slowdown = any(not missing(f) and f >= 1 for f in (f0, f1))
                amdahl.append(
                    f"{name}: Amdahl serial fraction f = {fmt(f0)} (baseline) → {fmt(f1)} (candidate), "
                    f"over the {len(group)} scales both have ({DEFINITIONS['amdahl_fit']})"
                    + ("; f ≥ 1: more ranks made it slower, a slowdown, not a serial fraction." if slowdown else ".")
                )
    return rows, amdahl


def provenance_values(runs: pd.DataFrame) -> dict[str, dict[str, set[str]]]:
    """study -> what (MPI, modules, versions.<package>, ...) -> the values its runs recorded."""
    found: dict[str, dict[str, set[str]]] = {}
    if runs.empty or "provenance" not in runs.columns:
        return found
    for study, text in runs[["study", "provenance"]].dropna().itertuples(index=False):
        try:
            record = json.loads(text)
        except (TypeError, ValueError):
            continue
        values = found.setdefault(str(study), {})
        for name, read in PROVENANCE_KEYS.items():
            value = read(record)
            if value not in (None, ""):
                values.setdefault(name, set()).add(str(value))
        for package, version in (record.get("versions") or {}).items():
            values.setdefault(f"version of {package}", set()).add(str(version))
    return found


def provenance_changes(base: Side, cand: Side, studies: Iterable[str]) -> list[list[str]]:
    """One row per study and provenance item whose values differ between the sides."""
    before, after = provenance_values(base.runs), provenance_values(cand.runs)
    rows = []
    for study in studies:
        a, b = before.get(study), after.get(study)
        if a is None or b is None:
            if a != b:
                none = base if a is None else cand
                rows.append([study, "(all)", f"no provenance in the {none.what} {none.source}", ""])
            continue
        for name in sorted(set(a) | set(b)):
            if a.get(name, set()) != b.get(name, set()):
                rows.append([study, name, values_text(a.get(name)), values_text(b.get(name))])
    return rows


def values_text(values: set[str] | None) -> str:
    if not values:
        return "–"
    shown = sorted(values)
    text = ", ".join(shown[:SHOWN_VALUES])
    return text + (f" … ({len(shown)} values)" if len(shown) > SHOWN_VALUES else "")
