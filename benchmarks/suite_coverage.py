"""What the README's test command proves, measured: line and branch coverage of workflow/
(coverage.py) by the whole `bash scripts/test.sh`, at a revision, and the test ids it ran.

The revision is checked out into a fresh folder (`git worktree`), set up there by its own
scripts/setup.sh (a fresh clone's setup), and its whole test command is run with every Python
process it starts measured: pytest, its xdist workers, each Snakemake, each runner and each rank
program (coverage's `sitecustomize` start-up, on PYTHONPATH; the processes that a job's own
environment strips of PYTHONPATH are not measured, at every revision alike), from the same cache
(`cache_without_counts`). Measured processes
run slower (branch tracing): the suite's time printed here is not its time without coverage.

    python benchmarks/suite_coverage.py --rev 761a33d --out /tmp/cov-before
    python benchmarks/suite_coverage.py --rev HEAD --out /tmp/cov-after
    python benchmarks/suite_coverage.py --compare /tmp/cov-before /tmp/cov-after

Prints, per revision: `workflow/ coverage at REV: lines C/N (P%), branches C/N (P%)`, the test
command's exit status and wall time; --compare prints both and their differences, and the test
ids (pytest's junit XML) only one side ran. Takes as long as the suite (tens of minutes).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COVERAGE = "coverage==7.17.5"
RCFILE = """\
[run]
branch = True
parallel = True
sigterm = True
source = {tree}/workflow/scalestudy
data_file = {out}/data/.coverage
"""
# A Python of another version (or without this folder's coverage build) starts unmeasured.
SITECUSTOMIZE = "try:\n    import coverage\n    coverage.process_startup()\nexcept ImportError:\n    pass\n"


def measure(rev: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tree = Path(tempfile.mkdtemp(prefix="suite-coverage-"))
    commit = subprocess.run(["git", "rev-parse", rev], cwd=REPO, capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit.strip()], cwd=REPO, check=True)
    starter = out / "coverage-site"
    if not (starter / "coverage").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(starter), COVERAGE], check=True)
    (starter / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (out / "data").mkdir(exist_ok=True)
    rcfile = out / "coveragerc"
    rcfile.write_text(RCFILE.format(tree=tree, out=out))
    env = {**os.environ, "COVERAGE_PROCESS_START": str(rcfile), "XDG_CACHE_HOME": str(cache_without_counts(out)),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(starter), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    start = time.monotonic()
    with open(out / "test.log", "w") as log:
        status = subprocess.run(["bash", "scripts/test.sh"], cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    cov = [sys.executable, "-m", "coverage"]
    cov_env = {**os.environ, "PYTHONPATH": str(starter)}
    subprocess.run([*cov, "combine", "--rcfile", str(rcfile), "-q"], cwd=tree, env=cov_env, check=True)
    subprocess.run([*cov, "json", "--rcfile", str(rcfile), "-q", "-o", str(out / "coverage.json")],
                   cwd=tree, env=cov_env, check=True)  # fmt: skip
    summary = {"rev": rev, "commit": commit.strip(), "status": status.returncode, "seconds": round(seconds),
               **totals(out / "coverage.json"), "tests": test_ids(tree)}  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(line(summary))
    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO)
    shutil.rmtree(tree, ignore_errors=True)


def cache_without_counts(out: Path) -> Path:
    """The user's cache folder as every revision's run starts from it: the same pip cache and
    site mpi4py wheels (links), none of the counts kept by apps.saved_bytes.kept_on_disk (the
    `.json` files of the project's cache). Those decide whether the counting code runs at all: a
    revision measured after another had filled them covered 42 lines fewer."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cache = out / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    (cache / "scalestudy").mkdir(parents=True)
    for entry in home.iterdir() if home.is_dir() else ():
        if entry.name != "scalestudy":
            (cache / entry.name).symlink_to(entry)
    for entry in (home / "scalestudy").iterdir() if (home / "scalestudy").is_dir() else ():
        if entry.suffix != ".json":
            (cache / "scalestudy" / entry.name).symlink_to(entry)
    return cache


def totals(report: Path) -> dict:
    data = json.loads(report.read_text())["totals"]
    return {key: data[key] for key in ("covered_lines", "num_statements", "covered_branches", "num_branches")}


def test_ids(tree: Path) -> list[str]:
    """Every test id the revision's suite holds (pytest --collect-only, in its own venv)."""
    command = [str(tree / ".venv/bin/python"), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    run = subprocess.run(command, cwd=tree, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return sorted(line for line in run.stdout.splitlines() if "::" in line)


def line(summary: dict) -> str:
    lines = summary["covered_lines"], summary["num_statements"]
    branches = summary["covered_branches"], summary["num_branches"]
    return (
        f"workflow/ coverage at {summary['rev']} ({summary['commit'][:7]}): lines {lines[0]}/{lines[1]} "
        f"({100 * lines[0] / lines[1]:.2f}%), branches {branches[0]}/{branches[1]} "
        f"({100 * branches[0] / branches[1]:.2f}%); test command exit {summary['status']} in {summary['seconds']} s "
        f"(measured, so slower than without coverage); {len(summary['tests'])} test ids"
    )


def compare(before: Path, after: Path) -> None:
    old, new = (json.loads((folder / "summary.json").read_text()) for folder in (before, after))
    print(line(old))
    print(line(new))
    for key, name in (("covered_lines", "lines"), ("covered_branches", "branches")):
        total = "num_statements" if key == "covered_lines" else "num_branches"
        ratio = (new[key] / new[total]) / (old[key] / old[total])
        print(f"{name} covered: {old[key]} -> {new[key]}; share after / before = {ratio:.4f}")
    gone, added = sorted(set(old["tests"]) - set(new["tests"])), sorted(set(new["tests"]) - set(old["tests"]))
    print(f"test ids only before: {len(gone)}; only after: {len(added)}")
    for test in gone:
        print(f"  only before: {test}")
    for test in added:
        print(f"  only after: {test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the revision whose test command is measured")
    parser.add_argument("--out", type=Path, help="where its coverage data, log and summary go")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="two --out folders")
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
    elif args.out is None:
        parser.error("--out: missing; allowed: a folder for the measurement (or --compare BEFORE AFTER)")
    else:
        measure(args.rev, args.out)


if __name__ == "__main__":
    main()
