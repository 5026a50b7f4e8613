"""Proof that settings took effect, from rank lines and Open MPI's parameter record."""

import json

from points import point
from scalestudy.launch.modules import loaded as loaded_modules
from scalestudy.launch.provenance import rank_lines, settings_proof


def rank(number, host="n1", **env):
    return {"rank": number, "host": host, "pid": 1, "env": env}


def test_every_rank_must_see_every_nccl_variable():
    p = point(nodes=1, ranks_per_node=2, mpi_flags={}, nccl_env={"NCCL_IB_DISABLE": "1"})
    ok = settings_proof(p, [rank(0, NCCL_IB_DISABLE="1"), rank(1, NCCL_IB_DISABLE="1")], None, "openmpi")
    assert ok == {
        "verified": True,
        "problems": [],
        "ranks_reported": 2,
        "mca_source": None,
        "bindings": "0@n1:? 1@n1:?",
        "hosts": {"n1": {"ranks": [0, 1], "settings": ["NCCL_IB_DISABLE"], "verified": True}},
    }
    lost = settings_proof(p, [rank(0, NCCL_IB_DISABLE="1"), rank(1, "n2")], None, "openmpi")
    assert lost["verified"] is False
    assert lost["problems"] == ["NCCL_IB_DISABLE=1: rank 1 on n2 saw None"]
    # Host by host: the host whose rank missed it is the one not proven (n2 is no n20).
    assert {name: host["verified"] for name, host in lost["hosts"].items()} == {"n1": True, "n2": False}
    other = settings_proof(p, [rank(0, "n2", NCCL_IB_DISABLE="1"), rank(1, "n20")], None, "openmpi")
    assert {name: host["verified"] for name, host in other["hosts"].items()} == {"n2": True, "n20": False}


def test_mca_values_are_checked_against_what_open_mpi_registered():
    p = point(nodes=1, ranks_per_node=1, mpi_flags={"btl": "^ucx", "coll_tuned_use_dynamic_rules": "1"}, nccl_env={})
    ranks = [rank(0, OMPI_MCA_btl="^ucx", OMPI_MCA_coll_tuned_use_dynamic_rules="1")]
    # Open MPI writes booleans as true/false.
    registered = {"btl": "^ucx", "coll_tuned_use_dynamic_rules": "true"}
    assert settings_proof(p, ranks, registered, "openmpi")["verified"] is True
    problems = settings_proof(p, ranks, {"btl": "self"}, "openmpi")["problems"]
    assert problems == [
        "--mca btl ^ucx: Open MPI used 'self'",
        "--mca coll_tuned_use_dynamic_rules 1: no Open MPI component registered it; it had no effect",
    ]
    assert "only 0 of 1 ranks" in settings_proof(p, [], registered, "openmpi")["problems"][0]


def test_a_rank_line_cut_off_is_not_evidence():
    text = 'scalestudy-rank {"rank": 1, "host": "a", "env": {}}\nscalestudy-rank {"rank": 0, "host": "b", "en'
    assert rank_lines(text) == [{"rank": 1, "host": "a", "env": {}}]


def test_modules_only_where_a_module_system_exists():
    assert loaded_modules({}) is None
    assert loaded_modules({"LOADEDMODULES": "openmpi/4.1.5:cuda/12.2", "MODULESHOME": "/m"}) == [
        "openmpi/4.1.5",
        "cuda/12.2",
    ]


def test_an_environment_flag_set_must_reach_every_rank():
    # MPICH: a flag set is variables (MPIR_CVAR_...), checked in each rank's environment.
    p = point(nodes=1, ranks_per_node=2, mpi_flags={"MPIR_CVAR_NOLOCAL": "1"}, nccl_env={})
    seen = [rank(0, MPIR_CVAR_NOLOCAL="1"), rank(1, MPIR_CVAR_NOLOCAL="1")]
    assert settings_proof(p, seen, None, "mpich")["verified"] is True
    lost = settings_proof(p, [seen[0], rank(1)], None, "mpich")
    assert lost["problems"] == ["MPIR_CVAR_NOLOCAL=1: rank 1 on n1 saw None"]


def test_a_long_rank_report_goes_in_parts_that_come_back_whole_in_any_order():
    from scalestudy.model.rank_probe import REPORT_PART_CHARS, report_lines

    long = {"rank": 2, "host": "n2", "env": {"OMPI_MCA_initial_wdir": "/scratch/ab12/" + "d" * 4000}}
    short = {"rank": 0, "host": "n1", "env": {}}
    parts = report_lines(json.dumps(long), "7@n2")
    assert len(parts) == 3 and all(len(line) <= REPORT_PART_CHARS and line.endswith("\n") for line in parts)
    assert report_lines(json.dumps(short), "5@n1") == [f"scalestudy-rank {json.dumps(short)}\n"]
    # Another rank's lines between the parts, the parts out of order, one after an unended line.
    text = parts[2] + report_lines(json.dumps(short), "5@n1")[0] + parts[0] + "app said: " + parts[1]
    assert rank_lines(text) == [short, long]
    assert rank_lines("".join(parts[:2])) == []  # a part missing: the report is not evidence
