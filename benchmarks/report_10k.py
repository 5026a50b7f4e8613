"""How long does the report of a 10,000-run study take, and how large is its page?

A study of N runs (default 10,000: 5 scales x 4 MPI flag sets x 5 NCCL env sets x 100
repeats, 1% failed) is written as one metrics.json per run, with provenance shaped like a
real run's (about 1 KB per run and 0.7 KB per rank: the rank probe's line of every rank).
Then the steps behind `snakemake report`, timed one by one, in this process:

    runs.csv                     records.write_runs_table        (rule aggregate: every record read)
    scaling.csv + variants.csv   scaling.write_scaling_table,    (rule scaling)
                                 verdicts.write_variants_table
    the model columns            scaling_models.add_to_scaling_csv (rule scaling)
    the plots                    plots.plot_from_files           (rule plots)
    index.html + index.md        report.build_from_files         (rule report; provenance side file)

Targets: the steps together < 15 s on 2 cores; index.html < 5 MB. (Snakemake's own planning
of a 10,000-point study is benchmarks/overhead.py's.)

Run from the repository root with the venv active:
    python benchmarks/report_10k.py                  # 10,000 runs
    python benchmarks/report_10k.py --runs 200       # a smoke run (the tests do this)
Each figure is printed with its ratio to the target.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from scalestudy.analysis.records import MPI_COLUMN, write_runs_table  # noqa: E402
from scalestudy.analysis.scaling import (  # noqa: E402
    CURVE_COLUMNS,
    SCALE_COLUMNS,
    write_scaling_table,  # noqa: E402
)
from scalestudy.analysis.scaling_models import add_to_scaling_csv  # noqa: E402
from scalestudy.analysis.verdicts import write_variants_table  # noqa: E402
from scalestudy.model.metrics import WALLTIME_USED  # noqa: E402
from scalestudy.model.paths import PLOT_KINDS, Layout  # noqa: E402
from scalestudy.model.point import PLACEMENT_DEFAULTS  # noqa: E402
from scalestudy.presentation.plots import plot_from_files  # noqa: E402
from scalestudy.presentation.report import build_from_files  # noqa: E402

TARGET_S = 15.0
TARGET_MB = 5.0
STUDY = "big"
NODES = (1, 2, 4, 8, 16)
RANKS_PER_NODE = 2
MPI_SETS = ("default", "a", "b", "c")
NCCL_SETS = ("default", "x", "y", "z", "w")


def rank_record(rank: int, size: int, host: str) -> dict:
    """What the rank probe records of one rank (about 0.7 KB, as a real run's)."""
    env = {
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % RANKS_PER_NODE),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(RANKS_PER_NODE),
        "OMPI_COMM_WORLD_NODE_RANK": str(rank % RANKS_PER_NODE),
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": str(size),
        "OMPI_MCA_cpu_type": "x86_64",
        "OMPI_MCA_initial_wdir": "/scratch/ab12/scalestudy",
        "OMPI_MCA_mpi_show_mca_params": "enviro",
        "OMPI_MCA_mpi_show_mca_params_file": "/scratch/ab12/scalestudy/results/big/runs/nodes16/mca-params.txt",
        "OMPI_MCA_num_procs": str(size),
        "OMP_NUM_THREADS": "1",
        "NCCL_IB_DISABLE": "1",
        "PMIX_RANK": str(rank),
    }
    return {"env": env, "host": host, "pid": 100000 + rank, "rank": rank, "size": size}


