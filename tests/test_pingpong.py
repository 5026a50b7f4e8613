"""The ping-pong app: parser on a recorded run, and real 2-rank runs (mpirun, mpi4py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scalestudy.apps import APPS, ParseError
from scalestudy.apps.pingpong import parse_pingpong
from scalestudy.apps.pingpong_rank import message_sizes
from scalestudy.config import clusters
from scalestudy.launch.provenance import rank_lines
from scalestudy.launch.runner import run_point
from scalestudy.model.errors import SweepError
from scalestudy.study import load
from test_launch import point as litgpt_point

RECORDED = "pingpong-openmpi5-2ranks.log"


def pingpong_point(**changes):
    values = dict(
        app="pingpong",
        nodes=1,
        ranks_per_node=2,
        gpus_per_node=0,
        mpi_flag_set="tcp",
        nccl_env_set="no-ib",
        walltime="00:01:00",
        params={"iterations": 50, "warmup": 10, "max_bytes": 4096},
        mpi_flags={"btl": "self,tcp"},
        nccl_env={"NCCL_IB_DISABLE": "1"},
    )
    values.update(changes)
    return litgpt_point(**values)


def test_message_sizes_are_powers_of_two_up_to_the_largest():
    assert message_sizes(1, 8) == [1, 2, 4, 8]
    assert message_sizes(3, 20) == [3, 6, 12, 20]
    assert message_sizes(64, 64) == [64]


def test_parser_reads_the_smallest_latency_and_the_largest_bandwidth(data_dir):
    figures = parse_pingpong((data_dir / RECORDED).read_text())
    assert figures["latency_us"] == 16.195 and figures["latency_size_bytes"] == 1
    assert figures["bandwidth_MBps"] == 1640.638 and figures["bandwidth_size_bytes"] == 65536
    assert figures["sizes_measured"] == 17 and figures["iterations"] == 200
    assert figures["ranks_reported"] == 2 and figures["hosts_seen"] == 1


def test_rank_lines_show_host_and_settings_of_every_rank(data_dir):
    ranks = rank_lines((data_dir / RECORDED).read_text())
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    for rank in ranks:
        assert rank["host"] and rank["env"]["OMPI_MCA_btl"] == "self,tcp" and rank["env"]["NCCL_IB_DISABLE"] == "1"


def test_a_log_cut_before_the_closing_line_is_unparseable(data_dir):
    text = (data_dir / RECORDED).read_text()
    cut = text[: text.index("scalestudy-pingpong") + 30]  # mid-line
    with pytest.raises(ParseError, match="cut off"):
        parse_pingpong(cut)
    with pytest.raises(ParseError, match="no ping-pong table"):
        parse_pingpong(text[: text.index("# size_bytes")])


def test_metric_kinds_give_speedup_the_right_direction():
    kinds = {m.name: m.kind for m in APPS["pingpong"].metrics}
    assert kinds == {"latency_us": "time", "bandwidth_MBps": "rate"}


def test_one_rank_and_inverted_sizes_are_refused_before_anything_runs():
    config = {
        "studies": {
            "pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [1], "params": {"min_bytes": 9, "max_bytes": 8}}
        }
    }
    with pytest.raises(SweepError) as error:
        load(config)
    assert error.value.problems == ["studies.pp.params.min_bytes: 9 is larger than max_bytes 8"]
    config["studies"]["pp"]["params"] = {}
    with pytest.raises(SweepError) as error:
        load(config)
    assert error.value.problems == [
        "studies.pp.nodes: ping-pong needs at least 2 ranks, got nodes=1 x ranks_per_node=1 = 1"
    ]


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
    sweep = {
        "cluster": "local",
        "results_dir": str(tmp_path / "results"),
        "mpi_flag_sets": {"tcp": {"btl": "self,tcp"}},
        "studies": {
            "pp": {
                "app": "pingpong",
                "nodes": [1],
                "ranks_per_node": [2],
                "mpi_flags": ["default", "tcp"],
                "walltime": "00:01:00",
                "params": {"iterations": 50, "warmup": 10, "max_bytes": 4096},
            }
        },
    }
    (tmp_path / "pp.yaml").write_text(yaml.safe_dump(sweep))
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
