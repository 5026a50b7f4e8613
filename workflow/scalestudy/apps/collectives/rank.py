"""What every MPI rank of a collectives point runs (a stand-alone script: it imports mpi4py
and numpy, torch for the torch.distributed backends, and ../osu.py, so it runs by path on any node
without the package on PYTHONPATH).

One operation over message sizes, OSU's protocol (osu_allreduce, osu_latency, osu_bw,
osu_bibw) with nccl-tests' sizes and bandwidths:

- collectives: per size, `warmup` untimed calls, then `iterations` calls each timed on its
  own with a barrier after it (not timed); a rank's latency is the mean of its calls; the
  table gives the average, minimum and maximum of that over the ranks (as OSU prints them);
- latency: ping-pong between rank 0 and the last rank; one-way latency = half the mean
  round trip (osu_latency);
- bw / bibw: windows of WINDOW non-blocking sends (bibw: both ways at once), each window
  closed by a 4-byte reply (osu_bw, osu_bibw); latency is the time per message.

The message size is nccl-tests' `size`: the bytes of the whole buffer a rank holds (allreduce,
bcast, reduce: the vector; allgather: the gathered result; alltoall: the send buffer;
reduce_scatter: the input), rounded down to whole elements per rank. algbw = size / latency;
busbw = algbw x BUS_FACTOR (nccl-tests' PERFORMANCE.md), what each link carries, comparable
across operations and rank counts. Rank 0 prints:

    # size_bytes count latency_avg_us latency_min_us latency_max_us algbw_GBps busbw_GBps
    4 1 5.210 5.100 5.320 0.000768 0.000768
    ...
    scalestudy-collectives {"operation": "allreduce", "backend": "mpi", ...}

Usage: python collectives/rank.py --operation allreduce --backend mpi --device cpu
       --min-bytes 4 --max-bytes 1048576 --iterations 100 --warmup 10 --dtype float32
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

try:  # in the package (the app, its tests)
    from ..osu import host_name, message_sizes
except ImportError:  # run by path (as the runner starts it): the shared module is in the folder above
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    from osu import host_name, message_sizes

SUMMARY_PREFIX = "scalestudy-collectives"
COLUMNS = ("size_bytes", "count", "latency_avg_us", "latency_min_us", "latency_max_us", "algbw_GBps", "busbw_GBps")
TABLE_HEADER = "# " + " ".join(COLUMNS)
COLLECTIVES = ("allreduce", "allgather", "alltoall", "bcast", "reduce_scatter", "reduce", "barrier")
POINT_TO_POINT = ("latency", "bw", "bibw")
OPERATIONS = COLLECTIVES + POINT_TO_POINT
# Operations whose buffer is split evenly over the ranks: a size is a whole number of
# elements per rank (nccl-tests rounds the count down the same way).
PARTITIONED = ("allgather", "alltoall", "reduce_scatter")
BACKENDS = ("mpi", "gloo", "nccl")
DTYPES = {"float32": 4, "float64": 8, "int32": 4, "int8": 1}
# Messages in flight per window of osu_bw / osu_bibw (their default window size).
WINDOW = 64
ACK_BYTES = 4


def buffer_messages(operation: str, backend: str, ranks: int) -> float:
    """How many messages of the largest size a rank holds at once, as this program allocates
    them: a collective's whole buffer and its output, and a rank's share (mpi4py: one; torch:
    the part it sends and the share it gets); latency's send and receive buffer; a window of
    WINDOW sends (bw) or WINDOW each way (bibw); a barrier none."""
    if operation == "barrier":
        return 0
    if operation in POINT_TO_POINT:
        return {"latency": 2, "bw": WINDOW, "bibw": 2 * WINDOW}[operation]
    return 2 + (1 if backend == "mpi" else 2) / max(ranks, 1)


def bus_factor(operation: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md): allreduce 2(n-1)/n (a reduce-scatter
    then an all-gather, each moving (n-1)/n of the buffer through every rank's link);
    allgather, reduce_scatter and alltoall (n-1)/n (a rank keeps its own share); bcast and
    reduce 1 (the buffer crosses each link once); point-to-point 1 (bibw counts both ways in
    its algbw). Barrier moves no data: 0."""
    n = ranks
    if operation == "allreduce":
        return 2 * (n - 1) / n
    if operation in PARTITIONED:
        return (n - 1) / n
    return 0.0 if operation == "barrier" else 1.0


def element_count(operation: str, size: int, itemsize: int, ranks: int) -> int:
    """Elements of the rank's buffer for a message of `size` bytes (0: too small to split)."""
    count = size // itemsize
    return count - count % ranks if operation in PARTITIONED else count


# ---------------------------------------------------------------- backends


