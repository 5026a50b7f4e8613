"""What every MPI rank of a LitGPT point runs: the stock `litgpt` CLI, plus two things.

1. A CPU-capable strategy for full fine-tuning. `litgpt finetune_full` always
   picks FSDP for more than one device, and FSDP refuses to run on CPU
   ("FSDP is only available on GPU"). Without CUDA we hand it DDP over gloo,
   which is what data-parallel training on CPU ranks is. With CUDA nothing is
   changed: the GPU path stays stock LitGPT.
2. A peak host-memory line per rank (LitGPT reports memory only for CUDA), so
   CPU runs get a memory figure measured by the OS, not guessed.

Usage: python -m scalestudy.apps.litgpt_entry finetune_full <litgpt arguments>
"""

from __future__ import annotations

import resource
import sys

from ..model.rank_probe import RANK_VARIABLES, first_int

# The per-rank line: "scalestudy: peak host memory rank 0: 589312 KiB" (getrusage's unit).
PEAK_RSS_PREFIX = "scalestudy: peak host memory"
PEAK_RSS_UNIT = "KiB"


def use_cpu_capable_strategy() -> bool:
    import torch

    if torch.cuda.is_available():
        return False
    import litgpt.finetune.full as full
    from lightning.fabric.strategies import DDPStrategy

    full.FSDPStrategy = lambda **_fsdp_options: DDPStrategy(process_group_backend="gloo")
    return True


def main(argv: list[str]) -> int:
    if argv and argv[0] == "finetune_full" and use_cpu_capable_strategy():
        print("scalestudy: no CUDA device; finetune_full uses DDP (gloo) instead of FSDP", flush=True)
    from litgpt.__main__ import main as litgpt_main

    sys.argv = ["litgpt", *argv]
    try:
        litgpt_main()
    finally:
        # ru_maxrss as the kernel gives it (KiB on Linux); the parser converts it (apps.litgpt).
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"{PEAK_RSS_PREFIX} rank {first_int(RANK_VARIABLES, 0)}: {peak_kib} {PEAK_RSS_UNIT}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
