"""The peak of the bytes CPU tensors hold, measured inside a rank (torch imported at the top:
only rank programs load this, never planning).

On a GPU, CUDA's max allocated counts tensor bytes; on CPU the nearest figure the OS gives is
max RSS, which also holds the Python and torch runtime, allocator arenas and pages malloc has
freed but the kernel has left mapped. torch's CPU tensors come from malloc, so the bytes malloc
holds in its chunks (glibc's `mallinfo2`: in use in its heap plus its mmapped chunks), sampled
after every op, follow what tensors hold, less what MKL's memory manager keeps in malloc for
itself (`mkl_pool`: the GEMM packing buffers it allocates on the first matrix product of each
size class and keeps for the process's life; 11 MB on the local LitGPT stand-in, measured
with a tracker of every live tensor storage, docs/MEMORY.md). Used by the torch-parallel rank program and
`litgpt.rank` (LitGPT on CPU ranks); the memory model's CPU prediction is held to it
(docs/MEMORY.md).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode


class MallocInfo(ctypes.Structure):
    """glibc's struct mallinfo2 (malloc.h)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
        + ("keepcost",)
    ]


def mkl_pool() -> Callable[[], int] | None:
    """Bytes MKL's memory manager holds now (its `mkl_mem_stat`), or None where torch was built
    without MKL (torch's x86 wheels link it into libtorch_cpu, where its symbols are local to
    that library: they are looked up there, not among the process's own).

    MKL's GEMM allocates its packing buffers with malloc on the first product of each size
    class and keeps them in its pool after the call (MKL's "fast memory manager"; with
    MKL_DISABLE_FAST_MM=1 they are freed after each call and the bytes malloc holds after a
    product grow by its output only). They are the BLAS library's workspace, not tensors:
    5.4 MB for a (512 x 256) @ (256 x 768) product, 5.7 MB more for one with 1024 columns,
    6.7 MB for 2048 (torch 2.13, MKL 2024.2, one thread), a few tens of MB at most however
    large the model, so the CPU runtime (model.memory.TORCH_CPU_RUNTIME_BYTES) covers them."""
    library = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    try:
        mkl = ctypes.CDLL(str(library))
    except OSError:
        return None
    for name in ("MKL_Mem_Stat", "mkl_serv_mem_stat"):  # the public name, or its implementation's
        stat = getattr(mkl, name, None)
        if stat is not None:
            break
    else:
        return None
    stat.restype = ctypes.c_int64
    stat.argtypes = [ctypes.POINTER(ctypes.c_int)]
    buffers = ctypes.c_int(0)

    def pool() -> int:
        return int(stat(ctypes.byref(buffers)))

    return pool


def malloc_held() -> Callable[[], int] | None:
    """Bytes held in malloc's chunks now (in use in its heap plus its mmapped chunks: what CPU
    tensors occupy, not what the kernel has left mapped, as RSS is) less MKL's own pool
    (`mkl_pool`), or None without glibc."""
    try:
        # The process's own symbols (libc among them): ctypes.util.find_library would start
        # ldconfig in every rank to find the same library.
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MallocInfo
    except (OSError, AttributeError):
        return None
    blas = mkl_pool() or (lambda: 0)

    def held() -> int:
        info = libc.mallinfo2()
        return info.uordblks + info.hblkhd - blas()

    return held


class Passthrough(TorchDispatchMode):
    """A dispatch mode that only runs each op."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def warm_up_dispatch() -> None:
    """Run one op under a Python dispatch mode: the first such op in a process imports what
    torch's mode machinery needs (about 800 modules, 24 MB of malloc with torch 2.13), which
    is code, not tensors, and must be held before a baseline is taken."""
    import torch

    with Passthrough():
        torch.empty(1).add_(1)


class TensorPeak(TorchDispatchMode):
    """The peak, over every op run inside it, of the bytes malloc holds above what it held when
    the tracker was made (the baseline: the runtime, imports and whatever the process held
    before the model's build): on CPU the peak of the bytes tensors hold, as CUDA's max
    allocated counts them on a GPU. Sampled after each op.

    Used as a context manager around a stretch of code, or `start()`ed and `stop()`ped where
    the stretch is not one block of the caller's code (LitGPT's first optimizer steps): after
    `stop()` no op is intercepted, so what runs later pays nothing for it."""

    def __init__(self, held: Callable[[], int]) -> None:
        super().__init__()
        warm_up_dispatch()
        self.held = held
        self.start_bytes = held()
        self.peak = 0
        self.active = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, self.held() - self.start_bytes)
        return out

    def __enter__(self):
        self.active = True
        return super().__enter__()

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.active = False
        return super().__exit__(exc_type, exc_val, exc_tb)

    def start(self) -> TensorPeak:
        return self.__enter__()

    def stop(self) -> None:
        """Leave the mode (nothing if it is not on). torch pops the top of its mode stack
        whichever mode that is, so only a tracker on top may leave: anywhere outside an op's
        dispatch (e.g. an optimizer step hook) with no mode entered after it."""
        if not self.active:
            return
        if _get_current_dispatch_mode() is not self:
            raise RuntimeError(
                "TensorPeak.stop: another dispatch mode was entered after the tracker and is still on; "
                "stop the tracker where it is the innermost mode"
            )
        self.__exit__(None, None, None)
