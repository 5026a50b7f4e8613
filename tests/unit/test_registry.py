"""The app registry and the facts declared once: apps register by being defined, each
has its conda environment, figures are declared once, defaults live in the declarations."""

from pathlib import Path

import pytest
from points import pingpong_point
from scalestudy.apps import APPS, App, Param
from scalestudy.model.metrics import DECLARED, declare, metric
from scalestudy.model.paths import Layout


def test_every_app_module_registers_its_app_and_has_a_conda_env():
    assert set(APPS) == {"collectives", "command", "hoomd", "lammps", "litgpt", "pingpong", "torch-parallel"}
    for app in APPS.values():
        assert Path(app.conda_env).is_file(), app.conda_env
        if app.declared_in_sweep:
            continue  # its figures and primary are each study's own (tests/unit/test_command_app.py)
        # The primary figure is declared, and is one of the app's own.
        assert metric(app.primary_metric) in app.metrics


def test_an_app_enters_the_registry_by_being_defined_and_only_once():
    class Probe(App):
        name = "probe-test"
        metrics = ()
        params = {}

    try:
        assert isinstance(APPS["probe-test"], Probe)
        with pytest.raises(ValueError, match="defined twice"):

            class Again(App):
                name = "probe-test"
    finally:
        del APPS["probe-test"]


def test_a_figure_is_declared_once():
    steps = metric("steps_per_s")
    assert not steps.extensive and steps.kind == "rate"
    assert declare("steps_per_s", steps.label, steps.unit, "rate", extensive=False) is steps
    with pytest.raises(ValueError, match="declared twice"):
        declare("steps_per_s", steps.label, steps.unit, "rate", extensive=True)
    assert "walltime_used_s" in DECLARED


def test_parameter_defaults_come_from_the_declaration():
    app = APPS["pingpong"]
    command = app.rank_command(pingpong_point(params={}), Path("/tmp/run"), Layout())
    for name, spec in app.params.items():
        flag = f"--{name.replace('_', '-')}"
        assert command[command.index(flag) + 1] == str(spec.default)
    assert app.setting(pingpong_point(params={"iterations": 7}), "iterations") == 7


def test_inputs_are_shared_by_value_not_by_object():
    same = {"iterations": 50, "warmup": 10, "max_bytes": 4096}
    first, second = pingpong_point(params=dict(same)), pingpong_point(params=dict(same), repeat=2)
    assert first.params is not second.params
    assert APPS["pingpong"].inputs_key(first) == APPS["pingpong"].inputs_key(second)


def test_a_param_without_default_reads_as_none():
    assert Param(int).default is None
    assert APPS["hoomd"].params["initial_state_cache"].default is None
