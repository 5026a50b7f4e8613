"""The collectives app's point-to-point latency and bandwidth against an implementation
nobody here wrote, on this machine, side by side: `python -m mpi4py.bench pingpong` (ships
with mpi4py), and, where given, Intel MPI Benchmarks' `IMB-MPI1` (PingPong and Allreduce) and
OSU's `osu_latency` and `osu_allreduce` (the protocols the app follows).

    python benchmarks/collectives_reference.py [--min-bytes 1] [--max-bytes 1048576]
        [--iterations 1000] [--warmup 100] [--rounds 5] [--imb PATH] [--osu-latency PATH]
        [--osu-allreduce PATH]

Each round runs, under the same `mpirun -np 2` (the venv's Open MPI), the app's rank program
(`collectives_rank.py --operation latency --backend mpi --dtype int8`: one-way latency = half
the mean round trip, bandwidth = size / one-way latency) and mpi4py's ping-pong with the same
sizes, warm-up and iterations, one after the other, alternating which goes first. Per size it
prints each side's median over the rounds and its best round (lowest latency, highest
bandwidth: a shared machine's stalls only ever slow a round down) and the ratios app /
reference of each, then how many ratios lie within 0.9–1.1. With --osu-latency and
--osu-allreduce (OSU built outside this repository, never committed; or on PATH) the app's
ping-pong latency is compared with osu_latency's, and its allreduce (float32, OSU's size: the
whole vector, the same as nccl-tests') with osu_allreduce's average latency, the same way;
without them those comparisons are skipped and the output says so. With --imb (IMB-MPI1 built
outside this repository from github.com/intel/mpi-benchmarks, never committed: `make IMB-MPI1
CC=mpicc CXX=mpicxx` with the venv's bin/ first on PATH; or IMB-MPI1 on PATH) the app's
ping-pong is compared with IMB's PingPong (t = half the round trip, as ours) and its allreduce
with IMB's Allreduce t_avg (the mean over ranks of each rank's mean time per call, float32, the
whole vector's bytes: the app's latency_avg_us), IMB's repetitions held at --iterations at
every size (`-iter_policy off`).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.apps.collectives import rank as collectives_rank  # noqa: E402
from scalestudy.apps.collectives.app import parse_collectives  # noqa: E402
from scalestudy.model.metrics import SIZE_TABLE  # noqa: E402

# mpi4py.bench pingpong: "  size  bandwidth_MBps | time_mean_s ± std  samples"
MPI4PY_ROW = re.compile(r"^\s*(\d+)\s+([0-9.]+)\s+\|\s+([0-9.e+-]+)", re.M)
# osu_allreduce: "size  avg_latency_us [min max iterations]"
OSU_ROW = re.compile(r"^(\d+)\s+([0-9.]+)", re.M)
# IMB-MPI1: a "# Benchmarking <name>" header, then rows "#bytes #repetitions <times...>": PingPong
# "t[usec] Mbytes/sec", a collective "t_min[usec] t_max[usec] t_avg[usec]".
IMB_SECTION = re.compile(r"^# Benchmarking (\S+)", re.M)
IMB_ROW = re.compile(r"^[ \t]+(\d+)[ \t]+(\d+)((?:[ \t]+[0-9.]+)+)[ \t]*$", re.M)
BAND = (0.9, 1.1)


def mpirun() -> list[str]:
    launcher = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    return [launcher, "-np", "2", "--oversubscribe", "--allow-run-as-root"]


def run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:8])} ... failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def app(operation: str, dtype: str, args) -> dict[int, tuple[float, float]]:
    """size -> (latency in us, bandwidth in MB/s) from the app's own rank program and parser."""
    command = [*mpirun(), sys.executable, collectives_rank.__file__, "--operation", operation, "--backend", "mpi",
               "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes), "--iterations",
               str(args.iterations), "--warmup", str(args.warmup), "--dtype", dtype]  # fmt: skip
    table = parse_collectives(run(command))[SIZE_TABLE]
    return {row["size_bytes"]: (row["latency_avg_us"], row["algbw_GBps"] * 1e3) for row in table}


