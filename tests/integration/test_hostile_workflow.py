"""Issue 23 through the real Snakemake, on the ping-pong study: the summary line is true
however Snakemake is asked to run (--forcerun, --forceall, --force, --rerun-incomplete after
a crash), the report target rebuilds when the set of points grows, and bad paths stop at load
in one line (a compare baseline that is not results, a results_dir under a file, a typo in a
path under the assets)."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sweeps
import yaml

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    # Targets first: --configfile takes every word after it.
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
            "--profile", str(REPO / "profiles/local"), *args, "--configfile", str(workdir / "sweep.yaml")]  # fmt: skip


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_command(workdir, *args), cwd=workdir, capture_output=True, text=True, timeout=600)


def job_counts(run: subprocess.CompletedProcess) -> dict[str, int]:
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", run.stdout, re.M)}


def summary(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in run.stdout.splitlines() if line.startswith("scalestudy:")]


def edit(workdir: Path, change) -> None:
    config = yaml.safe_load((workdir / "sweep.yaml").read_text())
    change(config)
    (workdir / "sweep.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The ping-pong study (2 points), run once."""
    workdir = tmp_path_factory.mktemp("hostile-workflow")
    sweeps.write(sweeps.sweep("pingpong-tcp", results_dir=str(workdir / "results")), workdir / "sweep.yaml")
    first = snakemake(workdir)
    assert first.returncode == 0, first.stderr[-3000:]
    return workdir


FORCED = "forced (--forceall, --forcerun or --force)"


@pytest.mark.parametrize(
    ("args", "forced"),
    [(("--forcerun", "run_pingpong"), 2), (("--forceall",), 2), (("all", "--forceall"), 2)],
)
def test_the_summary_counts_the_points_snakemake_is_told_to_rerun(finished, args, forced):
    dry = snakemake(finished, "-n", *args)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry)["run_pingpong"] == forced
    assert summary(dry)[0] == (
        f"scalestudy: 2 points (pp 2); {forced} run jobs to submit ({forced} {FORCED}); `report` alone submits none"
    )


def test_the_summary_counts_a_forced_target_file(finished):
    metrics = next(iter(sorted((finished / "results").glob("pp/runs/**/metrics.json"))))
    for args in (("--forcerun", str(metrics)), ("--force", str(metrics))):
        dry = snakemake(finished, "-n", *args)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert job_counts(dry)["run_pingpong"] == 1
        assert f"1 run jobs to submit (1 {FORCED})" in summary(dry)[0]


def test_report_alone_forced_still_runs_no_point(finished):
    dry = snakemake(finished, "-n", "report", "--forceall")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "run_pingpong" not in job_counts(dry)
    assert "report from the finished runs only: 0 run jobs" in summary(dry)[0]


