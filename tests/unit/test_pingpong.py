"""The ping-pong app: parser on a recorded run, and real 2-rank runs (mpirun, mpi4py)."""

import pytest
from scalestudy.apps.pingpong.app import parse_pingpong
from scalestudy.apps.pingpong.rank import message_sizes
from scalestudy.apps.registry import APPS, ParseError
from scalestudy.config.study import load
from scalestudy.launch.provenance import rank_lines
from scalestudy.model.errors import SweepError

RECORDED = "pingpong-openmpi5-2ranks.log"


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
