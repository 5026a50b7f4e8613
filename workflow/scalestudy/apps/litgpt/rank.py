"""What every MPI rank of a LitGPT point runs: the stock `litgpt` CLI, plus two things.

1. A CPU-capable strategy for full fine-tuning. `litgpt finetune_full` always
   picks FSDP for more than one device, and FSDP refuses to run on CPU
   ("FSDP is only available on GPU"). Without CUDA we hand it DDP over gloo,
   which is what data-parallel training on CPU ranks is. With CUDA nothing is
   changed: the GPU path stays stock LitGPT.
2. Two peak-memory lines per rank on CPU (LitGPT reports memory only for CUDA): the
   peak of the bytes tensors hold (`tensor_peak.TensorPeak`), tracked from just before
   the model is built through the first TRACKED_STEPS optimizer steps and then stopped,
   so the timed steps after pay nothing for it; and the process's max RSS (the runtime
   and allocator included), measured by the OS.

Usage: python -m scalestudy.apps.litgpt.rank finetune_full <litgpt arguments>
"""

from __future__ import annotations

import resource
import sys

from ...model.rank_probe import RANK_VARIABLES, end_rank, first_int

# The per-rank line: "scalestudy: peak host memory rank 0: 589312 KiB" (getrusage's unit).
PEAK_RSS_PREFIX = "scalestudy: peak host memory"
PEAK_RSS_UNIT = "KiB"
# The per-rank line: "scalestudy: peak tensor memory rank 0: 61234567 bytes" (above the
# baseline: what malloc held just before the model's build).
TENSOR_PEAK_PREFIX = "scalestudy: peak tensor memory"
TENSOR_PEAK_UNIT = "bytes"
# Optimizer steps tracked: the first allocates AdamW's state; the second is a step as every
# later one is (the first's lazily made buffers held, gradients freed and made again).
TRACKED_STEPS = 2


def use_cpu_capable_strategy() -> bool:
    import torch

    if torch.cuda.is_available():
        return False
    import litgpt.finetune.full as full
    from lightning.fabric.strategies import DDPStrategy

    full.FSDPStrategy = lambda **_fsdp_options: DDPStrategy(process_group_backend="gloo")
    return True


def track_tensor_peak(steps: int = TRACKED_STEPS):
    """A TensorPeak started when finetune_* first enters `Fabric.init_module` (the model's
    build: after the process group and the data are set up, as the torch-parallel rank's
    baseline is taken after its process group, before its build) and stopped by a global
    optimizer-step hook after `steps` steps. The hook runs after `Optimizer.step` has
    returned from every op, so the tracker is the innermost dispatch mode there. None where
    there is no glibc or there is a GPU (LitGPT reports CUDA max allocated itself)."""
    import torch

    if torch.cuda.is_available():
        return None
    from lightning.fabric import Fabric
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from ..tensor_peak import TensorPeak, malloc_held

    held = malloc_held()
    if held is None:
        return None
    state: dict = {"tracker": None, "steps": 0}
    init_module = Fabric.init_module

    def started_init_module(fabric, *args, **kwargs):
        if state["tracker"] is None:
            state["tracker"] = TensorPeak(held).start()
        return init_module(fabric, *args, **kwargs)

    def after_step(_optimizer, _args, _kwargs) -> None:
        state["steps"] += 1
        if state["steps"] >= steps and state["tracker"] is not None:
            state["tracker"].stop()
            handle.remove()
            Fabric.init_module = init_module

    Fabric.init_module = started_init_module
    handle = register_optimizer_step_post_hook(after_step)
    return state


def main(argv: list[str]) -> int:
    if argv and argv[0] == "finetune_full" and use_cpu_capable_strategy():
        print("scalestudy: no CUDA device; finetune_full uses DDP (gloo) instead of FSDP", flush=True)
    from litgpt.__main__ import main as litgpt_main

    tracking = track_tensor_peak()
    sys.argv = ["litgpt", *argv]
    rank = first_int(RANK_VARIABLES, 0)
    try:
        litgpt_main()
    finally:
        tracker = tracking and tracking["tracker"]
        if tracker is not None:
            tracker.stop()  # fewer steps than tracked, or a failure: the peak so far
            print(f"{TENSOR_PEAK_PREFIX} rank {rank}: {tracker.peak} {TENSOR_PEAK_UNIT}", flush=True)
        # ru_maxrss as the kernel gives it (KiB on Linux); the parser converts it (apps.litgpt).
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"{PEAK_RSS_PREFIX} rank {rank}: {peak_kib} {PEAK_RSS_UNIT}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit_:  # the CLI's own exit: its lines are printed (main's finally)
        code = exit_.code
    end_rank(code)  # without the interpreter's teardown (rank_probe.end_rank)
