"""Command line of the package, as the rules call it:

    python -m scalestudy run-point --point JSON --walltime-s S --cluster NAME --queue Q --results-dir DIR \
        --metrics FILE --log FILE
    python -m scalestudy published RECORD.csv --out DIR   # a published table, regenerated
    python -m scalestudy compare BASELINE CANDIDATE --out DIR [--fail-slower 5%] [--study NAME]
    python -m scalestudy memory [--configfile F ...] [--study NAME]   # predicted memory per rank
    python -m scalestudy plan --profile profiles/gadi [--configfile F ...] [--config k=v ...]

`memory` runs nothing: it prints the memory model's prediction for every point of the apps
that train (study, point, each term, total, its range within the model's uncertainty, what a
rank has, fits: yes / MAY NOT / NO) and exits 1 if any point does not fit.
`plan` submits nothing either: the exact submit line (qsub, sbatch) of every point a profile would run,
after the sweep's cost forecast (dry_plan); a sweep the Snakefile refuses is refused with the
Snakefile's `sweep error:` lines.

Bad input (a file that is no record, a folder where a file goes, an --out that is a file,
an unknown option) is one line on stderr and exit status 2, never a traceback.

run-point always exits 0 once metrics.json is written: a failed run is data, not a
failed Snakemake job. It exits 1 only when metrics.json cannot be written at all
(e.g. a full disk): then no metrics.json exists and the point reruns next time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .config import clusters
from .launch.runner import run_point
from .model.cli import OneLineParser, refuse
from .model.errors import SweepError
from .model.paths import Layout, folder_problem
from .model.point import Point


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m scalestudy")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run-point", help="run one point and write its metrics.json")
    run.add_argument("--point", required=True, help="the point, as JSON (from the workflow)")
    run.add_argument("--walltime-s", type=int, required=True, help="stop the run after this many seconds")
    run.add_argument("--cluster", required=True, help="name of config/clusters/<name>.yaml")
    run.add_argument("--metrics", required=True, help="the metrics.json to write; its folder is the run directory")
    run.add_argument("--log", help="where the app's output goes (default: <run-dir>/stdout.log)")
    run.add_argument("--queue", default=None, help="the batch queue the point runs in (for its cost)")
    run.add_argument("--results-dir", default=Layout().results, help="the results directory (its assets are inputs)")
    run.add_argument("--order-seed", type=int, default=None, help="the sweep's order_seed (recorded)")
    record = commands.add_parser("published", help="regenerate a published scaling table from its record (CSV)")
    record.add_argument("record", help="CSV: nodes, cores_per_node, steps_per_s, walltime_used[, ...]")
    record.add_argument("--out", required=True, help="folder for index.html, index.md and plots/")
    against = commands.add_parser("compare", help="two results directories (or a published record and one), compared")
    against.add_argument("baseline", help="a results directory, or a published record (.csv)")
    against.add_argument("candidate", help="a results directory")
    against.add_argument("--out", required=True, help="folder for index.html, index.md and compare.csv")
    against.add_argument(
        "--fail-slower",
        metavar="PCT",
        help="exit 1 when a point's primary figure is slower with its whole 95%% CI below 1 - PCT (e.g. 5%%)",
    )
    against.add_argument("--study", help="compare this study only (a published record stands for it)")

    memory = commands.add_parser("memory", help="predicted memory per rank of every point; exit 1 if one does not fit")
    # As Snakemake's: `--configfile A B` (and given again, extended).
    memory.add_argument(
        "--configfile",
        nargs="+",
        action="extend",
        help="sweep files, merged in order (default: config/sweep.yaml)",
    )
    memory.add_argument("--study", action="append", help="only this study (may be given again)")
    dry = commands.add_parser("plan", help="print each point's qsub or sbatch line (nothing submitted)")
    dry.add_argument("--profile", type=Path, required=True, help="a cluster's profile folder, e.g. profiles/gadi")
    dry.add_argument("--configfile", nargs="*", default=[], help="replace the profile's configfiles, as snakemake")
    dry.add_argument("--config", nargs="*", default=[], help="k=v: replace the profile's config entries")
    dry.add_argument(
        "--predict-from",
        type=Path,
        help="a results directory (or a published record) of the study measured at smaller scales: each larger"
        " planned scale's predicted figure, efficiency and cost (scaling models)",
    )
    args = parser.parse_args(argv)
    prog = f"{parser.prog} {args.command}"
    out = getattr(args, "out", None)
    if out is not None and folder_problem(out):
        return refuse(prog, [f"--out {out}: {folder_problem(out)}; give a folder (made where missing)"])
    try:
        if args.command == "memory":
            return print_memory(args.configfile, args.study)
        if args.command == "plan":
            return plan_command(args.profile, args.configfile, args.config, args.predict_from)
        if args.command == "published":
            from .presentation.published_page import write_record_page

            print(f"scalestudy: {write_record_page(args.record, args.out)}")
            return 0
        if args.command == "compare":
            return compare_command(args)
        run_dir = Path(args.metrics).parent
        cluster = clusters.load(args.cluster)
        try:
            point = Point.from_json(args.point, args.walltime_s, args.queue or None)
        except (ValueError, KeyError, TypeError) as error:
            return refuse(prog, [f"--point: not a point as the workflow writes it ({type(error).__name__}: {error})"])
    except SweepError as error:
        return refuse(prog, error.problems)
    try:
        metrics = run_point(point, run_dir, cluster, args.log, Layout(args.results_dir), args.order_seed)
    except OSError as error:
        # Nothing to record the failure in (e.g. the disk is full): fail the job, leave no
        # metrics.json, and the point reruns next time.
        print(f"scalestudy: {run_dir}: cannot write metrics.json: {error}; the point reruns next time", file=sys.stderr)
        return 1
    outcome = metrics["status"] + (f" ({metrics['reason']})" if metrics["reason"] else "")
    print(f"scalestudy: {run_dir}: {outcome}")
    return 0


def plan_command(profile: Path, configfiles: list[str], config: list[str], predict_from: Path | None = None) -> int:
    from .analysis.ladder import judge
    from .planning.dry_plan import plan
    from .presentation.planned_predictions import predictions

    if predict_from is not None and not predict_from.exists():
        return refuse("plan", [f"--predict-from {predict_from}: no such results directory or record"])
    try:
        lines = plan(profile, configfiles, config, predictions(predict_from) if predict_from else None, judge)
    except SweepError as error:
        return refuse("sweep error", error.problems)  # as the Snakefile says it
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:
        # The reader stopped early (`plan ... | head`): no traceback, and none again when
        # Python flushes stdout on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def compare_command(args) -> int:
    """Every primary verdict on stdout, the page in --out; 1 when --fail-slower trips, 2 on bad input."""
    from .model.paths import compare_outputs
    from .presentation.compare import compare, summary_lines
    from .presentation.comparison import parse_threshold

    threshold = parse_threshold(args.fail_slower) if args.fail_slower is not None else None
    table, failing = compare(args.baseline, args.candidate, args.out, threshold, args.study)
    for line in summary_lines(table):
        print(line)
    print(f"scalestudy: {compare_outputs(args.out)['html']}")
    if len(failing):
        print(
            f"scalestudy compare: {len(failing)} point(s) slower by more than {threshold:.0%} (whole 95% CI "
            f"below {1 - threshold:.3g})",
            file=sys.stderr,
        )
        return 1
    return 0


def print_memory(configfiles: list[str] | None, studies: list[str] | None) -> int:
    from .apps.registry import APPS, App
    from .config.files import load_files
    from .config.study import memory_rows
    from .model.errors import SweepError
    from .model.memory import DOES_NOT_FIT, FITS, MAY_NOT_FIT, TERMS
    from .model.paths import DEFAULT_SWEEP
    from .model.units import GB
    from .scheduler.site import load_study

    files = configfiles or [str(DEFAULT_SWEEP)]
    try:
        study = load_study(load_files(*files), files=files, submits=False, check_memory=False)
    except SweepError as error:
        print(error, file=sys.stderr)
        return 2
    unknown = sorted(set(studies or ()) - set(study.sweep.studies))
    if unknown:
        print(f"--study: no study {', '.join(unknown)}; allowed: {', '.join(study.sweep.studies)}", file=sys.stderr)
        return 2
    points = [p for p in study.points if not studies or p.study in studies]
    rows = memory_rows(points, study.cluster)
    terms = TERMS
    print(
        "\t".join(["study", "point", *(f"{name} GB" for name in terms), "total GB", "range GB", "capacity GB", "fits"])
    )
    for row in rows:
        gbs = row.prediction.terms_gb() if row.prediction else {}
        capacity = "unknown" if row.capacity_gb is None else f"{row.capacity_gb:.3g} per {row.per}"
        answer = {FITS: "yes", MAY_NOT_FIT: "MAY NOT", DOES_NOT_FIT: "NO", None: "unknown"}[row.verdict]
        cells = [f"{gbs.get(name, 0):.4g}" for name in terms] if gbs else ["-"] * len(terms)
        total = f"{row.prediction.total / GB:.4g}" if row.prediction else "-"
        bounds = f"{row.prediction.bound(0) / GB:.4g}-{row.prediction.bound(1) / GB:.4g}" if row.prediction else "-"
        note = f" ({row.note})" if row.note else ""
        print("\t".join([row.point.study, row.point.id, *cells, total, bounds, capacity, answer + note]))
    refused = [row for row in rows if row.verdict == DOES_NOT_FIT]
    for row in rows:
        if row.verdict in (MAY_NOT_FIT, DOES_NOT_FIT):
            print(row.line(study.cluster.name), file=sys.stderr)
    if not rows:
        modelled = ", ".join(name for name, app in APPS.items() if type(app).memory is not App.memory)
        print(f"scalestudy: no point of an app with a memory model ({modelled})", file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
