"""Collective and point-to-point communication over message sizes (OSU's protocol, nccl-tests'
bandwidths): the operations MPI flag sets and NCCL settings act on, measured directly.

Backends: `mpi` (mpi4py), `gloo` (torch.distributed on CPU), `nccl` (torch.distributed on
CUDA buffers, `device: cuda`). The rank program is rank.py beside it (its docstring defines
every column); a run records its whole size table (figures `size_table`, one row per size)
beside its scalar figures: the latency at the smallest message (primary) and the bus
bandwidth at the largest. The analysis of curves over message size is scalestudy.analysis.sizes.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...model.memory import Need, buffers_need
from ...model.metrics import SIZE_COLUMN, SIZE_TABLE, declare
from ...model.paths import Layout
from ...model.point import Point
from ...model.rank_probe import rank_lines
from ..base import App, Param, ParseError, table_and_summary
from . import rank as collectives_rank

NUMBER = r"([0-9.]+(?:e[+-]?\d+)?|nan|inf)"
# size_bytes count latency_avg_us latency_min_us latency_max_us algbw_GBps busbw_GBps
ROW = re.compile(rf"^(\d+) (\d+) {NUMBER} {NUMBER} {NUMBER} {NUMBER} {NUMBER}$", re.M)
NCCL_WITHOUT_GPU = "backend nccl needs CUDA GPUs, and this job sees none (torch.cuda.is_available() is False)"
TORCH_MISSING = "backend {backend} needs torch (torch.distributed), which this job's Python cannot import"

SIZE_FIGURES = (
    declare("latency_avg_us", "latency per call (average over ranks)", "us", "time"),
    declare("busbw_GBps", "bus bandwidth (nccl-tests: algbw × bus factor)", "GB/s", "rate", extensive=False),
    declare("algbw_GBps", "algorithm bandwidth (message size / latency)", "GB/s", "rate", extensive=False),
    declare("latency_min_us", "latency per call (fastest rank)", "us", "time"),
    declare("latency_max_us", "latency per call (slowest rank)", "us", "time"),
)


def parse_collectives(log_text: str) -> dict[str, Any]:
    table, summary = table_and_summary(
        log_text, collectives_rank.TABLE_HEADER, collectives_rank.SUMMARY_PREFIX, "collectives"
    )
    rows = [
        dict(zip(collectives_rank.COLUMNS, (int(size), int(count), *map(float, rest)), strict=True))
        for size, count, *rest in ROW.findall(table)
    ]
    if not rows:
        raise ParseError("the collectives table has no rows")
    smallest, largest = rows[0], rows[-1]
    ranks = rank_lines(log_text)
    figures = {
        "collective_latency_us": smallest["latency_avg_us"],
        "latency_size_bytes": smallest[SIZE_COLUMN],
        "sizes_measured": len(rows),
        "bus_factor": summary["bus_factor"],
        "iterations": summary["iterations"],
        "hosts_seen": len({r["host"] for r in ranks}) or len(summary.get("hosts", [])),
        "ranks_reported": len(ranks),
        SIZE_TABLE: [{k: v for k, v in row.items() if k != "count"} for row in rows],
    }
    if summary["bus_factor"] > 0:
        figures.update(collective_busbw_GBps=largest["busbw_GBps"], bandwidth_size_bytes=largest[SIZE_COLUMN])
    return figures


def values(value: Any) -> list[Any]:
    """A param's values: an axis's list, or the one value."""
    return value if isinstance(value, list) else [value]


class Collectives(App):
    name = "collectives"
    packages = ("mpi4py", "numpy", "torch")
    primary_metric = "collective_latency_us"
    metrics = (
        declare("collective_latency_us", "latency at the smallest message (average over ranks)", "us", "time"),
        declare("collective_busbw_GBps", "bus bandwidth at the largest message", "GB/s", "rate", extensive=False),
    )
    size_figures = tuple(m.name for m in SIZE_FIGURES)
    # Each backend against MPI at the same scale, flag set and operation.
    compared = {"backend": "mpi"}
    params = {
        "operation": Param(
            str, choices=collectives_rank.OPERATIONS, default="allreduce", help="the collective, or latency/bw/bibw"
        ),
        "backend": Param(str, choices=collectives_rank.BACKENDS, default="mpi", help="mpi4py, or torch.distributed's"),
        "device": Param(str, choices=("cpu", "cuda"), default="cpu", help="where the buffers live (cuda: nccl only)"),
        "min_bytes": Param(int, minimum=1, default=4, help="smallest message size in bytes (nccl-tests' size)"),
        "max_bytes": Param(int, minimum=1, default=1 << 20, help="largest message size in bytes"),
        "iterations": Param(int, minimum=1, default=100, help="timed calls per size"),
        "warmup": Param(int, minimum=0, default=10, help="untimed calls per size before timing"),
        "dtype": Param(str, choices=tuple(collectives_rank.DTYPES), default="float32", help="element type"),
    }

    def param_problems(self, params: Mapping[str, Any]) -> list[str]:
        problems = super().param_problems(params)
        if problems:
            return problems
        get = {name: values(params.get(name, spec.default)) for name, spec in self.params.items()}
        for low, high in itertools.product(get["min_bytes"], get["max_bytes"]):
            if low > high:
                problems.append(f"params.min_bytes: {low} is larger than max_bytes {high}; allowed: ≤ max_bytes")
        for backend, device in itertools.product(get["backend"], get["device"]):
            if (backend == "nccl") != (device == "cuda"):
                problems.append(
                    f"params.device: {device} with backend {backend}; allowed: device cuda with backend nccl,"
                    " device cpu with mpi or gloo"
                )
        for low, dtype in itertools.product(get["min_bytes"], get["dtype"]):
            if low < collectives_rank.DTYPES[dtype]:
                problems.append(
                    f"params.min_bytes: {low} is less than one {dtype} ({collectives_rank.DTYPES[dtype]} bytes);"
                    f" allowed: ≥ {collectives_rank.DTYPES[dtype]}"
                )
        return list(dict.fromkeys(problems))

    def preflight(self, point: Point) -> list[str]:
        if point.ranks < 2:
            return [
                f"nodes: collectives needs at least 2 ranks, got nodes={point.nodes} x "
                f"ranks_per_node={point.ranks_per_node} = {point.ranks}"
            ]
        operation = self.setting(point, "operation")
        if operation in collectives_rank.PARTITIONED:
            dtype, largest = self.setting(point, "dtype"), self.setting(point, "max_bytes")
            least = collectives_rank.DTYPES[dtype] * point.ranks
            if largest < least:
                return [
                    f"params.max_bytes: {largest} holds less than one {dtype} per rank for {operation} on "
                    f"{point.ranks} ranks; allowed: ≥ {least}"
                ]
        return []

    def memory(self, point: Point, figures: Mapping[str, Any] | None = None) -> Need:
        """The message buffers a rank holds at max_bytes (collectives_rank.buffer_messages)."""
        largest = self.setting(point, "max_bytes")
        messages = collectives_rank.buffer_messages(
            self.setting(point, "operation"), self.setting(point, "backend"), point.ranks
        )
        return buffers_need(messages * largest, "max_bytes", largest, self.setting(point, "device") == "cuda")

    def missing_software(self, point: Point) -> str | None:
        backend = self.setting(point, "backend")
        if backend == "mpi":
            return None
        if importlib.util.find_spec("torch") is None:
            return TORCH_MISSING.format(backend=backend)
        if backend == "nccl":
            import torch

            if not torch.cuda.is_available():
                return NCCL_WITHOUT_GPU
        return None

    def how_to_fix(self, reason: str) -> str | None:
        if reason == NCCL_WITHOUT_GPU:
            return "run the nccl points on GPU nodes (gpus_per_node, a GPU queue); on CPU use backend gloo or mpi"
        return None

    def loads_mpi4py(self, point: Point) -> bool:
        return True  # every backend's ranks meet through mpi4py's COMM_WORLD (collectives_rank.main)

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        command = [sys.executable, str(Path(collectives_rank.__file__).resolve())]
        for name in self.params:
            command += [f"--{name.replace('_', '-')}", str(self.setting(point, name))]
        return command

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        return parse_collectives(log_text)
