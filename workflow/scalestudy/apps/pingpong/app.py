"""MPI ping-pong (OSU-style latency and bandwidth between rank 0 and the last rank).

The cheapest real MPI job: it shows which hosts ran, which MPI/NCCL settings
reached every rank, and what the interconnect between the two end ranks does.
It is the process the fault tests kill, starve and misconfigure, and the app
of the scheduler tests. The rank program is rank.py beside it; the line per rank
with its host and settings comes from rank_probe.py, which runs in front of every
app's ranks.
"""

from __future__ import annotations

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
from . import rank as pingpong_rank

# The columns of its size table (figures[SIZE_TABLE]), one row per message size.
SIZE_FIGURES = (
    declare("oneway_latency_us", "one-way latency (half the mean round trip)", "us", "time"),
    declare("pingpong_bandwidth_MBps", "ping-pong bandwidth (bytes / one-way time)", "MB/s", "rate", extensive=False),
)
ROW = re.compile(r"^(\d+) ([0-9.]+(?:e[+-]?\d+)?) ([0-9.]+(?:e[+-]?\d+)?|inf)$", re.M)


def parse_pingpong(log_text: str) -> dict[str, Any]:
    table, summary = table_and_summary(log_text, pingpong_rank.TABLE_HEADER, pingpong_rank.SUMMARY_PREFIX, "ping-pong")
    rows = [(int(s), float(lat), float(bw)) for s, lat, bw in ROW.findall(table)]
    if not rows:
        raise ParseError("the ping-pong table has no rows")
    smallest, largest = min(rows), max(rows)
    ranks = rank_lines(log_text)
    return {
        "latency_us": smallest[1],
        "latency_size_bytes": smallest[0],
        "bandwidth_MBps": largest[2],
        "bandwidth_size_bytes": largest[0],
        "sizes_measured": len(rows),
        "iterations": summary["iterations"],
        "hosts_seen": len({r["host"] for r in ranks}) or len(summary.get("hosts", [])),
        "ranks_reported": len(ranks),
        SIZE_TABLE: [
            dict(zip((SIZE_COLUMN, *(m.name for m in SIZE_FIGURES)), row, strict=True)) for row in sorted(rows)
        ],
    }


class PingPong(App):
    name = "pingpong"
    breakdown_note = "a ping-pong is communication by definition: its whole time is the exchange"
    packages = ("mpi4py",)
    primary_metric = "latency_us"
    size_figures = tuple(m.name for m in SIZE_FIGURES)
    metrics = (
        declare("latency_us", "one-way latency at the smallest message (half the mean round trip)", "us", "time"),
        declare("bandwidth_MBps", "ping-pong bandwidth at the largest message (bytes / one-way time)", "MB/s", "rate"),
    )
    params = {
        "min_bytes": Param(int, minimum=1, help="smallest message size in bytes", default=1),
        "max_bytes": Param(int, minimum=1, help="largest message size in bytes", default=1 << 20),
        "iterations": Param(int, minimum=1, help="timed round trips per size", default=1000),
        "warmup": Param(int, minimum=0, help="untimed round trips per size before timing", default=100),
    }

    def param_problems(self, params):
        problems = super().param_problems(params)
        low = params.get("min_bytes", self.params["min_bytes"].default)
        high = params.get("max_bytes", self.params["max_bytes"].default)
        if not problems and not any(isinstance(v, list) for v in (low, high)) and low > high:
            problems.append(f"params.min_bytes: {low} is larger than max_bytes {high}")
        return problems

    def preflight(self, point: Point) -> list[str]:
        if point.ranks < 2:
            return [
                f"nodes: ping-pong needs at least 2 ranks, got nodes={point.nodes} x "
                f"ranks_per_node={point.ranks_per_node} = {point.ranks}"
            ]
        return []

    def memory(self, point: Point, figures: Mapping[str, Any] | None = None) -> Need:
        """The two message buffers (send, receive) a rank holds at max_bytes (pingpong_rank.ping_pong)."""
        largest = self.setting(point, "max_bytes")
        return buffers_need(2 * largest, "max_bytes", largest, on_gpu=False)

    def loads_mpi4py(self, point: Point) -> bool:
        return True

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        command = [sys.executable, str(Path(pingpong_rank.__file__).resolve())]
        for name in ("min_bytes", "max_bytes", "iterations", "warmup"):
            command += [f"--{name.replace('_', '-')}", str(self.setting(point, name))]
        return command

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        return parse_pingpong(log_text)
