"""Each app's rank program starts, as the runner starts it, without the package around it: no
other app's module, not the registry (which imports every app), and no RuntimeWarning from runpy
(`'scalestudy.apps.X' found in sys.modules after import of package 'scalestudy.apps'`, printed in
every rank's log while scalestudy.apps imported every app). Integration: it starts processes."""

import subprocess
import sys
from pathlib import Path

import pytest
from points import pingpong_point
from scalestudy.apps.registry import APPS, APPS_DIR
from scalestudy.model.paths import WORKFLOW_DIR, Layout

# LitGPT's CLI is imported inside the rank program's main (tens of seconds): the check stops the
# program there, when every import at the program's top has run.
STOP_AT = "litgpt"
STOPPED = "scalestudy-test: stopped at the import of"
STOP_HOOK = f"""
import runpy, sys
class Stop:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {STOP_AT!r}:
            print({STOPPED!r}, name, file=sys.stderr, flush=True)
            raise SystemExit(0)
sys.meta_path.insert(0, Stop())
runpy._run_module_as_main(sys.argv.pop(1))  # what `python -m` calls
"""


def program_head(package: str) -> list[str]:
    """The rank program of app folder `package`, started as its app's rank_command starts it."""
    if package in ("pingpong", "collectives"):  # by path: checked against rank_command below
        return [sys.executable, str(APPS_DIR / package / "rank.py")]
    return [sys.executable, "-m", f"scalestudy.apps.{package}.rank"]


def test_the_heads_are_those_of_the_rank_commands():
    command = APPS["pingpong"].rank_command(pingpong_point(params={}), Path("/tmp/run"), Layout())
    assert command[:2] == program_head("pingpong")
    assert APPS["hoomd"].program == "scalestudy.apps.hoomd.rank"
    # litgpt and torch-parallel: tests/unit/test_launch.py, test_torch_parallel.py check their heads.


def imported_modules(importtime: str) -> set[str]:
    """The modules `python -X importtime` reports as imported."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("package", ["pingpong", "collectives", "hoomd", "litgpt", "torch_parallel"])
def test_a_rank_program_imports_no_other_app_and_warns_nothing(package):
    head = program_head(package)
    if package == STOP_AT:
        head = [sys.executable, "-c", STOP_HOOK, head[-1]]
    done = subprocess.run(
        [head[0], "-W", "error::RuntimeWarning", "-X", "importtime", *head[1:], "--help"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(WORKFLOW_DIR), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower() or STOPPED in done.stderr
    assert "Warning" not in done.stderr.replace("import time:", "")
    modules = imported_modules(done.stderr)
    assert modules, "no import times read"
    others = {f"scalestudy.apps.{other}" for other in (p.name for p in APPS_DIR.iterdir() if p.is_dir())} - {
        f"scalestudy.apps.{package}"
    }
    wrong = sorted(
        name
        for name in modules
        if name in ("scalestudy.apps.registry", "scalestudy.apps.base")
        or any(name == other or name.startswith(other + ".") for other in others)
    )
    assert not wrong, wrong