def mpi4py_pingpong_command(launch: list[str], args, python: str = sys.executable) -> list[str]:
    """`launch` (an mpirun line) running `python`'s mpi4py ping-pong with the sizes, warm-up and
    iterations of `args` at every size (mpi4py's large and huge sizes too)."""
    loops = [str(args.warmup), str(args.iterations)]
    return [*launch, python, "-m", "mpi4py.bench", "pingpong", "-m", str(args.min_bytes),
            "-n", str(args.max_bytes), "-s", loops[0], "-l", loops[1], "--skip-large", loops[0],
            "--loop-large", loops[1], "--skip-huge", loops[0], "--loop-huge", loops[1]]  # fmt: skip


def mpi4py_table(output: str) -> dict[int, tuple[float, float]]:
    """size -> (one-way latency in us, bandwidth in MB/s) from mpi4py.bench pingpong's output."""
    return {int(s): (float(t) * 1e6, float(bw)) for s, bw, t in MPI4PY_ROW.findall(output)}


def mpi4py_pingpong(args) -> dict[int, tuple[float, float]]:
    return mpi4py_table(run(mpi4py_pingpong_command(mpirun(), args)))


def osu_latency(path: str, args) -> dict[int, tuple[float, float]]:
    """osu_latency: one-way latency (half the mean round trip) at every size up to 4 MiB."""
    command = [*mpirun(), path, "-i", str(args.iterations), "-x", str(args.warmup)]
    rows = OSU_ROW.findall(run(command))
    return {int(s): (float(lat), float("nan")) for s, lat in rows if args.min_bytes <= int(s) <= args.max_bytes}


def osu_allreduce(path: str, args) -> dict[int, tuple[float, float]]:
    command = [*mpirun(), path, "-m", f"{max(args.min_bytes, 4)}:{args.max_bytes}", "-i", str(args.iterations),
               "-x", str(args.warmup)]  # fmt: skip
    return {int(s): (float(lat), float("nan")) for s, lat in OSU_ROW.findall(run(command))}


def imb_tables(text: str) -> dict[str, dict[int, tuple[float, ...]]]:
    """IMB-MPI1's output: benchmark name -> size -> the row's figures after #repetitions."""
    parts = IMB_SECTION.split(text)
    return {
        name: {int(size): tuple(float(x) for x in rest.split()) for size, _reps, rest in IMB_ROW.findall(body)}
        for name, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def imb_command(launch: list[str], path: str, benchmark: str, args) -> list[str]:
    """`launch` (an mpirun line) running one IMB-MPI1 benchmark over the sizes of `args` (powers
    of two), its repetitions held at --iterations at every size (`-iter_policy off`). IMB warms
    up each size with a tenth of them (at least 10): --warmup's default, 100 of 1,000."""
    low, high = max(args.min_bytes, 1).bit_length() - 1, args.max_bytes.bit_length() - 1
    return [*launch, path, benchmark, "-msglog", f"{low}:{high}", "-iter", str(args.iterations),
            "-iter_policy", "off", "-npmin", "2"]  # fmt: skip


def imb_figures(output: str, benchmark: str) -> dict[int, tuple[float, float]]:
    """size -> (latency in us, bandwidth in MB/s or nan) of one IMB-MPI1 benchmark's output:
    PingPong's t and Mbytes/sec, a collective's t_avg."""
    rows = imb_tables(output)[benchmark]
    if benchmark == "PingPong":
        return {size: (row[0], row[1]) for size, row in rows.items() if size}
    return {size: (row[2], float("nan")) for size, row in rows.items() if size}


def imb_path(args) -> str | None:
    """The IMB-MPI1 to run (an absolute path): --imb, else the one on PATH, else None. A --imb
    that names no executable file stops here, before anything runs."""
    if args.imb is None:
        return shutil.which("IMB-MPI1")
    given = Path(args.imb).resolve()
    if not (given.is_file() and os.access(given, os.X_OK)):
        raise SystemExit(f"--imb: {args.imb} is not an executable file; allowed: the path of an IMB-MPI1")
    return str(given)


def not_found(program: str, option: str) -> str:
    """Why a comparison with `program` is skipped."""
    return f"no {program} on PATH and none given with {option}"


def imb_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--imb", help="an IMB-MPI1 built outside this repository (default: IMB-MPI1 on PATH)")


def imb(path: str, benchmark: str, args) -> dict[int, tuple[float, float]]:
    return imb_figures(run(imb_command(mpirun(), path, benchmark, args)), benchmark)


# How each side's rounds become its figure: the median, and the best round (latency lowest,
# bandwidth highest).
STATISTICS = {
    "median": lambda values, _higher: statistics.median(values),
    "best": lambda v, higher: (max if higher else min)(v),
}


def compare(name: str, ours, theirs, rounds: int, columns: tuple[str, ...]) -> None:
    """Print per size each side's median and best round and their ratios, then how many ratios
    of each statistic lie within BAND."""
    sizes = sorted(set.intersection(*(set(r) for r in ours + theirs)))
    inside = dict.fromkeys(STATISTICS, 0)
    print(f"\n{name}: median and best of {rounds} rounds of each side; ratio = app / reference")
    header = ["size_B"] + [
        f"{c}_{stat}_{side}" for c in columns for stat in STATISTICS for side in ("app", "ref", "ratio")
    ]
    print(" ".join(f"{h:>14}" for h in header))
    for size in sizes:
        cells = [str(size)]
        for i, column in enumerate(columns):
            for stat, reduce in STATISTICS.items():
                higher = "bandwidth" in column
                a, b = (reduce([r[size][i] for r in side], higher) for side in (ours, theirs))
                ratio = a / b if b else float("nan")
                inside[stat] += BAND[0] <= ratio <= BAND[1]
                cells += [f"{a:.4g}", f"{b:.4g}", f"{ratio:.3f}"]
        print(" ".join(f"{c:>14}" for c in cells))
    total = len(sizes) * len(columns)
    for stat, count in inside.items():
        print(f"{name}: {stat}: {count} of {total} ratios within {BAND[0]}–{BAND[1]} (n = {rounds} rounds per side)")


def side_by_side(ours: Callable[[], dict], theirs: Callable[[], dict], rounds: int) -> tuple[list, list]:
    """Each side's tables of `rounds` rounds, one side after the other, alternating which goes
    first (a drift of the machine falls on both)."""
    tables: tuple[list, list] = ([], [])
    for round_ in range(rounds):
        for side in (0, 1) if round_ % 2 == 0 else (1, 0):
            tables[side].append((ours, theirs)[side]())
    return tables


def size_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a side-by-side size sweep: sizes, iterations, warm-up, rounds."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--min-bytes", type=int, default=1)
    parser.add_argument("--max-bytes", type=int, default=1 << 20)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    return parser


