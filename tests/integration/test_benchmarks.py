"""Every benchmark still runs on a fresh clone (one broke silently once when apps were
added): each is run small here, and must print its figure and its ratio."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def benchmark(name: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "benchmarks" / name), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_planning_overhead_runs_and_prints_its_ratio():
    run = benchmark("overhead.py", "--only", "b", "--points", "200", "--repeats", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "dry run of 200 points" in run.stdout
    assert "(b) wall ratio " in run.stdout and "(b) CPU ratio " in run.stdout


def test_the_shipped_sweeps_start_is_measured_against_bare_snakemake_on_an_equal_dag():
    run = benchmark("overhead.py", "--only", "e", "--repeats", "1")
    assert "(e) wall time of `snakemake -n` on the shipped sweep: scalestudy " in run.stdout
    assert "bare Snakemake, equal DAG: " in run.stdout and "(target <= +1.5 s)" in run.stdout


def test_runner_overhead_runs_and_prints_its_ratio():
    run = benchmark("overhead.py", "--only", "c", "--runs", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "(c) runner CPU overhead per run job, this checkout: median" in run.stdout
    assert "(c) CPU: this checkout / 25b3435 = " in run.stdout


def test_exit_abort_runs_and_prints_its_counts():
    run = benchmark("exit_abort.py", "--launches", "1", "--busy", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "this checkout: 1 launches, 0 aborts after the result" in run.stdout and "load average" in run.stdout


def test_qstat_per_round_runs_and_prints_its_ratio():
    run = benchmark("qstat_per_round.py", "--jobs", "5", "--rounds", "2", "--seconds-between-rounds", "2.5")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "worst round: 1 qstat" in run.stdout and "ratio to the default" in run.stdout


def test_hoomd_reference_ratio_starts():
    # It needs HOOMD-blue and the reference harness to measure; its imports and options must hold.
    run = benchmark("hoomd_reference_ratio.py", "--help")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "--harness-dir" in run.stdout


def test_report_of_many_runs_runs_and_prints_its_ratios():
    run = benchmark("report_10k.py", "--runs", "200")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "report of 200 runs:" in run.stdout and "(target 15 s; ratio " in run.stdout
    assert "index.html:" in run.stdout and "(target 5 MB; ratio " in run.stdout


def test_memory_anchors_runs_and_prints_every_reference_and_a_cpu_ratio():
    run = benchmark(
        "memory_anchors.py",
        "--cpu-width",
        "256",
        "--cpu-depth",
        "2",
        "--cpu-strategies",
        "fsdp:3",
        "--ranks",
        "2",
        "--speed-points",
        "200",
        "--litgpt-methods",
        "lora",
        "--no-fsdp",
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    out = run.stdout
    lines = out.splitlines()
    assert sum(line.startswith("litgpt-lora ") for line in lines) == 25
    assert "litgpt table: 19/19 measured cells within 0.8-1.2" in out
    assert sum(line.startswith("zero stage ") for line in lines) == 4
    assert sum(line.startswith("deepspeed zero") for line in lines) == 6
    assert "cpu fsdp:3 ranks=2 " in out and ", ratio " in out and "cpu: " in out
    assert "cpu litgpt-lora ranks=1: " in out and "cpu litgpt-lora ranks=2: " in out and "cpu litgpt: " in out
    assert "load-time check of 200 LitGPT points" in out and " s again (cached)" in out
    # The held-out table: every cell printed, none wrongly refused or admitted.
    assert sum(line.endswith("yaml") or ".yaml (" in line for line in lines) == 26
    assert "held out: wrong refusals 0, wrong admissions 0, OOM refused 5" in out


def test_memory_anchors_measures_litgpt_under_fsdp_on_cpu_ranks():
    # Stock LitGPT finetune_full under FSDP on 2 CPU ranks at the smallest size: every part the
    # model adds up, measured, and the peak within 0.8-1.2 (a miss is printed and counted).
    run = benchmark("memory_anchors.py", "--speed-points", "0", "--cpu-strategies", "", "--litgpt-methods", "",
                    "--fsdp-sizes", "base")  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("fsdp base ")]
    for part in ("shard", "root + activations", "optimizer", "step_temporaries", "peak", "sharded gradients"):
        assert f"; {part} " in f"; {line.split(': ', 1)[1]}"
    assert "fsdp peak: 1/1 within 0.8-1.2" in run.stdout


def test_memory_autocast_prints_the_published_mixed_cells_and_a_measured_cpu_ratio():
    # LitGPT's published mixed-precision cells (none out of memory said to fit) and one CPU case
    # under bfloat16 autocast, measured now: its saved bytes and its peak against the model.
    run = benchmark("memory_autocast.py", "--only", "llama lora bf16-mixed 1 128")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert sum(line.startswith("Lightning-AI/litgpt tutorials/finetune_lora.md@") for line in lines) == 12
    assert "published mixed: 3/3 measured cells within 0.8-1.2" in run.stdout
    assert "published: wrong refusals 0, wrong admissions 0, OOM refused 4" in run.stdout
    (cpu,) = [line for line in lines if line.startswith("cpu llama lora bf16-mixed micro_batch=1 s=128: saved ")]
    assert "; peak " in cpu and "cpu peak: 1/1 within 0.8-1.2" in run.stdout


def test_breakdown_overhead_runs_and_prints_its_ratios():
    run = benchmark("breakdown_overhead.py", "--repeats", "2", "--steps", "3", "--breakdown-steps", "2")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "figure: samples_per_s:" in run.stdout and "(n = 2)" in run.stdout
    assert "(a) ratio with / without: " in run.stdout and "(b) profiled step / timed median step" in run.stdout


def test_collectives_reference_runs_and_prints_its_ratios():
    run = benchmark("collectives_reference.py", "--max-bytes", "64", "--iterations", "20", "--warmup", "5",
                    "--rounds", "1")  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "point-to-point vs mpi4py.bench pingpong: median and best of 1 rounds" in run.stdout
    # 1 ... 64 B, latency and bandwidth
    assert "pingpong: best: " in run.stdout and "of 14 ratios within 0.9–1.1 (n = 1 rounds per side)" in run.stdout
    assert "allreduce vs osu_allreduce" in run.stdout or "vs osu_allreduce: skipped" in run.stdout
    assert "allreduce vs IMB Allreduce" in run.stdout or "vs IMB-MPI1: skipped" in run.stdout


def test_verdicts_benchmark_runs_and_prints_its_rates():
    run = benchmark("verdicts.py", "--rounds", "4", "--load-on", "0.5", "--load-off", "0.5")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "false-verdict rate: " in run.stdout and "(target <= 5%; ratio " in run.stdout
    assert "detection rate: " in run.stdout and "(target >= 80%; ratio " in run.stdout


def test_scaling_models_runs_and_prints_its_ratios():
    run = benchmark("scaling_models.py", "--synthetic", "3")
    assert run.returncode == 0, run.stderr[-3000:]
    # 16 nodes from 1-8 (p = ranks): the model 1.122x the published, its centre 1.019x after the lean
    assert "(a) Held to the published Gadi table" in run.stdout and "vs 4,831: ratio 1.019" in run.stdout
    assert "(b) Held to Extra-P" in run.stdout and "(c) Synthetic" in run.stdout and "Definitions:" in run.stdout


def test_contended_benchmark_runs_and_prints_its_rates():
    run = benchmark("contended.py", "--basis", "1", "--comparisons", "1")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "latency [collective_latency_us] with 4 busy: median " in run.stdout
    assert "false-verdict rate with the new rules: " in run.stdout and "(target <= 5%; ratio " in run.stdout
    assert "false-verdict rate without them: " in run.stdout


def test_multihost_curves_run_and_print_their_ratios_or_why_not():
    # The allreduce half runs where IMB-MPI1 is on PATH, else says it is skipped and why.
    run = benchmark("multihost_curves.py", "--max-bytes", "8", "--iterations", "20", "--warmup", "2",
                    "--rounds", "1")  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    if "multihost curves: skipped (" in run.stdout:
        return  # no root, no sshd, ...: said, and nothing else to check
    # 1 ... 8 B, latency and bandwidth
    assert "pingpong: median: " in run.stdout and "of 8 ratios within 0.9–1.1 (n = 1 rounds per side)" in run.stdout
    name = "two-host allreduce vs IMB-MPI1 Allreduce"
    if shutil.which("IMB-MPI1"):
        # 4 and 8 B (one and two float32), latency only
        best = [line for line in run.stdout.splitlines() if line.startswith(f"{name}: best: ")]
        assert len(best) == 1 and best[0].endswith(" of 2 ratios within 0.9–1.1 (n = 1 rounds per side)"), run.stdout
    else:
        assert f"{name}: skipped (no IMB-MPI1 on PATH and none given with --imb)" in run.stdout


def test_site_mpi_runs_and_prints_its_four_comparisons_or_why_not():
    run = benchmark("site_mpi.py", "--max-bytes", "8", "--iterations", "20", "--warmup", "2", "--rounds", "1",
                    "--study-repeats", "1")  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    if "site MPI: skipped (" in run.stdout:
        return  # no Lmod, no Debian Open MPI, no .venv-site, no root: said, and nothing else to check
    assert run.stdout.count("app on the site: ranks on Open MPI v4.1") >= 2
    assert "app on pip's MPI: ranks on Open MPI v5" in run.stdout
    for name in ("the site's Open MPI 4.1, two-host ping-pong vs mpi4py.bench pingpong by hand",
                 "which MPI: two-host ping-pong, pip's Open MPI 5 (app) vs the site's 4.1 (reference)",
                 "which MPI: two-host allreduce, pip's Open MPI 5 (app) vs the site's 4.1 (reference)"):  # fmt: skip
        assert f"{name}: median and best of 1 rounds of each side" in run.stdout, run.stdout
    # The study a user runs, on each MPI, and compared: the verdict lines name both studies' points.
    assert "the study on site's MPI: ranks on {'pp': ['Open MPI v4.1" in run.stdout, run.stdout
    said = run.stdout.split("`scalestudy compare`", 1)[1]
    assert "pp mpi-tcp/nccl-default at 2 nodes" in said and "coll mpi-tcp/nccl-default at 2 nodes" in said, said
    assert "| pp | modules | – | openmpi/4.1" in said, said


def test_multihost_curves_refuse_an_imb_that_is_not_a_program_before_anything_runs(tmp_path):
    run = benchmark("multihost_curves.py", "--imb", str(tmp_path / "IMB-MPI1"))
    assert run.returncode != 0 and run.stdout == ""
    assert (
        run.stderr.strip()
        == f"--imb: {tmp_path / 'IMB-MPI1'} is not an executable file; allowed: the path of an IMB-MPI1"
    )


def test_slow_host_runs_and_prints_each_hosts_figures_or_why_not():
    run = benchmark("slow_host.py", "--runs", "1", "--iterations", "20")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    if "slow host: skipped (" in run.stdout:
        return  # no root, no sshd, no cpuset: said, and nothing else to check
    assert run.stdout.count("other processes' share ") == 4 and "load average after: " in run.stdout


def test_lammps_memory_runs_and_prints_its_ratios():
    done = benchmark("lammps_memory.py", "--quick")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fitted on [(5000, 1), (20000, 1)]" in done.stdout
    assert "predicted/measured" in done.stdout and "ghosts predicted/LAMMPS" in done.stdout
    assert "check cells outside the predicted range: " in done.stdout


def test_run_queue_benchmark_prints_both_rules_rates_side_by_side():
    run = benchmark("run_queue.py", "--repeats", "1", "--busy", "0", "3", "--apps", "torch-parallel")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "false-positive rate (expected not contended: ranks + busy <= CPUs, n = 2): run-queue rule " in run.stdout
    assert "true-positive rate with 3 busy (ranks + busy > CPUs, n = 2): run-queue rule " in run.stdout
    assert "Spearman rho of wait share vs slowdown" in run.stdout and ", older rule " in run.stdout


def test_prediction_intervals_run_and_print_their_coverage_beside_extrap():
    run = benchmark("prediction_intervals.py", "--small")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "(i) The published Gadi table" in run.stdout and "1-4 nodes: 3 scales: too few" in run.stdout
    assert "TOTAL check split" in run.stdout and "goal: >= 90% of the check split inside" in run.stdout
    assert "TOTAL synthetic" in run.stdout and "(iv) Where to measure next" in run.stdout
    assert "(v) Issue 47's goals within 2x the largest fitted scale" in run.stdout
    assert "check split, first 4 and 5 scales" in run.stdout and "95% given " in run.stdout
    assert "(vi) The most a 95% interval spanning at most x2 could hold" in run.stdout
    assert "of the best band" in run.stdout
    assert ("Extra-P columns: skipped" in run.stdout) or ("Extra-P   " in run.stdout)


def test_ladder_replay_stops_published_series_and_prints_the_node_hours_not_spent(capsys):
    run = benchmark("ladder_replay.py", "--series", "gadi_hoomd_wca_2024", "ramses_sedov_amr_meluxina", "amdahl_f0.07")
    assert run.returncode == 0, run.stderr[-3000:]
    # Gadi's table climbs to 32 nodes (0.48 there, 0.82 at 16 nodes); RAMSES' Sedov AMR run falls
    # to 0.46 at 4 nodes: the ladder stops there, 92% of its node-hours not spent.
    assert "gadi_hoomd_wca_2024" in run.stdout and "stops at      32 of      32 (measured below ) E 0.48" in run.stdout
    assert "stops at       4 of      32 (measured below ) E 0.46 next      8 E 0.22  agrees" in run.stdout
    assert "(ii) judged by the measured rungs and the calibrated prediction" in run.stdout
    assert "total: 2 series; stopped before the last rung 1; agrees 2, late 0, early 0" in run.stdout
    # The prediction-chosen rungs against the doubling ladder: neither published series has a scale at
    # 1.5x a rung past its 4th, so nothing differs there; the synthetic series has every one.
    assert "(iii) the doubling ladder" in run.stdout and "(iv) the same with intermediate rungs" in run.stdout
    offered = "series offered a measurable intermediate rung 0, intermediate rungs run 0, of which stopped the ladder 0"
    assert offered in run.stdout
    assert "node-hours differ in 0 series" in run.stdout and "(v) synthetic Amdahl series" in run.stdout
    [plain, chosen] = [line for line in run.stdout.splitlines() if line.startswith("  amdahl_f0.07 ")]
    assert "rungs  7 stops at" in plain and "vs (iii))  measurable between: " in chosen and " closest: P " in chosen
    assert "decisions with an intermediate candidate (the ladder climbing past its 4th rung): " in run.stdout
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ladder_replay  # in this process: a second start would cost as much as the run above

    assert ladder_replay.main(["--series", "nosuch"]) == 2
    assert capsys.readouterr().err.startswith("--series: unknown nosuch; known: ramses_")


def test_ratio_intervals_run_and_print_their_coverage_of_a_known_speedup():
    run = benchmark("ratio_intervals.py", "--small")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Fieller's interval with Welch–Satterthwaite degrees of freedom, 95%" in run.stdout
    total = next(line for line in run.stdout.splitlines() if line.startswith("TOTAL normal repeats: coverage "))
    # 6,000 or so bounded intervals of normal repeats: the true speedup inside 95% ± 1 point of them.
    assert 0.94 <= float(total.split("coverage ")[1].split()[0]) <= 0.97, total


def test_the_interval_calibration_is_what_its_script_derives():
    run = benchmark("calibrate_intervals.py", "--check")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "stored calibration: up to date" in run.stdout


def test_suite_mutations_runs_two_and_prints_its_total():
    # The first two mutations' tests are unit tests: seconds, each run unmutated and mutated.
    run = benchmark("suite_mutations.py", "--only", "1,2")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("1 launch: ") and " -- caught by tests/unit/test_failures.py::" in lines[0]
    assert lines[-1].startswith("mutations caught: 2/2 at the working tree of ")
    assert lines[-1].endswith(" (each test passed unmutated)")


def test_suite_coverage_compares_two_measurements_and_names_the_tests_only_one_side_ran(tmp_path):
    # A measurement runs the whole suite (tens of minutes): here two recorded summaries compared.
    for side, lines, branches, tests in (("before", 900, 300, ["a", "b"]), ("after", 950, 330, ["b", "c"])):
        (tmp_path / side).mkdir()
        summary = {"rev": side, "commit": "0" * 40, "status": 0, "seconds": 60, "tests": tests, "covered_lines": lines,
                   "num_statements": 1000, "covered_branches": branches, "num_branches": 400}  # fmt: skip
        (tmp_path / side / "summary.json").write_text(json.dumps(summary))
    run = benchmark("suite_coverage.py", "--compare", str(tmp_path / "before"), str(tmp_path / "after"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert "workflow/ coverage at before (0000000): lines 900/1000 (90.00%), branches 300/400 (75.00%)" in run.stdout
    assert "lines covered: 900 -> 950; share after / before = 1.0556" in run.stdout
    assert "branches covered: 300 -> 330; share after / before = 1.1000" in run.stdout
    assert "test ids only before: 1; only after: 1" in run.stdout and "  only before: a" in run.stdout
    refused = benchmark("suite_coverage.py")
    assert refused.returncode == 2 and "--out: missing; allowed: a folder" in refused.stderr


def test_suite_coverage_measures_every_revision_from_a_cache_without_the_kept_counts(tmp_path, monkeypatch):
    # Both revisions start without apps.saved_bytes' counts, with pip's cache and the mpi4py wheels.
    import importlib.util

    home = tmp_path / "home-cache"
    (home / "scalestudy" / "mpi4py-abc").mkdir(parents=True)
    (home / "pip").mkdir()
    (home / "scalestudy" / "count_litgpt.json").write_text("{}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    spec = importlib.util.spec_from_file_location("suite_coverage", REPO / "benchmarks" / "suite_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cache = module.cache_without_counts(tmp_path / "out")
    assert sorted(p.name for p in cache.iterdir()) == ["pip", "scalestudy"]
    assert (cache / "pip").resolve() == home / "pip"
    assert [p.name for p in (cache / "scalestudy").iterdir()] == ["mpi4py-abc"]
