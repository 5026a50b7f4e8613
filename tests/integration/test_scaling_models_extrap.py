"""Extra-P (PyPI extrap, its own command line) on the same inputs as our scaling models gives the
same model and the same predictions (benchmarks/scaling_models.py (b)); skipped where Extra-P is
not installed (pip install --no-deps -r requirements-extrap.txt)."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def benchmark():
    spec = importlib.util.spec_from_file_location("scaling_models_benchmark", REPO / "benchmarks/scaling_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_extrap_on_the_same_inputs_gives_the_same_models():
    bench = benchmark()
    if bench.extrap_command() is None:
        pytest.skip("Extra-P is not installed (pip install --no-deps -r requirements-extrap.txt)")
    named = {f"gadi_{top}": bench.gadi_fit(top, per_node=True) for top in (8, 16)}
    rows = bench.side_by_side(named)
    assert len(rows) == 2 and all(row["within"] for row in rows)
    assert all(row["ratio_4x"] == pytest.approx(1, abs=1e-3) for row in rows)
    assert bench.extrap_lead(rows[0]["extrap"]) == (0.5, 0)


def test_extrap_recovers_the_same_synthetic_terms_as_ours():
    bench = benchmark()
    if bench.extrap_command() is None:
        pytest.skip("Extra-P is not installed (pip install --no-deps -r requirements-extrap.txt)")
    rows = bench.synthetic_section(8, seed=2)
    for row in rows:
        assert row["extrap_recovered"] == pytest.approx(row["ours_recovered"])
        assert row["extrap_err_median"] == pytest.approx(row["ours_err_median"], rel=1e-3, abs=1e-9)
