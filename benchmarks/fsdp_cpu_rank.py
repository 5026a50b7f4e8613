"""One rank of stock LitGPT `finetune_full` under FSDP on CPU ranks (gloo), with the bytes
tensors hold recorded at every phase boundary of training: what benchmarks/memory_anchors.py
(section 6) holds the memory model's FSDP terms to.

LitGPT picks Lightning's FSDPStrategy for more than one device (auto_wrap_policy={Block},
activation_checkpointing_policy={Block}, limit_all_gathers=True: litgpt/finetune/full.py, the
same in the 04/2024 LitGPT that measured config_hub/finetune/README.md). Lightning refuses
FSDP without a GPU by checking the strategy's exact type (lightning/fabric/connector.py:
`type(strategy) is FSDPStrategy`); a subclass that changes nothing passes that check, and torch's
FSDP itself runs on CPU with gloo once it is told the CPU is its device (Lightning passes
`device_id=None` there). Nothing else of LitGPT, Lightning or FSDP is changed.

Recorded per rank, as one JSON line (`PHASES_PREFIX rank <r>: {...}`): for each mark, the bytes
malloc holds above the baseline (taken where the model's build starts, as litgpt_entry's
tracker) and the peak since the previous mark (apps.tensor_peak: after every op, MKL's GEMM
buffers left out). Marks: `fit` (the model set up, sharded and loaded), per iteration
`backward` (the forward and loss done), `backward_end`, and on an optimizer step `step`
(its pre-hook), `step_end` and `zero_grad_end` (LitGPT zeroes the gradients after each
step); tracking stops, and the line is printed, after TRACKED optimizer steps.

    mpirun -np 2 python benchmarks/fsdp_cpu_rank.py finetune_full <checkpoint> <litgpt arguments>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

PHASES_PREFIX = "scalestudy: fsdp phases"
TRACKED = 2  # optimizer steps: the first makes AdamW's state, the second is as every later one


def main(argv: list[str]) -> int:
    import litgpt.finetune.full as full
    import torch
    from lightning.fabric import Fabric
    from lightning.fabric.strategies import FSDPStrategy
    from scalestudy.apps.tensor_peak import TensorPeak, malloc_held
    from scalestudy.model.rank_probe import RANK_VARIABLES, first_int
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    class CPUFSDPStrategy(FSDPStrategy):
        """Lightning's FSDPStrategy, unchanged: only its type differs (see the module's docstring)."""

    full.FSDPStrategy = CPUFSDPStrategy
    # Lightning passes FSDP `device_id=root_device.index`, None on CPU, where torch's FSDP then
    # looks for an accelerator; the CPU device named as such is what it runs on.
    fsdp_init = FullyShardedDataParallel.__init__

    def cpu_fsdp_init(self, *args, device_id=None, **kwargs):
        fsdp_init(self, *args, device_id=torch.device("cpu") if device_id is None else device_id, **kwargs)

    FullyShardedDataParallel.__init__ = cpu_fsdp_init
    held = malloc_held()
    state: dict = {"tracker": None, "marks": [], "steps": 0, "done": False}

    def mark(name: str) -> None:
        tracker = state["tracker"]
        if tracker is None or state["done"]:
            return
        state["marks"].append({"mark": name, "held": held() - tracker.start_bytes, "peak": tracker.peak})
        tracker.peak = held() - tracker.start_bytes  # the next phase's peak starts from here

    init_module = Fabric.init_module

    def started_init_module(fabric, *args, **kwargs):
        if state["tracker"] is None:
            state["tracker"] = TensorPeak(held).start()
        return init_module(fabric, *args, **kwargs)

    Fabric.init_module = started_init_module
    fit = full.fit

    def marked_fit(*args, **kwargs):
        mark("fit")
        return fit(*args, **kwargs)

    full.fit = marked_fit
    backward = Fabric.backward

    def marked_backward(fabric, *args, **kwargs):
        mark("backward")
        out = backward(fabric, *args, **kwargs)
        mark("backward_end")
        return out

    Fabric.backward = marked_backward

    def before_step(_optimizer, _args, _kwargs) -> None:
        mark("step")

    def after_step(_optimizer, _args, _kwargs) -> None:
        mark("step_end")
        state["steps"] += 1
        if state["steps"] >= TRACKED and state["tracker"] is not None and not state["done"]:
            state["tracker"].stop()
            state["done"] = True
            print(f"{PHASES_PREFIX} rank {rank}: {json.dumps(state['marks'])}", flush=True)

    # The final checkpoint is not measured, and gathering FSDP's full state dict on CPU ranks
    # crashes in torch 2.13 (a segmentation fault in a clone of the gathered flat parameter).
    Fabric.save = lambda fabric, *args, **kwargs: None
    rank = first_int(RANK_VARIABLES, 0)
    zero_grad = torch.optim.Optimizer.zero_grad

    def marked_zero_grad(optimizer, *args, **kwargs):
        out = zero_grad(optimizer, *args, **kwargs)
        mark("zero_grad_end")
        return out

    torch.optim.Optimizer.zero_grad = marked_zero_grad
    register_optimizer_step_pre_hook(before_step)
    register_optimizer_step_post_hook(after_step)
    from litgpt.__main__ import main as litgpt_main

    sys.argv = ["litgpt", *argv]
    litgpt_main()
    if not state["done"]:
        raise SystemExit(f"rank {rank}: fewer than {TRACKED} optimizer steps ran; nothing measured")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
