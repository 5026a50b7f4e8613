"""Two studies compared (scalestudy.presentation.compare): synthetic runs through the real analysis."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scalestudy.analysis.records import write_table
from scalestudy.analysis.scaling import scaling
from scalestudy.analysis.statistics import summarize
from scalestudy.model.metrics import metric
from scalestudy.model.paths import Layout, compare_outputs
from scalestudy.presentation.compare import compare
from scalestudy.presentation.comparison import CompareError, load_side, parse_threshold, points

DATA = Path(__file__).parents[1] / "data"


def runs(study="md", rates=None, seed=0, repeats=4, flag_sets=("default", "fast"), versions="3.0", hosts=("n1",)):
    """LAMMPS-like runs: steps/s per (flag set, ranks), a few repeats with 1% noise."""
    rng = np.random.default_rng(seed)
    rates = rates or {}
    rows = []
    for flag_set in flag_sets:
        for ranks in (1, 2, 4):
            rate = rates.get((flag_set, ranks), 100.0 * ranks**0.9)
            for repeat in range(1, repeats + 1):
                rows.append({
                    "study": study, "app": "lammps", "scaling": "strong", "variant": f"mpi-{flag_set}/nccl-default",
                    "mpi_flag_set": flag_set, "nccl_env_set": "default", "param.N": 8000, "nodes": 1,
                    "ranks_per_node": ranks, "gpus_per_node": 0, "ranks": ranks, "repeat": repeat, "status": "ok",
                    "steps_per_s": rate * (1 + 0.01 * rng.standard_normal()), "walltime_used_s": 10.0 + rng.random(),
                    "provenance": f'{{"mpi": {{"version": "mpich {versions}"}}, "node_list": {list(hosts)!r}}}'.replace(
                        "'", '"'
                    ),
                })  # fmt: skip
    return pd.DataFrame(rows)


def results(tmp_path: Path, name: str, table: pd.DataFrame) -> Path:
    layout = Layout(str(tmp_path / name))
    for study, study_runs in table.groupby("study"):
        write_table(study_runs, layout.table(study, "runs"))
        write_table(scaling(study_runs), layout.table(study, "scaling"))
    return tmp_path / name


def primary(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["primary"] & (table["present"] == "both")]


def test_an_unchanged_pair_gives_no_verdict_but_no_measurable_difference(tmp_path):
    base = results(tmp_path, "base", runs(seed=1))
    cand = results(tmp_path, "cand", runs(seed=2))
    table, failing = compare(base, cand, tmp_path / "out", threshold=0.05)
    assert set(table["verdict"]) == {"no measurable difference"}
    assert len(primary(table)) == 6 and failing.empty
    markdown = (tmp_path / "out/index.md").read_text()
    assert "6 no measurable difference" in markdown and "Nothing: the same modules" in markdown
    assert set(compare_outputs(tmp_path / "out")) == {"html", "markdown", "csv", "plot"}
    # The ratios' plot, on the page once.
    assert "![ratios.png](ratios.png)" in markdown and (tmp_path / "out/ratios.png").stat().st_size > 10_000
    assert (tmp_path / "out/index.html").read_text().count("data:image/png;base64,") == 1
    assert len(pd.read_csv(compare_outputs(tmp_path / "out")["csv"])) == len(table)


def test_a_slowed_point_is_named_slower_and_trips_the_threshold(tmp_path):
    base = results(tmp_path, "base", runs(seed=1))
    slowed = runs(seed=2, rates={("fast", 4): 0.8 * 100.0 * 4**0.9}, versions="4.1", hosts=("n2", "n3"))
    cand = results(tmp_path, "cand", slowed)
    table, failing = compare(base, cand, tmp_path / "out", threshold=0.05)
    verdicts = primary(table).set_index(["mpi_flag_set", "ranks"])["verdict"]
    assert verdicts[("fast", "4")] == "slower"
    assert set(verdicts.drop(("fast", "4"))) == {"no measurable difference"}
    assert len(failing) == 1 and failing.iloc[0]["ratio"] == pytest.approx(0.8, rel=0.03)
    # 20% slower trips a 5% threshold, not a 25% one.
    assert compare(base, cand, tmp_path / "out2", threshold=0.25)[1].empty
    markdown = (tmp_path / "out/index.md").read_text()
    assert "| md | MPI | mpich 3.0 | mpich 4.1 |" in markdown and "| md | hosts | n1 | n2 n3 |" in markdown
    # The whole curve: the slowed scale's efficiency dropped; Amdahl's f grew.
    assert "md mpi-fast/nccl-default (N=8000): Amdahl serial fraction" in markdown


def test_a_rate_and_a_time_point_the_same_way():
    # Both halved in speed: steps/s halves, a time doubles; both are "slower".
    def side(mean, kind):
        return pd.DataFrame([{"study": "s", "app": "a", "scaling": "strong", "mpi_flag_set": "default",
                              "nccl_env_set": "default", "nodes": 1, "ranks_per_node": 1, "gpus_per_node": 0,
                              "ranks": 1, "metric": f"x_{kind}", "metric_label": kind, "unit": "u", "kind": kind,
                              "primary": True, **summarize([mean * 0.99, mean, mean * 1.01])}])  # fmt: skip

    for kind, before, after in (("rate", 100.0, 50.0), ("time", 10.0, 20.0)):
        row = points(side(before, kind), side(after, kind)).iloc[0]
        assert row["verdict"] == "slower" and row["ratio"] == pytest.approx(0.5)
        assert row["direction"] == ("higher is better" if kind == "rate" else "lower is better")
    assert metric("steps_per_s").direction == "higher is better"


def test_points_only_one_side_has_are_listed(tmp_path):
    base = results(tmp_path, "base", runs(flag_sets=("default",)))
    cand = results(tmp_path, "cand", runs(flag_sets=("default", "fast")))
    table, _ = compare(base, cand, tmp_path / "out")
    alone = table[table["present"] == "candidate only"]
    assert set(alone["mpi_flag_set"]) == {"fast"} and set(alone["verdict"]) == {"candidate only"}
    assert "Points only one side has (3)" in (tmp_path / "out/index.md").read_text()


def test_a_published_record_is_a_baseline(tmp_path):
    record = DATA / "gadi-2024-hoomd-wca-strong.csv"
    side = load_side(record, "hoomd-wca")
    assert set(side.scaling["study"]) == {"hoomd-wca"}
    table, _ = compare(record, record, tmp_path / "out", study="hoomd-wca")
    # One run per scale in a record: no CI, so no verdict either way.
    assert set(primary(table)["verdict"]) == {"too few repeats for a verdict (need n ≥ 2 each)"}
    # Ratios without CIs still plot (as points); the page shows the plot.
    assert "![ratios.png](ratios.png)" in (tmp_path / "out/index.md").read_text()
    assert "no provenance" not in (tmp_path / "out/index.md").read_text()


def test_bad_sides_and_thresholds_are_one_line(tmp_path):
    assert parse_threshold("5%") == pytest.approx(0.05) and parse_threshold("0.1") == pytest.approx(0.1)
    for text in ("five", "150%", "-1"):
        with pytest.raises(CompareError, match="--fail-slower"):
            parse_threshold(text)
    with pytest.raises(CompareError, match="not found; give a results directory"):
        load_side(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="no runs.csv of any study"):
        load_side(tmp_path / "empty")


def test_the_trimmed_mean_drops_the_fastest_and_the_slowest():
    plain, trimmed = (
        summarize([1.0, 10.0, 11.0, 12.0, 100.0]),
        summarize([1.0, 10.0, 11.0, 12.0, 100.0], estimator="trimmed_mean"),
    )
    assert plain["mean"] == pytest.approx(26.8) and trimmed["mean"] == pytest.approx(11.0)
    assert trimmed["n"] == 5 and trimmed["n_used"] == 3 and trimmed["ci95"] < plain["ci95"]
    # Fewer than 3: nothing to drop.
    assert summarize([1.0, 3.0], estimator="trimmed_mean")["mean"] == pytest.approx(2.0)


def test_sides_summarized_differently_are_named(tmp_path):
    base = tmp_path / "base"
    layout = Layout(str(base))
    table = runs(seed=1)
    write_table(table, layout.table("md", "runs"))
    write_table(scaling(table, estimator="trimmed_mean"), layout.table("md", "scaling"))
    cand = results(tmp_path, "cand", runs(seed=2))
    compare(base, cand, tmp_path / "out")
    markdown = (tmp_path / "out/index.md").read_text()
    assert "(n=4 trimmed)" in markdown and "summarize their repeats differently in md" in markdown


def placement_runs(seed: int) -> pd.DataFrame:
    """A placement study: the same flag sets bound to cores and unbound, the unbound twice as fast."""
    bound = runs(seed=seed).assign(binding="core", hyperthreads=False, mapping="default")
    unbound = runs(seed=seed + 10).assign(binding="none", hyperthreads=False, mapping="default")
    unbound["steps_per_s"] *= 2
    for table, binding in ((bound, "core"), (unbound, "none")):
        table["variant"] = table["variant"] + f"/bind-{binding}"
    return pd.concat([bound, unbound], ignore_index=True)


def test_a_placement_study_compared_with_itself_pairs_each_binding_with_itself(tmp_path):
    # Paired by study, sets and scale only, core met none: "slower 0.5" and "faster 2.0".
    base = results(tmp_path, "base", placement_runs(seed=1))
    cand = results(tmp_path, "cand", placement_runs(seed=2))
    table, failing = compare(base, cand, tmp_path / "out", threshold=0.05)
    assert set(table["verdict"]) == {"no measurable difference"} and failing.empty
    both = table[table["present"] == "both"]
    assert len(primary(table)) == 12 and set(both["binding"]) == {"core", "none"}
    # Each pair is one placement on both sides (a key, not a column per side), and its
    # figures agree: core against none would be twice or half as fast.
    assert not {"binding_baseline", "hyperthreads_baseline", "mapping_baseline"} & set(table.columns)
    rates = primary(table)
    assert (rates["mean_candidate"] / rates["mean_baseline"]).between(0.9, 1.1).all()
    # The curves' changes name each binding's curve apart.
    markdown = (tmp_path / "out/index.md").read_text()
    assert "md mpi-fast/nccl-default (N=8000, binding=core): Amdahl" in markdown
    assert "md mpi-fast/nccl-default (N=8000, binding=none): Amdahl" in markdown


def test_the_part_of_the_time_that_changed_is_named_with_its_share(tmp_path):
    def with_parts(table: pd.DataFrame, comm: float, seed: int) -> pd.DataFrame:
        """LAMMPS's Pair and Comm per step beside steps/s; 1% noise."""
        rng = np.random.default_rng(seed)
        noise = lambda: 1 + 0.01 * rng.standard_normal(len(table))  # noqa: E731
        pair = 1e-3 / table["ranks"]
        return table.assign(lammps_pair_s=pair * noise(), lammps_comm_s=comm * table["ranks"] * noise())

    base = results(tmp_path, "base", with_parts(runs(seed=1, flag_sets=("default",)), 1e-4, 1))
    cand = results(tmp_path, "cand", with_parts(runs(seed=2, flag_sets=("default",)), 2e-4, 2))
    compare(base, cand, tmp_path / "out")
    markdown = (tmp_path / "out/index.md").read_text()
    section = markdown[markdown.index("## Which part of the time changed") : markdown.index("## Every figure")]
    # Comm doubled everywhere; Pair did not move: only Comm is named, with its share on each side
    # (at p = 2: 0.2 ms of 0.7 ms, 29%, → 0.4 ms of 0.9 ms, 44%; 1% noise on each).
    assert section.count("Comm slower") == 3 and "Pair" not in section
    share = re.search(r"\(p = 2\): Comm slower .* share of the time step (\d+)% → (\d+)%\.", section)
    assert share and abs(int(share[1]) - 29) <= 1 and int(share[2]) == 44
