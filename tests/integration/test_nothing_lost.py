"""Nothing lost, nothing spent by surprise, with the real workflow on the ping-pong study:

- `snakemake report` builds the report from what has finished and never runs a point;
- `snakemake -n` says first how many points there are and how many run jobs it submits;
- finished points are found from the results themselves: without .snakemake/metadata (a
  fresh clone) new repeats and studies still run and finished points still do not;
- a point whose definition changed is measured again and its old record and log are kept."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sweeps
import yaml

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
POINTS = ("nodes1-rpn2/mpi-default/nccl-default", "nodes1-rpn2/mpi-tcp/nccl-default")


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    # Targets first: --configfile takes every word after it.
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--profile", str(REPO / "profiles/local"), *args,
               "--configfile", str(workdir / "sweep.yaml")]  # fmt: skip
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600)


def job_counts(run: subprocess.CompletedProcess) -> dict[str, int]:
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", run.stdout, re.M)}


def nothing_to_do(run: subprocess.CompletedProcess) -> bool:
    return run.returncode == 0 and "Nothing to be done" in run.stdout + run.stderr


def records(results: Path) -> dict[str, dict]:
    return {
        str(path.parent.relative_to(results)): json.loads(path.read_text())
        for path in sorted(results.glob("*/runs/**/metrics.json"))
        if "history" not in path.parts
    }


def edit(workdir: Path, change) -> None:
    config = yaml.safe_load((workdir / "sweep.yaml").read_text())
    change(config)
    (workdir / "sweep.yaml").write_text(yaml.safe_dump(config))


def forget_metadata(workdir: Path) -> None:
    """What a fresh clone pointing at the same results has: no Snakemake metadata."""
    shutil.rmtree(workdir / ".snakemake", ignore_errors=True)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("nothing-lost")
    results = workdir / "results"
    sweeps.write(sweeps.sweep("pingpong-tcp", results_dir=str(results)), workdir / "sweep.yaml")
    steps = {"report_dry": snakemake(workdir, "report", "-n"), "report": snakemake(workdir, "report")}
    steps["report_page"] = (results / "report/index.html").read_text() if steps["report"].returncode == 0 else ""
    steps["records_after_report"] = records(results)
    steps["dry"] = snakemake(workdir, "-n")
    steps["first"] = snakemake(workdir)
    steps["first_records"] = records(results)

    # A fresh clone on the same results: a second repeat and a second study.
    forget_metadata(workdir)

    def grow(config):
        config["studies"]["pp"]["repeats"] = 2
        config["studies"]["pp2"] = copy.deepcopy(config["studies"]["pp"])

    edit(workdir, grow)
    steps["grown_dry"] = snakemake(workdir, "-n")
    steps["grown"] = snakemake(workdir)
    steps["grown_records"] = records(results)

    # Again without metadata: a param that is not an axis changes (iterations 50 -> 100) in pp.
    forget_metadata(workdir)
    edit(workdir, lambda c: c["studies"]["pp"]["params"].update(iterations=100))
    steps["changed_dry"] = snakemake(workdir, "-n")
    steps["changed"] = snakemake(workdir)
    steps["changed_records"] = records(results)
    steps["after"] = snakemake(workdir, "-n")
    forget_metadata(workdir)
    steps["after_without_metadata"] = snakemake(workdir, "-n")

    # With metadata (the usual case): a param of pp2 changes (warmup 10 -> 20).
    steps["pp2_first"] = snakemake(workdir)
    edit(workdir, lambda c: c["studies"]["pp2"]["params"].update(warmup=20))
    steps["pp2_changed"] = snakemake(workdir)
    steps["pp2_records"] = records(results)
    return {"dir": workdir, "results": results, **steps}


def test_report_plans_no_run_job_and_lists_every_point_as_not_run_yet(study):
    dry = study["report_dry"]
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "run_pingpong" not in job_counts(dry) and job_counts(dry)["report"] == 1
    assert study["report"].returncode == 0, study["report"].stderr[-3000:]
    assert study["records_after_report"] == {}
    assert "2 runs: 2 not run yet." in study["report_page"] and "Not run yet (2)" in study["report_page"]


def test_a_dry_run_says_first_how_many_points_and_run_jobs(study):
    dry = study["dry"]
    assert dry.returncode == 0, dry.stderr[-3000:]
    lines = [line for line in dry.stdout.splitlines() if line.startswith("scalestudy:")]
    assert lines == ["scalestudy: 2 points (pp 2); 2 run jobs to submit (2 not run yet); `report` alone submits none"]
    assert dry.stdout.startswith(lines[0])  # before Snakemake's own output
    assert job_counts(dry)["run_pingpong"] == 2


def test_without_metadata_new_repeats_and_studies_run_and_finished_points_do_not(study):
    dry = study["grown_dry"]
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "6 run jobs to submit (6 not run yet)" in dry.stdout
    assert job_counts(dry)["run_pingpong"] == 6
    planned = set(re.findall(r"--metrics \S+/results/(\S+)/metrics.json", dry.stdout))
    assert planned == {f"pp/runs/{p}/rep2" for p in POINTS} | {f"pp2/runs/{p}/rep{r}" for p in POINTS for r in (1, 2)}
    assert study["grown"].returncode == 0, study["grown"].stderr[-3000:]
    grown, first = study["grown_records"], study["first_records"]
    assert len(grown) == 8 and all(r["status"] == "ok" for r in grown.values())
    assert all(grown[path] == record for path, record in first.items()), "a finished point was rerun"


def test_a_changed_point_reruns_without_metadata_and_keeps_its_old_record(study):
    dry = study["changed_dry"]
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "4 run jobs to submit (4 definition changed)" in dry.stdout
    assert job_counts(dry)["run_pingpong"] == 4 and job_counts(dry)["keep_record"] == 4
    assert study["changed"].returncode == 0, study["changed"].stderr[-3000:]
    before, after = study["grown_records"], study["changed_records"]
    for path, record in after.items():
        if path.startswith("pp2/"):
            assert record == before[path], "a point of the unchanged study was rerun"
            continue
        assert record["params"]["iterations"] == 100 and record["status"] == "ok"
        kept = list((study["results"] / path / "history").glob("*/metrics.json"))
        assert len(kept) == 1, f"{path}: {kept}"
        assert json.loads(kept[0].read_text()) == before[path]  # the earlier record, whole
        assert (kept[0].parent / "stdout.log").is_file() and (kept[0].parent / "launch.sh").is_file()
        note = json.loads((kept[0].parent / "definition.json").read_text())
        assert note["definition"]["params"]["iterations"] == 50 and note["changes"] == ["params.iterations: 50 → 100"]
    page = (study["results"] / "report/index.html").read_text()
    assert "4 runs: 4 succeeded; 4 re-measured." in page and "Re-measured (4)" in page


def test_a_changed_point_keeps_its_old_record_with_metadata_too(study):
    assert study["pp2_changed"].returncode == 0, study["pp2_changed"].stderr[-3000:]
    before, after = study["changed_records"], study["pp2_records"]
    pp2 = [path for path in after if path.startswith("pp2/")]
    assert len(pp2) == 4
    for path in pp2:
        assert after[path]["params"]["warmup"] == 20
        kept = [json.loads(p.read_text()) for p in (study["results"] / path / "history").glob("*/metrics.json")]
        assert kept == [before[path]]


def test_after_the_rerun_nothing_is_to_be_done_with_or_without_metadata(study):
    assert nothing_to_do(study["after"]), study["after"].stdout[-3000:]
    assert nothing_to_do(study["after_without_metadata"]), study["after_without_metadata"].stdout[-3000:]
    assert "scalestudy: 8 points (pp 4, pp2 4); 0 run jobs to submit" in study["after"].stdout


def test_report_on_a_cluster_profile_submits_nothing(tmp_path):
    # docs/profiles.md's "only the report": the shipped sweep, never run, through the ASPIRE 2A profile.
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(REPO / "profiles/aspire2a"), "report", "-n",
               "--config", "cluster=aspire2a", f"results_dir={tmp_path / 'results'}"]  # fmt: skip
    # The sweep is loaded before the target is known: a PBS site's project is checked all the same.
    env = {**os.environ, "PROJECT": "ab12"}
    dry = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = job_counts(dry)
    assert jobs["report"] == 1 and not [rule for rule in jobs if rule.startswith("run_")], jobs


def test_report_without_threads_runs_its_table_steps_in_processes_of_their_own(tmp_path):
    # Without --force-use-threads (the cluster profiles) each table step is a Snakemake process
    # of its own, which does not know the targets: it must not wait for records never made.
    sweeps.write(sweeps.sweep("pingpong-tcp", results_dir=str(tmp_path / "results")), tmp_path / "sweep.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
               "--cores", "1", "--latency-wait", "1", "report",
               "--configfile", str(tmp_path / "sweep.yaml")]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "Not run yet (2)" in (tmp_path / "results/report/index.html").read_text()
    assert not list(tmp_path.glob("results/*/runs/**/metrics.json"))
