"""Where a training step's time goes: `breakdown_steps` steps profiled with torch.profiler after
the timed ones (so the timed figure is measured without the profiler), each split into the parts
of torch_parallel.spec.PARTS by `step_parts` (which needs no torch; its tests run on plain spans).
"""

from __future__ import annotations

import contextlib
import statistics
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from ..spec import PARTS, REGION_PREFIX, STEP_REGION, Span, is_communication, step_parts

# Microseconds, the profiler's time unit, to seconds.
US = 1e-6


def spans(events: Any) -> list[Span]:
    """The profiler's events as plain spans (device kernels marked, and events nested inside a
    communication event: a collective's own copies are not compute)."""
    out = []
    for event in events:
        parent, inside = event.cpu_parent, False
        while parent is not None and not inside:
            inside, parent = is_communication(parent.name), parent.cpu_parent
        device = event.device_type != torch.autograd.DeviceType.CPU
        out.append(Span(event.name, event.thread, event.time_range.start, event.time_range.end, device, inside))
    return out


def profiled_parts(trainer: Any, x: torch.Tensor, y: torch.Tensor, steps: int, synchronize: Any) -> dict[str, float]:
    """The median over `steps` profiled steps (after one the profiler warms up on) of each part,
    of the step's wall time and of the communication in flight and hidden, in seconds."""
    activities = [ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    trainer.region = lambda name: record_function(REGION_PREFIX + name)
    try:
        with profile(
            activities=activities, schedule=schedule(wait=0, warmup=1, active=steps), acc_events=True
        ) as profiler:
            for _ in range(steps + 1):
                with record_function(REGION_PREFIX + STEP_REGION):
                    trainer.step(x, y)
                    synchronize(trainer.device)
                profiler.step()
    finally:
        trainer.region = no_region
    per_step = step_parts(spans(profiler.events()))
    names = [*PARTS, "step", "in_flight", "hidden"]
    if not per_step:
        return {name: float("nan") for name in names}
    return {name: statistics.median(step[name] for step in per_step) * US for name in names}


def no_region(name: str) -> contextlib.nullcontext:
    """Outside the profiled steps a region is nothing (one call per part per step)."""
    return contextlib.nullcontext()
