"""The calibrated prediction intervals (scalestudy.analysis.intervals) held to published numbers the
models never saw, with Extra-P 4.2.5's prediction on the same inputs beside:

(i)   the published Gadi table (tests/data/gadi-2024-hoomd-wca-strong.csv, HOOMD-blue steps/s),
      fitted at 1-4, 1-8 and 1-16 nodes (p = nodes), each later published scale predicted;
(ii)  the published series of benchmarks/data/published_strong_scaling.csv: each fitted on its
      first 4 and on its first 5 scales, each later scale predicted; the calibration half (whose
      backtests set the distance term), the check half (never seen by the calibration) and the
      series set aside (added after the calibration was fixed) reported apart;
(iii) synthetic curves whose true form is outside the PMNF terms (a saturating rate, a
      communication-bound time, a superlinear start), p = 1..256 doubling, 2% noise, fitted on
      p = 1..16, the rest predicted;
(iv)  where to measure next, backtested: on the published series fitted on their first 4 (or 5)
      scales, with a target the largest later scale within 4x and at least two measured scales
      between: does measuring the suggested scale (intervals.measure_next) narrow the interval at
      the target more than measuring another of them (the published value added, refitted)?
(v)   issue 47's goals within 2x the largest fitted scale (`sharpness`);
(vi)  what any interval spanning at most x2 could hold there at best (`ceiling`): the share of
      the published values within x2 of the calibrated centre, and within the best x2 band the
      split's own errors allow (its offset chosen on the split itself: an upper bound no
      calibration can pass); and each split's own lean, uncorrected.

Definitions (every figure per series and in total; n = the predictions counted):
- coverage at 80% / 95%: the share of held-out published values inside the nominal 80% / 95%
  interval (the bootstrap's alone beside, `boot95`: the intervals before issue 39);
- width: the median of the 95% interval's ± (sqrt(high/low) − 1), in %; refused: the share of
  95% intervals spanning more than x2 (the report says why in words instead of a number);
- |ratio − 1| at 2x / 4x: the median over predictions at exactly 2x / 4x the largest fitted scale
  of |predicted / published − 1|, ours and Extra-P's (its default modeler on the same inputs: the
  figure as a rate).

    python benchmarks/prediction_intervals.py [--small]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "benchmarks"))

from calibrate_intervals import published_series  # noqa: E402
from scalestudy.analysis import intervals, pmnf  # noqa: E402

GADI = REPO / "tests" / "data" / "gadi-2024-hoomd-wca-strong.csv"
GOAL = 0.90  # at nominal 95%, the share of held-out points inside (issue 39)


def extrap_module():
    spec = importlib.util.spec_from_file_location("scaling_models_benchmark", REPO / "benchmarks/scaling_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXTRAP = extrap_module()


def extrap_predictions(cases: list[dict]) -> None:
    """Extra-P's model of each case's fitted rates, evaluated at its held-out scales (in place:
    case['extrap'], nan where Extra-P is absent or gave no model)."""
    inputs = {f"c{k}": (case["p_fit"], [[float(v)] for v in case["rate_fit"]]) for k, case in enumerate(cases)}
    models = EXTRAP.extrap_models(inputs) if EXTRAP.extrap_command() else {}
    for k, case in enumerate(cases):
        model = models.get(f"c{k}")
        rate = EXTRAP.extrap_eval(model, case["p_out"]) if model else np.full(len(case["p_out"]), np.nan)
        case["extrap"] = 1 / rate if case["kind"] == "time" else rate


def case(name, p, y, kind, k, split="") -> dict:
    """Fit the first k scales, predict the rest: our 80% and 95% intervals and the bootstrap's."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    fit_p, fit_y, out_p, out_y = p[:k], y[:k], p[k:], y[k:]
    rate = intervals.orient(fit_y, kind)
    out = {"name": name, "split": split, "kind": kind, "k": k, "p_fit": fit_p, "rate_fit": rate, "p_out": out_p,
           "y_out": out_y, "largest": fit_p.max()}  # fmt: skip
    for level in intervals.LEVELS:
        out[level] = intervals.interval(fit_p, fit_y, out_p, kind, level=level)
    found = pmnf.fit(fit_p, rate)
    if found.best is not None:
        boot = pmnf.predict(found, out_p)
        low, high = (1 / boot.high, 1 / boot.low) if kind == "time" else (boot.low, boot.high)
        out["boot"] = (low, high)
    return out


