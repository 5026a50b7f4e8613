"""The real workflow with failing points: the report still builds, a rerun reruns nothing,
`--config retry_failed=true` reruns only the failed points (never an ok one), and two
invocations on the same results directory do not run at once."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sweeps
import yaml

pytestmark = pytest.mark.e2e


def sweep(tmp_path: Path, slow_walltime: str = "00:00:02") -> dict:
    config = sweeps.sweep("pingpong-tcp", results_dir=str(tmp_path / "results"))
    # Runs far longer than its walltime: stopped and recorded as failed.
    config["studies"]["pp-slow"] = {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "walltime": slow_walltime,
                                    "params": {"iterations": 10**8, "warmup": 0, "max_bytes": 64}}  # fmt: skip
    return config


def snakemake_command(repo: Path, workdir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(workdir),
            "--profile", str(repo / "profiles/local"), "--configfile", str(workdir / "sweep.yaml"), *args]  # fmt: skip


def snakemake(repo: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    command = snakemake_command(repo, workdir, *args)
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600)


def records(results: Path) -> dict[str, dict]:
    return {
        str(path.relative_to(results)): json.loads(path.read_text())
        for path in sorted(results.glob("*/runs/**/metrics.json"))
        if "attempts" not in path.parts
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory, request):
    repo = Path(request.config.rootpath)
    workdir = tmp_path_factory.mktemp("retry")
    (workdir / "sweep.yaml").write_text(yaml.safe_dump(sweep(workdir)))
    results = workdir / "results"
    steps = {"first": snakemake(repo, workdir)}
    steps["first_records"] = records(results)
    steps["again"] = snakemake(repo, workdir, "-n")
    steps["retry_dry"] = snakemake(repo, workdir, "-n", "--config", "retry_failed=true")
    steps["attempts_after_dry"] = sorted(results.glob("**/attempts/*"))
    steps["retry"] = snakemake(repo, workdir, "--config", "retry_failed=true")
    steps["retry_records"] = records(results)
    steps["after_retry"] = snakemake(repo, workdir, "-n")
    steps["after_retry_switch_on"] = snakemake(repo, workdir, "-n", "--config", "retry_failed=true")
    return {"repo": repo, "dir": workdir, "results": results, **steps}


def job_counts(run: subprocess.CompletedProcess) -> dict[str, int]:
    import re

    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", run.stdout + run.stderr, re.M)}


def test_failed_points_are_data_and_the_report_builds(study):
    assert study["first"].returncode == 0, study["first"].stderr[-3000:]
    first = study["first_records"]
    assert len(first) == 3
    categories = {
        path.split("/runs/")[0] + "/" + r["point"]["mpi_flag_set"]: r["category"] for path, r in first.items()
    }
    assert categories == {"pp/default": None, "pp/tcp": None, "pp-slow/default": "walltime"}
    page = (study["results"] / "report" / "index.html").read_text()
    # pp-slow's one run failed: its section is the reason and what to do (no empty plots, no table).
    assert "Its one run failed: walltime exceeded" in page and "retry_failed=true" in page


def test_a_rerun_reruns_nothing(study):
    assert study["again"].returncode == 0
    assert "Nothing to be done" in study["again"].stdout + study["again"].stderr


def test_retry_dry_run_lists_only_the_failed_point_and_changes_nothing(study):
    assert study["retry_dry"].returncode == 0, study["retry_dry"].stderr[-2000:]
    assert job_counts(study["retry_dry"]).get("run_pingpong") == 1
    assert "pp-slow/runs/" in study["retry_dry"].stdout + study["retry_dry"].stderr
    assert study["attempts_after_dry"] == []


def test_retry_reruns_only_the_failed_point(study):
    assert study["retry"].returncode == 0, study["retry"].stderr[-3000:]
    before, after = study["first_records"], study["retry_records"]
    for path, record in before.items():
        if record["status"] == "ok":
            assert after[path] == record, f"ok point {path} was rerun"
        else:
            assert after[path]["started"] != record["started"] and after[path]["attempt"] == 2
            run_dir = study["results"] / Path(path).parent
            archived = sorted(p.name for p in (run_dir / "attempts").iterdir())
            stamp = record["started"].replace(":", "-").replace("+", "-")
            assert archived == [f"{stamp}.metrics.json", f"{stamp}.stdout.log"]
            assert json.loads((run_dir / "attempts" / archived[0]).read_text()) == record


def test_after_a_retry_nothing_reruns_with_or_without_the_switch(study):
    for step in ("after_retry",):
        assert "Nothing to be done" in study[step].stdout + study[step].stderr, study[step].stdout[-2000:]
    # With the switch still on, the (again failed) point is offered once more; ok points never.
    assert job_counts(study["after_retry_switch_on"]).get("run_pingpong") == 1


def test_a_second_invocation_on_the_same_directory_is_refused_while_one_runs(tmp_path, repo):
    # The first run must outlast the start-up of two more Snakemakes (about 3 s each, more on a
    # loaded machine): its slow point holds it for 12 s.
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep(tmp_path, slow_walltime="00:00:12")))
    first = subprocess.Popen(snakemake_command(repo, tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / ".snakemake" / "locks").glob("*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        second = snakemake(repo, tmp_path)
        # Another working directory, the same results directory: Snakemake's lock does not see it.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "sweep.yaml").write_text((tmp_path / "sweep.yaml").read_text())
        third = snakemake(repo, elsewhere)
        assert first.poll() is None, "the first run ended before the others were tried: lengthen its slow point"
    finally:
        out, _ = first.communicate(timeout=300)
    assert second.returncode != 0
    assert "Directory cannot be locked" in second.stdout + second.stderr
    assert third.returncode != 0
    assert f"results directory {tmp_path / 'results'} is in use by a running workflow" in third.stderr
    assert first.returncode == 0, out[-3000:]
    # The first run finished undisturbed: every record whole and readable.
    found = records(tmp_path / "results")
    assert len(found) == 3 and all(r["status"] in ("ok", "failed") for r in found.values())
    assert (tmp_path / "results" / "report" / "index.html").is_file()
    assert not list((tmp_path / "results").glob("**/.metrics.json.tmp"))


def test_a_batch_job_gets_the_point_of_a_retried_run():
    """The retry number rides in the point JSON, which batch jobs read back (PBS submit)."""
    from points import point
    from scalestudy.bookkeeping.retry import with_retry
    from scalestudy.model.point import Point

    p = point()
    assert with_retry(p.to_json(), 0) == p.to_json()
    retried = with_retry(p.to_json(), 2)
    assert json.loads(retried)["retry"] == 2
    assert Point.from_json(retried, p.walltime_seconds) == Point.from_json(p.to_json(), p.walltime_seconds)
