"""Calibrated prediction intervals (scalestudy.analysis.intervals), held to published numbers they
were not fitted on: the Gadi table's larger scales and the check half of
benchmarks/data/published_strong_scaling.csv (never seen by the calibration); the rate/time
symmetry and positivity held to the published table's own inverse; where to measure next held to
the published values at the candidate scales."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scalestudy.analysis import intervals, pmnf, scaling_models
from scalestudy.presentation import scaling_models_page

REPO = Path(__file__).resolve().parents[2]
GADI = REPO / "tests" / "data" / "gadi-2024-hoomd-wca-strong.csv"


def benchmark_script(name: str):
    """benchmarks/<name>.py, imported as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def calibration_script():
    return benchmark_script("calibrate_intervals")


def gadi() -> tuple[np.ndarray, np.ndarray]:
    table = pd.read_csv(GADI, comment="#")
    return table["nodes"].to_numpy(float), table["steps_per_s"].to_numpy(float)


def test_a_times_interval_is_exactly_the_inverse_of_the_rates():
    nodes, rate = gadi()
    at = [16.0, 24.0, 32.0]
    as_rate = intervals.interval(nodes[:4], rate[:4], at, "rate")
    as_time = intervals.interval(nodes[:4], 1 / rate[:4], at, "time")
    assert as_time.value == pytest.approx(1 / as_rate.value, rel=1e-9)
    assert as_time.low == pytest.approx(1 / as_rate.high, rel=1e-9)
    assert as_time.high == pytest.approx(1 / as_rate.low, rel=1e-9)
    # and both hold the published 16 and 32 nodes (the bootstrap's alone held neither).
    for k, published in ((0, 4831.0), (2, 6431.0)):
        assert as_rate.low[k] <= published <= as_rate.high[k]
        assert as_time.low[k] <= 1 / published <= as_time.high[k]


def test_times_never_reach_zero_however_far_the_prediction():
    series = calibration_script().published_series()["wavetrisk_niagara_2018"]
    found = intervals.interval(series["p"][:5], series["y"][:5], series["p"][5:], "time")
    assert np.all(found.low > 0) and np.all(found.value > 0)


def test_the_interval_widens_with_the_distance_beyond_the_largest_scale():
    nodes, rate = gadi()
    at = np.array([8.0, 12.0, 16.0, 32.0, 64.0])
    found = intervals.interval(nodes[:4], rate[:4], at, "rate")
    assert found.doublings == pytest.approx([0, math.log2(1.5), 1, 2, 3])
    assert np.all(np.diff(found.span) > 0)


@pytest.mark.parametrize(("split", "least"), [("check", 40), ("aside", 70)])
def test_series_the_calibration_never_saw_are_covered_at_the_nominal_level(split, least):
    # Neither the check half nor the series set aside (added after the calibration was fixed) were
    # seen by it: fitted on their first 4 and 5 scales, the 95% intervals must hold at least 90%
    # of their later published values (issue 39's goal).
    series = calibration_script().published_series()
    inside = []
    for s in series.values():
        if s["split"] != split:
            continue
        for k in (4, 5):
            if len(s["p"]) > k:
                found = intervals.interval(s["p"][:k], s["y"][:k], s["p"][k:], s["kind"])
                inside += list((found.low <= s["y"][k:]) & (s["y"][k:] <= found.high))
    assert len(inside) >= least
    assert np.mean(inside) >= 0.90


def test_the_stored_calibration_is_what_the_script_derives():
    script = calibration_script()
    derived = script.calibrate(script.published_series())
    stored = intervals.calibration()
    assert {float(k): v for k, v in derived["slope"].items()} == stored.slope
    strong = derived["strong"]
    assert (strong["lean"], {float(k): v for k, v in strong["low"].items()}) == (stored.lean, stored.low)
    assert {float(k): v for k, v in strong["high"].items()} == stored.high
    assert tuple(derived["series"]) == stored.series
    assert not set(stored.series) & {n for n, s in script.published_series().items() if s["split"] != "calibrate"}


def test_an_interval_wider_than_a_factor_of_two_is_said_in_words():
    nodes, rate = gadi()
    # Fitted on 1-16 nodes: at 32 (one doubling) the 95% interval holds the published 6,431 steps/s
    # but spans x6.4, so it is said in words (since the 13-series calibration of 2026-12-02; with 5
    # series it was within x2, a number); at 64 (two doublings) x112: words.
    found = intervals.interval(nodes[:5], rate[:5], [32.0, 64.0], "rate")
    assert found.span[0] == pytest.approx(6.44, abs=0.01) and found.span[0] > intervals.USEFUL_SPAN
    assert found.reasons[0].startswith("no useful prediction: the 95% interval spans 6.4× (more than ×2)")
    assert "1.0 doublings beyond the largest measured scale" in found.reasons[0]
    assert found.low[0] <= 6431.0 <= found.high[0]
    assert found.span[1] > intervals.USEFUL_SPAN
    assert found.reasons[1].startswith("no useful prediction: the 95% interval spans")
    assert "2.0 doublings beyond the largest measured scale" in found.reasons[1]
    # inside the measured range the interval is the bootstrap's: narrow, and given as a number.
    inside = intervals.interval(nodes[:5], rate[:5], [12.0], "rate")
    assert inside.reasons == [""] and inside.span[0] < 1.2