def figures(cases: list[dict]) -> dict:
    inside = {level: [] for level in intervals.LEVELS}
    boot, width, refused, r2, r4, e2, e4 = [], [], [], [], [], [], []
    for c in cases:
        ninety_five = c[0.95]
        if not np.isfinite(ninety_five.value).all():
            continue
        for level in intervals.LEVELS:
            band = c[level]
            inside[level] += list((band.low <= c["y_out"]) & (c["y_out"] <= band.high))
        if "boot" in c:
            low, high = c["boot"]
            with np.errstate(invalid="ignore"):
                boot += list((low <= c["y_out"]) & (c["y_out"] <= high))
        width += list(ninety_five.plus_minus())
        refused += list(~ninety_five.useful())
        multiple = c["p_out"] / c["largest"]
        for factor, ours, theirs in ((2, r2, e2), (4, r4, e4)):
            at = np.isclose(multiple, factor)
            ours += list(np.abs(ninety_five.value[at] / c["y_out"][at] - 1))
            theirs += list(np.abs(c.get("extrap", np.full(len(at), np.nan))[at] / c["y_out"][at] - 1))

    def median(values):
        values = [v for v in values if np.isfinite(v)]
        return float(np.median(values)) if values else math.nan

    return {"n": len(inside[0.95]), "cov80": np.mean(inside[0.8]) if inside[0.8] else math.nan,
            "cov95": np.mean(inside[0.95]) if inside[0.95] else math.nan,
            "boot95": np.mean(boot) if boot else math.nan, "width": median(width),
            "refused": np.mean(refused) if refused else math.nan, "r2": median(r2), "n2": len(r2),
            "r4": median(r4), "n4": len(r4), "e2": median(e2), "e4": median(e4)}  # fmt: skip


def row(label: str, f: dict) -> str:
    def pct(v):
        return "   –  " if not np.isfinite(v) else f"{v * 100:5.1f}%"

    return (f"  {label:44} n={f['n']:3}  cov80 {pct(f['cov80'])}  cov95 {pct(f['cov95'])}  boot95 {pct(f['boot95'])}"
            f"  width ±{pct(f['width'])}  refused {pct(f['refused'])}  |r-1| 2x {pct(f['r2'])} (n={f['n2']},"
            f" Extra-P {pct(f['e2'])})  4x {pct(f['r4'])} (n={f['n4']}, Extra-P {pct(f['e4'])})")  # fmt: skip


HEADER = ("  cov80/cov95: share of held-out published values inside the nominal 80%/95% interval; boot95: inside"
          " the bootstrap's 95% interval alone (before);\n  width: median ± of the 95% interval; refused: share"
          " spanning more than x2 (said in words); |r-1|: median |predicted/published - 1|")  # fmt: skip


def gadi_section() -> list[dict]:
    print("(i) The published Gadi table (HOOMD-blue md_pair_wca steps/s, p = nodes), fitted at 1-4, 1-8, 1-16 nodes")
    lines = [line for line in GADI.read_text().splitlines() if line and not line.startswith("#")]
    rows = [line.split(",") for line in lines[1:]]
    p = np.array([float(r[0]) for r in rows])
    y = np.array([float(r[4]) for r in rows])
    cases = []
    for top in (4, 8, 16):
        k = int(np.sum(p <= top))
        c = case(f"gadi 1-{top} nodes", p, y, "rate", k)
        band = c[0.95]
        if not np.isfinite(band.value).all():
            print(f"  1-{top} nodes: {band.reasons[0]}")
            continue
        cases.append(c)
    extrap_predictions(cases)
    for c in cases:
        for j, at in enumerate(c["p_out"]):
            b80, b95 = c[0.8], c[0.95]
            words = b95.reasons[j] or "useful"
            print(f"  {c['name']}: at {at:g} nodes {b95.value[j]:,.0f}, 80% [{b80.low[j]:,.0f}-{b80.high[j]:,.0f}],"
                  f" 95% [{b95.low[j]:,.0f}-{b95.high[j]:,.0f}] vs published {c['y_out'][j]:,.0f}:"
                  f" ratio {b95.value[j] / c['y_out'][j]:.3f} (Extra-P {c['extrap'][j] / c['y_out'][j]:.3f});"
                  f" 95% inside: {'yes' if b95.low[j] <= c['y_out'][j] <= b95.high[j] else 'NO'}; {words}")  # fmt: skip
    print(row("Gadi, all fits", figures(cases)))
    return cases


PROTOCOLS = ("first 4 and 5", "every k")  # which first-k fits of a series are made


def protocols(small: bool) -> tuple[str, ...]:
    return PROTOCOLS[:1] if small else PROTOCOLS  # --small: the cheap one


