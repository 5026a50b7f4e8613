"""The report page: the published Gadi table regenerated through the report code, its
Markdown twin, and the page seen in a real browser (headless Chromium)."""

from pathlib import Path

import pandas as pd
from scalestudy.model.paths import PLOT_KINDS
from scalestudy.presentation.scaling_section import hpc_table, summary_sentence


def test_the_published_table_is_on_the_page_and_in_markdown(record_page):
    markdown = (record_page.parent / "index.md").read_text()
    row32 = next(line for line in markdown.splitlines() if line.startswith("| 32 | 1,536 |"))
    # published wall-time speedup and S/cores, then the steps/s speedup and parallel efficiency
    assert "| 3.93 | 0.003 | 15.20 | 0.475 |" in row32
    # The record's 21.54 is PBS's "Memory Used" (2^30 bytes), shown in GB of 10^9 bytes.
    assert "| 1 | 48 | 23.13 | 00:00:55 | 423 | 1.00 | 0.021 | 1.00 | 1.000 |" in markdown
    assert "516% (impossible)" in markdown and "contradicts itself" in markdown and "S/cores" in markdown
    page = record_page.read_text()
    # One flag set, no service units, no parts of a run and no curve over message size in a
    # record: those four plots are a line, not empty boxes (and no line about the sizes plot).
    assert page.count("data:image/png;base64,") == len(PLOT_KINDS) - 4
    assert "No time breakdown: HOOMD-blue's time per operation was not examined" in markdown
    assert "sizes plot" not in page
    assert "Not drawn: the variants plot: one MPI flag set, one NCCL env set and one placement" in page
    # One run per node count: no interval of the efficiency, so no verdict against the threshold.
    assert "cannot tell with n = 1 whether it holds ≥ 70% efficiency at 2 nodes (p = 96)" in page
    assert "fewer than 2 repeats at p = 48 and p = 96: one repeat has no spread" in page


def test_summary_and_table_of_a_weak_study():
    table = pd.DataFrame(
        {
            "study": "w", "variant": "v", "scaling": "weak", "metric": "steps_per_s", "metric_label": "steps/s",
            "unit": "steps/s", "kind": "rate", "nodes": [1, 2, 4], "ranks": [4, 8, 16], "n": [3, 3, 0],
            "n_failed": [0, 0, 3], "n_pending": 0, "mean": [100.0, 190.0, float("nan")],
            "ci95": [5.0, 6.0, float("nan")], "p0": 4, "weak_efficiency": [1.0, 0.95, float("nan")],
            "scaled_speedup": [1.0, 1.9, float("nan")], "cores_allocated": [4, 8, 16],
            "weak_efficiency_ci_low": [1.0, 0.9, float("nan")], "weak_efficiency_ci_high": [1.0, 1.0, float("nan")],
            "scaled_speedup_ci_low": [1.0, 1.8, float("nan")], "scaled_speedup_ci_high": [1.0, 2.0, float("nan")],
        }
    )  # fmt: skip
    assert summary_sentence(table) == (
        "weak scaling of steps/s holds ≥ 70% weak-scaling efficiency up to 2 nodes (p = 8); "
        "at 2 nodes (p = 8) scaled speedup 1.9 [1.8–2], weak-scaling efficiency 0.95 [0.9–1] (n = 3)."
    )
    rows = hpc_table(table).rows
    assert rows[0][3] == "100 ± 5 (n=3)" and rows[2][3] == "no successful run" and "3 failed" in rows[2][-1]


