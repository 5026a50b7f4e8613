"""Command line of the package, as the rules call it:

    python -m scalestudy run-point --point JSON --walltime-s S --cluster NAME --queue Q --results-dir DIR \
        --metrics FILE --log FILE
    python -m scalestudy published RECORD.csv --out DIR   # a published table, regenerated
    python -m scalestudy compare BASELINE CANDIDATE --out DIR [--fail-slower 5%] [--study NAME]
    python -m scalestudy memory [--configfile F ...] [--study NAME]   # predicted memory per rank

`memory` runs nothing: it prints the memory model's prediction for every point of the apps
that train (study, point, each term, total, what a rank has, fits) and exits 1 if any
point does not fit.

It always exits 0 once metrics.json is written: a failed run is data, not a
failed Snakemake job. It exits 1 only when metrics.json cannot be written at all
(e.g. a full disk): then no metrics.json exists and the point reruns next time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .config import clusters
from .launch.runner import run_point
from .model.paths import Layout
from .model.point import Point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalestudy")
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
    memory.add_argument(
        "--configfile", action="append", help="sweep files, merged in order (default: config/sweep.yaml)"
    )
    memory.add_argument("--study", action="append", help="only this study (may be given again)")
    args = parser.parse_args(argv)
    if args.command == "memory":
        return print_memory(args.configfile, args.study)
    if args.command == "published":
        from .published_page import write_record_page

        print(f"scalestudy: {write_record_page(args.record, args.out)}")
        return 0
    if args.command == "compare":
        return compare_command(args)
    run_dir = Path(args.metrics).parent
    point = Point.from_json(args.point, args.walltime_s, args.queue or None)
    try:
        metrics = run_point(
            point, run_dir, clusters.load(args.cluster), args.log, Layout(args.results_dir), args.order_seed
        )
    except OSError as error:
        # Nothing to record the failure in (e.g. the disk is full): fail the job, leave no
        # metrics.json, and the point reruns next time.
        print(f"scalestudy: {run_dir}: cannot write metrics.json: {error}; the point reruns next time", file=sys.stderr)
        return 1
    outcome = metrics["status"] + (f" ({metrics['reason']})" if metrics["reason"] else "")
    print(f"scalestudy: {run_dir}: {outcome}")
    return 0


def compare_command(args) -> int:
    """Every primary verdict on stdout, the page in --out; 1 when --fail-slower trips, 2 on bad input."""
    from .compare import CompareError, compare, parse_threshold, summary_lines
    from .model.paths import compare_outputs

    try:
        threshold = parse_threshold(args.fail_slower) if args.fail_slower is not None else None
        table, failing = compare(args.baseline, args.candidate, args.out, threshold, args.study)
    except CompareError as error:
        print(f"scalestudy compare: {error}", file=sys.stderr)
        return 2
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
    from .apps import APPS, App
    from .config.files import load_files
    from .model.errors import SweepError
    from .model.paths import DEFAULT_SWEEP
    from .model.units import GB
    from .scheduler.site import load_study
    from .study import memory_rows

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
    columns = [
        "study",
        "point",
        "model GB",
        "optimizer GB",
        "gradients GB",
        "activations GB",
        "total GB",
        "capacity GB",
        "fits",
    ]
    print("\t".join(columns))
    for row in rows:
        terms = row.prediction.terms_gb() if row.prediction else {}
        capacity = "unknown" if row.capacity_gb is None else f"{row.capacity_gb:.3g} per {row.per}"
        fits = {True: "yes", False: "NO", None: "unknown"}[row.fits]
        cells = (
            [f"{terms[name]:.4g}" for name in ("model", "optimizer", "gradients", "activations")]
            if terms
            else ["-"] * 4
        )
        total = f"{row.prediction.total / GB:.4g}" if row.prediction else "-"
        print(
            "\t".join(
                [row.point.study, row.point.id, *cells, total, capacity, fits + (f" ({row.note})" if row.note else "")]
            )
        )
    refused = [row for row in rows if row.fits is False]
    for row in refused:
        print(row.refusal(study.cluster.name), file=sys.stderr)
    if not rows:
        modelled = ", ".join(name for name, app in APPS.items() if type(app).memory is not App.memory)
        print(f"scalestudy: no point of an app with a memory model ({modelled})", file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