def fitted_ks(s: dict, protocol: str) -> list[int]:
    """The k of the fits on the first k scales that protocol makes of series s (a scale left to predict)."""
    ks = (4, 5) if protocol == PROTOCOLS[0] else range(pmnf.MIN_SCALES, len(s["p"]))
    return [k for k in ks if len(s["p"]) > k]


def series_for(small: bool) -> dict[str, dict]:
    """The published series; --small: the first two and the last two."""
    series = published_series()
    return dict(list(series.items())[:2] + list(series.items())[-2:]) if small else series


def published_section(small: bool) -> dict[str, list[dict]]:
    series = series_for(small)
    print(f"\n(ii) {len(series)} published series (benchmarks/data/published_strong_scaling.csv), each fitted on its"
          " first 4 and first 5 scales, every later scale predicted")  # fmt: skip
    print(HEADER)
    by_split: dict[str, list[dict]] = {"calibrate": [], "check": [], "aside": []}
    for name, s in series.items():
        cases = [case(name, s["p"], s["y"], s["kind"], k, s["split"]) for k in fitted_ks(s, PROTOCOLS[0])]
        extrap_predictions(cases)
        print(row(f"{name} [{s['split']}]", figures(cases)))
        by_split[s["split"]] += cases
    for split, cases in by_split.items():
        if cases:
            print(row(f"TOTAL {split} split", figures(cases)))
    check = figures(by_split["check"])
    verdict = "met" if check["cov95"] >= GOAL else "NOT met"
    print(f"  goal: >= {GOAL:.0%} of the check split inside its nominal 95% interval: {check['cov95']:.1%}"
          f" (n = {check['n']}): {verdict}")  # fmt: skip
    return by_split


def synthetic_curves(count: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray, str]]:
    p = 2.0 ** np.arange(0, 9)
    out = []
    for k in range(count):
        knee = rng.uniform(8, 64)
        out.append((f"saturating rate #{k}", p, 100 * p / (1 + p / knee), "rate"))
        comm = rng.uniform(0.002, 0.02)
        out.append((f"communication-bound time #{k}", p, 1 / p + comm * np.log2(2 * p) * p**0.5, "time"))
        cache = rng.uniform(1.2, 1.6)
        boost = np.where(p <= 4, 1.0, np.where(p <= 16, cache, cache * 0.9))
        out.append((f"superlinear start #{k}", p, 50 * p * boost / (1 + 0.002 * p**1.3), "rate"))
    noisy = []
    for name, p_, y, kind in out:
        noisy.append((name, p_, y * (1 + rng.uniform(-0.02, 0.02, size=len(y))), kind))
    return noisy


def synthetic_section(small: bool) -> list[dict]:
    print("\n(iii) Synthetic curves outside the PMNF terms (p = 1..256, 2% noise), fitted on p = 1..16")
    rng = np.random.default_rng(7)
    curves = synthetic_curves(2 if small else 10, rng)
    cases = [case(name, p, y, kind, 5) for name, p, y, kind in curves]
    extrap_predictions(cases)
    for form in ("saturating", "communication-bound", "superlinear"):
        print(row(form, figures([c for c in cases if c["name"].startswith(form)])))
    print(row("TOTAL synthetic", figures(cases)))
    return cases


def measure_next_section(small: bool) -> None:
    print("\n(iv) Where to measure next, backtested on the published series (fit on the first 4 or 5 scales;"
          " target: each later scale within 4x, then 8x, of the largest fitted one with at least two measured"
          " scales between; the suggestion (intervals.measure_next over those scales) against each other one,"
          " each with its published value added)")  # fmt: skip
    series = published_series()
    if small:
        series = dict(list(series.items())[:3])
    for reach in (4, 8):
        wins = comparisons = trials = 0
        for s in series.values():
            p, y, kind = s["p"], s["y"], s["kind"]
            for k in (4, 5):
                for target in range(k + 2, len(p)):
                    between = list(range(k, target))
                    if p[target] > reach * p[k - 1] + 1e-9:
                        break
                    suggestion = intervals.measure_next(p[:k], y[:k], kind, p[target], choices=p[between])
                    if not math.isfinite(suggestion.scale):
                        continue
                    actual = {}
                    for j in between:
                        fit_p, fit_y = np.append(p[:k], p[j]), np.append(y[:k], y[j])
                        actual[p[j]] = float(intervals.interval(fit_p, fit_y, [p[target]], kind).span[0])
                    trials += 1
                    mine = actual[suggestion.scale]
                    for scale, span in actual.items():
                        if scale != suggestion.scale:
                            comparisons += 1
                            wins += 1.0 if mine < span else (0.5 if mine == span else 0.0)
        share = wins / comparisons if comparisons else math.nan
        print(f"  targets within {reach}x: {trials} backtests, {comparisons} comparisons: the suggested scale gave the"
              f" narrower 95% interval at the target in {share:.1%} of them (ties half; by chance: 50%)")  # fmt: skip


