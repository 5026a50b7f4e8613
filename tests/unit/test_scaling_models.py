"""Scaling models (analysis.pmnf, scaling_models): the fitter recovers known PMNF functions, says
when there are too few scales, predicts where efficiency falls below the threshold and where one
part passes another, and the references of benchmarks/scaling_models.py run: the published Gadi
table (Extra-P on the same inputs: tests/integration/test_scaling_models_extrap.py)."""

import importlib.util
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scalestudy.analysis import pmnf, scaling_models
from scalestudy.analysis.scaling import scaling
from scalestudy.apps.lammps.app import BREAKDOWN
from scalestudy.presentation import scaling_models_page
from scalestudy.presentation.published import read_record
from scalestudy.presentation.scaling_models_page import exponent_lines

REPO = Path(__file__).resolve().parents[2]
GADI = REPO / "tests" / "data" / "gadi-2024-hoomd-wca-strong.csv"
P = np.array([2, 4, 8, 16, 32, 64], dtype=float)


def benchmark():
    spec = importlib.util.spec_from_file_location("scaling_models_benchmark", REPO / "benchmarks/scaling_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("i", "j", "c", "a"),
    [(Fraction(1, 2), 0, 10, 3), (Fraction(1), 1, 5, 2), (Fraction(0), 1, 100, 7), (Fraction(2), 0, 1, 0.5),
     (Fraction(-1), 0, 0.5, 100), (Fraction(4, 3), 0, 50, 1)],
)  # fmt: skip
def test_the_fitter_recovers_a_known_function_and_predicts_it(i, j, c, a):
    term = pmnf.Term(i, j)
    found = pmnf.fit(P, c + a * term(P))
    assert found.best.lead == term
    assert found.best.smape_loo < 1e-6 and found.best.adj_r2 == pytest.approx(1)
    at = P.max() * 4
    assert found.best(np.array([at]))[0] == pytest.approx(c + a * term(np.array([at]))[0], rel=1e-6)


def test_noisy_repeats_still_give_the_lead_term_and_an_interval_that_holds_the_truth():
    rng = np.random.default_rng(3)
    truth = 20 + 0.5 * P**2
    repeats = truth[:, None] * (1 + rng.uniform(-0.01, 0.01, size=(len(P), 5)))
    found = pmnf.fit(P, repeats.mean(axis=1))
    assert found.best.lead == pmnf.Term(Fraction(2), 0)
    se = repeats.std(axis=1, ddof=1) / np.sqrt(5)
    at = np.array([128.0, 256.0])
    prediction = pmnf.predict(found, at, se)
    expected = 20 + 0.5 * at**2
    assert np.all(prediction.low <= expected) and np.all(expected <= prediction.high)
    assert np.all(prediction.high / prediction.low < 1.2)


def test_too_few_scales_are_said_instead_of_a_model():
    found = pmnf.fit([1, 2, 4], [10.0, 19.0, 35.0])
    assert found.best is None
    assert found.reason == "3 scales: too few to tell p from p log p (a model needs 4)"


def test_extrap_building_blocks_are_its_defaults():
    # Extra-P 4.2.5 create_default_building_blocks(allow_log_terms=True): 42, plus 42 with negatives.
    assert len(pmnf.BLOCKS) == 42 and len(pmnf.NEGATIVE_BLOCKS) + len(pmnf.NEGATIVE_POWERS) == 42
    assert len(set(pmnf.BLOCKS)) == 42


