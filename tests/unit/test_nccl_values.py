"""NCCL values NCCL could not read are refused when the sweep loads; the NCCL version line is recorded."""

import pytest
from scalestudy.config.nccl import value_problem
from scalestudy.config.study import load
from scalestudy.launch.provenance import after_run
from scalestudy.model.errors import SweepError


@pytest.mark.parametrize(
    ("name", "value", "ok"),
    [
        ("NCCL_IB_DISABLE", 1, True),
        ("NCCL_IB_DISABLE", "yes", False),
        ("NCCL_DEBUG", "info", True),
        ("NCCL_DEBUG", "LOUD", False),
        ("NCCL_NET_GDR_LEVEL", "PHB", True),
        ("NCCL_NET_GDR_LEVEL", 2, True),
        ("NCCL_NET_GDR_LEVEL", "near", False),
        ("NCCL_PROTO", "^LL128", True),
        ("NCCL_PROTO", "LL,Simple", True),
        ("NCCL_PROTO", "fast", False),
        ("NCCL_ALGO", "Ring,Tree", True),
        ("NCCL_ALGO", "allreduce:tree;broadcast:ring", True),
        ("NCCL_BUFFSIZE", "4194304", True),
        ("NCCL_BUFFSIZE", "4M", False),
        ("NCCL_SOCKET_IFNAME", "=eth0", True),  # free-form: checked only for arrival
    ],
)
def test_values_nccl_can_read(name, value, ok):
    assert (value_problem(name, value) is None) == ok


def test_a_bad_value_is_one_line_naming_set_and_variable():
    config = {
        "nccl_env_sets": {"fast": {"NCCL_PROTO": "fast", "NCCL_IB_DISABLE": 1}},
        "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "nccl_env": ["fast"]}},
    }
    with pytest.raises(SweepError) as error:
        load(config)
    assert error.value.problems == [
        "nccl_env_sets.fast.NCCL_PROTO: 'fast' names unknown fast; allowed: ll, ll128, simple (comma list, ^ excludes)"
    ]


def test_the_nccl_version_line_is_recorded(tmp_path):
    log = "n1:10:10 [0] NCCL INFO Bootstrap\nNCCL version 2.21.5+cuda12.4\nNCCL version 2.21.5+cuda12.4\n"
    assert after_run(log, tmp_path)["nccl_version"] == "2.21.5+cuda12.4"
    assert after_run("no nccl here", tmp_path)["nccl_version"] is None
