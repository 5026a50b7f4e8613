"""The scaling models (scalestudy.analysis.scaling_models, scalestudy.analysis.pmnf) held to references:

(a) the published Gadi table (tests/data/gadi-2024-hoomd-wca-strong.csv, HOOMD-blue steps/s at 1-32
    nodes): fitted on 1-8 nodes, the predictions at 16 and 32 nodes against the published 4,831
    and 6,431 steps/s (ratio = predicted / published; inside = the published value in the
    prediction's interval); the same fitted on 1-16 nodes, at 32;
(b) Extra-P itself (PyPI extrap 4.2.5, its command line, default modeler) on the same inputs: the
    model per curve and the predictions at 2x and 4x the largest scale, ratio = ours / Extra-P's;
(c) synthetic curves c + a*p^i*log2(p)^j (a building block drawn at random, c and a at random),
    5 scales p = 4..64, 5 repeats each with uniform multiplicative noise of +-n%: the share of
    curves whose lead term (i, j) is recovered exactly, and the median and 90th percentile of
    |predicted - true| / true at 4x the largest scale (p = 256); Extra-P on the same curves beside.

    python benchmarks/scaling_models.py [--synthetic 60] [--seed 1] [--results DIR ...]

--results: results directories whose scaling.csv files (LAMMPS, torch-parallel breakdowns) are
fitted by both as well. Extra-P: `pip install --no-deps -r requirements-extrap.txt` (absent: (b)
and its columns of (c) are skipped with that line).
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.analysis import pmnf, scaling_models  # noqa: E402
from scalestudy.analysis.records import read_table  # noqa: E402
from scalestudy.analysis.scaling import scaling  # noqa: E402
from scalestudy.presentation.published import read_record  # noqa: E402

GADI = REPO / "tests" / "data" / "gadi-2024-hoomd-wca-strong.csv"
PUBLISHED = {16: 4831.0, 32: 6431.0}
SYNTHETIC_P = np.array([4, 8, 16, 32, 64], dtype=float)
SYNTHETIC_AT = SYNTHETIC_P.max() * 4
NOISE_LEVELS = (0.0, 0.01, 0.05, 0.10)
REPEATS = 5


# ---------------------------------------------------------------- Extra-P


def extrap_command() -> list[str] | None:
    """Extra-P's command line from this Python's environment, or None where it is absent."""
    beside = Path(sys.executable).parent / "extrap"
    found = str(beside) if beside.exists() else shutil.which("extrap")
    return [found] if found else None


def extrap_models(curves: dict[str, tuple[np.ndarray, list[list[float]]]], negative: bool = False) -> dict[str, str]:
    """Extra-P's model text per curve ({name: (p, values per scale)}), all curves in one text
    file (one region each), Extra-P's default modeler; `negative`: allow_negative_exponents."""
    command = extrap_command()
    if command is None or not curves:
        return {}
    lines = []
    for name, (p, values) in curves.items():
        lines += ["PARAMETER p", "POINTS " + " ".join(f"{x:g}" for x in p), f"REGION {name}", "METRIC figure"]
        lines += ["DATA " + " ".join(f"{v!r}" for v in row) for row in values]
        lines.append("")
    with tempfile.TemporaryDirectory() as tmp:
        # One experiment per file: Extra-P's text format declares the parameter once per file.
        out = {}
        for k, chunk in enumerate(split_experiments(lines)):
            path = Path(tmp) / f"curves{k}.txt"
            path.write_text("\n".join(chunk))
            args = [*command, "--text", str(path), "--disable-progress"]
            if negative:
                args += ["--options", "allow_negative_exponents=True"]
            done = subprocess.run(args, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise SystemExit(f"Extra-P failed:\n{done.stderr[-2000:]}")
            out.update(parse_extrap(done.stdout))
    return out


def split_experiments(lines: list[str]) -> list[list[str]]:
    """Curves with the same POINTS go in one file (Extra-P reads one parameter's points per file)."""
    groups: dict[str, list[str]] = {}
    current: list[str] = []
    points = ""
    for line in lines:
        if line.startswith("POINTS"):
            points = line
            continue
        if line.startswith("PARAMETER"):
            current = []
            continue
        current.append(line)
        if line == "":
            groups.setdefault(points, []).extend(current)
    return [["PARAMETER p", points, *body] for points, body in groups.items()]


def parse_extrap(text: str) -> dict[str, str]:
    """{callpath: model text} from Extra-P's printed output."""
    out, region = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Callpath:"):
            region = line.split(":", 1)[1].strip()
        elif line.startswith("Model:") and region is not None:
            out[region] = line.split(":", 1)[1].strip()
    return out


def extrap_eval(model: str, p) -> np.ndarray:
    """Extra-P's model text (e.g. '-1246.37 + 1662.3 * p^(1/2) * log2(p)^(1)') at p."""
    expression = model.replace("^", "**").replace("log2(p)", "np.log2(p)")
    p = np.asarray(p, dtype=float)
    return np.asarray(eval(expression, {"np": np, "p": p}), dtype=float) * np.ones_like(p)  # noqa: S307


def extrap_lead(model: str) -> tuple[float, int]:
    """The lead term (i, j) of Extra-P's model text: its term that grows fastest with p, as
    pmnf.Model.lead ((0, 0) for a constant)."""
    found = []
    for term in re.split(r"\s[+-]\s", model):
        power = re.search(r"(?<![(])p\^\(?(-?[\d/.]+)\)?", term)
        log = re.search(r"log2\(p\)\^\(?(-?[\d.]+)\)?", term)
        if power or log:
            found.append((float(Fraction(power.group(1))) if power else 0.0, int(float(log.group(1))) if log else 0))
    return max(found, key=lambda t: t[0] + 0.01 * t[1]) if found else (0.0, 0)


# ---------------------------------------------------------------- (a) the published table


def gadi_fit(top_nodes: int, per_node: bool) -> scaling_models.CurveFit:
    """Our model of the Gadi table's steps/s on nodes <= top_nodes; p = ranks (the report's p)
    or nodes."""
    runs = read_record(GADI)
    runs = runs[runs["nodes"] <= top_nodes].copy()
    if per_node:
        runs["ranks"] = runs["nodes"]
        runs["ranks_per_node"] = 1
    table = scaling(runs)
    [cf] = scaling_models.curve_fits(table, metrics=["steps_per_s"])
    return cf


def published_section() -> list[dict]:
    print("(a) Held to the published Gadi table (HOOMD-blue md_pair_wca, 48 ranks per node; n = 1 run per scale)")
    print(
        "    ratio = predicted / published; inside = published value within the 95% interval (calibrated:"
        " analysis.intervals; the bootstrap's alone beside, as before issue 39)\n"
    )
    rows = []
    for p_name, per_node in (("ranks", False), ("nodes", True)):
        for top in (8, 16):
            cf = gadi_fit(top, per_node)
            targets = [n for n in PUBLISHED if n > top]
            factor = 1 if per_node else 48
            found = cf.prediction(np.array(targets, dtype=float) * factor)
            plain = pmnf.predict(cf.fit, np.array(targets, dtype=float) * factor, cf.se)
            for k, nodes in enumerate(targets):
                ratio = found.value[k] / PUBLISHED[nodes]
                inside = found.low[k] <= PUBLISHED[nodes] <= found.high[k]
                inside_plain = plain.low[k] <= PUBLISHED[nodes] <= plain.high[k]
                rows.append({"p": p_name, "fitted": f"1-{top} nodes", "model": cf.fit.best.symbols(), "at": nodes,
                             "predicted": found.value[k], "low": found.low[k], "high": found.high[k],
                             "published": PUBLISHED[nodes], "ratio": ratio, "inside": inside,
                             "inside_bootstrap": inside_plain, "superlinear_steps": cf.superlinear()})  # fmt: skip
                print(f"    p = {p_name:5} fitted on 1-{top:<2} nodes: {cf.fit.best.symbols():32} "
                      f"at {nodes} nodes {found.value[k]:7,.0f} [{found.low[k]:,.0f}, {found.high[k]:,.0f}] "
                      f"vs {PUBLISHED[nodes]:,.0f}: ratio {ratio:.3f}, inside: {'yes' if inside else 'NO'}"
                      f" (the bootstrap's interval alone: {'yes' if inside_plain else 'no'})")  # fmt: skip
    print(
        "\n    Why 1-8 nodes over-predicts: the step from 1 to 2 nodes is superlinear (423 -> 1,058 steps/s, 2.50x for"
        "\n    2x the nodes: efficiency 125%; the usual cause is a rank's share of the particles coming to fit in"
        "\n    cache), and the model leans on it. The bootstrap's interval alone (noise and the choice of model)"
        "\n    misses; the calibrated one carries the error of the model's form, per doubling beyond 8 nodes."
    )
    return rows


# ---------------------------------------------------------------- (b) Extra-P on the same inputs


def curve_inputs(cf: scaling_models.CurveFit) -> tuple[np.ndarray, list[list[float]]]:
    return cf.p, [[float(v)] for v in cf.mean]


def side_by_side(named: dict[str, scaling_models.CurveFit]) -> list[dict]:
    rows = []
    positive = {name: curve_inputs(cf) for name, cf in named.items() if not falls(cf)}
    negative = {name: curve_inputs(cf) for name, cf in named.items() if falls(cf)}
    theirs = {**extrap_models(positive), **extrap_models(negative, negative=True)}
    for name, cf in named.items():
        if cf.fit.best is None:
            print(f"    {name}: {cf.fit.reason}")
            continue
        at = np.array([2, 4]) * cf.p.max()
        ours = cf.fit.best(at)
        model = theirs.get(name)
        if model is None:
            print(f"    {name}: ours {cf.fit.best.symbols()}; Extra-P gave no model")
            continue
        extra = extrap_eval(model, at)
        ratio = ours / extra
        ok = bool(np.all((ratio >= 0.95) & (ratio <= 1.05)))
        rows.append({"curve": name, "ours": cf.fit.best.symbols(), "extrap": model, "ratio_2x": ratio[0],
                     "ratio_4x": ratio[1], "within": ok})  # fmt: skip
        print(f"    {name}\n        ours:    {cf.fit.best.symbols()}\n        Extra-P: {model}\n"
              f"        at 2x (p = {at[0]:g}): {ours[0]:.4g} vs {extra[0]:.4g}, ratio {ratio[0]:.3f}; "
              f"at 4x (p = {at[1]:g}): {ours[1]:.4g} vs {extra[1]:.4g}, ratio {ratio[1]:.3f}"
              f"{'' if ok else '  (outside 0.95-1.05: see below)'}")  # fmt: skip
    return rows


def falls(cf: scaling_models.CurveFit) -> bool:
    return bool(cf.mean[-1] < cf.mean[0])


def extrap_section(results: list[Path]) -> list[dict]:
    print(
        "\n(b) Held to Extra-P 4.2.5 (its command line, default modeler) on the same inputs: ratio = ours / Extra-P's"
    )
    if extrap_command() is None:
        print("    skipped: Extra-P is not installed (pip install --no-deps -r requirements-extrap.txt)")
        return []
    named = {}
    for top in (8, 16, 32):
        for p_name, per_node in (("ranks", False), ("nodes", True)):
            named[f"gadi_1-{top}_nodes_p={p_name}"] = gadi_fit(top, per_node)
    for directory in results:
        for path in sorted(Path(directory).glob("*/scaling.csv")):
            table = read_table(path)
            for cf in scaling_models.curve_fits(table):
                if cf.fit.best is None and len(cf.p) < 2:
                    continue
                key = re.sub(r"[^A-Za-z0-9_.=-]", "_", f"{path.parent.name}_{cf.variant}_{cf.metric}")
                named[key] = cf
    rows = side_by_side(named)
    within = sum(r["within"] for r in rows)
    print(f"\n    {within} of {len(rows)} curves within 0.95-1.05 at both 2x and 4x (n = {len(rows)} curves)")
    return rows


# ---------------------------------------------------------------- (c) synthetic


def synthetic_curves(count: int, noise: float, rng: np.random.Generator, falling: bool) -> list[dict]:
    blocks = (*pmnf.NEGATIVE_POWERS, *pmnf.NEGATIVE_BLOCKS) if falling else pmnf.BLOCKS
    out = []
    for _ in range(count):
        term = pmnf.Term.of(blocks[rng.integers(len(blocks))])
        c, a = rng.uniform(1, 100), rng.uniform(1, 100)
        if falling:
            c, a = rng.uniform(0.1, 10), rng.uniform(10, 1000)
        truth = c + a * term(SYNTHETIC_P)
        values = truth[:, None] * (1 + rng.uniform(-noise, noise, size=(len(SYNTHETIC_P), REPEATS)))
        out.append({"term": term, "c": c, "a": a, "values": values, "true_at": c + a * term(SYNTHETIC_AT)})
    return out


def synthetic_section(count: int, seed: int) -> list[dict]:
    print(f"\n(c) Synthetic: c + a*p^i*log2(p)^j, (i, j) drawn from Extra-P's building blocks, c, a ~ U(1, 100);"
          f"\n    p = {', '.join(f'{p:g}' for p in SYNTHETIC_P)}, {REPEATS} repeats with uniform noise of ± n%;"
          f" n = {count} curves per row; recovered = the lead term (i, j) exactly;"
          f"\n    error at 4x = |predicted − true| / true at p = {SYNTHETIC_AT:g}"
          " (median, 90th percentile)")  # fmt: skip
    rng = np.random.default_rng(seed)
    rows = []
    have_extrap = extrap_command() is not None
    for falling in (False, True):
        for noise in NOISE_LEVELS:
            curves = synthetic_curves(count, noise, rng, falling)
            ours_hit, ours_err = [], []
            for curve in curves:
                found = pmnf.fit(SYNTHETIC_P, curve["values"].mean(axis=1))
                lead = found.best.lead if found.best is not None else None
                ours_hit.append(lead is not None and lead.i == curve["term"].i and lead.j == curve["term"].j)
                predicted = found.best(np.array([SYNTHETIC_AT]))[0] if found.best is not None else math.nan
                ours_err.append(abs(predicted - curve["true_at"]) / curve["true_at"])
            row = {"family": "falling (negative blocks)" if falling else "Extra-P blocks", "noise": noise, "n": count,
                   "ours_recovered": np.mean(ours_hit), "ours_err_median": np.median(ours_err),
                   "ours_err_p90": np.percentile(ours_err, 90)}  # fmt: skip
            if have_extrap:
                inputs = {f"c{k}": (SYNTHETIC_P, curve["values"].tolist()) for k, curve in enumerate(curves)}
                models = extrap_models(inputs, negative=falling)
                hits, errs = [], []
                for k, curve in enumerate(curves):
                    model = models.get(f"c{k}", "")
                    i, j = extrap_lead(model) if model else (math.nan, 0)
                    hits.append(i == float(curve["term"].i) and j == curve["term"].j)
                    predicted = extrap_eval(model, [SYNTHETIC_AT])[0] if model else math.nan
                    errs.append(abs(predicted - curve["true_at"]) / curve["true_at"])
                row.update(extrap_recovered=np.mean(hits), extrap_err_median=np.nanmedian(errs),
                           extrap_err_p90=np.nanpercentile(errs, 90))  # fmt: skip
            rows.append(row)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
    if not have_extrap:
        print("    Extra-P columns skipped: not installed (pip install --no-deps -r requirements-extrap.txt)")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthetic", type=int, default=60, help="curves per noise level and family")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--results", type=Path, nargs="*", default=[], help="results directories to fit too")
    args = parser.parse_args()
    published_section()
    extrap_section(args.results)
    synthetic_section(args.synthetic, args.seed)
    print("\nDefinitions: " + "; ".join(f"{k}: {v}" for k, v in scaling_models.DEFINITIONS.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
