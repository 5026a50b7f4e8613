"""HOOMD-blue steps/s through the workflow versus the reference harness run directly.

    python benchmarks/hoomd_reference_ratio.py --harness-dir /path/to/hoomd-benchmarks [--rounds 5]

Needs `import hoomd` to work in this Python (a site module, a conda env) and a checkout
of hoomd-benchmarks. For each rank count it alternates, round after round, a direct
`mpirun -np R python -m hoomd_benchmarks.md_pair_wca --device CPU -N ... -v` (from the
harness directory, with its own initial-state cache) and the same point through
`snakemake --profile profiles/local` (forced rerun each round), with the same N, steps and
ranks, and reports each side's best and median steps/s and the ratios workflow/reference.
Alternating, and comparing best-of and medians, is what makes this usable on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.apps.hoomd.app import parse_hoomd  # noqa: E402
from scalestudy.model.paths import Layout  # noqa: E402


def reference(harness_dir: Path, ranks: int, particles: int, warmup: int, steps: int) -> float:
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    command = [mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root", sys.executable, "-m",
               "hoomd_benchmarks.md_pair_wca", "--device", "CPU", "-N", str(particles),
               "--warmup_steps", str(warmup), "--benchmark_steps", str(steps), "-v"]  # fmt: skip
    out = subprocess.run(command, cwd=harness_dir, capture_output=True, text=True, check=True)
    return parse_hoomd(out.stdout)["steps_per_s"]


def workflow(workdir: Path, ranks: int) -> float:
    target = Layout("results").metrics("ratio", f"nodes1-rpn{ranks}/mpi-default/nccl-default/rep1")
    configs = [str(REPO / "config/sweep.yaml"), str(REPO / "config/local.yaml"), str(workdir / "ratio.yaml")]
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--profile", str(REPO / "profiles/local"), target, "--forcerun", target,
               "--configfile", *configs]  # fmt: skip
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"snakemake failed:\n{done.stderr[-3000:]}")
    data = json.loads((workdir / target).read_text())
    if data["status"] != "ok":
        raise SystemExit(f"workflow point failed: {data['reason']}")
    return data["figures"]["steps_per_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness-dir", type=Path, required=True, help="checkout of hoomd-benchmarks")
    parser.add_argument("-N", type=int, default=4000)
    parser.add_argument("--warmup_steps", type=int, default=1000)
    parser.add_argument("--benchmark_steps", type=int, default=5000)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hoomd-ratio-"))
    params = {"N": args.N, "warmup_steps": args.warmup_steps, "benchmark_steps": args.benchmark_steps}
    study = {"app": "hoomd", "nodes": [1], "ranks_per_node": args.ranks, "walltime": "00:30:00", "params": params}
    (workdir / "ratio.yaml").write_text(yaml.safe_dump({"results_dir": "results", "studies": {"ratio": study}}))
    results = {}
    for ranks in args.ranks:
        ref, ours = [], []
        for round_ in range(1, args.rounds + 1):
            ref.append(reference(args.harness_dir, ranks, args.N, args.warmup_steps, args.benchmark_steps))
            ours.append(workflow(workdir, ranks))
            print(f"ranks={ranks} round {round_}: reference {ref[-1]:.1f}  workflow {ours[-1]:.1f} steps/s", flush=True)
        results[ranks] = {
            "reference": ref,
            "workflow": ours,
            "ratio_of_best": max(ours) / max(ref),
            "ratio_of_medians": statistics.median(ours) / statistics.median(ref),
        }
        print(
            f"ranks={ranks}: best {max(ours):.1f} / {max(ref):.1f} = {results[ranks]['ratio_of_best']:.3f}; "
            f"median {statistics.median(ours):.1f} / {statistics.median(ref):.1f} = "
            f"{results[ranks]['ratio_of_medians']:.3f}",
            flush=True,
        )
    print(json.dumps({"N": args.N, "warmup_steps": args.warmup_steps, "benchmark_steps": args.benchmark_steps,
                      "rounds": args.rounds, "results": results}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
