"""The app registry and the facts declared once: apps register by being defined, each
has its conda environment, figures are declared once, defaults live in the declarations."""

import shutil
from pathlib import Path

import pytest
from points import pingpong_point
from scalestudy.apps.base import ENV_FILE
from scalestudy.apps.registry import APPS, APPS_DIR, App, Param
from scalestudy.model.metrics import DECLARED, declare, metric
from scalestudy.model.paths import Layout


def app_folders_problems(apps_dir: Path, apps) -> list[str]:
    """What is wrong with the app folders under `apps_dir` (each subpackage an app): every folder's
    app.py defines an App that registered, named like its folder ('-' as '_'), with its env.yaml
    beside it; every registered app comes from such a folder."""
    problems = []
    by_module = {type(app).__module__: app for app in apps.values()}
    for app_py in sorted(apps_dir.glob("*/app.py")):
        package = app_py.parent.name
        app = by_module.get(f"scalestudy.apps.{package}.app")
        if app is None:
            problems.append(f"apps/{package}/app.py defines no App")
            continue
        if app.name.replace("-", "_") != package:
            problems.append(f"apps/{package}/: its app is named {app.name!r}")
        if not (app_py.parent / ENV_FILE).is_file():
            problems.append(f"apps/{package}/ has no {ENV_FILE}")
    found = {f"scalestudy.apps.{path.parent.name}.app" for path in apps_dir.glob("*/app.py")}
    problems += [
        f"app {app.name!r} is not in an app folder" for module, app in by_module.items() if module not in found
    ]
    return problems


def test_every_app_folder_registers_its_app_and_has_a_conda_env():
    assert APPS, "discovery found no app"
    assert not app_folders_problems(APPS_DIR, APPS)
    for app in APPS.values():  # the environment --sdm conda builds is the one in its folder
        assert Path(app.conda_env) == APPS_DIR / app.name.replace("-", "_") / ENV_FILE
    for app in APPS.values():
        if app.declared_in_sweep:
            continue  # its figures and primary are each study's own (tests/unit/test_command_app.py)
        # The primary figure is declared, and is one of the app's own.
        assert metric(app.primary_metric) in app.metrics


def test_the_folder_check_fails_without_env_yaml_or_without_an_app(tmp_path):
    """The check above can fail: a copy of the apps folder with one env.yaml removed, and with an
    app folder whose app.py defines nothing."""
    shutil.copytree(APPS_DIR, tmp_path / "apps", ignore=shutil.ignore_patterns("__pycache__"))
    assert not app_folders_problems(tmp_path / "apps", APPS)  # a faithful copy passes
    (tmp_path / "apps/pingpong/env.yaml").unlink()
    assert app_folders_problems(tmp_path / "apps", APPS) == ["apps/pingpong/ has no env.yaml"]
    (tmp_path / "apps/empty").mkdir()
    (tmp_path / "apps/empty/app.py").write_text('"""An app folder whose app.py defines no App."""\n')
    assert "apps/empty/app.py defines no App" in app_folders_problems(tmp_path / "apps", APPS)


def test_discovery_names_an_app_folder_without_app_py(tmp_path, monkeypatch):
    from scalestudy.apps import registry

    (tmp_path / "half").mkdir()
    (tmp_path / "half/__init__.py").write_text("")
    monkeypatch.setattr(registry, "APPS_DIR", tmp_path)
    with pytest.raises(ImportError, match=r"apps/half/ has no app.py"):
        registry.discover()


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