def main() -> int:
    parser = size_parser(__doc__)
    imb_option(parser)
    parser.add_argument("--osu-latency", help="an osu_latency built outside this repository")
    parser.add_argument("--osu-allreduce", help="an osu_allreduce built outside this repository")
    args = parser.parse_args()
    imb_found = imb_path(args)
    ours, theirs = side_by_side(functools.partial(app, "latency", "int8", args),
                                functools.partial(mpi4py_pingpong, args), args.rounds)  # fmt: skip
    compare("point-to-point vs mpi4py.bench pingpong", ours, theirs, args.rounds, ("latency_us", "bandwidth_MBps"))
    references = [
        ("IMB-MPI1", imb_found, "--imb", [
            ("point-to-point vs IMB PingPong", "latency", "int8", lambda path: imb(path, "PingPong", args),
             ("latency_us", "bandwidth_MBps")),
            ("allreduce vs IMB Allreduce", "allreduce", "float32", lambda path: imb(path, "Allreduce", args),
             ("latency_us",)),
        ]),
        ("osu_latency", args.osu_latency or shutil.which("osu_latency"), "--osu-latency", [
            ("point-to-point vs osu_latency", "latency", "int8", lambda path: osu_latency(path, args),
             ("latency_us",)),
        ]),
        ("osu_allreduce", args.osu_allreduce or shutil.which("osu_allreduce"), "--osu-allreduce", [
            ("allreduce vs osu_allreduce", "allreduce", "float32", lambda path: osu_allreduce(path, args),
             ("latency_us",)),
        ]),
    ]  # fmt: skip
    for program, path, option, comparisons in references:
        if not path:
            print(f"\nvs {program}: skipped ({not_found(program, option)})")
            continue
        for name, operation, dtype, reference, columns in comparisons:
            ours, theirs = side_by_side(functools.partial(app, operation, dtype, args),
                                        functools.partial(reference, path), args.rounds)  # fmt: skip
            compare(name, ours, theirs, args.rounds, columns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