def test_after_a_crash_the_start_says_what_snakemake_runs_again(tmp_path):
    sweeps.write(sweeps.sweep("pingpong-tcp", results_dir=str(tmp_path / "results")), tmp_path / "sweep.yaml")
    edit(tmp_path, lambda c: c["studies"]["pp"].update(mpi_flags=["default"]))
    # Snakemake killed while its one run job runs: the job's process writes its record, and
    # Snakemake's mark of an incomplete output stays.
    runner = subprocess.Popen(snakemake_command(tmp_path), cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    incomplete = tmp_path / ".snakemake/incomplete"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(incomplete.glob("*")):
        time.sleep(0.05)
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    metrics = list((tmp_path / "results").glob("pp/runs/**/metrics.json"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not metrics:
        time.sleep(0.2)
        metrics = list((tmp_path / "results").glob("pp/runs/**/metrics.json"))
    if not metrics or not any(incomplete.glob("*")):
        pytest.skip("the run job ended with Snakemake (no record left behind an incomplete mark)")
    assert snakemake(tmp_path, "--unlock").returncode == 0  # what Snakemake asks after a kill
    again = snakemake(tmp_path, "--rerun-incomplete")
    assert again.returncode == 0, again.stderr[-3000:]
    lines = summary(again)
    assert lines[0].startswith("scalestudy: 1 points (pp 1); 0 run jobs to submit")
    assert lines[1] == (
        "scalestudy: --rerun-incomplete: points an interrupted run left incomplete run again too; the count is "
        "given when the run starts"
    )
    assert re.fullmatch(
        r"scalestudy: Snakemake runs 1 run jobs, 1 more than counted above, for its own reasons: 1 [^;]+ "
        r"\(--rerun-incomplete: left incomplete by an interrupted run\)",
        lines[2],
    ), lines
    # The record the crash left was kept before the rerun (nothing lost).
    assert list((tmp_path / "results").glob("pp/runs/**/history/*/metrics.json"))


def test_the_report_target_rebuilds_when_the_sweep_grows(finished, tmp_path):
    report = snakemake(finished, "report")
    assert report.returncode == 0, report.stderr[-3000:]
    page = finished / "results/report/index.html"
    assert "2 runs: 2 succeeded." in page.read_text(), re.findall(r"\d+ runs: [^<]*", page.read_text())
    edit(finished, lambda c: c["studies"]["pp"].update(repeats=2))
    grown = snakemake(finished, "report")
    assert grown.returncode == 0, grown.stderr[-3000:]
    assert "Nothing to be done" not in grown.stdout + grown.stderr
    assert "4 runs: 2 succeeded, 2 not run yet." in page.read_text()
    edit(finished, lambda c: c["studies"]["pp"].update(repeats=1))


# ---------------------------------------------------------------- bad paths, at load


def test_bad_paths_stop_the_dry_run_in_one_line(tmp_path):
    sweeps.write(sweeps.sweep("pingpong-tcp", results_dir=str(tmp_path / "results")), tmp_path / "sweep.yaml")
    dry = snakemake(tmp_path, "-n", "compare", "--config", f"compare_baseline={tmp_path / 'nowhere'}")
    assert dry.returncode != 0
    errors = [line for line in dry.stderr.splitlines() if line.startswith("sweep error:")]
    assert errors == [
        f"sweep error: compare_baseline: {tmp_path / 'nowhere'}: not found; give a results directory (with "
        "<study>/runs.csv) or a published record (.csv)"
    ], dry.stderr[-3000:]
    assert "Traceback" not in dry.stderr
    (tmp_path / "taken").write_text("")
    edit(tmp_path, lambda c: c.update(results_dir=str(tmp_path / "taken/results")))
    dry = snakemake(tmp_path, "-n")
    assert dry.returncode != 0 and "NotADirectoryError" not in dry.stderr
    assert f"sweep error: results_dir: '{tmp_path / 'taken/results'}' lies under {tmp_path / 'taken'}, which is a " \
           "file" in dry.stderr  # fmt: skip


def test_a_typo_under_the_assets_is_the_documented_warning(tmp_path):
    params = {"method": "lora", "checkpoint_dir": "{results_dir}/assets/litgpt-tiny/checkpoint",
              "data_path": "{results_dir}/assets/litgpt-tiny/alpaca.jsn", "max_steps": 1, "global_batch_size": 8,
              "micro_batch_size": 1}  # fmt: skip
    config = {"cluster": "local", "results_dir": str(tmp_path / "results"),
              "studies": {"lg": {"app": "litgpt", "nodes": [1], "ranks_per_node": [1], "params": params}}}  # fmt: skip
    sweeps.write(config, tmp_path / "sweep.yaml")
    dry = snakemake(tmp_path, "-n")
    assert "MissingInputException" not in dry.stderr, dry.stderr[-3000:]
    assert (
        f"sweep warning: studies.lg.params.data_path: {tmp_path}/results/assets/litgpt-tiny/alpaca.jsn does not "
        "exist (a real run stops here)"
    ) in dry.stderr
