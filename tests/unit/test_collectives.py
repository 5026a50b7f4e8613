"""The collectives app: the parser on a recorded run, nccl-tests' bus factors, the size
arithmetic, and the parameter checks at load."""

import pytest
from scalestudy.apps.collectives.app import parse_collectives
from scalestudy.apps.collectives.rank import bus_factor, element_count, message_sizes
from scalestudy.apps.registry import APPS, ParseError
from scalestudy.config.study import load
from scalestudy.model.errors import SweepError
from scalestudy.model.metrics import SIZE_TABLE, metric

P = "studies.c.params."
RECORDED = "collectives-openmpi5-allreduce-2ranks.log"


def test_parser_keeps_the_whole_size_table_and_the_scalar_figures(data_dir):
    figures = parse_collectives((data_dir / RECORDED).read_text())
    table = figures[SIZE_TABLE]
    assert [row["size_bytes"] for row in table] == [4 << k for k in range(15)]
    assert figures["collective_latency_us"] == table[0]["latency_avg_us"] == 2651.262
    assert figures["collective_busbw_GBps"] == table[-1]["busbw_GBps"]
    assert figures["sizes_measured"] == 15 and figures["ranks_reported"] == 2
    for row in table:
        assert row["latency_min_us"] <= row["latency_avg_us"] <= row["latency_max_us"]
    # Every column of the table is a declared figure of the app's curve.
    assert {name for row in table for name in row} == {"size_bytes", *APPS["collectives"].size_figures}
    assert all(metric(name) for name in APPS["collectives"].size_figures)


def test_a_log_cut_before_the_closing_line_is_unparseable(data_dir):
    text = (data_dir / RECORDED).read_text()
    with pytest.raises(ParseError, match="cut off"):
        parse_collectives(text[: text.index("scalestudy-collectives") + 30])
    with pytest.raises(ParseError, match="no collectives table"):
        parse_collectives(text[: text.index("# size_bytes")])


@pytest.mark.parametrize(
    "operation, ranks, factor",
    [  # nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor
        ("allreduce", 2, 1.0),
        ("allreduce", 8, 2 * 7 / 8),
        ("reduce_scatter", 8, 7 / 8),
        ("allgather", 4, 3 / 4),
        ("alltoall", 4, 3 / 4),
        ("bcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("bw", 2, 1.0),
        ("barrier", 4, 0.0),
    ],
)
def test_bus_factors_are_nccl_tests(operation, ranks, factor):
    assert bus_factor(operation, ranks) == pytest.approx(factor)


def test_sizes_are_whole_elements_per_rank_where_the_buffer_is_split():
    assert message_sizes(4, 64) == [4, 8, 16, 32, 64]
    assert element_count("allreduce", 4, 4, 2) == 1
    assert element_count("alltoall", 4, 4, 2) == 0  # one float32 cannot be split over 2 ranks
    assert element_count("allgather", 48, 4, 3) == 12
    assert element_count("reduce_scatter", 40, 4, 3) == 9


def study(params, ranks_per_node=2):
    spec = {"app": "collectives", "nodes": [1], "ranks_per_node": [ranks_per_node], "params": params}
    return {"studies": {"c": spec}}


@pytest.mark.parametrize(
    "params, problem",
    [
        ({"operation": "allreduse"}, P + "operation: 'allreduse' is not allowed; allowed: allreduce,"),
        ({"min_bytes": 9, "max_bytes": 8}, P + "min_bytes: 9 is larger than max_bytes 8; allowed: ≤ max_bytes"),
        ({"backend": "nccl"}, P + "device: cpu with backend nccl; allowed: device cuda with backend nccl,"),
        ({"backend": ["mpi", "gloo"], "device": "cuda"}, P + "device: cuda with backend mpi; allowed:"),
        ({"min_bytes": 2, "dtype": "float64"}, P + "min_bytes: 2 is less than one float64 (8 bytes); allowed: ≥ 8"),
        ({"operation": "alltoall", "max_bytes": 4}, P + "max_bytes: 4 holds less than one float32 per rank"),
    ],
)
def test_bad_params_are_one_line_each_before_anything_runs(params, problem):
    with pytest.raises(SweepError) as error:
        load(study(params))
    assert error.value.problems[0].startswith(problem), error.value.problems


def test_one_rank_is_refused():
    with pytest.raises(SweepError) as error:
        load(study({}, ranks_per_node=1))
    problem = "studies.c.nodes: collectives needs at least 2 ranks, got nodes=1 x ranks_per_node=1 = 1"
    assert error.value.problems == [problem]


def test_the_backend_is_compared_with_mpi():
    assert APPS["collectives"].compared == {"backend": "mpi"}
