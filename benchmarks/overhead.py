"""How much does scalestudy cost on top of the work it measures?

(a) study overhead: wall time of `snakemake --profile profiles/local` over a
    study whose points each run >= 30 s, divided by the sum of the app
    processes' own wall times (metrics.json resources.walltime_used_s).
    Target: <= 1.05.
(b) planning overhead: `snakemake -n` on a generated 10,000-point sweep,
    divided by bare Snakemake's dry run of a trivial 2-rule DAG with the same
    number of jobs. Target: <= 1.3. Both quiet (`-q`: the job counts only) unless
    --listing (every job printed, as a plain `snakemake -n` does); --profile runs
    scalestudy's side through profiles/local (what users type).

Run from the repository root with the venv active:
    python benchmarks/overhead.py            # both
    python benchmarks/overhead.py --only b   # only the dry-run ratio
    python benchmarks/overhead.py --only b --points 100000 --repeats 1 --profile --listing
    python benchmarks/overhead.py --only b --points 200 --repeats 1   # a smoke run (the tests do this)
Each figure is printed with its ratio and target.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def snakemake(workdir: Path, *args: str) -> float:
    return timed_snakemake(workdir, *args)[0]


def timed_snakemake(workdir: Path, *args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one Snakemake run. On a shared machine the
    CPU time is the steadier figure: other work stretches the wall time, not the CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "--directory", str(workdir), *args],
                   check=True, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def study_overhead(workdir: Path, max_steps: int) -> None:
    results = workdir / "results"
    assets = results / "assets/litgpt-tiny"
    params = {"checkpoint_dir": str(assets / "checkpoint"), "data_path": str(assets / "alpaca.json"),
              "max_steps": max_steps}  # fmt: skip
    # Only the LitGPT studies: the others (HOOMD-blue where it is not installed) are not what is timed.
    shipped = {
        name
        for file in ("config/sweep.yaml", "config/local.yaml")
        for name in yaml.safe_load((REPO / file).read_text())["studies"]
    }
    overlay = {
        "results_dir": str(results),
        "studies": {
            name: {"repeats": 1, "params": params} if name in ("litgpt-full", "litgpt-lora") else None
            for name in shipped
        },
    }
    (workdir / "bench.yaml").write_text(yaml.safe_dump(overlay))
    base = ["-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles/local"), "--configfile",
            str(REPO / "config/sweep.yaml"), str(REPO / "config/local.yaml"), str(workdir / "bench.yaml")]  # fmt: skip
    # The stand-in model is made once per checkout, not per study: not part of the figure.
    snakemake(workdir, str(assets / "alpaca.json"), *base)  # target first: --configfile takes the rest
    wall = snakemake(workdir, *base)
    runs = [json.loads(p.read_text()) for p in results.glob("*/runs/**/metrics.json")]
    app_walls = [r["resources"]["walltime_used_s"] for r in runs]
    assert all(r["status"] == "ok" for r in runs), [r["reason"] for r in runs if r["status"] != "ok"]
    total = sum(app_walls)
    print(f"(a) points: {len(runs)}, app wall times: {', '.join(f'{w:.1f}' for w in sorted(app_walls))} s")
    print(f"(a) study wall time {wall:.1f} s / sum of app wall times {total:.1f} s = {wall / total:.3f}"
          f"  (target <= 1.05; shortest point {min(app_walls):.1f} s)")  # fmt: skip


def bare_snakefile(workdir: Path, points: int) -> Path:
    path = workdir / "Snakefile.bare"
    path.write_text(
        f"rule all:\n    input: expand('out/{{i}}.txt', i=range({points}))\n\n"
        "rule make:\n    output: 'out/{i}.txt'\n    shell: 'touch {output}'\n"
    )
    return path


def big_sweep(workdir: Path, points: int) -> Path:
    """10 node counts x 10 ranks-per-node counts x points/100 repeats (10,000 points: 100 repeats)."""
    if points % 100:
        raise SystemExit(f"--points must be a multiple of 100 (10 node counts x 10 ranks per node); got {points}")
    sweep = yaml.safe_load((REPO / "config/sweep.yaml").read_text())
    study = sweep["studies"]["litgpt-lora"]
    study.update(
        {"nodes": list(range(1, 11)), "repeats": points // 100, "mpi_flags": ["default"], "nccl_env": ["default"]}
    )
    study.pop("gpus_per_node")
    study["ranks_per_node"] = list(range(1, 11))
    study["params"].update({"global_batch_size": 128, "micro_batch_size": 1})
    sweep["studies"] = {"litgpt-lora": study}
    sweep["cluster"] = "slurm"  # a cluster of many nodes (the local one is one machine); no project to charge
    path = workdir / f"sweep-{points}.yaml"
    path.write_text(yaml.safe_dump(sweep))
    # The inputs the run jobs read must exist for a dry run to plan them.
    for name in ("checkpoint_dir", "data_path"):
        target = workdir / study["params"][name]
        target = target / "lit_model.pth" if name == "checkpoint_dir" else target
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    return path


def dry_run_ratio(workdir: Path, repeats: int, points: int, profile: bool = False, listing: bool = False) -> None:
    bare = bare_snakefile(workdir, points)
    sweep = big_sweep(workdir, points)
    quiet = [] if listing else ["-q"]
    # A --configfile given on the command line replaces the profile's configfiles.
    through = ["--profile", str(REPO / "profiles/local")] if profile else []
    ours_args = ["-s", str(REPO / "Snakefile"), *through, "--configfile", str(sweep), "-n", *quiet, "--cores", "1"]
    bare_args = ["-s", str(bare), "-n", *quiet, "--cores", "1"]
    how = ", ".join(["through profiles/local" if profile else "no profile", "every job listed" if listing else "-q"])
    ours, theirs = [], []
    for _ in range(repeats):
        theirs.append(timed_snakemake(workdir, *bare_args))
        ours.append(timed_snakemake(workdir, *ours_args))
    for label, kind in (("wall", 0), ("CPU", 1)):
        ours_s, theirs_s = [run[kind] for run in ours], [run[kind] for run in theirs]
        # Best of N: on a shared 2-core machine the noise is one-sided (other work only adds time).
        print(f"(b) {label} time, dry run of {points:,} points ({how}): scalestudy {min(ours_s):.2f} s "
              f"(best of {repeats}: {', '.join(f'{t:.2f}' for t in ours_s)}); bare Snakemake, trivial 2-rule DAG "
              f"of {points:,} jobs: {min(theirs_s):.2f} s ({', '.join(f'{t:.2f}' for t in theirs_s)})")  # fmt: skip
        print(
            f"(b) {label} ratio {min(ours_s) / min(theirs_s):.3f} best-of-{repeats}, "
            f"{statistics.median(ours_s) / statistics.median(theirs_s):.3f} median  (target <= 1.3)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["a", "b"])
    parser.add_argument("--max-steps", type=int, default=70, help="(a) steps per point; 70 gives >= 30 s points")
    parser.add_argument("--repeats", type=int, default=5, help="(b) dry runs of each; the best is used")
    parser.add_argument("--points", type=int, default=10_000, help="(b) points of the generated sweep")
    parser.add_argument("--profile", action="store_true", help="(b) scalestudy's dry run through profiles/local")
    parser.add_argument("--listing", action="store_true", help="(b) list every job (no -q), on both sides")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scalestudy-bench-") as tmp:
        for part in ("b", "a"):
            if args.only in (None, part):
                (Path(tmp) / part).mkdir()
        if args.only in (None, "b"):
            dry_run_ratio(Path(tmp) / "b", args.repeats, args.points, args.profile, args.listing)
        if args.only in (None, "a"):
            study_overhead(Path(tmp) / "a", args.max_steps)


if __name__ == "__main__":
    main()
