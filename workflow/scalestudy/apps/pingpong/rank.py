"""What every MPI rank of a ping-pong point runs (a stand-alone script: it imports only
mpi4py and ../osu.py, so it runs by path on any node without the package on PYTHONPATH).

OSU-style latency/bandwidth ping-pong between rank 0 and the last rank (osu_latency
shape: per size, `warmup` untimed round trips, then `iterations` timed ones; one-way
latency is half the mean round trip). Ranks in between only take part in the start
and end barriers. Rank 0 prints the table and a summary line:

    # size_bytes latency_us bandwidth_MBps
    1 0.52 1.93
    ...
    scalestudy-pingpong {"pair": [0, 1], "iterations": 1000, ...}

Usage: python pingpong/rank.py --min-bytes 1 --max-bytes 1048576 --iterations 1000 --warmup 100
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:  # in the package (the app, its tests)
    from ..osu import host_name, message_sizes
except ImportError:  # run by path (as the runner starts it): the shared module is in the folder above
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    from osu import host_name, message_sizes

SUMMARY_PREFIX = "scalestudy-pingpong"
TABLE_HEADER = "# size_bytes latency_us bandwidth_MBps"


def ping_pong(comm, peer: int, leader: bool, size: int, warmup: int, iterations: int) -> float:
    """Mean round-trip time in seconds over `iterations` exchanges of `size` bytes."""
    from mpi4py import MPI

    send, receive = bytearray(size), bytearray(size)
    start = 0.0
    for i in range(warmup + iterations):
        if i == warmup:
            start = MPI.Wtime()
        if leader:
            comm.Send([send, MPI.BYTE], dest=peer, tag=1)
            comm.Recv([receive, MPI.BYTE], source=peer, tag=1)
        else:
            comm.Recv([receive, MPI.BYTE], source=peer, tag=1)
            comm.Send([send, MPI.BYTE], dest=peer, tag=1)
    return (MPI.Wtime() - start) / iterations


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=int, required=True)
    parser.add_argument("--max-bytes", type=int, required=True)
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    args = parser.parse_args(argv)

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        if rank == 0:
            print("pingpong needs at least 2 ranks (rank 0 and the last rank exchange messages)", flush=True)
        return 2
    last = size - 1
    comm.Barrier()
    rows = []
    if rank in (0, last):
        for nbytes in message_sizes(args.min_bytes, args.max_bytes):
            round_trip_s = ping_pong(comm, last if rank == 0 else 0, rank == 0, nbytes, args.warmup, args.iterations)
            one_way_s = round_trip_s / 2
            rows.append((nbytes, one_way_s * 1e6, nbytes / one_way_s / 1e6))
            if rank == 0 and len(rows) == 1:
                print(TABLE_HEADER, flush=True)
            if rank == 0:
                print(f"{nbytes} {rows[-1][1]:.3f} {rows[-1][2]:.3f}", flush=True)
    comm.Barrier()
    if rank == 0:
        summary = {
            "pair": [0, last],
            "iterations": args.iterations,
            "warmup": args.warmup,
            "hosts": sorted(set(comm.allgather(host_name()))),
            "mpi_library": " ".join(MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0].split()),
        }
        print(f"{SUMMARY_PREFIX} {json.dumps(summary, sort_keys=True)}", flush=True)
    else:
        comm.allgather(host_name())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
