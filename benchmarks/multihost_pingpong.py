"""Ping-pong across two real hosts through the workflow's run job, against mpi4py's own
ping-pong run by hand across the same two hosts.

    python benchmarks/multihost_pingpong.py [--min-bytes 1] [--max-bytes 1048576]
        [--iterations 1000] [--warmup 100] [--rounds 5]

Makes two hosts on this machine (tests/support/hosts.py: network namespaces with their own
host name, address, sshd and CPU; root needed, else it says why and exits 0), then per round,
one side after the other, alternating which goes first:
  - app: a 2-node ping-pong point (one rank per node) through `python -m scalestudy run-point`
    on the first host, as a PBS job runs it there (PBS_NODEFILE naming both hosts); its size
    table from metrics.json (one-way latency = half the mean round trip; bandwidth = size /
    one-way latency);
  - reference: `mpirun -np 2 --host h1:1,h2:1 python -m mpi4py.bench pingpong` run by hand on
    the first host with the same sizes, warm-up and iterations (the same Open MPI and ssh).
Per size it prints each side's median over the rounds and its best round, and the ratios
app / reference; then how many ratios lie within 0.9-1.1 (n = rounds per side). Both sides
cross the bed's bridge over TCP between network namespaces (no shared memory between hosts).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "workflow"), str(REPO / "tests" / "support"), str(Path(__file__).parent)]

from collectives_reference import compare, mpi4py_pingpong_command, mpi4py_table, side_by_side, size_parser  # noqa: E402
from hosts import Hosts, unavailable_reason  # noqa: E402
from scalestudy.apps.pingpong import SIZE_FIGURES  # noqa: E402
from scalestudy.model.metrics import SIZE_COLUMN, SIZE_TABLE  # noqa: E402
from scalestudy.model.point import Point  # noqa: E402


def on_first_host(bed: Hosts, command: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), **bed.launch_env()}
    done = subprocess.run(bed.command(0, command), env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} ... failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def app(bed: Hosts, folder: Path, args) -> dict[int, tuple[float, float]]:
    params = {"min_bytes": args.min_bytes, "max_bytes": args.max_bytes, "iterations": args.iterations,
              "warmup": args.warmup}  # fmt: skip
    point = Point(study="bench", app="pingpong", scaling="strong", nodes=2, ranks_per_node=1, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1, walltime="00:15:00",
                  params=params)  # fmt: skip
    run_dir = Path(tempfile.mkdtemp(dir=folder))
    on_first_host(bed, [sys.executable, "-m", "scalestudy", "run-point", "--point", point.to_json(), "--cluster",
                        "local", "--walltime-s", str(point.walltime_seconds), "--metrics",
                        str(run_dir / "metrics.json")])  # fmt: skip
    metrics = json.loads((run_dir / "metrics.json").read_text())
    if metrics["status"] != "ok":
        raise SystemExit(f"the app's point failed: {metrics['reason']}")
    hosts = {rank["host"] for rank in metrics["provenance"]["ranks"]}
    if hosts != set(bed.names):
        raise SystemExit(f"the app's ranks ran on {sorted(hosts)}, not on both hosts {bed.names}")
    latency, bandwidth = (figure.name for figure in SIZE_FIGURES)
    return {row[SIZE_COLUMN]: (row[latency], row[bandwidth]) for row in metrics["figures"][SIZE_TABLE]}


def mpi4py_pingpong(bed: Hosts, args) -> dict[int, tuple[float, float]]:
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    launch = [mpirun, "-np", "2", "--host", f"{bed.names[0]}:1,{bed.names[1]}:1", "--allow-run-as-root"]
    return mpi4py_table(on_first_host(bed, mpi4py_pingpong_command(launch, args)))


def main() -> int:
    args = size_parser(__doc__).parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"multihost ping-pong: skipped ({reason})")
        return 0
    with tempfile.TemporaryDirectory(prefix="multihost-pingpong-") as folder:
        with Hosts(Path(folder) / "bed", 2) as bed:
            cpus = "a CPU of its own per host" if bed.cpusets else "no cpuset: the hosts share every CPU"
            print(f"two hosts {bed.names} on {bed.subnet} ({cpus}); load average {os.getloadavg()[0]:.2f}")
            ours, theirs = side_by_side(lambda: app(bed, Path(folder), args), lambda: mpi4py_pingpong(bed, args),
                                        args.rounds)  # fmt: skip
            compare("two-host ping-pong vs mpi4py.bench pingpong", ours, theirs, args.rounds,
                    ("latency_us", "bandwidth_MBps"))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
