"""A slow host, seen per host: a 2-node ping-pong on two real hosts, with and without a busy
process on the second host's one CPU, and what each host's record says.

    python benchmarks/slow_host.py [--runs 4] [--iterations 50000]

Makes two hosts on this machine (tests/support/hosts.py: network namespaces with their own host
name, address, sshd and CPU; root needed, else it says why and exits 0), then per run, quiet and
busy alternating: a 2-node ping-pong point (one rank per node, 8 B at most) through `python -m
scalestudy run-point` on the first host, as a PBS job runs it there; for the busy side a Python
busy loop is started in the second host's cpuset (so on its CPU only) half a second before and
ended by its pid after. Per run it prints the load average, each host's `conditions.hosts`
figures (other processes' and the run's own share of the CPUs its ranks may use, how long its
first rank was watched, contended or not), whether the run counts as contended and its
latency; then per side and host the range of other processes' share and how many runs named it.
The machine is shared: other work on a host's CPU during a run is seen there too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "workflow"), str(REPO / "tests" / "support")]

from hosts import Hosts, unavailable_reason  # noqa: E402
from load import BUSY_LOOP  # noqa: E402
from scalestudy.model.contention import contended_hosts  # noqa: E402
from scalestudy.model.point import Point  # noqa: E402


def run_point(bed: Hosts, iterations: int, run_dir: Path) -> dict:
    params = {"iterations": iterations, "warmup": 10, "max_bytes": 8}
    point = Point(study="bench", app="pingpong", scaling="strong", nodes=2, ranks_per_node=1, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="tcp", nccl_env_set="default", repeat=1, walltime="00:05:00",
                  params=params, mpi_flags={"btl": "self,tcp"})  # fmt: skip
    run_dir.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), **bed.launch_env()}
    argv = [sys.executable, "-m", "scalestudy", "run-point", "--point", point.to_json(), "--cluster", "local",
            "--walltime-s", str(point.walltime_seconds), "--metrics", str(run_dir / "metrics.json")]  # fmt: skip
    done = subprocess.run(bed.command(0, argv), env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"run-point failed:\n{done.stderr[-2000:]}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    if metrics["status"] != "ok":
        raise SystemExit(f"the point failed: {metrics['reason']}")
    return metrics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs a side (quiet, busy), alternating")
    parser.add_argument("--iterations", type=int, default=50000, help="ping-pong iterations per size (1-8 B)")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"slow host: skipped ({reason})")
        return 0
    folder = Path(tempfile.mkdtemp(prefix="slow-host-"))
    bed = Hosts(folder / "bed", 2).start()
    if not bed.cpusets:
        bed.stop()
        print("slow host: skipped (no cpuset cgroup here: the hosts share every CPU)")
        return 0
    seen: dict[str, list[dict]] = {"quiet": [], "busy": []}
    try:
        print(f"hosts {bed.names}: CPUs {[(h.cpuset / 'cpuset.cpus').read_text().strip() for h in bed.hosts]}")
        for run in range(args.runs):
            for side in ("quiet", "busy"):
                busy = None
                if side == "busy":
                    busy = subprocess.Popen(bed.command(1, [sys.executable, "-c", BUSY_LOOP, "1", "0", "600"]))
                    time.sleep(0.5)
                load = os.getloadavg()[0]
                try:
                    metrics = run_point(bed, args.iterations, folder / f"{side}{run}")
                finally:
                    if busy is not None:
                        busy.kill()
                        busy.wait()
                hosts = metrics["conditions"].get("hosts", {})
                seen[side].append(hosts)
                cells = "  ".join(
                    f"{name}: other {h['other_cpu_share']:.2f} own {h['own_cpu_share']:.2f} {h['wall_s']:.1f} s"
                    f"{' CONTENDED' if h['contended'] else ''}"
                    for name, h in sorted(hosts.items())
                )
                latency = metrics["figures"].get("latency_us")
                print(f"{side:5} load {load:.2f}  {cells}  run contended {metrics['conditions'].get('contended')}"
                      f"  latency {latency} µs", flush=True)  # fmt: skip
    finally:
        bed.stop()
    for side, runs in seen.items():
        for name in bed.names:
            shares = [r[name]["other_cpu_share"] for r in runs if name in r]
            named = sum(name in contended_hosts(r) for r in runs)
            if shares:
                print(f"{side:5} {name}: other processes' share {min(shares):.2f}-{max(shares):.2f}, "
                      f"named in {named} of {len(runs)}")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