def test_the_report_says_why_instead_of_a_number():
    from scalestudy.analysis.scaling import scaling
    from scalestudy.presentation.published import read_record

    runs = read_record(GADI)
    runs = runs[runs["nodes"] <= 16].copy()
    runs["ranks"], runs["ranks_per_node"] = runs["nodes"], 1
    [cf] = scaling_models.curve_fits(scaling(runs), metrics=["steps_per_s"])
    cell = scaling_models_page.predicted_cell(cf, 64.0)
    assert cell.startswith("No useful prediction: the 95% interval spans") and "2.0 doublings beyond" in cell
    # one doubling out (32 nodes) too, since the 13-series calibration (the 95% interval x6.4; with 5
    # series it was the number 6,579 [4,872–9,420]): words, with the 80% interval (published: 6,431)
    near = scaling_models_page.predicted_cell(cf, 32.0)
    assert near.startswith("No useful prediction: the 95% interval spans 6.4×") and "1.0 doublings beyond" in near
    assert near.endswith("its 80% interval: 4,974–8,028 (median 6,191)")


def test_measuring_the_suggested_scale_narrows_the_target_most():
    # OpenFOAM on one node, fitted on 1-6 cores, target 24 cores: each candidate's published value
    # added in turn; the suggested one's actual interval is the narrowest of them.
    series = calibration_script().published_series()["openfoam_motorbike_arc"]
    p, y = series["p"], series["y"]
    choices = p[(p > 6) & (p < 24)]
    suggestion = intervals.measure_next(p[:4], y[:4], "time", 24.0, choices=choices)
    assert suggestion.scale in choices and suggestion.after.span[0] < suggestion.before.span[0]
    actual = {}
    for c in choices:
        j = int(np.nonzero(p == c)[0][0])
        actual[c] = intervals.interval(np.append(p[:4], c), np.append(y[:4], y[j]), [24.0], "time").span[0]
    assert actual[suggestion.scale] == min(actual.values())


@pytest.mark.parametrize(
    ("target", "words"),
    [(8.0, "measured range already reaches p = 8"), (40.0, "beyond predict_up_to (4× the largest measured scale"),
     (0.0, "use a number of ranks above 0")],
)  # fmt: skip
def test_a_target_out_of_range_is_one_line(target, words):
    problem = intervals.target_problem(target, largest=8.0, beyond=4.0)
    assert words in problem and "\n" not in problem
    assert intervals.target_problem(16.0, largest=8.0, beyond=4.0) == ""


@pytest.mark.parametrize("scales", [1, 2])
def test_one_or_two_scales_predict_nothing(scales):
    found = intervals.interval([1, 2][:scales], [10.0, 19.0][:scales], [4.0], "rate")
    assert np.isnan(found.value).all()
    assert found.reasons == [pmnf.too_few(scales) + ": no prediction"]


def test_repeats_that_disagree_wildly_predict_nothing():
    nodes, rate = gadi()
    spread = np.array([0.01, 0.02, 0.9, 0.01])
    found = intervals.interval(nodes[:4], rate[:4], [16.0], "rate", spread=spread)
    assert np.isnan(found.value).all()
    assert found.reasons[0].startswith("the repeats at p = 4 disagree wildly (standard deviation 90% of their mean")


def test_plan_names_the_planned_scale_to_measure_first_with_its_cost(tmp_path, monkeypatch, capsys):
    # The Gadi record measured up to 32 nodes; the sweep plans 48, 64 and 96: for 96 nodes,
    # measuring 64 first (the closer of the two between) narrows its interval more, at its SU.
    from scalestudy.__main__ import main

    monkeypatch.setenv("PROJECT", "ab12")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "cluster: gadi\nstudies:\n  hoomd-wca:\n    app: hoomd\n    nodes: [8, 16, 32, 48, 64, 96]\n"
        "    ranks_per_node: [48]\n    walltime: '00:10:00'\n"
        "    params: {N: 200000, warmup_steps: 40000, benchmark_steps: 80000}\n"
    )
    args = ["plan", "--profile", str(REPO / "profiles/gadi"), "--configfile", str(sweep), "--predict-from", str(GADI)]
    assert main(args) == 0
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if "Where to measure next" in line]
    assert "Where to measure next for 96 nodes (p = 4,608): 64 nodes (p = 3,072) (" in line and "SU a run)" in line
    assert "of 2 scales between" in line
    # each planned scale past the measured ones says why its 95% interval is not a number
    [far] = [line for line in out.splitlines() if "hoomd-wca 96 nodes (p = 4,608): time steps per second" in line]
    assert "no useful prediction: the 95% interval spans" in far
    # the cost named is the 64-node point's own forecast line's
    [near] = [line for line in out.splitlines() if "hoomd-wca 64 nodes (p = 3,072): time steps per second" in line]
    su = near.split("≈ ")[-1].split(" SU a run")[0]
    assert f"({su} SU a run)" in line


