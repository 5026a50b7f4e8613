"""Real ping-pong runs under mpirun and Snakemake."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sweeps
from points import pingpong_point
from scalestudy.config import clusters
from scalestudy.launch.provenance import rank_lines
from scalestudy.launch.runner import run_point


def test_real_two_rank_run_is_ok_and_the_ranks_saw_the_settings(tmp_path):
    metrics = run_point(pingpong_point(), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    assert metrics["figures"]["latency_us"] > 0 and metrics["figures"]["bandwidth_MBps"] > 0
    ranks = rank_lines((tmp_path / "run" / "stdout.log").read_text())
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert {r["env"].get("OMPI_MCA_btl") for r in ranks} == {"self,tcp"}
    assert {r["env"].get("NCCL_IB_DISABLE") for r in ranks} == {"1"}


@pytest.mark.e2e
def test_snakemake_runs_a_pingpong_study(tmp_path, repo):
    sweeps.write(sweeps.sweep("pingpong-tcp", results_dir=str(tmp_path / "results")), tmp_path / "pp.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(repo / "profiles/local"), "--configfile", str(tmp_path / "pp.yaml")]  # fmt: skip
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    found = sorted(Path(tmp_path / "results/pp/runs").glob("**/metrics.json"))
    assert len(found) == 2
    assert all(json.loads(p.read_text())["status"] == "ok" for p in found)
    assert (tmp_path / "results/report/index.html").is_file()


def test_a_flag_no_mpi_component_registered_is_flagged_as_unproven(tmp_path):
    # Open MPI accepts --mca coll_hcoll_enable 1 silently where hcoll is absent: the run is
    # ok, but its proof shows that the setting had no effect.
    flags = {"btl": "self,tcp", "coll_hcoll_enable": "1"}
    metrics = run_point(pingpong_point(mpi_flags=flags), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    proof = metrics["settings_proof"]
    assert proof["verified"] is False and proof["ranks_reported"] == 2
    assert proof["problems"] == ["--mca coll_hcoll_enable 1: no Open MPI component registered it; it had no effect"]
    assert metrics["provenance"]["mca_registered"]["btl"] == "self,tcp"
    assert metrics["provenance"]["mpi"]["flavour"] == "openmpi"
    assert len(metrics["provenance"]["python_packages_sha256"]) == 64
