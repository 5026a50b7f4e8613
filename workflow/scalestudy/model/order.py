"""The order points are measured in: repeat rounds, each a seeded random shuffle.

A verdict compares runs of two sides (flag sets, strategies, placements at one scale). If
one side's repeats run back to back in a quiet minute and the other's in a busy one, the
machine's drift becomes the verdict (Hoefler & Belli, SC'15: randomise and interleave). So
every point runs in round `repeat` (repeat 1 of every point, then repeat 2, ...), and within
a round in a random order drawn from the sweep's `order_seed` (A B | B A | A B ...).

A point's place is a pure function of the seed and the point (`order_key`): it does not
depend on which points are still to run, so a resumed sweep keeps its order and planning
reads no state. The place is recorded in each run's record (`order_record`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from .point import Point

# Keys are fractions in [0, 1) from 52 bits of a hash: distinct in practice, exact in a float.
KEY_BITS = 52


def order_key(point: Point, seed: int) -> tuple[int, float]:
    """(round, key): the round is the repeat; the key, the point's place within its round."""
    digest = hashlib.sha256(f"{seed}\0{point.study}\0{point.id}".encode()).digest()
    key = (int.from_bytes(digest[:8], "big") >> (64 - KEY_BITS)) / 2**KEY_BITS
    return point.repeat, key


def run_order(points: Iterable[Point], seed: int) -> list[Point]:
    """The points in the order they are to be measured (round by round, shuffled within)."""
    return sorted(points, key=lambda point: order_key(point, seed))


def priorities(points: Iterable[Point], seed: int) -> dict[tuple[str, str], int]:
    """(study, point id) -> Snakemake priority: the first in `run_order` the highest, so that
    a scheduler that picks the ready job of highest priority follows the order."""
    ordered = run_order(points, seed)
    return {(point.study, point.id): len(ordered) - index for index, point in enumerate(ordered)}


def order_record(point: Point, seed: int) -> dict:
    """What a run's record says about its place: the seed, its round and its key in the round."""
    round_, key = order_key(point, seed)
    return {"seed": seed, "round": round_, "key": round(key, 12)}
