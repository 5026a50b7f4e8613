"""A/A checks of the verdicts: two identical flag sets (tests/sweeps/lammps-aa.yaml) measured
by real Snakemake and LAMMPS while a background load switches on and off, and a sweep grown by
an identical set after its baseline ran under load. Neither may give a faster/slower verdict.

The first is a statistical check: a 95% CI that excludes 1 between identical sides is the 5%
a CI allows; the load switching under interleaved runs must not make it more. The second is
exact where it can be: sides measured in different invocations are never compared, until the
study's repeats are raised and both sides are measured again, interleaved; then only those runs
are compared, and their verdict is again a statistical check."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
from load import background_load
from sweeps import sweep, write

REPO = Path(__file__).resolve().parents[2]


def snakemake(config: dict, tmp_path: Path, name: str = "sweep.yaml") -> subprocess.CompletedProcess:
    sweep_file = write(config, tmp_path / name)
    variants = Path(config["results_dir"]) / "aa" / "variants.csv"
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/local",
               "--configfile", str(sweep_file), "--", str(variants)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def tables(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_csv(results / "aa" / "runs.csv"), pd.read_csv(results / "aa" / "variants.csv")


def aa_under_switching_load(results: Path, tmp_path: Path, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    with background_load(on_s=1.5, off_s=1.5):
        snakemake(sweep("lammps-aa", results_dir=str(results), order_seed=seed), tmp_path, f"sweep-{seed}.yaml")
    return tables(results)


def test_identical_flag_sets_under_a_switching_load_get_no_verdict_and_run_interleaved(tmp_path):
    runs, variants = aa_under_switching_load(tmp_path / "results", tmp_path, seed=7)
    assert len(runs) == 8 and (runs["status"] == "ok").all()
    # The local profile ran them in the recorded order: round by round, the seed's shuffle within.
    assert (runs["order_seed"] == 7).all()
    # One run at a time: the order they ended in (metrics.json written last, ns clock) is theirs.
    runs["ended_ns"] = [Path(path).stat().st_mtime_ns for path in runs["metrics_path"]]
    by_end = runs.sort_values("ended_ns")
    assert list(by_end["order_round"]) == sorted(runs["order_round"])
    for _round, group in runs.groupby("order_round"):
        assert list(group.sort_values("ended_ns")["order_key"]) == sorted(group["order_key"])
    # Each run says what else the machine did meanwhile.
    assert runs["other_cpu_share"].between(0, 1).all() and runs["own_cpu_share"].gt(0).all()
    primary = variants[variants["primary"]]
    assert len(primary) == 1 and primary["method"].iloc[0]
    if primary["verdict"].iloc[0] in ("faster", "slower"):
        # A 95% CI between identical sides excludes 1 in up to 5% of comparisons by chance (the
        # benchmark measures the rate over many). Once is chance; the same again in a fresh A/A
        # with another order is not (the two together: <= 0.25% by chance).
        _runs, again = aa_under_switching_load(tmp_path / "again", tmp_path, seed=8)
        primary = again[again["primary"]]
        assert primary["verdict"].iloc[0] not in ("faster", "slower"), primary.to_dict("records")


def test_a_set_added_after_its_baseline_ran_under_load_is_not_compared_across_invocations(tmp_path):
    results = tmp_path / "results"
    config = sweep("lammps-aa", results_dir=str(results))
    config["studies"]["aa"]["mpi_flags"] = ["default"]
    with background_load():
        snakemake(config, tmp_path, "first.yaml")
    snakemake(sweep("lammps-aa", results_dir=str(results)), tmp_path, "grown.yaml")
    _runs, variants = tables(results)
    primary = variants[variants["primary"]].iloc[0]
    assert primary["interleaved"] == False  # noqa: E712 (read back from the CSV)
    assert primary["verdict"].startswith("not interleaved"), primary["verdict"]
    # Raising the repeats measures both sides again, interleaved: compared on those runs only.
    raised = sweep("lammps-aa", results_dir=str(results))
    raised["studies"]["aa"]["repeats"] = 8
    snakemake(raised, tmp_path, "raised.yaml")
    runs, variants = tables(results)
    assert len(runs) == 16 and (runs["status"] == "ok").all()
    primary = variants[variants["primary"]].iloc[0]
    assert primary["interleaved"] == True and primary["runs_compared"].startswith("4 / 4 measured together")  # noqa: E712
    if primary["verdict"] in ("faster", "slower"):
        # The exact part held (only the 4 and 4 runs measured together were compared); a CI between
        # identical sides still excludes 1 by chance in up to 5% of comparisons. Raising the repeats
        # again measures 4 more of each, interleaved: the same false verdict twice is <= 0.25%.
        raised["studies"]["aa"]["repeats"] = 12
        snakemake(raised, tmp_path, "raised-again.yaml")
        _runs, variants = tables(results)
        primary = variants[variants["primary"]].iloc[0]
        assert primary["runs_compared"].startswith("8 / 8 measured together"), primary["runs_compared"]
    assert primary["verdict"] not in ("faster", "slower"), primary.to_dict()


def test_repeats_until_clear_go_round_by_round_in_one_invocation(tmp_path):
    # Two studies of known spread (tests/sweeps/repeats-rounds.yaml): `steady` prints the same
    # figure (CI ±0%: stops at min 2), `noisy` a uniform draw (CI far above ±1%: runs to max 4).
    # One invocation runs every round; the next has nothing to do.
    results = tmp_path / "results"
    sweep_file = write(sweep("repeats-rounds", results_dir=str(results)), tmp_path / "sweep.yaml")
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--configfile", str(sweep_file)]

    dry = subprocess.run([*command, "-n"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert dry.returncode == 0, dry.stderr[-3000:]
    dry_out = dry.stdout + dry.stderr
    assert "later rounds may add up to 4 repeats (up to max)" in dry_out, dry_out[-3000:]
    assert "repeats_round" in dry_out and "rep3" not in dry_out, dry_out[-3000:]

    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    point_dir = Path("runs", "nodes1-rpn1", "mpi-default", "nccl-default")
    reps = {study: sorted(p.name for p in (results / study / point_dir).iterdir()) for study in ("steady", "noisy")}
    assert reps == {"steady": ["rep1", "rep2"], "noisy": ["rep1", "rep2", "rep3", "rep4"]}, reps
    rounds = "noisy: round 2 done; round 3 runs 1 more repeat (CI still wider than the target)"
    assert rounds in done.stderr, done.stderr[-3000:]
    assert "steady: round 1 done; every point has stopped (1 at their CI target, 0 at max)" in done.stderr
    for study, run, stop in (("steady", 2, "CI ±0.0% ≤ ±1%"), ("noisy", 4, "max 4 reached")):
        row = pd.read_csv(results / study / "scaling.csv").iloc[0]
        assert row["repeats_run"] == run and row["repeats_stop"].startswith(stop), row.to_dict()
        assert len(pd.read_csv(results / study / "runs.csv")) == run
    assert (results / "report" / "index.html").exists()

    again = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-3000:]
