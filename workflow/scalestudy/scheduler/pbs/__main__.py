"""python -m scalestudy.scheduler.pbs submit|status|sidecar|plan (profiles/pbs/scalestudy-pbs).

Each command imports its module only when chosen: the status command runs once per job
per polling round and must not pay for the others.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalestudy.scheduler.pbs")
    commands = parser.add_subparsers(dest="command", required=True)
    sub = commands.add_parser("submit", help="qsub a Snakemake jobscript; prints the job id")
    sub.add_argument("--cluster", required=True)
    sub.add_argument("jobscript", type=Path)
    stat = commands.add_parser("status", help="print running|success|failed for a job id")
    stat.add_argument("job_id")
    commands.add_parser("sidecar", help="Snakemake's sidecar: deletes the run's unfinished jobs on an interrupt")
    dry = commands.add_parser("plan", help="print the qsub line of every point (nothing is submitted)")
    dry.add_argument("--profile", type=Path, required=True)
    dry.add_argument("--configfile", nargs="*", default=[])
    args = parser.parse_args(argv)
    if args.command == "status":
        from .cache import cache_dir
        from .status import status

        print(status(args.job_id, cache_dir()))
        return 0
    if args.command == "sidecar":
        from .cache import cache_dir
        from .sidecar import sidecar

        return sidecar(cache_dir(), os.environ.get("SCALESTUDY_QDEL", "qdel"))
    if args.command == "plan":
        from .plan import plan

        print("\n".join(plan(args.profile, args.configfile)))
        return 0
    from .submit import SubmitRefused, submit

    try:
        print(submit(args.jobscript, args.cluster))
    except SubmitRefused as refused:
        for problem in refused.problems:
            print(f"scalestudy: refused before submission: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
