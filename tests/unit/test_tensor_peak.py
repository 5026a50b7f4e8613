"""The CPU tensor-bytes tracker (apps.tensor_peak) shared by the torch-parallel rank program and
the LitGPT rank program (apps/litgpt/rank.py): it sees a known allocation, and once stopped it
intercepts nothing; the rank program's
start at the model's build and stop after the second optimizer step."""

import pytest
import torch
from scalestudy.apps.litgpt import rank as litgpt_entry
from scalestudy.apps.tensor_peak import TensorPeak, malloc_held, mkl_pool
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

MB = 10**6
held = malloc_held()
pytestmark = pytest.mark.skipif(held is None, reason="no glibc mallinfo2 here")


class Counting(TensorPeak):
    """A tracker that counts the ops it intercepts."""

    def __init__(self, held):
        super().__init__(held)
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return super().__torch_dispatch__(func, types, args, kwargs)


def test_a_100_mb_tensor_raises_the_peak_by_100_mb_and_freeing_it_keeps_the_peak():
    with TensorPeak(held) as tracker:
        x = torch.ones(25 * MB, dtype=torch.float32)  # 100 MB
        del x
    assert tracker.peak == pytest.approx(100 * MB, rel=0.05)
    assert not tracker.active


def test_the_baseline_is_what_malloc_held_when_the_tracker_was_made():
    kept = torch.ones(25 * MB // 2, dtype=torch.float32)  # 50 MB held before: not counted
    tracker = TensorPeak(held).start()
    y = kept * 2  # 50 MB more
    tracker.stop()
    assert tracker.peak == pytest.approx(50 * MB, rel=0.05)
    del kept, y


def test_after_stop_no_op_is_intercepted():
    tracker = Counting(held).start()
    torch.ones(1000).sum()
    tracker.stop()
    ops, peak = tracker.ops, tracker.peak
    assert ops >= 2 and _get_current_dispatch_mode() is None
    z = torch.ones(25 * MB)
    z.mul_(2)
    assert (tracker.ops, tracker.peak) == (ops, peak)
    tracker.stop()  # a second stop does nothing


def test_stop_refuses_when_another_mode_is_on_top():
    tracker = TensorPeak(held).start()
    try:
        with TorchDispatchMode(), pytest.raises(RuntimeError, match="innermost"):
            tracker.stop()
        assert tracker.active
    finally:
        tracker.stop()
    assert _get_current_dispatch_mode() is None


def test_litgpt_entry_tracks_from_the_models_build_through_two_optimizer_steps():
    from lightning.fabric import Fabric

    original = Fabric.init_module
    state = litgpt_entry.track_tensor_peak()
    try:
        fabric = Fabric(accelerator="cpu", devices=1)
        assert state["tracker"] is None  # nothing tracked before the build
        with fabric.init_module():
            model = torch.nn.Linear(2000, 2500)  # 20 MB of fp32 weights
        tracker = state["tracker"]
        assert tracker.active
        optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
        for step in range(3):
            model(torch.ones(8, 2000)).sum().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            # Tracking ends with the second step; the third runs with no mode on.
            assert tracker.active == (step == 0)
        # Weights, gradients, AdamW's two moments (80 MB) and its per-tensor step's two
        # temporaries of the weight's size (sqrt, then div: 40 MB), measured 137 MB here.
        assert 120 * MB <= tracker.peak < 160 * MB
        assert _get_current_dispatch_mode() is None
        assert Fabric.init_module is original
    finally:
        if state["tracker"] is not None:
            state["tracker"].stop()
        Fabric.init_module = original


def test_mkls_own_gemm_buffers_are_not_counted_as_tensors():
    pool = mkl_pool()
    if pool is None:
        pytest.skip("torch here is built without MKL")
    import ctypes
    from pathlib import Path

    # Empty MKL's pool first, so that the product below allocates its packing buffer anew.
    ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")).mkl_serv_free_buffers()
    x, w = torch.ones(512, 256), torch.ones(256, 2048)
    with TensorPeak(held) as tracker:
        y = x @ w  # 4.2 MB of output; MKL keeps a buffer of about 6.7 MB besides (torch 2.13)
    assert pool() > 1 * MB
    assert tracker.peak == pytest.approx(y.untyped_storage().nbytes(), rel=0.1)
