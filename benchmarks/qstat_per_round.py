"""How many qstat calls one polling round costs with 50 jobs pending.

Snakemake's cluster-generic executor runs the status command once per active job
per round. Without sharing, that is one qstat per job (50 per round here); the
profiles' status command shares one `qstat -x -f -F json <all ids>` per round.
This drives the real command (profiles/pbs/scalestudy-pbs status JOBID, one
process per job, as the executor does) against a stand-in qstat that counts its
invocations and answers "Q" (queued) for every job.

    python benchmarks/qstat_per_round.py [--jobs 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE_QSTAT = """#!/usr/bin/env python3
import json, sys
open({calls!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
ids = [a for a in sys.argv[1:] if not a.startswith("-") and a != "json"]
print(json.dumps({{"Jobs": {{i: {{"job_state": "Q"}} for i in ids}}}}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds-between-rounds", type=float, default=2.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        calls = tmp / "calls"
        calls.touch()
        qstat = tmp / "qstat"
        qstat.write_text(FAKE_QSTAT.format(calls=str(calls)))
        qstat.chmod(0o755)
        env = {
            **os.environ,
            "PATH": f"{tmp}{os.pathsep}{os.environ['PATH']}",
            "SCALESTUDY_PBS_CACHE": str(tmp / "cache"),
            "SCALESTUDY_PYTHON": sys.executable,
        }
        sys.path.insert(0, str(REPO / "workflow"))
        from scalestudy.scheduler.pbs import cache

        jobs = [f"{9000000 + i}.pbs" for i in range(args.jobs)]
        for job in jobs:
            cache.register(tmp / "cache", job)
        per_round, seconds = [], []
        for _ in range(args.rounds):
            before = len(calls.read_text().splitlines())
            start = time.perf_counter()
            for job in jobs:
                out = subprocess.run(
                    [str(REPO / "profiles/pbs/scalestudy-pbs"), "status", job],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                assert out.stdout == "running\n", out
            seconds.append(time.perf_counter() - start)
            per_round.append(len(calls.read_text().splitlines()) - before)
            time.sleep(args.seconds_between_rounds)
    print(f"qstat invocations per round with {args.jobs} jobs pending: {per_round}")
    print(f"status command: {1000 * sum(seconds) / (args.rounds * args.jobs):.0f} ms per call (mean)")
    worst = max(per_round)
    print(f"worst round: {worst} qstat (target 1); cluster-generic default: {args.jobs}")
    print(f"ratio to the default: {worst / args.jobs:.3f}")
    return 0 if worst == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