class MpiOps:
    """The operations through mpi4py on numpy buffers."""

    def __init__(self, comm, dtype: str):
        import numpy as np
        from mpi4py import MPI

        self.MPI, self.np, self.comm, self.dtype = MPI, np, comm, np.dtype(dtype)

    def buffers(self, count: int, ranks: int):
        np = self.np
        return np.ones(count, self.dtype), np.zeros(count, self.dtype), np.zeros(max(count // ranks, 1), self.dtype)

    def collective(self, operation: str, count: int, ranks: int):
        comm, SUM = self.comm, self.MPI.SUM
        whole, out, share = self.buffers(count, ranks)
        part = whole[: count // ranks] if count >= ranks else whole
        return {
            "allreduce": lambda: comm.Allreduce(whole, out, op=SUM),
            "allgather": lambda: comm.Allgather(part, out),
            "alltoall": lambda: comm.Alltoall(whole, out),
            "bcast": lambda: comm.Bcast(whole, root=0),
            "reduce_scatter": lambda: comm.Reduce_scatter_block(whole, share, op=SUM),
            "reduce": lambda: comm.Reduce(whole, out, op=SUM, root=0),
            "barrier": comm.Barrier,
        }[operation]

    # Point-to-point: positional arguments and buffers given as [array, MPI.BYTE] (as
    # mpi4py.bench does), so that the Python around a small message costs what it costs there.
    def isend(self, buffer, peer):
        return self.comm.Isend(buffer, peer, 1)

    def irecv(self, buffer, peer):
        return self.comm.Irecv(buffer, peer, 1)

    def wait_all(self, requests):
        self.MPI.Request.Waitall(requests)

    def send(self, buffer, peer):
        self.comm.Send(buffer, peer, 2)

    def recv(self, buffer, peer):
        self.comm.Recv(buffer, peer, 2)

    def new(self, count: int):
        """A point-to-point buffer of `count` elements."""
        return [self.np.zeros(count, self.dtype), self.MPI.BYTE]

    def sync(self):
        pass

    def barrier(self):
        self.comm.Barrier()


class TorchOps:
    """The operations through torch.distributed (gloo on CPU, NCCL on CUDA buffers)."""

    def __init__(self, backend: str, device: str, dtype: str, rank: int, ranks: int, comm):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.dtype = getattr(torch, dtype)
        if device == "cuda":
            local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK") or os.environ.get("MPI_LOCALRANKID") or 0)
            torch.cuda.set_device(local)
            self.device = torch.device("cuda", local)
        else:
            self.device = torch.device("cpu")
        dist.init_process_group(backend, init_method=rendezvous(comm, rank), rank=rank, world_size=ranks)

    def new(self, count: int):
        return self.torch.zeros(count, dtype=self.dtype, device=self.device)

    def collective(self, operation: str, count: int, ranks: int):
        dist = self.dist
        whole = self.torch.ones(count, dtype=self.dtype, device=self.device)
        out = self.new(count)
        part, share = self.new(max(count // ranks, 1)), self.new(max(count // ranks, 1))
        return {
            "allreduce": lambda: dist.all_reduce(whole),
            "allgather": lambda: dist.all_gather_into_tensor(out, part),
            "alltoall": lambda: dist.all_to_all_single(out, whole),
            "bcast": lambda: dist.broadcast(whole, 0),
            "reduce_scatter": lambda: dist.reduce_scatter_tensor(share, whole),
            "reduce": lambda: dist.reduce(whole, 0),
            "barrier": dist.barrier,
        }[operation]

    def isend(self, buffer, peer):
        return self.dist.isend(buffer, peer)

    def irecv(self, buffer, peer):
        return self.dist.irecv(buffer, peer)

    def wait_all(self, requests):
        for request in requests:
            request.wait()

    def send(self, buffer, peer):
        self.dist.send(buffer, peer)

    def recv(self, buffer, peer):
        self.dist.recv(buffer, peer)

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def barrier(self):
        # The backend's own (OSU uses the library it measures): an MPI barrier's busy wait
        # would take the cores gloo's threads need.
        self.dist.barrier()


def rendezvous(comm, rank: int) -> str:
    """Where torch.distributed's ranks meet: a file under the shared temp folder named by
    rank 0, sent to every rank through MPI (one machine), else rank 0's host and a free port."""
    if rank == 0:
        probe = socket.socket()
        probe.bind(("", 0))
        port = probe.getsockname()[1]
        probe.close()
        found = (os.environ.get("MASTER_ADDR") or socket.gethostname(), port)
    else:
        found = None
    address, port = comm.bcast(found, root=0)
    hosts = set(comm.allgather(host_name()))
    if len(hosts) == 1:
        return f"file://{tempfile.gettempdir()}/scalestudy-collectives-{os.getuid()}-{address}-{port}"
    return f"tcp://{address}:{port}"


# ---------------------------------------------------------------- timing


def time_collective(ops, comm, call, warmup: int, iterations: int) -> float:
    """A rank's mean seconds per call (OSU: each call timed alone, a barrier after it)."""
    for _ in range(warmup):
        call()
        ops.sync()
    ops.barrier()
    total = 0.0
    for _ in range(iterations):
        start = time.perf_counter()
        call()
        ops.sync()
        total += time.perf_counter() - start
        ops.barrier()
    return total / iterations


def time_point_to_point(ops, comm, operation: str, count: int, leader: bool, peer: int, warmup: int, iterations: int):
    """Seconds per message of the pair (latency: one way, half the mean round trip)."""
    if operation == "latency":
        send, receive = ops.new(count), ops.new(count)
        start = 0.0
        for i in range(warmup + iterations):
            if i == warmup:
                ops.sync()
                start = time.perf_counter()
            if leader:
                ops.send(send, peer)
                ops.recv(receive, peer)
            else:
                ops.recv(receive, peer)
                ops.send(send, peer)
        ops.sync()
        return (time.perf_counter() - start) / iterations / 2
    buffers = [ops.new(count) for _ in range(WINDOW)]
    back = [ops.new(count) for _ in range(WINDOW)] if operation == "bibw" else []
    ack = ops.new(1)
    start = 0.0
    for i in range(warmup + iterations):
        if i == warmup:
            ops.sync()
            start = time.perf_counter()
        if operation == "bibw":
            requests = [ops.irecv(b, peer) for b in back] + [ops.isend(b, peer) for b in buffers]
            ops.wait_all(requests)
        elif leader:
            ops.wait_all([ops.isend(b, peer) for b in buffers])
        else:
            ops.wait_all([ops.irecv(b, peer) for b in buffers])
        if leader:
            ops.recv(ack, peer)
        else:
            ops.send(ack, peer)
    ops.sync()
    return (time.perf_counter() - start) / iterations / WINDOW


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operation", choices=OPERATIONS, required=True)
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--min-bytes", type=int, required=True)
    parser.add_argument("--max-bytes", type=int, required=True)
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="float32")
    args = parser.parse_args(argv)

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    if ranks < 2:
        if rank == 0:
            print(f"collectives needs at least 2 ranks, got {ranks}", flush=True)
        return 2
    if args.backend == "mpi":
        ops = MpiOps(comm, args.dtype)
    else:
        ops = TorchOps(args.backend, args.device, args.dtype, rank, ranks, comm)
    point_to_point = args.operation in POINT_TO_POINT
    last = ranks - 1
    # Point-to-point: rank 0 and the last rank (on another node where the job spans nodes).
    takes_part = not point_to_point or rank in (0, last)
    factor = bus_factor(args.operation, ranks)
    sizes = [0] if args.operation == "barrier" else message_sizes(args.min_bytes, args.max_bytes)
    itemsize = DTYPES[args.dtype]
    comm.Barrier()
    printed_header = False
    for size in sizes:
        count = element_count(args.operation, size, itemsize, ranks)
        if args.operation != "barrier" and count == 0:
            continue
        seconds = float("nan")
        if takes_part and point_to_point:
            peer = last if rank == 0 else 0
            seconds = time_point_to_point(
                ops, comm, args.operation, count, rank == 0, peer, args.warmup, args.iterations
            )
        elif takes_part:
            call = ops.collective(args.operation, count, ranks)
            seconds = time_collective(ops, comm, call, args.warmup, args.iterations)
        timings = [s for s in comm.gather(seconds, root=0) or [] if s == s]
        comm.Barrier()
        if rank != 0:
            continue
        nbytes = count * itemsize
        average = sum(timings) / len(timings)
        algbw = nbytes / average / 1e9 * (2 if args.operation == "bibw" else 1)
        if not printed_header:
            print(TABLE_HEADER, flush=True)
            printed_header = True
        print(
            f"{nbytes} {count} {average * 1e6:.3f} {min(timings) * 1e6:.3f} {max(timings) * 1e6:.3f} "
            f"{algbw:.6g} {algbw * factor:.6g}",
            flush=True,
        )
    hosts = sorted(set(comm.allgather(host_name())))
    if rank == 0:
        summary = {
            "operation": args.operation,
            "backend": args.backend,
            "device": args.device,
            "dtype": args.dtype,
            "ranks": ranks,
            "iterations": args.iterations,
            "warmup": args.warmup,
            "bus_factor": factor,
            "window": WINDOW if args.operation in ("bw", "bibw") else None,
            "hosts": hosts,
            "mpi_library": " ".join(MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0].split()),
        }
        print(f"{SUMMARY_PREFIX} {json.dumps(summary, sort_keys=True)}", flush=True)
    if args.backend != "mpi":
        ops.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
