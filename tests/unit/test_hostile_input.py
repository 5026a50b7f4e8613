"""Hostile input, as properties over generated values (hypothesis): no sweep value is ever
executed by a shell, each value reaches the launcher as one argument, and names with
shell metacharacters or path separators are refused before anything runs."""

import re

from hostile import SHELL_BITS
from hypothesis import given, settings
from hypothesis import strategies as st
from scalestudy.model.errors import SweepError
from scalestudy.study import load

VALID_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def sweep_with(study="s", mpi_set="default", nccl_set="default", axis_value=2):
    return {
        "mpi_flag_sets": {mpi_set: {}},
        "nccl_env_sets": {nccl_set: {}},
        "studies": {
            study: {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "mpi_flags": [mpi_set],
                    "nccl_env": [nccl_set], "params": {"iterations": [axis_value, 10**6]}}
        },
    }  # fmt: skip


NAMES = st.one_of(
    st.text(min_size=1, max_size=12), st.from_regex(VALID_NAME, fullmatch=True).filter(lambda s: len(s) < 60)
)


@settings(max_examples=150, deadline=None)
@given(name=NAMES, where=st.sampled_from(["study", "mpi_set", "nccl_set"]))
def test_names_are_refused_unless_they_are_safe_path_segments(name, where):
    safe = bool(VALID_NAME.match(name)) and len(name) <= 64
    try:
        loaded = load(sweep_with(**{where: name}))
    except SweepError as error:
        assert not safe, error.problems
        assert any(repr(name) in problem or "name" in problem for problem in error.problems)
        return
    assert safe
    for p in loaded.points:
        assert all(VALID_NAME.match(part) for part in p.id.split("/"))


SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(st.text(min_size=1, max_size=12), SHELL_BITS))
def test_axis_values_that_cannot_name_a_directory_are_refused(value):
    params = {"method": "lora", "checkpoint_dir": "/ckpt", "max_steps": 1, "global_batch_size": 8,
              "micro_batch_size": 1, "data_path": [value, "other.json"]}  # fmt: skip
    config = {"studies": {"s": {"app": "litgpt", "nodes": [1], "ranks_per_node": [1], "params": params}}}
    try:
        loaded = load(config)
    except SweepError as error:
        assert not SAFE_SEGMENT.match(value) or value == "other.json", error.problems
        assert any(p.startswith("studies.s.params.data_path") for p in error.problems)
        return
    assert SAFE_SEGMENT.match(value)
    assert {p.id.split("/")[0] for p in loaded.points} == {f"data_path-{value}", "data_path-other.json"}
