"""python -m scalestudy.scheduler.pbs submit|status|cancel|sidecar (profiles/pbs/scalestudy-pbs), and plan
(handed over to `python -m scalestudy plan`). submit, status and cancel are PBS Pro's commands
(pbspro.PbsPro in the cluster's dialect; status and cancel need no cluster file).

Each command imports its module only when chosen. The status command runs once per job
per polling round and the cancel command within Snakemake's 2 s: called the way Snakemake
calls them (`status ID`, `cancel ID...`) they also skip argparse, a sixth of their start-up.
"""

from __future__ import annotations

import os
import sys


def status_command(job_id: str) -> int:
    # Any dialect's: a job's status needs no cluster file (nor its loading, on every call).
    from .pbspro import PbsPro

    print(PbsPro().status(job_id))
    return 0


def cancel_command(job_ids: list[str]) -> int:
    from .pbspro import PbsPro

    PbsPro().cancel(job_ids)
    return 0


def sidecar_command() -> int:
    from .cache import cache_dir
    from .cancel import qdel_command
    from .sidecar import sidecar

    return sidecar(cache_dir(), qdel_command())


def submit_command(jobscript, cluster: str) -> int:
    from ...config.clusters import load
    from ...model.errors import SweepError
    from ..jobscript import SubmitRefused
    from .pbspro import PbsPro

    loaded = load(cluster)
    if loaded.scheduler != PbsPro.scheduler:
        return refused(
            [f"--cluster {cluster}: its scheduler is {loaded.scheduler!r}; the PBS commands submit only to a "
             f"cluster with scheduler: {PbsPro.scheduler}"],
            "scalestudy: refused before submission",
        )  # fmt: skip
    try:
        print(PbsPro.for_cluster(loaded).submit(jobscript))
    except SweepError as error:
        return refused(error.problems, "scalestudy: refused before submission")
    except SubmitRefused as refusal:
        return refused(refusal.problems, "scalestudy: refused before submission")
    return 0


def plan_command(args: list[str]) -> int:
    """Dry mode lives with planning, above this layer (scalestudy.planning.dry_plan, on the Snakefile's
    plan.build_plan): this spelling hands over to `python -m scalestudy plan`, its arguments as given."""
    os.execv(sys.executable, [sys.executable, "-m", "scalestudy", "plan", *args])
    return 1  # not reached


def refused(problems: list[str], prefix: str) -> int:
    """One line per problem on stderr; the command's exit status."""
    for problem in problems:
        print(f"{prefix}: {problem}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command, args = (argv[0], argv[1:]) if argv else ("", [])
    if not any(arg.startswith("-") for arg in args):
        if command == "status" and len(args) == 1:
            return status_command(args[0])
        if command == "cancel":
            return cancel_command(args)
    if command == "plan":
        return plan_command(args)
    return parsed_command(argv)


def parsed_command(argv: list[str]) -> int:
    """Every command, with --help and errors from argparse."""
    from pathlib import Path

    from ...model.cli import OneLineParser

    parser = OneLineParser(prog="python -m scalestudy.scheduler.pbs")
    commands = parser.add_subparsers(dest="command", required=True)
    sub = commands.add_parser("submit", help="qsub a Snakemake jobscript; prints the job id")
    sub.add_argument("--cluster", required=True)
    sub.add_argument("jobscript", type=Path)
    stat = commands.add_parser("status", help="print running|success|failed for a job id")
    stat.add_argument("job_id")
    cancel = commands.add_parser("cancel", help="qdel job ids, detached; returns at once")
    cancel.add_argument("job_ids", nargs="*")
    commands.add_parser("sidecar", help="Snakemake's sidecar: deletes the run's unfinished jobs on an interrupt")
    commands.add_parser("plan", help="the qsub line of every point: python -m scalestudy plan --profile P")
    args = parser.parse_args(argv)
    if args.command == "status":
        return status_command(args.job_id)
    if args.command == "cancel":
        return cancel_command(args.job_ids)
    if args.command == "sidecar":
        return sidecar_command()
    return submit_command(args.jobscript, args.cluster)


if __name__ == "__main__":
    sys.exit(main())
