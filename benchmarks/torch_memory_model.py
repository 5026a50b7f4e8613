"""The memory model against measured CPU ranks: predicted memory per rank (model.memory, the
shape the torch-parallel app gives) versus what each rank's training added to its memory.

    python benchmarks/torch_memory_model.py [--ranks 2] [--scale 1.0] [--strategies ddp,fsdp:3]

For each model (an MLP of 1024 wide residual blocks and a GPT-2-style decoder, both about
tens of millions of parameters at --scale 1) and strategy, one `mpirun -np R` launch of the
rank program in throughput mode (a few steps). Measured: the largest rank's max RSS minus its
RSS before the model was built (the runtime's own memory left out; CPU ranks have no
allocator counter like CUDA's max allocated). Prints one line per case and the ratios
measured / predicted.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.apps import APPS  # noqa: E402
from scalestudy.apps.torch_parallel import parse_torch_parallel  # noqa: E402
from scalestudy.model.point import Point  # noqa: E402
from scalestudy.model.units import GB  # noqa: E402

MODELS = {
    "mlp": {"width": 1024, "depth": 4, "heads": 8, "seq_len": 64},
    "gpt2": {"width": 512, "depth": 4, "heads": 8, "seq_len": 64},
}


def case(model: str, strategy: str, ranks: int, scale: float, batch: int) -> tuple[dict, dict]:
    name, _, number = strategy.partition(":")
    size = dict(MODELS[model])
    size["width"] = max(8, int(size["width"] * scale) // 8 * 8)
    params = {"model": model, "strategy": name, "batch_size": batch, "micro_batches": 2, **size}
    if number:
        params["zero_stage" if name == "fsdp" else "group_size"] = int(number)
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    command = [mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1",
               "-x", f"PYTHONPATH={REPO / 'workflow'}", sys.executable, "-m", "scalestudy.apps.torch_parallel_rank",
               "--model", model, "--strategy", strategy, "--mode", "throughput", "--steps", "3",
               "--warmup-steps", "1", "--batch-size", str(batch), "--micro-batches", "2",
               *(f"--{k.replace('_', '-')}={v}" for k, v in size.items())]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{model} {strategy}: mpirun exited {done.returncode}\n{done.stderr[-3000:]}")
    figures = parse_torch_parallel(done.stdout)
    point = Point(study="memory", app="torch-parallel", scaling="strong", nodes=1, ranks_per_node=ranks,
                  gpus_per_node=0, threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                  walltime="00:10:00", params=params)  # fmt: skip
    need = APPS["torch-parallel"].memory(point, figures)
    return figures, need.prediction.terms_gb() | {"total": need.prediction.total / GB}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--scale", type=float, default=1.0, help="widths times this (smaller: faster)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--strategies", default="ddp,fsdp:3")
    parser.add_argument("--models", default="mlp,gpt2")
    args = parser.parse_args(argv)
    ratios = []
    print("model strategy ranks parameters predicted_GB (model+optimizer+gradients+activations) "
          "measured_growth_GB measured_peak_rss_GB ratio")  # fmt: skip
    for model in args.models.split(","):
        for strategy in args.strategies.split(","):
            figures, predicted = case(model, strategy, args.ranks, args.scale, args.batch_size)
            ratio = figures["memory_growth_gb"] / predicted["total"]
            ratios.append(ratio)
            terms = "+".join(f"{predicted[k]:.3f}" for k in ("model", "optimizer", "gradients", "activations"))
            measured = f"{figures['memory_growth_gb']:.3f} {figures['peak_memory_gb']:.3f} {ratio:.2f}"
            line = f"{model} {strategy} {args.ranks} {figures['parameters']} {predicted['total']:.3f} ({terms})"
            print(f"{line} {measured}", flush=True)
    print(f"ratio measured/predicted: min {min(ratios):.2f}, max {max(ratios):.2f} over {len(ratios)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
