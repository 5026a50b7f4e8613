"""Hostile input, as properties over generated values (hypothesis): no sweep value is ever
executed by a shell, each value reaches the launcher as one argument, and names with
shell metacharacters or path separators are refused before anything runs."""

import json
import re
import shlex
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scalestudy.config.clusters import MpiLauncher
from scalestudy.launch.command import launch_script, mpirun_command
from scalestudy.model.errors import SweepError
from scalestudy.study import load
from test_launch import point

# Any text a UTF-8 YAML file can hold except NUL (which no argv can carry); biased
# towards what a shell would act on.
SHELL_BITS = st.sampled_from(["$(touch pwned)", "`touch pwned`", "; touch pwned", "'", '"', "\\", "\n", "$HOME", "*",
                              "&&", "|", ">", "<", "~", "#", " ", "${IFS}", "!", "-x", "--mca"])  # fmt: skip
VALUES = st.lists(
    st.one_of(SHELL_BITS, st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=8)),
    max_size=6,
).map("".join)
VALID_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    """A stand-in launcher that records the argv it was given."""
    folder = tmp_path_factory.mktemp("recorder")
    script = folder / "record-argv"
    script.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    script.chmod(0o755)
    return script


@FAST
@given(mca_value=VALUES, nccl_value=VALUES, app_value=VALUES)
def test_every_value_is_one_argument_and_never_runs_in_a_shell(tmp_path, recorder, mca_value, nccl_value, app_value):
    p = point(mpi_flags={"btl": mca_value}, nccl_env={"NCCL_SOCKET_IFNAME": nccl_value})
    argv = mpirun_command(p, ["app", app_value], {}, MpiLauncher(launcher=str(recorder)))
    # One argument each, in place.
    assert argv[argv.index("btl") + 1] == mca_value
    assert f"NCCL_SOCKET_IFNAME={nccl_value}" in argv
    assert argv[-1] == app_value
    # launch.sh, run by real bash, hands the launcher exactly that list, and runs nothing else.
    script = tmp_path / "launch.sh"
    script.write_text(launch_script(argv))
    out = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == argv[1:]
    assert not (tmp_path / "pwned").exists()


@FAST
@given(value=VALUES)
def test_the_point_json_survives_the_rule_shell_quoting(tmp_path, value):
    """The run rules pass the point as {params.point:q} (shlex.quote) through bash."""
    text = point(params={**point().params, "data_path": value}).to_json()
    out = subprocess.run(
        ["bash", "-c", f"printf %s {shlex.quote(text)}"], cwd=tmp_path, capture_output=True, check=True
    )
    assert out.stdout.decode() == text
    assert not (tmp_path / "pwned").exists()


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
