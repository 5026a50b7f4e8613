"""Ping-pong and allreduce across two real hosts through the workflow's run job, against a peer
tool run by hand across the same two hosts: mpi4py's ping-pong and IMB-MPI1's Allreduce.

    python benchmarks/multihost_curves.py [--min-bytes 1] [--max-bytes 1048576]
        [--iterations 1000] [--warmup 100] [--rounds 5] [--imb PATH]

Makes two hosts on this machine (tests/support/hosts.py: network namespaces with their own
host name, address, sshd and CPU; root needed, else it says why and exits 0), then two
comparisons, each per round one side after the other, alternating which goes first:
  - ping-pong. App: a 2-node `pingpong` point (one rank per node) through `python -m scalestudy
    run-point` on the first host, as a PBS job runs it there (PBS_NODEFILE naming both hosts);
    its size table from metrics.json (one-way latency = half the mean round trip; bandwidth =
    size / one-way latency). Reference: `mpirun -np 2 --host h1:1,h2:1 python -m mpi4py.bench
    pingpong` by hand on the first host with the same sizes, warm-up and iterations.
  - allreduce. App: a 2-node `collectives` point (allreduce, backend mpi, float32, one rank per
    node) the same way; its latency_avg_us per size (the whole vector's bytes, from one float32).
    Reference: `mpirun -np 2 --host h1:1,h2:1 IMB-MPI1 Allreduce` by hand on the first host with
    the same sizes and repetitions (collectives_reference.imb_command: `-iter_policy off`), its
    t_avg. Both time each call alone with a barrier after it (IMB's default `-sync on`) and
    average each rank's mean over the ranks. IMB warms a size up with a tenth of its repetitions
    (at least 10), the app with --warmup: the defaults agree (100 of 1,000). IMB-MPI1 is --imb
    (built outside this repository, never committed), else the one on PATH; without either this
    half says it is skipped and why, and the ping-pong half still runs.
Both sides use the same Open MPI (the venv's) and ssh, and cross the bed's bridge over TCP
between network namespaces (no shared memory between hosts). Per size it prints each side's
median over the rounds and its best round, and the ratios app / reference; then how many
ratios lie within 0.9-1.1 (n = rounds per side); and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "workflow"), str(REPO / "tests" / "support"), str(Path(__file__).parent)]

from collectives_reference import (  # noqa: E402
    compare,
    imb_command,
    imb_figures,
    imb_option,
    imb_path,
    mpi4py_pingpong_command,
    mpi4py_table,
    not_found,
    side_by_side,
    size_parser,
)
from hosts import Hosts, unavailable_reason  # noqa: E402
from scalestudy.apps.collectives.rank import DTYPES  # noqa: E402
from scalestudy.apps.pingpong.app import SIZE_FIGURES  # noqa: E402
from scalestudy.model.metrics import SIZE_COLUMN, SIZE_TABLE  # noqa: E402
from scalestudy.model.point import Point  # noqa: E402

ALLREDUCE_DTYPE = "float32"  # IMB's reductions' type (MPI_FLOAT)


def on_first_host(bed: Hosts, command: list[str], environ: dict[str, str] | None = None) -> str:
    """`command`'s output, run on the first host in `environ` (this process's by default)."""
    env = {**(os.environ if environ is None else environ), "PYTHONPATH": str(REPO / "workflow"), **bed.launch_env()}
    done = subprocess.run(bed.command(0, command), env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} ... failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def by_hand(bed: Hosts, mpirun: str | None = None) -> list[str]:
    """The mpirun line a person types on the first host: one rank on each host (`mpirun`: the
    venv's by default)."""
    mpirun = mpirun or shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    return [mpirun, "-np", "2", "--host", f"{bed.names[0]}:1,{bed.names[1]}:1", "--allow-run-as-root"]


def size_table(
    bed: Hosts, folder: Path, app: str, params: dict, python: str = sys.executable, site: dict | None = None
) -> list[dict]:
    """The size table of a 2-node point (one rank per node) run through run-point on the first
    host by `python`, after checking that it ran on both hosts. `site`: the environment and the
    cluster (SCALESTUDY_CLUSTERS_DIR and a name) of a site's MPI, else this machine's."""
    site = site or {"environ": None, "cluster": "local"}
    point = Point(study="bench", app=app, scaling="strong", nodes=2, ranks_per_node=1, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1, walltime="00:15:00",
                  params=params)  # fmt: skip
    run_dir = Path(tempfile.mkdtemp(dir=folder))
    on_first_host(bed, [python, "-m", "scalestudy", "run-point", "--point", point.to_json(), "--cluster",
                        site["cluster"], "--walltime-s", str(point.walltime_seconds), "--metrics",
                        str(run_dir / "metrics.json")], site["environ"])  # fmt: skip
    metrics = json.loads((run_dir / "metrics.json").read_text())
    if metrics["status"] != "ok":
        raise SystemExit(f"the app's {app} point failed: {metrics['reason']}")
    hosts = {rank["host"] for rank in metrics["provenance"]["ranks"]}
    if hosts != set(bed.names):
        raise SystemExit(f"the app's ranks ran on {sorted(hosts)}, not on both hosts {bed.names}")
    size_table.libraries = metrics["provenance"].get("mpi_libraries")  # the last run's, for the print
    return metrics["figures"][SIZE_TABLE]


def app_pingpong(bed: Hosts, folder: Path, args, **run) -> dict[int, tuple[float, float]]:
    params = {"min_bytes": args.min_bytes, "max_bytes": args.max_bytes, "iterations": args.iterations,
              "warmup": args.warmup}  # fmt: skip
    latency, bandwidth = (figure.name for figure in SIZE_FIGURES)
    table = size_table(bed, folder, "pingpong", params, **run)
    return {row[SIZE_COLUMN]: (row[latency], row[bandwidth]) for row in table}


def mpi4py_pingpong(bed: Hosts, args) -> dict[int, tuple[float, float]]:
    return mpi4py_table(on_first_host(bed, mpi4py_pingpong_command(by_hand(bed), args)))


def app_allreduce(bed: Hosts, folder: Path, args, **run) -> dict[int, tuple[float]]:
    params = {"operation": "allreduce", "backend": "mpi", "dtype": ALLREDUCE_DTYPE, "min_bytes": args.min_bytes,
              "max_bytes": args.max_bytes, "iterations": args.iterations, "warmup": args.warmup}  # fmt: skip
    table = size_table(bed, folder, "collectives", params, **run)
    return {row[SIZE_COLUMN]: (row["latency_avg_us"],) for row in table}


def imb_allreduce(bed: Hosts, path: str, args) -> dict[int, tuple[float]]:
    output = on_first_host(bed, imb_command(by_hand(bed), path, "Allreduce", args))
    return {size: figures[:1] for size, figures in imb_figures(output, "Allreduce").items()}


def main() -> int:
    parser = size_parser(__doc__)
    imb_option(parser)
    args = parser.parse_args()
    imb = imb_path(args)
    reason = unavailable_reason()
    if reason:
        print(f"multihost curves: skipped ({reason})")
        return 0
    # The allreduce's sizes start at one element (the app refuses less; IMB reduces 0 of them).
    allreduce_args = argparse.Namespace(**{**vars(args), "min_bytes": max(args.min_bytes, DTYPES[ALLREDUCE_DTYPE])})
    with tempfile.TemporaryDirectory(prefix="multihost-curves-") as folder:
        with Hosts(Path(folder) / "bed", 2) as bed:
            cpus = "a CPU of its own per host" if bed.cpusets else "no cpuset: the hosts share every CPU"
            print(f"two hosts {bed.names} on {bed.subnet} ({cpus}); load average {os.getloadavg()[0]:.2f}")
            ours, theirs = side_by_side(lambda: app_pingpong(bed, Path(folder), args),
                                        lambda: mpi4py_pingpong(bed, args), args.rounds)  # fmt: skip
            compare("two-host ping-pong vs mpi4py.bench pingpong", ours, theirs, args.rounds,
                    ("latency_us", "bandwidth_MBps"))  # fmt: skip
            name = "two-host allreduce vs IMB-MPI1 Allreduce"
            if imb is None:
                print(f"\n{name}: skipped ({not_found('IMB-MPI1', '--imb')})")
            else:
                ours, theirs = side_by_side(lambda: app_allreduce(bed, Path(folder), allreduce_args),
                                            lambda: imb_allreduce(bed, imb, allreduce_args), args.rounds)  # fmt: skip
                compare(name, ours, theirs, args.rounds, ("latency_us",))
            print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
