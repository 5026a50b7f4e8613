"""What autograd saves for the backward of a model's forward, counted on torch's meta device
(shapes and dtypes only: nothing of the model is allocated, a 70B model counts in about a
second). Used by the apps' memory models (model.memory); torch is imported inside the
functions, so planning a sweep without a training point never loads it.

Counted: every storage a saved-tensor hook sees that is not a parameter or buffer (a view
counts its whole storage once: it keeps it alive), and what the caller keeps besides (the
logits a training loop holds until its backward). Attention: the fused kernel a GPU (and
torch on CPU) runs for `scaled_dot_product_attention` saves its inputs, its output and a
float32 log-sum-exp per row, never the s x s scores (with an additive mask, e.g. LitGPT's
sliding window, a GPU runs the memory-efficient kernel, which keeps the mask beside them);
on the meta device torch would pick the math kernel, so the count replaces the call by one
that saves what the fused kernel saves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model.paths import user_cache_dir

# A count depends on the code that counts and on the libraries whose models it counts.
COUNTED_WITH = ("torch", "litgpt")


def kept_on_disk(result_type: type, *sources: Path) -> Callable:
    """A count that imports torch and LitGPT (seconds of every planning, most of it LitGPT's
    import of Lightning) kept per user (model.paths.user_cache_dir) under its arguments, the
    versions of COUNTED_WITH and the text of `sources` (the counting code): a planning that
    counts a shape counted before imports neither. `result_type`: a dataclass of plain values.
    A cache that cannot be read or written is counted past, never trusted half-written."""

    def decorate(function: Callable) -> Callable:
        path = user_cache_dir() / f"{function.__name__}.json"

        @functools.lru_cache(maxsize=1024)
        def cached(*args: Any) -> Any:
            versions = []
            for name in COUNTED_WITH:
                try:
                    versions.append(importlib.metadata.version(name))
                except importlib.metadata.PackageNotFoundError:
                    versions.append(None)
            code = hashlib.sha256(b"".join(source.read_bytes() for source in sources)).hexdigest()
            key = hashlib.sha256(repr((args, versions, code)).encode()).hexdigest()
            try:
                store = json.loads(path.read_text())
            except (OSError, ValueError):
                store = {}
            if isinstance(store, dict) and isinstance(store.get(key), dict):
                with contextlib.suppress(TypeError):
                    return result_type(**store[key])
            result = function(*args)
            store = store if isinstance(store, dict) else {}
            store[key] = dataclasses.asdict(result)
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                temporary = path.with_name(f"{path.name}.{os.getpid()}")
                temporary.write_text(json.dumps(store))
                os.replace(temporary, path)
            return result

        return cached

    return decorate


@dataclass(frozen=True)
class Saved:
    """Bytes autograd keeps after a forward: in all, in each block (a checkpointing unit),
    the inputs of each block, and the largest single storage."""

    total: int
    blocks: tuple[int, ...] = ()
    block_inputs: tuple[int, ...] = ()
    largest: int = 0

    def checkpointed(self) -> int:
        """Bytes kept when each block is checkpointed: everything outside the blocks, each
        block's inputs, and one block's own (recomputed in its backward)."""
        return self.total - sum(self.blocks) + sum(self.block_inputs) + max(self.blocks, default=0)


@contextlib.contextmanager
def fused_attention():
    """`scaled_dot_product_attention` replaced by one that saves what the fused (flash /
    memory-efficient) kernel saves: q, k, v, the output and a float32 log-sum-exp, and a mask
    where one is given (the memory-efficient kernel takes additive masks: a GPU runs LitGPT's
    sliding-window attention there; Mistral-7B-v0.1, with a 4096-token window, and v0.2,
    without one, peak at the same 20.66 GB in LitGPT's config_hub table)."""
    import torch
    import torch.nn.functional as F

    class FusedAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, mask):
            out = q.new_empty((*q.shape[:-1], v.shape[-1]))
            extra = (mask,) if mask is not None else ()
            ctx.save_for_backward(q, k, v, out, q.new_empty(q.shape[:-1], dtype=torch.float32), *extra)
            return out

        @staticmethod
        def backward(ctx, grad):  # pragma: no cover - counting never runs a backward
            raise RuntimeError("the attention stand-in only counts what is saved")

    def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        kind = q.device.type
        if kind in ("cpu", "cuda") and torch.is_autocast_enabled(kind):
            # The kernel is on autocast's lower-precision list: it runs on (and keeps) 16-bit
            # casts of float32 inputs, as the stand-in, a Python function autocast never sees, must.
            low = torch.get_autocast_dtype(kind)
            q, k, v = (t.to(low) if t.dtype == torch.float32 else t for t in (q, k, v))
        return FusedAttention.apply(q, k, v, attn_mask)

    original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = attention
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


def count_saved(forward: Callable[[], Iterable[Any]], held: Iterable[Any], blocks: Sequence[Any] = ()) -> Saved:
    """Run `forward` (on meta tensors) and count what autograd saves; `held`: the tensors that
    are there anyway (parameters, buffers); `blocks`: modules whose saved bytes and inputs are
    counted apart (checkpointing units). `forward` returns the tensors the caller keeps."""
    import torch

    skip = {t.untyped_storage()._cdata for t in held}
    seen: dict[int, tuple[int, Any]] = {}
    current: list[int] = []
    per_block: list[int] = []
    inputs: list[int] = []

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key not in skip and key not in seen:
            seen[key] = (storage.nbytes(), tensor)  # the tensor keeps its storage (and key) alive
            if current:
                current[-1] += storage.nbytes()
        return tensor

    def before(module, args):
        current.append(0)
        inputs.append(
            sum(a.untyped_storage().nbytes() for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
        )

    def after(module, args, output):
        per_block.append(current.pop())

    hooks = [h for b in blocks for h in (b.register_forward_pre_hook(before), b.register_forward_hook(after))]
    try:
        with fused_attention(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            kept = list(forward())
    finally:
        for hook in hooks:
            hook.remove()
    for tensor in kept:
        storage = tensor.untyped_storage()
        if storage._cdata not in skip and storage._cdata not in seen:
            seen[storage._cdata] = (storage.nbytes(), tensor)
    sizes = [n for n, _ in seen.values()]
    return Saved(sum(sizes), tuple(per_block), tuple(inputs), max(sizes, default=0))