def test_the_efficiency_crossing_interval_holds_the_published_crossing():
    # Gadi, fitted on 1-8 nodes: the published efficiency is 0.71 at 16 nodes (4,831 / (423 x 16))
    # and 0.48 at 32 (6,431 / (423 x 32)): it falls below 0.5 between 16 and 32 nodes.
    from scalestudy.analysis.scaling import scaling
    from scalestudy.presentation.published import read_record

    runs = read_record(GADI)
    runs = runs[runs["nodes"] <= 8].copy()
    runs["ranks"], runs["ranks_per_node"] = runs["nodes"], 1
    [cf] = scaling_models.curve_fits(scaling(runs), metrics=["steps_per_s"])
    found = scaling_models.efficiency_limit(cf)
    assert found["low"] <= 32 and found["high"] > 16
    assert found["low"] <= found["at"] <= found["high"]


def test_a_study_whose_own_scales_defy_its_model_gets_a_wider_interval():
    # WAVETRISK's adaptive runs: 640 cores took 355 s after 787 s at 480 (2.2x for 1.33x the cores).
    # Its own leave-future-out backtest misses that by more than the calibration allows, so its
    # distance term is its own, and larger: 1.48 per doubling against the calibration's 1.40
    # (symmetric) and 0.67 (above the centre, strong scaling), from 13 series since 2026-12-02.
    series = calibration_script().published_series()["wavetrisk_niagara_2018_adaptive"]
    calibrated = intervals.calibration()
    found = intervals.interval(series["p"], series["y"], [1280.0], "time")
    _, high = intervals.own_terms(series["p"], 1 / series["y"], lean=calibrated.lean)
    assert found.slope == pytest.approx(high)  # 640 cores beat its model: the upper side widens
    assert found.slope > calibrated.at(0.95) and high > 2 * calibrated.at(0.95, calibrated.high)
    without_last = intervals.interval(series["p"][:-1], series["y"][:-1], [1280.0], "time")
    assert without_last.slope == intervals.calibration().at(0.95)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [("efficiency_threshold", 1.5, "studies.pp.efficiency_threshold: 1.5 is not allowed; use a fraction between 0"),
     ("efficiency_threshold", 0, "studies.pp.efficiency_threshold: 0 is not allowed; use a fraction between 0 and 1"),
     ("predict_up_to", 0.5, "studies.pp.predict_up_to: 0.5 is not allowed; use a factor of the largest measured")],
)  # fmt: skip
def test_a_threshold_or_reach_out_of_range_is_one_line_before_anything_runs(key, value, words):
    from scalestudy.config import study
    from scalestudy.config.sweep import SweepError

    config = {
        "cluster": "local",
        "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], key: value}},
    }
    with pytest.raises(SweepError) as raised:
        study.load(config)
    [problem] = raised.value.problems
    assert problem.startswith(words) and "\n" not in problem, problem


def test_strong_scaling_corrects_the_lean_for_the_first_doubling_and_its_sides_differ():
    # The calibration half's models promised more than was published (lean < 0): the centre of a
    # strong-scaling prediction is the model corrected by the lean for the first doubling only;
    # its two sides are the calibrated terms below and above that centre.
    nodes, rate = gadi()
    calibrated = intervals.calibration()
    assert calibrated.lean < 0 and calibrated.low[0.95] != calibrated.high[0.95]
    at = np.array([32.0, 64.0])
    found = intervals.interval(nodes[:5], rate[:5], at, "rate")
    model = pmnf.fit(nodes[:5], rate[:5]).best(at)
    assert found.value == pytest.approx(model * math.exp(calibrated.lean), rel=1e-9)
    weak = intervals.interval(nodes[:5], rate[:5], at, "rate", scaling="weak")
    assert weak.value == pytest.approx(model, rel=1e-9)  # weak scaling: the symmetric interval, as before
    w = intervals.bootstrap_halfwidth(pmnf.fit(nodes[:5], rate[:5]), at, None, 0.95)
    assert np.log(found.high[0] / found.value[0]) == pytest.approx(w[0] + calibrated.high[0.95], rel=1e-6)
    assert np.log(found.value[0] / found.low[0]) == pytest.approx(w[0] + calibrated.low[0.95], rel=1e-6)


