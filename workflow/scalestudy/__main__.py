"""Command line of the package, as the rules call it:

    python -m scalestudy run-point --point JSON --cluster NAME --run-dir DIR --log FILE

It always exits 0 once metrics.json is written: a failed run is data, not a
failed Snakemake job.
"""

from __future__ import annotations

import argparse
import sys

from . import clusters
from .runner import run_point
from .sweep import Point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalestudy")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run-point", help="run one point and write its metrics.json")
    run.add_argument("--point", required=True, help="the point, as JSON (from the workflow)")
    run.add_argument("--walltime-s", type=int, required=True, help="stop the run after this many seconds")
    run.add_argument("--cluster", required=True, help="name of config/clusters/<name>.yaml")
    run.add_argument("--run-dir", required=True)
    run.add_argument("--log", help="where the app's output goes (default: <run-dir>/stdout.log)")
    args = parser.parse_args(argv)
    metrics = run_point(
        Point.from_json(args.point, args.walltime_s), args.run_dir, clusters.load(args.cluster), args.log
    )
    print(f"scalestudy: {args.run_dir}: {metrics['status']}" + (f" ({metrics['reason']})" if metrics["reason"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