def test_published_command_line_writes_the_page(tmp_path, capsys):
    from scalestudy.__main__ import main

    record = Path(__file__).parents[1] / "data/gadi-2024-hoomd-wca-strong.csv"
    assert main(["published", str(record), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "index.html").is_file() and "15.20" in (tmp_path / "index.md").read_text()
    assert len(list((tmp_path / "plots").glob("*.png"))) == len(PLOT_KINDS)


def test_cost_lines_name_the_scale_the_budget_and_n():
    from scalestudy.analysis.scaling import scaling
    from scalestudy.presentation.scaling_section import cost_lines

    rows = []
    for ranks, rate, su in ((1, 100.0, 10.0), (2, 150.0, 12.0), (4, 180.0, 20.0)):
        for repeat in (1, 2):
            rows.append({"study": "s", "app": "litgpt", "scaling": "strong", "variant": "v", "mpi_flag_set": "default",
                         "nccl_env_set": "default", "nodes": ranks, "ranks_per_node": 1, "gpus_per_node": 0,
                         "ranks": ranks, "repeat": repeat, "status": "ok", "tokens_per_s": rate,
                         "service_units": su, "service_units_source": "site",
                         "walltime_used_s": 3600.0 / ranks})  # fmt: skip
    table = scaling(pd.DataFrame(rows), budget_su=15.0).query("metric == 'tokens_per_s'")
    lines = cost_lines(table, 15.0)
    assert lines[0] == "v: cost-optimal at 1 node (p = 1): 10 SU per run (mean of n = 2)."
    assert lines[1].startswith("v: fastest within the budget of 15 SU per run: 2 nodes (p = 2), throughput 150 tok/s")


def test_amdahl_line_names_a_slowdown_instead_of_a_ceiling_below_one():
    from scalestudy.presentation.scaling_section import amdahl_lines

    table = pd.DataFrame(
        {"scaling": "strong", "variant": "v", "n": [2, 2], "p0": [1, 1],
         "amdahl_serial_fraction": [1.29, 1.29], "amdahl_max_speedup": [0.775, 0.775]}
    )  # fmt: skip
    (line,) = amdahl_lines(table)
    assert "more ranks made it slower" in line and "ceiling 1/f" not in line
    (line,) = amdahl_lines(table.assign(amdahl_serial_fraction=0.25, amdahl_max_speedup=4.0))
    assert "speedup ceiling 1/f = 4" in line


def test_the_overview_comes_first_and_an_all_failed_study_is_one_line_and_a_fix(tmp_path):
    from pages import overview_page

    page = overview_page(tmp_path / "results")
    markdown = (page.parent / "index.md").read_text()
    overview = markdown[markdown.index("## Overview") : markdown.index("## md")]
    md_row = next(line for line in overview.splitlines() if line.startswith("| [md](#md)"))
    # The trimmed mean is named where it is used; the 10% faster set is the best variant.
    assert "| lammps | strong | p = 1, 2, 4 |" in md_row and "trimmed mean" in md_row and "(n=5)" in md_row
    assert "MPI flag set fast faster: 1.1× at 1 node (p = 4)" in md_row and "| 30 / 0 / 0 |" in md_row
    hoomd_row = next(line for line in overview.splitlines() if line.startswith("| [hoomd-wca](#hoomd-wca)"))
    assert "every run failed: hoomd not installed" in hoomd_row and "| 0 / 4 / 0 |" in hoomd_row
    # Its section: the reason and how to fix it, no plots, no per-run table.
    section = markdown[markdown.index("## hoomd-wca") : markdown.index("## Definitions")]
    assert "All 4 runs failed for one reason: hoomd not installed" in section and "--sdm conda" in section
    assert "LAMMPS twin" in section and "](plots/" not in section and "Failed runs" not in section
    # The trimmed mean in the HPC table's header; one flag-set plot line, no empty cost box.
    assert "trimmed mean (MLPerf: fastest and slowest run dropped) ± 95% CI (n)" in markdown
    assert "Not drawn: the cost plot: no service units recorded" in markdown
    assert markdown.count("](plots/md.") == 4 and "plots/hoomd-wca." not in markdown
    # Provenance: a side file per study, linked from the page; small studies also inline.
    side = page.parent / "provenance/md.jsonl"
    assert len(side.read_text().splitlines()) == 30 and "](provenance/md.jsonl)" in markdown
    assert "href='provenance/md.jsonl'" in page.read_text()


def test_error_bars_stop_at_zero():
    import numpy as np
    from scalestudy.presentation.plots import clipped_at_zero, doubling

    bars = clipped_at_zero(np.array([1.0, 5.0, np.nan]), np.array([3.0, 1.0, 0.0]))
    assert bars[0].tolist()[:2] == [1.0, 1.0] and bars[1].tolist()[:2] == [3.0, 1.0]
    assert doubling([1, 2, 4, 8]) and doubling([48, 96]) and not doubling([1, 2, 3]) and not doubling([4])


def test_a_large_studys_provenance_is_only_in_the_side_file(tmp_path, monkeypatch):
    import json

    from pages import md_runs
    from scalestudy.presentation import runs_section
    from scalestudy.presentation.page import to_html

    runs = md_runs()
    runs["provenance"] = '{"hosts": ["n1"], "ranks": [{"rank": 0, "env": {"A": "1"}}]}'
    runs.loc[0, "reason"] = 'a reason with "quotes" and a | pipe'
    side = tmp_path / "provenance/md.jsonl"
    runs_section.write_provenance(runs, side)
    lines = [json.loads(line) for line in side.read_text().splitlines()]
    assert len(lines) == len(runs) and lines[0]["reason"] == 'a reason with "quotes" and a | pipe'
    assert lines[1]["provenance"]["ranks"][0]["env"] == {"A": "1"} and lines[1]["point"] == runs["point"][1]
    monkeypatch.setattr(runs_section, "INLINE_PROVENANCE_BYTES", 1000)
    page = to_html(runs_section.run_blocks(runs, "provenance/md.jsonl"))
    assert "href='provenance/md.jsonl'" in page and "<details>" not in page
    monkeypatch.setattr(runs_section, "INLINE_PROVENANCE_BYTES", 10**7)
    assert to_html(runs_section.run_blocks(runs, "provenance/md.jsonl")).count("<details>") == len(runs) + 1


def test_one_scale_draws_no_speedup_or_efficiency_box():
    from pages import md_runs
    from scalestudy.analysis.scaling import scaling
    from scalestudy.analysis.verdicts import variants
    from scalestudy.presentation.plots import missing_plots

    runs = md_runs()
    table = scaling(runs[runs["ranks"] == 2])
    why = missing_plots(table, variants(table), "md")
    assert why["speedup"] == why["efficiency"] == "one scale succeeded (p = 2), so nothing to scale against"
    assert "metric" not in why and "variants" not in why


def test_memory_table_puts_the_prediction_beside_the_measured_peak_with_n():
    from scalestudy.presentation.scaling_section import memory_blocks

    runs = pd.DataFrame(
        [
            {"status": "ok", "variant": "model-mlp/strategy-ddp", "ranks": r, "predicted_memory_gb": 0.5,
             "memory_growth_gb": g, "peak_memory_gb": g + 0.3, "memory_ratio": g / 0.5}
            for r, g in ((1, 0.7), (1, 0.8), (2, 0.75))
        ]
        + [{"status": "failed", "variant": "model-mlp/strategy-ddp", "ranks": 2}]
    )  # fmt: skip
    heading, table, note = memory_blocks(runs)
    assert heading.text == "Memory per rank: predicted against measured"
    assert table.headers[-2:] == ["measured / predicted", "n"]
    assert table.rows[0][0:3] == ["model-mlp/strategy-ddp", "1", "0.5"] and table.rows[0][-2:] == ["1.5", "2"]
    assert table.rows[1][-1] == "1"  # the failed run is not counted
    assert "the memory model's tensor bytes" in note.text
    assert memory_blocks(runs.drop(columns="predicted_memory_gb")) == []


def test_a_run_that_failed_at_exit_after_its_result_is_listed_with_its_figures_kept():
    from pages import md_runs
    from scalestudy.analysis.records import run_row
    from scalestudy.presentation import runs_section
    from scalestudy.presentation.page import to_html

    runs = md_runs()
    reason = "result complete, then failed at exit: MPI job aborted or lost a rank (exit code 134 (SIGABRT)): ..."
    record = {"status": "ok", "reason": reason, "exit_failure": {"category": "mpi_abort", "reason": "..."}}
    row = run_row({**record, "point": {"study": "md"}, "figures": {"t": 1.0}})
    assert row["status"] == "ok" and row["exit_failure"] == "mpi_abort" and row["t"] == 1.0
    runs["exit_failure"] = ""
    runs.loc[1, ["reason", "exit_failure"]] = [reason, "mpi_abort"]
    page = to_html(runs_section.run_blocks(runs))
    assert "Runs that failed at exit after their complete result (1): their figures are kept" in page
    assert reason in page and "Failed runs" not in page
