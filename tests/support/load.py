"""A background load the tests switch on and off: one bounded busy-loop process, started and
stopped by its own pid (never by name), that can never outlive its test."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

# Busy for `on` seconds, idle for `off` (off 0: always busy), never longer than `limit` in all.
BUSY_LOOP = """
import sys, time
on, off, limit = map(float, sys.argv[1:])
start = time.monotonic()
while time.monotonic() - start < limit:
    phase = time.monotonic()
    while time.monotonic() - phase < on:
        pass
    if off:
        time.sleep(off)
"""


@contextlib.contextmanager
def background_load(on_s: float = 1.0, off_s: float = 0.0, limit_s: float = 300.0) -> Iterator[subprocess.Popen]:
    """One CPU kept busy (switching on and off where `off_s` > 0) while the block runs."""
    process = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(on_s), str(off_s), str(limit_s)])
    try:
        yield process
    finally:
        process.kill()
        process.wait()
