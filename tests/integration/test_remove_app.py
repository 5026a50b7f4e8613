"""Removing an app is removing its folder (docs/apps.md, "Adding an app"; issue 48): in a copy of
the checkout without apps/<pkg>/, the shipped sweep less that app's studies (and its `assets:`
entry) plans under a PBS profile, dry-runs under the local one, and the import contracts hold.
Nothing outside the folder names the app: its made inputs' rules, assets, schema key and
published records are found from the folder, and no contract lists the apps.

Cheap by design: one copy of the checkout per app (no venv, no results), dry runs only."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scalestudy.apps.registry import APPS, app_packages
from scalestudy.config.files import drop_nulls
from sweeps import merge

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# What a copy of the checkout leaves out: git, venvs, caches, the results directory, and the
# test recordings (no dry run reads them).
not_copied = shutil.ignore_patterns(".git", ".venv*", ".snakemake", "__pycache__", "*.egg-info", "results", "data")


def sweep_without(app_name: str, overlays: list[str]) -> tuple[dict, list[str]]:
    """The shipped sweep (merged with `overlays`) less the studies of `app_name` and its assets;
    and the names of the studies left out."""
    config: dict = {}
    for name in ["config/sweep.yaml", *overlays]:
        merge(config, yaml.safe_load((REPO / name).read_text()))
    config = drop_nulls(config)
    left_out = [name for name, study in config["studies"].items() if study.get("app") == app_name]
    config["studies"] = {name: study for name, study in config["studies"].items() if name not in left_out}
    key = APPS[app_name].assets_key
    if key is not None:
        config.get("assets", {}).pop(key, None)
    return config, left_out


def run(command: list[str], checkout: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(checkout / "workflow"), "PATH": f"{BIN}:{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "PROJECT": "ab12"}  # fmt: skip
    return subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("package", app_packages())
def test_removing_an_app_folder_removes_the_app_and_nothing_else(tmp_path, package):
    (app,) = [a for a in APPS.values() if type(a).__module__ == f"scalestudy.apps.{package}.app"]
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=not_copied)
    shutil.rmtree(checkout / "workflow/scalestudy/apps" / package)
    local, gadi = tmp_path / "local.yaml", tmp_path / "gadi.yaml"
    local_sweep, left_out = sweep_without(app.name, ["config/local.yaml"])
    gadi_sweep, _ = sweep_without(app.name, [])
    local.write_text(yaml.safe_dump(local_sweep))
    gadi.write_text(yaml.safe_dump(gadi_sweep))
    results = f"results_dir={tmp_path / 'results'}"

    dry = run([str(BIN / "snakemake"), "-n", "--profile", "profiles/local", "--configfile", str(local),
               "--config", results], checkout)  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-3000:] + dry.stdout[-2000:]
    said = dry.stdout + dry.stderr
    assert "rule run_" in said and f"rule run_{app.name}:" not in said
    assert [study for study in left_out if f"results/{study}/" in said] == []

    plan = run([sys.executable, "-m", "scalestudy", "plan", "--profile", "profiles/gadi", "--configfile", str(gadi),
                "--config", results], checkout)  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-3000:] + plan.stdout[-2000:]
    assert "qsub -P ab12" in plan.stdout
    assert [study for study in left_out if f" -N {study}." in plan.stdout] == []

    lint = run([str(BIN / "lint-imports")], checkout)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-1000:]
    assert "0 broken" in lint.stdout