def strong_time_table(times: dict[str, np.ndarray], ranks: np.ndarray, study="s") -> pd.DataFrame:
    rows = []
    for metric, values in times.items():
        for p, value in zip(ranks, values, strict=True):
            rows.append({"study": study, "app": "lammps", "scaling": "strong", "variant": "mpi-default/nccl-default",
                         "mpi_flag_set": "default", "nccl_env_set": "default", "nodes": 1, "ranks_per_node": int(p),
                         "gpus_per_node": 0, "ranks": int(p), "metric": metric, "metric_label": metric, "unit": "s",
                         "kind": "time", "n": 3, "mean": float(value), "std": 0.001 * float(value),
                         "primary": metric == "loop_time"})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_scale_where_efficiency_falls_below_the_threshold():
    ranks = np.array([1, 2, 4, 8, 16])
    table = strong_time_table({"loop_time": 1 + 100 / ranks}, ranks)
    table[scaling_models.BEYOND_KEY] = 16.0
    [cf] = scaling_models.curve_fits(table)
    # E(p) = t(1) / (p t(p)) = 101 / (p + 100) < 0.5 from p = 102: inside the calibrated interval of
    # the crossing (the model of the rate, 16 ranks measured, 2.7 doublings short of it).
    found = scaling_models.efficiency_limit(cf)
    assert found["low"] <= 102 <= found["high"]
    assert found["low"] <= found["at"] <= found["high"]


def test_the_scale_where_communication_passes_the_largest_part():
    ranks = np.array([1, 2, 4, 8])
    pair, comm = BREAKDOWN["Pair"].name, BREAKDOWN["Comm"].name
    table = strong_time_table({pair: 0.5 + 100 / ranks, comm: 1 + 2 * np.log2(ranks)}, ranks)
    fits = scaling_models.curve_fits(table)
    [found] = scaling_models.overtaking(fits)
    # 0.5 + 100/p = 1 + 2 log2 p at p ≈ 12.75 (the grid: steps of 2%)
    assert found["part"].metric == comm and found["over"].metric == pair
    assert found["at"] == pytest.approx(12.75, rel=0.02) and not found["measured"]
    assert scaling_models_page.overtake_sentence(found).startswith("Comm passes Pair at about p = 13")


def test_compare_names_a_lead_term_that_changed():
    ranks = np.array([1, 2, 4, 8, 16])
    comm = BREAKDOWN["Comm"].name
    before = strong_time_table({comm: 1 + 2 * np.log2(ranks)}, ranks)
    after = strong_time_table({comm: 1 + 0.5 * ranks}, ranks)
    assert exponent_lines(before, after) == ["Comm went from log2 p to p (mpi-default/nccl-default, s)"]
    assert exponent_lines(before, before) == []


def test_scaling_csv_gains_the_model_columns_from_the_gadi_table():
    table = scaling_models.add_model_columns(scaling(read_record(GADI)), threshold=0.5, beyond=4)
    rate = table[table["primary"]]
    assert (rate["model_form"] == "c + a1·p^(1/3)").all()
    # The fit at each measured scale, within 13% of it (2 nodes: the superlinear step, 1,186 vs 1,058).
    assert rate["model_value"].to_numpy() == pytest.approx(rate["mean"].to_numpy(), rel=0.13)
    # Measured efficiency 0.714 at 16 nodes, 0.475 at 32: the crossing lies between them.
    crossing = rate["model_efficiency_below_p"].iloc[0] / 48
    assert 16 < crossing <= 32
    assert rate["model_at_2x_low"].iloc[0] < rate["model_at_2x"].iloc[0] < rate["model_at_2x_high"].iloc[0]


def test_the_published_gadi_predictions_are_held_to_the_table():
    rows = benchmark().published_section()
    by = {(r["p"], r["fitted"], r["at"]): r for r in rows}
    # 1-8 nodes over-predicts (the superlinear 1 -> 2 nodes step): the bootstrap's interval alone
    # misses the published value; the calibrated one (the model's form's error) holds it. The
    # centre corrected for the calibration series' lean, shrunk left-one-series-out (issue 47; -0.096
    # per doubling from 13 series), is nearer: 1.02 at 16 nodes (the model alone: 1.12), 1.15 at 32
    # (1.26).
    assert by[("ranks", "1-8 nodes", 16)]["ratio"] == pytest.approx(1.02, abs=0.01)
    assert by[("ranks", "1-8 nodes", 32)]["ratio"] == pytest.approx(1.15, abs=0.02)
    assert not by[("ranks", "1-8 nodes", 32)]["inside_bootstrap"]
    assert all(row["inside"] for row in rows)


