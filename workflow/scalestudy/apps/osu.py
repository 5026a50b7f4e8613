"""What the OSU-style rank programs (pingpong/rank.py, collectives/rank.py) share: the message
sizes of a sweep and the name of the host a rank runs on.

Standard library only, like the rank programs that import it: they run by path on any node
without the package on PYTHONPATH, and then import this module from the folder above theirs.
"""

from __future__ import annotations

import os
import socket


def host_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def message_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from min_bytes up, and max_bytes itself (as osu_latency)."""
    sizes, size = [], min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= 2
    return [*sizes, max_bytes]
