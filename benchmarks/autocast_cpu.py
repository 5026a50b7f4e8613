"""What LitGPT's training step really keeps under autocast, measured on CPU (bfloat16 and float16
autocast both run on CPU): LitGPT's own GPT (litgpt.GPT, litgpt.lora.GPT with finetune_lora's
adapters and head chunks), random weights, driven through Lightning's own precision plugins
(MixedPrecision: autocast and, for 16-mixed, its GradScaler; HalfPrecision for the -true
settings) as Fabric drives them in LitGPT's finetune scripts: the forward in the plugin's
forward context, its output converted (float32 logits), LitGPT's chunked cross-entropy, the
backward through the plugin (the scaler's scaled loss), AdamW's step through the plugin.

Two figures per run (bytes):

- saved: what autograd saves for the backward (saved-tensor hooks, each storage once, the
  parameters and buffers left out) plus the logits the loop keeps; `cast copies`: the part of
  it that is autocast's low-precision copies of parameters (the outputs of `_to_copy` of a
  parameter, seen by a dispatch mode).
- peak: the CPU allocator's peak over two training steps (torch's profiler with
  profile_memory: every allocation and free of c10's CPU allocator, in order, intra-op
  workspaces included: the CPU's max_memory_allocated), plus what was live before (the weights,
  buffers and the batch). oneDNN's own scratch is not c10's and is not in it.

Used by benchmarks/memory_autocast.py (which prints each ratio to the memory model) and to record
tests/data/memory_autocast_cpu.json (the unit tests' measured numbers):

    python benchmarks/autocast_cpu.py --record tests/data/memory_autocast_cpu.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.apps.litgpt.app import LM_HEAD_CHUNK, LORA_SETTINGS  # noqa: E402

# Small LitGPT shapes of the two families the published tables hold: Llama (RMSNorm, gated
# MLP, sequential residual) and GPT-NeoX/StableLM (LayerNorm, parallel residual, GELU MLP).
SHAPES = {
    "llama": {"name": "cpu-llama", "block_size": 1024, "vocab_size": 4096, "padded_vocab_size": 4096,
              "n_layer": 2, "n_head": 4, "n_embd": 256, "rotary_percentage": 1.0, "parallel_residual": False,
              "bias": False, "norm_class_name": "RMSNorm", "mlp_class_name": "LLaMAMLP",
              "intermediate_size": 688},
    "neox": {"name": "cpu-neox", "block_size": 1024, "vocab_size": 4096, "padded_vocab_size": 4096,
             "n_layer": 2, "n_head": 4, "n_embd": 256, "rotary_percentage": 0.25, "parallel_residual": True,
             "bias": True, "norm_class_name": "LayerNorm", "mlp_class_name": "GptNeoxMLP",
             "intermediate_size": 1024},
}  # fmt: skip
# (shape, method, precision, micro batch, tokens): each precision at each shape, two sequence
# lengths (1 and 3 head chunks of LM_HEAD_CHUNK for LoRA), two micro batches.
PRECISIONS = ("bf16-true", "bf16-mixed", "16-mixed", "32-true")
CASES = [
    (shape, method, precision, micro, tokens)
    for shape in SHAPES
    for method in ("lora", "full")
    for precision in PRECISIONS
    for micro, tokens in ((1, 128), (2, 384))
]


def plugin_of(precision: str):
    """Lightning's precision plugin for `precision` on CPU, as Fabric would pick it on a GPU
    (Fabric itself turns 16-mixed into bf16-mixed on CPU: the plugin is made directly)."""
    from lightning.fabric.plugins.precision import HalfPrecision, MixedPrecision, Precision

    if precision.endswith("-mixed"):
        return MixedPrecision(precision, device="cpu")
    if precision in ("bf16-true", "16-true"):
        return HalfPrecision(precision)
    return Precision()


def measure(shape: str, method: str, precision: str, micro_batch: int, tokens: int, seed: int = 0) -> dict:
    """One LitGPT training set-up on CPU: saved bytes and cast copies of the first forward, and
    the allocator's peak over two steps (see the module's docstring)."""
    import torch
    from litgpt.utils import chunked_cross_entropy
    from torch.profiler import ProfilerActivity, profile
    from torch.utils._python_dispatch import TorchDispatchMode

    torch.manual_seed(seed)
    config_dict = SHAPES[shape]
    if method == "lora":
        from litgpt.lora import GPT, Config, mark_only_lora_as_trainable

        config = Config(**{**config_dict, **LORA_SETTINGS})
    else:
        from litgpt import GPT, Config

        config = Config(**config_dict)
    plugin = plugin_of(precision)
    with plugin.module_init_context():
        model = GPT(config)
    model = plugin.convert_module(model)
    if method == "lora":
        mark_only_lora_as_trainable(model)
    model.max_seq_length = tokens
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randint(0, config.padded_vocab_size, (micro_batch, tokens))
    held = [*model.parameters(), *model.buffers()]
    param_storages = {p.untyped_storage()._cdata for p in held}

    def forward():
        with plugin.forward_context():
            if method == "lora":
                out = model(batch, lm_head_chunk_size=LM_HEAD_CHUNK)
            else:
                out = model(batch)
        logits = plugin.convert_output(out)
        if method == "lora":
            logits[-1] = logits[-1][..., :-1, :]
            loss = chunked_cross_entropy(logits, batch[..., 1:])
        else:
            loss = chunked_cross_entropy(logits[..., :-1, :], batch[..., 1:])
        return logits, loss

    casts: set[int] = set()
    # Every cast kept alive through the counting forward: a freed copy's storage address could
    # be taken by a later activation and miscounted as a copy.
    cast_tensors: list = []

    class CastCopies(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._to_copy.default and args[0].untyped_storage()._cdata in param_storages:
                casts.add(out.untyped_storage()._cdata)
                cast_tensors.append(out)
            return out

    saved: dict[int, tuple[int, object]] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage._cdata not in param_storages and storage._cdata not in saved:
            saved[storage._cdata] = (storage.nbytes(), tensor)
        return tensor

    with CastCopies(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits, loss = forward()
    kept = logits if isinstance(logits, list) else [logits]
    for tensor in kept:
        storage = tensor.untyped_storage()
        saved.setdefault(storage._cdata, (storage.nbytes(), tensor))
    saved_bytes = sum(n for n, _ in saved.values())
    cast_bytes = sum(n for key, (n, _) in saved.items() if key in casts)
    del logits, loss, kept
    saved.clear()
    cast_tensors.clear()

    def train_step():
        logits, loss = forward()
        plugin.backward(loss, model)
        plugin.optimizer_step(optimizer)
        optimizer.zero_grad(set_to_none=True)

    live_before = sum({p.untyped_storage()._cdata: p.untyped_storage().nbytes() for p in held}.values())
    live_before += batch.untyped_storage().nbytes()
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step()
        train_step()
    seconds = time.perf_counter() - started
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    running = peak = 0
    for _, nbytes in events:
        running += nbytes
        peak = max(peak, running)
    return {
        "shape": shape,
        "method": method,
        "precision": precision,
        "micro_batch": micro_batch,
        "tokens": tokens,
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "saved_bytes": saved_bytes,
        "cast_copy_bytes": cast_bytes,
        "peak_bytes": live_before + peak,
        "weights_bytes": live_before - batch.untyped_storage().nbytes(),
        "seconds": round(seconds, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, help="write every case's measurement to this JSON file")
    parser.add_argument("--only", default="", help="cases whose 'shape method precision' contains this")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    rows = []
    for case in CASES:
        if args.only and args.only not in " ".join(map(str, case)):
            continue
        row = measure(*case)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.record:
        from importlib.metadata import version

        import lightning
        import litgpt  # noqa: F401

        args.record.write_text(
            json.dumps(
                {
                    "source": "benchmarks/autocast_cpu.py (LitGPT's GPT on CPU through Lightning's precision plugins)",
                    "versions": {
                        "torch": torch.__version__,
                        "litgpt": version("litgpt"),
                        "lightning": lightning.__version__,
                    },  # fmt: skip
                    "shapes": SHAPES,
                    "lora": LORA_SETTINGS,
                    "lm_head_chunk": LM_HEAD_CHUNK,
                    "cases": rows,
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
