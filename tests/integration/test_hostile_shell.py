"""Hostile values through a real shell and launcher: one argument each, never run."""

import json
import shlex
import subprocess
import sys

import pytest
from hostile import FAST, VALUES
from hypothesis import given
from points import point
from scalestudy.config.clusters import MpiLauncher
from scalestudy.launch.command import launch_script, mpirun_command


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