SHARP = {"given": 0.5, "held95": 0.90, "held80": 0.80, "lean": 0.60}  # issue 47's goals within 2x


def sharpness(cases: list[dict]) -> dict:
    """Issue 47's figures over the held-out points within 2x the largest fitted scale: how many
    95% intervals are given (span <= USEFUL_SPAN) and how many of those hold the published value;
    the same for the 80% bands; which side the centre misses on (optimistic: it promised more
    than was published) and which side the given intervals miss on."""
    out = {"n": 0, "given95": 0, "held95": 0, "given80": 0, "held80": 0, "optimistic": 0, "pessimistic": 0,
           "out_low": 0, "out_high": 0}  # fmt: skip
    for c in cases:
        near = c["p_out"] <= 2 * c["largest"] * (1 + 1e-9)
        for j in np.nonzero(near)[0]:
            published = c["y_out"][j]
            band95 = c[0.95]
            if not np.isfinite(band95.value[j]):
                continue
            out["n"] += 1
            rate_ratio = intervals.orient(np.array([band95.value[j] / published]), c["kind"])[0]
            out["optimistic" if rate_ratio > 1 else "pessimistic"] += 1
            for level, given, held in ((0.95, "given95", "held95"), (0.8, "given80", "held80")):
                band = c[level]
                if band.reasons[j]:
                    continue
                out[given] += 1
                inside = band.low[j] <= published <= band.high[j]
                out[held] += int(inside)
                if not inside and level == 0.95:
                    better = published > band.high[j] if c["kind"] == "rate" else published < band.low[j]
                    out["out_high" if better else "out_low"] += 1
    return out


def sharpness_line(label: str, f: dict) -> str:
    def share(a, b):
        return f"{a}/{b} ({a / b:.0%})" if b else f"{a}/0"

    n, sides = f["n"], f["optimistic"] + f["pessimistic"]
    met = (n and f["given95"] / n >= SHARP["given"] and f["given95"] and f["held95"] / f["given95"] >= SHARP["held95"]
           and f["given80"] and f["held80"] / f["given80"] >= SHARP["held80"]
           and sides and max(f["optimistic"], f["pessimistic"]) / sides <= SHARP["lean"])  # fmt: skip
    return (f"  {label:40} n={n:3}  95% given {share(f['given95'], n)}, held {share(f['held95'], f['given95'])}"
            f"  80% given {share(f['given80'], n)}, held {share(f['held80'], f['given80'])}"
            f"  centre optimistic {share(f['optimistic'], sides)}"
            f"  95% misses below/above {f['out_low']}/{f['out_high']}"
            f"  goals: {'met' if met else 'NOT met'}")  # fmt: skip


def sharpness_section(small: bool) -> dict[str, dict[str, list[dict]]]:
    print("\n(v) Issue 47's goals within 2x the largest fitted scale (strong scaling): a 95% interval spanning at most"
          f" x{intervals.USEFUL_SPAN:g} given for >= {SHARP['given']:.0%} of the points, >= {SHARP['held95']:.0%} of"
          f" those holding the published value, the given 80% bands >= {SHARP['held80']:.0%}, and neither side more"
          f" than {SHARP['lean']:.0%} of the centre's misses (optimistic: it promised more than was published);"
          " fitted on the first 4 and 5 scales (as (ii)) and, below, on the first k for every k >= 4")  # fmt: skip
    series = series_for(small)
    cases_by_protocol = {}
    for protocol in protocols(small):
        by_split = cases_by_protocol[protocol] = split_cases(series, protocol)
        for split, cases in by_split.items():
            if cases:
                print(sharpness_line(f"{split} split, {protocol} scales", sharpness(cases)))
    return cases_by_protocol


def split_cases(series: dict[str, dict], protocol: str) -> dict[str, list[dict]]:
    """Each split's fits (`case`) of its series on the first k scales, for each k of the protocol."""
    by_split: dict[str, list[dict]] = {"calibrate": [], "check": [], "aside": []}
    for name, s in series.items():
        by_split[s["split"]] += [case(name, s["p"], s["y"], s["kind"], k, s["split"]) for k in fitted_ks(s, protocol)]
    return by_split