def test_the_report_shows_the_models_of_the_published_record(record_page):
    markdown = (record_page.parent / "index.md").read_text()
    assert "Where scaling will stop: scaling models" in markdown
    assert "grows with the cube root of p" in markdown and "leave-one-out SMAPE" in markdown


def test_plan_predicts_the_larger_points_from_a_measured_study(tmp_path, monkeypatch, capsys):
    from scalestudy.__main__ import main

    monkeypatch.setenv("PROJECT", "ab12")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "cluster: gadi\nstudies:\n  hoomd-wca:\n    app: hoomd\n    nodes: [8, 16, 32, 64]\n    ranks_per_node: [48]\n"
        "    walltime: '00:10:00'\n    params: {N: 200000, warmup_steps: 40000, benchmark_steps: 80000}\n"
    )
    args = ["plan", "--profile", str(REPO / "profiles/gadi"), "--configfile", str(sweep), "--predict-from", str(GADI)]
    assert main(args) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "predicted from" in line]
    # The record measured up to 32 nodes: only 64 nodes is predicted, with its cost.
    assert len(notes) == 1 and "hoomd-wca 64 nodes (p = 3,072): time steps per second" in notes[0]
    # (0.33 from the model alone; 0.30 with the centre corrected for the calibration series' lean,
    # and since the 13-series calibration its 95% interval, x6.1, is said in words beside it)
    assert "parallel efficiency 0.30, but no useful prediction: the 95% interval spans 6.1×" in notes[0]
    assert "SU a run" in notes[0] and "a point to drop?" in notes[0]
    assert main([*args[:-1], str(tmp_path / "nothing")]) == 2


def test_a_results_directory_is_read_for_the_predictions(tmp_path):
    from scalestudy.model.paths import Layout
    from scalestudy.presentation.planned_predictions import measured_scaling

    ranks = np.array([1, 2, 4, 8])
    table = strong_time_table({"loop_time": 1 + 100 / ranks}, ranks, study="md")
    path = Path(Layout(str(tmp_path)).table("md", "scaling"))
    path.parent.mkdir(parents=True)
    table.to_csv(path, index=False)
    read = measured_scaling(tmp_path, ["md", "absent"], {"md": "lammps", "absent": "lammps"})
    assert len(read) == 4 and set(read["study"]) == {"md"}
    # A published record stands for the studies of its app only.
    assert measured_scaling(GADI, ["md", "h"], {"md": "lammps", "h": "hoomd"})["study"].unique().tolist() == ["h"]


def test_a_times_model_columns_are_the_fit_its_prediction_comes_from():
    # WAVETRISK's 2018 runs on Niagara (published times, first 6 scales): the prediction of a time
    # is the inverse of its rate's model (analysis.intervals); the page's formula and model_value
    # are that one fit, not a separate fit of the time (which missed it by more than 1% here).
    published = pd.read_csv(REPO / "benchmarks/data/published_strong_scaling.csv", comment="#")
    series = published[published["series"] == "wavetrisk_niagara_2018"].sort_values("p").head(6)
    ranks, times = series["p"].to_numpy(), series["value"].to_numpy(float)
    table = scaling_models.add_model_columns(strong_time_table({"loop_time": times}, ranks))
    [cf] = scaling_models.curve_fits(table)
    centre = cf.calibrated(cf.p).value
    assert table["model_value"].to_numpy(float) == pytest.approx(centre, rel=1e-9)
    assert table["model"].iloc[0].startswith("1/(") and table["model_form"].iloc[0].startswith("1/(c + ")
    assert scaling_models_page.model_sentence(cf).startswith(f"loop_time ≈ {table['model'].iloc[0]} (the inverse")
    time_model = pmnf.fit(cf.p, cf.mean).best(cf.p)
    assert np.max(np.abs(time_model / centre - 1)) > 0.01  # the two fits do differ: the test can tell them apart