@pytest.mark.parametrize(("split", "counts"), [("check", (23, 1, 1)), ("aside", (9, 0, 0))])
def test_within_twice_the_largest_scale_the_95_intervals_given_hold_but_few_are_given(split, counts):
    # Issue 47's goal on series the calibration never saw, fitted on their first 4 and 5 scales:
    # at the later published scales within 2x, a 95% interval spanning at most x2 for at least
    # half of them, and at least 90% of those holding the published value. Since the calibration
    # grew from 5 to 13 series (2026-12-02) its 95% terms cover their collapses past a best scale
    # (VASP TiO2 past 16 nodes, CASTEP DNA past 128) and a superlinear jump (OpenSBLI 1024^3 on
    # ARCHER), so the first half is NOT met: 1 of the check half's 23 points and none of the
    # set-aside's 9 get one (with 5 series: 9 of 11 and 5 of 9). Every one given holds. Pinned, so
    # that either way a change shows.
    series = calibration_script().published_series()
    given = held = near = 0
    for s in series.values():
        if s["split"] != split:
            continue
        for k in (4, 5):
            close = s["p"][k:][s["p"][k:] <= 2 * s["p"][k - 1]]
            if len(s["p"]) <= k or not len(close):
                continue
            found = intervals.interval(s["p"][:k], s["y"][:k], close, s["kind"])
            published = s["y"][k : k + len(close)]
            near += len(close)
            useful = found.useful()
            given += int(useful.sum())
            held += int(((found.low <= published) & (published <= found.high))[useful].sum())
    assert (near, given, held) == counts
    assert held >= 0.9 * given and given < near / 2  # the goal's second half met, its first not


def test_the_best_band_of_a_span_holds_the_most_errors_any_such_band_can():
    bench = benchmark_script("prediction_intervals")
    errors = np.array([-1.0, 0.0, 0.1, 0.6, 0.65, 0.7, 2.0])
    share, centre = bench.best_band(errors, math.log(2))  # width 0.693: 0.0-0.65 or 0.1-0.7, 4 each
    assert share == pytest.approx(4 / 7)
    assert np.sum(np.abs(errors - centre) <= math.log(2) / 2) == 4  # the band it names holds them
    # Brute force over a fine grid of band positions: none holds more.
    most = max(int(np.sum((errors >= lo) & (errors <= lo + math.log(2)))) for lo in np.linspace(-1.5, 2.5, 4001))
    assert most == 4


def test_no_band_spanning_x2_holds_95_of_the_calibration_halfs_first_doublings():
    # Why issue 47's sharp 95% interval is not given: within 2x the largest fitted scale, fitted on
    # the first 4 and 5 scales, no band spanning x2 (however centred) holds more than 83% of the
    # calibration half's published values (benchmarks/prediction_intervals.py (vi): 89% fitted on
    # every k), so an interval that holds 95% of them must be wider; the check half's are easier
    # (96%). Pinned: a change of the series or the fitter shows here.
    bench = benchmark_script("prediction_intervals")
    by_split = bench.split_cases(bench.series_for(small=False), bench.PROTOCOLS[0])
    lean = intervals.calibration().lean
    found = {}
    for split in ("calibrate", "check"):
        errors = bench.first_doubling_errors(by_split[split])
        found[split] = (len(errors), round(bench.ceiling(errors, lean)["best"], 2))
    assert found == {"calibrate": (29, 0.83), "check": (23, 0.96)}


def test_the_lean_is_shrunk_by_the_share_left_one_series_out_chooses():
    # The calibration half's pooled lean, from 13 series, is shrunk toward 0 by λ in [0, 1]; λ
    # minimises the left-one-series-out absolute error of the corrected centres within the first
    # doubling (each series weighing 1): the weighted median is that minimiser, no grid beats it.
    script = calibration_script()
    chosen = {n: s for n, s in script.published_series().items() if s["split"] == "calibrate"}
    per_series = {
        n: intervals.misses(s["p"], intervals.orient(s["y"], s["kind"]), None, intervals.LEVELS[0])
        for n, s in chosen.items()
    }

    def loss(share):
        total = 0.0
        for name, found in per_series.items():
            near = [m for m in found if m.doublings <= 1 + 1e-9 and math.isfinite(m.error)]
            others = script.pooled_lean([f for other, f in per_series.items() if other != name])
            total += sum(abs(m.error - share * others * m.doublings) for m in near) / len(near)
        return total

    shrink = script.lean_shrinkage(per_series)
    assert 0 < shrink < 1
    assert all(loss(shrink) <= loss(share) + 1e-12 for share in np.linspace(0, 1, 101))
    stored = intervals.calibration()
    assert stored.lean == pytest.approx(shrink * script.pooled_lean(list(per_series.values())), abs=1e-6)