def first_doubling_errors(cases: list[dict]) -> list[tuple[float, float]]:
    """(log(published / centre), doublings) of every held-out scale within 2x the largest fitted
    one, the centre the fit's own (intervals.interval's, corrected for the calibrated lean), both
    as rates."""
    out = []
    for c in cases:
        centre = c[0.95]
        for j in np.nonzero(centre.doublings <= 1 + 1e-9)[0]:
            if np.isfinite(centre.value[j]) and centre.value[j] > 0:
                published, predicted = intervals.orient(np.array([c["y_out"][j], centre.value[j]]), c["kind"])
                out.append((math.log(published / predicted), float(centre.doublings[j])))
    return out


def best_band(errors: np.ndarray, log_span: float) -> tuple[float, float]:
    """The most errors any band of width log_span holds (its share), and of the centres of such
    bands the one nearest 0 (our centre). A band holding the most can slide until its low end is
    one of the errors, so the low ends tried are the errors; the k errors from the i-th on stay
    inside while the centre is within [e[i+k-1] - span/2, e[i] + span/2]."""
    ordered = np.sort(errors)
    counts = np.searchsorted(ordered, ordered + log_span, side="right") - np.arange(len(ordered))
    most = int(counts.max())
    centres = []
    for i in np.nonzero(counts == most)[0]:
        low, high = ordered[i + most - 1] - log_span / 2, ordered[i] + log_span / 2
        centres.append(float(np.clip(0.0, low, high)))
    return most / len(ordered), min(centres, key=abs)


def ceiling(errors: list[tuple[float, float]], lean: float) -> dict:
    e = np.array([err for err, _ in errors])
    d = np.array([dd for _, dd in errors])
    half = math.log(intervals.USEFUL_SPAN) / 2
    share, offset = best_band(e, 2 * half)
    raw = e + lean * d  # the model's own error, before the centre's correction
    return {"n": len(e), "centred": float(np.mean(np.abs(e) <= half + 1e-12)), "best": share, "offset": offset,
            "optimistic_raw": float(np.mean(raw < 0)), "lean_own": float(np.median(raw / d))}  # fmt: skip


def ceiling_section(cases_by_protocol: dict[str, dict[str, list[dict]]]) -> None:
    lean = intervals.calibration().lean
    print(f"\n(vi) The most a 95% interval spanning at most x{intervals.USEFUL_SPAN:g} could hold within 2x the largest"
          " fitted scale: the share of published values within that span of the calibrated centre, and within the best"
          " such band of the split's own errors (its centre chosen on the split itself, an upper bound); beside, the"
          " models' own lean before the centre's correction (share optimistic, the median error per doubling), which"
          f" the calibration's {lean:+.3f} corrects")  # fmt: skip
    for protocol, by_split in cases_by_protocol.items():  # the fits of (v)
        for split, cases in [*by_split.items(), ("every", [c for fits in by_split.values() for c in fits])]:
            errors = first_doubling_errors(cases)
            if not errors:
                continue
            c = ceiling(errors, lean)
            label = "every series" if split == "every" else f"{split} split"
            span = f"x{intervals.USEFUL_SPAN:g}"
            print(f"  {label}, {protocol} scales: n={c['n']:3}  within {span} of the centre {c['centred']:.0%},"
                  f" of the best band {c['best']:.0%} (its centre {c['offset']:+.3f} from ours); uncorrected:"
                  f" optimistic {c['optimistic_raw']:.0%}, lean {c['lean_own']:+.3f} per doubling")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="a few series and curves (the test's run)")
    args = parser.parse_args()
    calibration = intervals.calibration()
    sides = ", ".join(f"{k:.0%}: -{calibration.low[k]:.3f}/+{calibration.high[k]:.3f}" for k in calibration.low)
    print(f"calibration: {', '.join(f'{k:.0%}: {v:.3f}' for k, v in calibration.slope.items())} per doubling"
          f" (symmetric: not strong scaling); strong scaling: lean {calibration.lean:+.3f}, {sides} per doubling;"
          f" from {len(calibration.series)} series ({', '.join(calibration.series)})")  # fmt: skip
    if not EXTRAP.extrap_command():
        print("Extra-P columns: skipped (not installed: pip install --no-deps -r requirements-extrap.txt)")
    gadi_section()
    published_section(args.small)
    synthetic_section(args.small)
    measure_next_section(args.small)
    ceiling_section(sharpness_section(args.small))
    return 0


if __name__ == "__main__":
    sys.exit(main())