def provenance(nodes: int) -> str:
    size = nodes * RANKS_PER_NODE
    hosts = [f"gadi-cpu-clx-{n:04d}" for n in range(nodes)]
    record = {
        "hostname": hosts[0],
        "hosts": hosts,
        "node_list": hosts,
        "job_id": "123456789.gadi-pbs",
        "python": "3.11.7",
        "versions": {"openmpi": "4.1.5", "mpi4py": "4.1.2", "snakemake": "9.27.1", "lammps": "2024.8.29"},
        "workflow_commit": "fbb2fb9a683864576074a98de6466ce1ac15ac7e",
        "mpi": {"launcher": "/apps/openmpi/4.1.5/bin/mpirun", "version": "mpirun (Open MPI) 4.1.5"},
        "modules": ["openmpi/4.1.5", "python3/3.11.7"],
        "python_packages_sha256": "8ce1250db9f52c233f9986b0e74a91160dc4dbe7531d2003742c583f045b3ff0",
        "python_packages": 121,
        "ranks": [rank_record(r, size, hosts[r // RANKS_PER_NODE]) for r in range(size)],
        "nccl_version": None,
    }
    return json.dumps(record, sort_keys=True)


def study_runs(total: int, seed: int = 0) -> pd.DataFrame:
    """`total` runs of one strong-scaling study (LAMMPS steps/s), 1% of them failed."""
    rng = np.random.default_rng(seed)
    points = [(n, m, c) for n in NODES for m in MPI_SETS for c in NCCL_SETS]
    repeats = -(-total // len(points))
    texts = {n: provenance(n) for n in NODES}
    rows = []
    for nodes, mpi_set, nccl_set in points:
        for repeat in range(1, repeats + 1):
            if len(rows) == total:
                break
            failed = rng.random() < 0.01
            ranks = nodes * RANKS_PER_NODE
            variant = f"mpi-{mpi_set}/nccl-{nccl_set}"
            rows.append({
                "study": STUDY, "app": "lammps", "scaling": "strong",
                "point": f"N200000/nodes{nodes}-rpn{RANKS_PER_NODE}/{variant}/rep{repeat}", "variant": variant,
                "nodes": nodes, "ranks_per_node": RANKS_PER_NODE, "gpus_per_node": 0, "ranks": ranks,
                "threads_per_rank": 1, "mpi_flag_set": mpi_set, "nccl_env_set": nccl_set, "param.N": 200000,
                "repeat": repeat, **PLACEMENT_DEFAULTS, "status": "failed" if failed else "ok",
                "reason": "walltime exceeded (scalestudy): killed after 1800 s" if failed else "",
                "category": "walltime" if failed else "",
                "steps_per_s": np.nan if failed else 400.0 * ranks**0.85 * (1 + 0.02 * rng.standard_normal()),
                WALLTIME_USED.name: 60.0 + 5 * rng.random(), "cores_allocated": ranks,
                "service_units": 2.0 * ranks * 65 / 3600, "service_units_source": "estimated",
                "params": '{"N": 200000, "benchmark_steps": 80000, "warmup_steps": 40000}',
                "mpi_flags": "{}" if mpi_set == "default" else '{"btl": "^ucx", "coll_hcoll_enable": "0"}',
                "provenance": texts[nodes], "started": "2026-11-23T07:06:18+00:00",
                "finished": "2026-11-23T07:07:23+00:00",
            })  # fmt: skip
    return pd.DataFrame(rows)


def write_records(table: pd.DataFrame, layout: Layout) -> list[tuple[dict, Path]]:
    """One metrics.json per run, as the runner writes them; (point columns, path) per run."""
    # A point never names its MPI: its record's provenance does (analysis.records.mpi_columns).
    curve = [c for c in CURVE_COLUMNS if c != MPI_COLUMN]
    columns = [*curve, *SCALE_COLUMNS, "point", "repeat", "threads_per_rank", "param.N"]
    expected = []
    for row in table.to_dict("records"):
        point = {c: row[c] for c in columns}
        path = Path(layout.metrics(STUDY, row["point"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        ok = row["status"] == "ok"
        record = {
            "status": row["status"], "reason": row["reason"] or None, "category": row["category"] or None,
            "point": point, "params": json.loads(row["params"]), "mpi_flags": json.loads(row["mpi_flags"]),
            "nccl_env": {}, "figures": {"steps_per_s": row["steps_per_s"]} if ok else {},
            "resources": {c: row[c] for c in (WALLTIME_USED.name, "cores_allocated", "service_units",
                                              "service_units_source")},
            "provenance": json.loads(row["provenance"]), "started": row["started"], "finished": row["finished"],
        }  # fmt: skip
        path.write_text(json.dumps(record))
        expected.append((point, path))
    return expected


def scaling_and_variants(runs_csv: Path, scaling_csv: str, variants_csv: str) -> None:
    """As the scaling rule: scaling.csv, then variants.csv from its table."""
    table, runs = write_scaling_table(runs_csv, scaling_csv)
    write_variants_table(table, runs, variants_csv)


def timed(what: str, function, *args, **kwargs) -> float:
    start = time.perf_counter()
    function(*args, **kwargs)
    seconds = time.perf_counter() - start
    print(f"  {what}: {seconds:.2f} s", flush=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the study (default 10,000)")
    parser.add_argument("--keep", type=Path, help="write the results here (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        layout = Layout(str(args.keep or Path(scratch) / "results"))
        runs_csv = Path(layout.table(STUDY, "runs"))
        table = study_runs(args.runs)
        expected = write_records(table, layout)
        print(f"{len(table):,} records ({(table['status'] == 'failed').sum()} failed) under {layout.results}")
        seconds = timed("runs.csv", write_runs_table, expected, runs_csv)
        print(f"  (runs.csv: {runs_csv.stat().st_size / 1e6:.1f} MB)")
        scaling_csv, variants_csv = layout.table(STUDY, "scaling"), layout.table(STUDY, "variants")
        plots = {kind: layout.plot(STUDY, kind) for kind in PLOT_KINDS}
        seconds += timed("scaling.csv + variants.csv", scaling_and_variants, runs_csv, scaling_csv, variants_csv)
        seconds += timed("scaling models (scaling.csv's columns)", add_to_scaling_csv, scaling_csv)
        # As the plots rule: runs.csv too (the size curves' plot reads it).
        seconds += timed("plots", plot_from_files, scaling_csv, variants_csv, STUDY, plots, None, None, runs_csv)
        seconds += timed(
            "index.html + index.md + provenance side file",
            build_from_files,
            [STUDY], [str(runs_csv)], [scaling_csv], [variants_csv], list(plots.values()),
            layout.report_html, layout.report_markdown, provenance=[layout.provenance(STUDY)],
        )  # fmt: skip
        page_mb = Path(layout.report_html).stat().st_size / 1e6
        side_mb = Path(layout.provenance(STUDY)).stat().st_size / 1e6
        print(f"report of {len(table):,} runs: {seconds:.2f} s (target {TARGET_S:g} s; ratio {seconds / TARGET_S:.2f})")
        print(f"index.html: {page_mb:.2f} MB (target {TARGET_MB:g} MB; ratio {page_mb / TARGET_MB:.2f}); "
              f"provenance side file {side_mb:.1f} MB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
