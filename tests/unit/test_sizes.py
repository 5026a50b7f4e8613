"""Curves over message size: size bands, band figures and verdicts per band, the report's
sentence that reads "flag set X helps large allreduces and hurts small ones"."""

import json

import pandas as pd
import pytest
from scalestudy.analysis.sizes import SIZE_BANDS, band_figures, band_of, band_verdicts, size_curves
from scalestudy.model.metrics import SIZE_TABLE
from scalestudy.presentation.variants_section import size_blocks

SIZES = (1024, 4096, 65536, 4 << 20, 8 << 20)


def run(flag_set: str, repeat: int, small: float, large: float) -> dict:
    """An allreduce run whose latency is `small` us below 8 KiB and `large` us above 1 MiB."""
    noise = 1 + 0.01 * repeat
    table = [
        {"size_bytes": s, "latency_avg_us": (small if s < 8192 else 10.0 if s <= 1 << 20 else large) * noise,
         "busbw_GBps": s / 1e3 / ((small if s < 8192 else 10.0 if s <= 1 << 20 else large) * noise)}
        for s in SIZES
    ]  # fmt: skip
    return {
        "study": "coll", "app": "collectives", "scaling": "strong", "mpi_flag_set": flag_set,
        "nccl_env_set": "default", "variant": f"operation-allreduce/mpi-{flag_set}/nccl-default",
        "param.operation": "allreduce", "nodes": 1, "ranks_per_node": 2, "gpus_per_node": 0, "ranks": 2,
        "repeat": repeat, "status": "ok", "collective_latency_us": table[0]["latency_avg_us"],
        SIZE_TABLE: json.dumps(table),
    }  # fmt: skip


@pytest.fixture
def runs():
    rows = [run("default", r, small=2.0, large=1000.0) for r in (1, 2, 3)]
    rows += [run("ring", r, small=3.0, large=500.0) for r in (1, 2, 3)]
    return pd.DataFrame(rows)


def test_bands_cover_every_size_once():
    assert [band_of(s) for s in (1, 8191, 8192, 1 << 20, (1 << 20) + 1)] == [
        "small", "small", "medium", "medium", "large"
    ]  # fmt: skip
    assert SIZE_BANDS[0][1] == 1 and SIZE_BANDS[-1][2] == float("inf")


def test_size_curves_have_a_row_per_curve_size_and_figure(runs):
    curves = size_curves(runs)
    assert len(curves) == 2 * len(SIZES) * 2 and set(curves["n"]) == {3}
    at = curves[(curves["mpi_flag_set"] == "ring") & (curves["size_bytes"] == 4 << 20)]
    assert at.loc[at["metric"] == "latency_avg_us", "mean"].item() == pytest.approx(500 * 1.02)


def test_a_band_figure_is_the_geometric_mean_over_the_bands_sizes(runs):
    bands = band_figures(runs)
    small = bands[(bands["metric"] == "busbw_GBps@small") & (bands["mpi_flag_set"] == "default")]
    # busbw at 1 KiB and 4 KiB: 1.024/2 and 4.096/2 (x 1/noise); geometric mean 1.024 x 2 / 2.
    expected = sum(1.024 / (1 + 0.01 * r) for r in (1, 2, 3)) / 3
    assert small["mean"].item() == pytest.approx(expected, rel=1e-3)


def test_a_flag_set_that_helps_large_messages_and_hurts_small_ones_says_so(runs):
    verdicts = band_verdicts(runs)
    latency = verdicts[verdicts["figure"] == "latency_avg_us"].set_index("band")
    assert latency.loc["small", "verdict"] == "slower" and latency.loc["large", "verdict"] == "faster"
    assert latency.loc["medium", "verdict"] == "no measurable difference"
    assert latency.loc["large", "ratio"] == pytest.approx(2.0)
    text = " ".join(str(block) for block in size_blocks(runs))
    assert "MPI flag set ring vs default (operation=allreduce, p = 2), latency per call (average over ranks):" in text
    assert "slower for small messages; faster for large messages; no measurable difference for medium ones." in text
    # Each curve's table per message size, as OSU prints it.
    assert "Figures per message size" in text and "'4 MiB', '510 ± " in text


def test_runs_without_size_tables_have_no_band_section():
    assert size_blocks(pd.DataFrame([{"app": "lammps", "status": "ok"}])) == []
