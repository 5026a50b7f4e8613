"""Adding an app is one folder (docs/apps.md, "Adding an app"): in a copy of the checkout, a new
folder apps/echo/ (app.py, env.yaml, a docstring __init__.py) alone gives a study that plans, runs
and reports; nothing else of the checkout is edited."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

ECHO_APP = '''
"""A test app: every rank prints a number, rank 0 a figure."""

import re
import sys

from ...model.metrics import declare
from ..base import App, Param, ParseError

FIGURE = re.compile(r"^echo_value ([0-9.]+)$", re.M)


class Echo(App):
    name = "echo"
    mpi_flavour = "openmpi"
    primary_metric = "echo_value"
    metrics = (declare("echo_value", "the value echoed", "1", "rate"),)
    params = {"value": Param(int, minimum=1, help="what rank 0 prints", default=7)}

    def rank_command(self, point, run_dir, layout):
        program = "import os; os.environ.get('OMPI_COMM_WORLD_RANK', '0') == '0' and print('echo_value', {v})"
        return [sys.executable, "-c", program.format(v=self.setting(point, "value"))]

    def parse(self, log_text, run_dir):
        found = FIGURE.search(log_text)
        if not found:
            raise ParseError("no echo_value line")
        return {"echo_value": float(found.group(1))}
'''


# What a copy of the checkout leaves out: git, venvs, caches, and the results directory.
not_copied = shutil.ignore_patterns(".git", ".venv*", ".snakemake", "__pycache__", "*.egg-info", "results")


def test_a_new_app_is_one_folder(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=not_copied)
    folder = checkout / "workflow/scalestudy/apps/echo"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A test app: echoes its parameter."""\n')
    (folder / "app.py").write_text(ECHO_APP)
    (folder / "env.yaml").write_text("channels: [conda-forge]\ndependencies: [python=3.11, pyyaml, jsonschema]\n")
    sweep = {
        "cluster": "local",
        "studies": {"echo-study": {"app": "echo", "nodes": [1], "ranks_per_node": [1, 2], "repeats": 2,
                                   "walltime": "00:01:00", "params": {"value": [3, 5]}}},
    }  # fmt: skip
    (tmp_path / "echo.yaml").write_text(yaml.safe_dump(sweep))
    command = [sys.executable, "-m", "snakemake", "-s", str(checkout / "Snakefile"), "--profile",
               str(checkout / "profiles/local"), "--configfile", str(tmp_path / "echo.yaml")]  # fmt: skip
    run = subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "run_echo" in run.stderr + run.stdout
    records = [
        json.loads(p.read_text()) for p in sorted((checkout / "results").glob("echo-study/runs/**/metrics.json"))
    ]
    assert len(records) == 8 and {r["status"] for r in records} == {"ok"}
    assert {r["figures"]["echo_value"] for r in records} == {3.0, 5.0}
    scaling = (checkout / "results/echo-study/scaling.csv").read_text()
    assert "echo_value" in scaling
    assert "echo-study" in (checkout / "results/report/index.html").read_text()
