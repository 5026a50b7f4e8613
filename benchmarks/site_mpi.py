"""A site's MPI across two real hosts: the workflow on the site's Open MPI 4.1 (a module) against
mpi4py's own ping-pong run by hand with that MPI, and pip's Open MPI 5 against the site's 4.1.

    python benchmarks/site_mpi.py [--min-bytes 1] [--max-bytes 1048576] [--iterations 1000]
        [--warmup 100] [--rounds 5] [--site-python .venv-site/bin/python] [--study-repeats 3]
        [--keep DIR]

Needs root (two hosts: tests/support/hosts.py), Lmod and Debian's Open MPI 4.1 (the module tree of
tests/support/site_modules.py, written here), and the site's Python environment built under that
module (`SCALESTUDY_MPI=site bash scripts/setup.sh`, into .venv-site by scripts/test.sh); without
one of them it says which and exits 0. Three comparisons, each per round one side after the other,
alternating which goes first (benchmarks/collectives_reference.side_by_side):
  1. ping-pong on the site's 4.1: a 2-node `pingpong` point (one rank per host) through `python -m
     scalestudy run-point` with a cluster file whose `mpi.source` is site (the runner loads the
     module), against the module's `mpirun -np 2 --host h1:1,h2:1 .venv-site/bin/python -m
     mpi4py.bench pingpong` by hand with the same sizes, warm-up and iterations: the ratio
     app / reference of one-way latency and bandwidth per size;
  2. "which MPI", ping-pong: the same point on pip's Open MPI 5 (.venv, the local cluster) against
     the site's 4.1: the ratio pip's / site's per size (a user's question, not a check: no band);
  3. "which MPI", allreduce: a 2-node `collectives` allreduce (backend mpi, float32) the same way;
  4. "which MPI", as a study a user runs: one sweep (a 2-node ping-pong and allreduce study, flag
     set `tcp`, --study-repeats runs) run by Snakemake (profiles/local) on the first host twice,
     with pip's Open MPI (a cluster file `mpi.source: python_env`) and with the site's module
     (`mpi.source: site`), then `python -m scalestudy compare` of the two results (pip's the
     baseline): its verdict lines, what it finds different in the runs' provenance, and where
     its report is (--keep DIR keeps both results and the comparison).
Both MPIs cross the bed's bridge over TCP between network namespaces. Each run's ranks name the
library they loaded: printed, and the run stops if a side ran on another MPI than it says.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "workflow"), str(REPO / "tests" / "support"), str(Path(__file__).parent)]

import pandas as pd  # noqa: E402
import site_modules  # noqa: E402
import yaml  # noqa: E402
from collectives_reference import compare, mpi4py_pingpong_command, mpi4py_table, side_by_side, size_parser  # noqa: E402
from hosts import Hosts, unavailable_reason  # noqa: E402
from multihost_curves import ALLREDUCE_DTYPE, app_allreduce, app_pingpong, by_hand, on_first_host, size_table  # noqa: E402
from scalestudy.apps.collectives.rank import DTYPES  # noqa: E402


def missing(site_python: Path) -> str | None:
    """Why this cannot run here, or None."""
    if not Path(site_modules.LMOD_INIT).is_file():
        return "no Lmod (scripts/system-packages.sh installs lmod)"
    if site_modules.installed_version("openmpi") is None:
        return "no Debian Open MPI 4.1 (scripts/system-packages.sh installs openmpi-bin)"
    if not site_python.is_file():
        return f"no {site_python} (scripts/test.sh builds it: SCALESTUDY_MPI=site bash scripts/setup.sh)"
    return unavailable_reason()


def site(folder: Path, site_python: Path) -> dict:
    """The site: its module tree, a login shell's environment with Lmod (the module not loaded:
    the runner loads it), a cluster file `site` (this machine, mpi.source: site), the module's mpirun."""
    tree = site_modules.write_tree(folder / "modulefiles")
    path = f"{site_python.parent}:/usr/local/bin:/usr/bin:/bin"
    environ = site_modules.shell_environment(
        {"PATH": path, "HOME": os.environ.get("HOME", "/root")}, [folder / "modulefiles"]
    )
    cluster = yaml.safe_load((REPO / "config/clusters/local.yaml").read_text())
    cluster.update(name="site", modules=[tree["openmpi"]])
    cluster["mpi"]["source"] = "site"
    (folder / "clusters").mkdir()
    (folder / "clusters" / "site.yaml").write_text(yaml.safe_dump(cluster))
    environ["SCALESTUDY_CLUSTERS_DIR"] = str(folder / "clusters")
    prefix = folder / "modulefiles" / ".prefix" / tree["openmpi"].replace("/", "-")
    return {"environ": environ, "cluster": "site", "module": tree["openmpi"], "mpirun": str(prefix / "bin" / "mpirun")}


def library_said(expected: str):
    """The library the last run's ranks named, checked to be `expected` (e.g. 'Open MPI v4.1')."""
    libraries = list(size_table.libraries or {})
    if len(libraries) != 1 or not libraries[0].startswith(expected):
        raise SystemExit(f"expected every rank on {expected}, the ranks said {libraries}")
    return libraries[0].split(",")[0]


def which_mpi_study(bed: Hosts, folder: Path, the_site: dict, site_python: Path, args) -> None:
    """Part 4: the same sweep on pip's MPI and on the site's, through Snakemake, then compared."""
    clusters = folder / "study-clusters"
    clusters.mkdir()
    local = yaml.safe_load((REPO / "config/clusters/local.yaml").read_text())
    site_file = yaml.safe_load((Path(the_site["environ"]["SCALESTUDY_CLUSTERS_DIR"]) / "site.yaml").read_text())
    for name, data in (("pip", local), ("site", site_file)):
        (clusters / f"{name}.yaml").write_text(yaml.safe_dump({**data, "name": name, "nodes": len(bed.hosts)}))
    common = {"nodes": [2], "ranks_per_node": [1], "repeats": args.study_repeats, "mpi_flags": ["tcp"],
              "walltime": "00:03:00"}  # fmt: skip
    sizes = {"min_bytes": args.min_bytes, "max_bytes": args.max_bytes, "iterations": args.iterations,
             "warmup": args.warmup}  # fmt: skip
    studies = {"pp": {**common, "app": "pingpong", "params": sizes},
               "coll": {**common, "app": "collectives",
                        "params": {**sizes, "operation": "allreduce", "backend": "mpi", "dtype": ALLREDUCE_DTYPE,
                                   "min_bytes": max(args.min_bytes, DTYPES[ALLREDUCE_DTYPE])}}}  # fmt: skip
    sides = {"pip": (REPO / ".venv" / "bin" / "python", {**os.environ}), "site": (site_python, the_site["environ"])}
    for name, (python, environ) in sides.items():
        sweep = {"cluster": name, "results_dir": str(folder / f"results-{name}"),
                 "mpi_flag_sets": {"tcp": {"btl": "self,tcp"}}, "studies": studies}  # fmt: skip
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(sweep))
        command = [str(python), "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(folder),
                   "--profile", str(REPO / "profiles/local"), "--configfile", str(folder / f"{name}.yaml")]  # fmt: skip
        env = {**environ, "PYTHONPATH": str(REPO / "workflow"), "SCALESTUDY_CLUSTERS_DIR": str(clusters),
               **bed.launch_env()}  # fmt: skip
        done = subprocess.run(bed.command(0, command), cwd=folder, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the study on {name}'s MPI failed:\n{done.stderr[-3000:]}")
        said = {study: sorted(set(pd.read_csv(folder / f"results-{name}" / study / "runs.csv")["mpi_library"]))
                for study in studies}  # fmt: skip
        print(f"  the study on {name}'s MPI: ranks on {said}")
    compared = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "scalestudy", "compare", str(folder / "results-pip"),
         str(folder / "results-site"), "--out", str(folder / "compare")],
        env={**os.environ, "PYTHONPATH": str(REPO / "workflow")}, capture_output=True, text=True,
    )  # fmt: skip
    print("\n## which MPI, as a study: pip's Open MPI 5 (baseline) vs the site's 4.1 (candidate), `scalestudy compare`")
    print(compared.stdout.strip() or compared.stderr.strip())
    page = (folder / "compare" / "index.md").read_text() if (folder / "compare" / "index.md").is_file() else ""
    differ = [line for line in page.splitlines() if "Open MPI" in line or "modules" in line.lower()]
    print("what the comparison finds different in the runs' provenance:", *differ[:8], sep="\n  ")


def main() -> int:
    parser = size_parser(__doc__)
    parser.add_argument("--site-python", type=Path, default=REPO / ".venv-site" / "bin" / "python")
    parser.add_argument("--study-repeats", type=int, default=3, help="runs of each point in part 4 (the study)")
    parser.add_argument("--keep", type=Path, help="keep part 4's results and comparison here (a new folder)")
    args = parser.parse_args()
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep}: exists; give a new folder")
    reason = missing(args.site_python)
    if reason:
        print(f"site MPI: skipped ({reason})")
        return 0
    allreduce_args = argparse.Namespace(**{**vars(args), "min_bytes": max(args.min_bytes, DTYPES[ALLREDUCE_DTYPE])})
    with tempfile.TemporaryDirectory(prefix="site-mpi-") as scratch:
        folder = Path(scratch)
        the_site = site(folder, args.site_python)
        on_site = {"python": str(args.site_python), "site": the_site}
        with Hosts(folder / "bed", 2) as bed:
            cpus = "a CPU of its own per host" if bed.cpusets else "no cpuset: the hosts share every CPU"
            print(f"two hosts {bed.names} on {bed.subnet} ({cpus}); the site's module {the_site['module']}; "
                  f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip

            def site_app():
                table = app_pingpong(bed, folder, args, **on_site)
                print(f"  app on the site: ranks on {library_said('Open MPI v4.1')}")
                return table

            def site_by_hand():
                command = mpi4py_pingpong_command(by_hand(bed, the_site["mpirun"]), args, str(args.site_python))
                return mpi4py_table(on_first_host(bed, command, the_site["environ"]))

            def pip_app():
                table = app_pingpong(bed, folder, args)
                print(f"  app on pip's MPI: ranks on {library_said('Open MPI v5')}")
                return table

            ours, theirs = side_by_side(site_app, site_by_hand, args.rounds)
            compare("the site's Open MPI 4.1, two-host ping-pong vs mpi4py.bench pingpong by hand", ours, theirs,
                    args.rounds, ("latency_us", "bandwidth_MBps"))  # fmt: skip
            ours, theirs = side_by_side(pip_app, site_app, args.rounds)
            compare("which MPI: two-host ping-pong, pip's Open MPI 5 (app) vs the site's 4.1 (reference)", ours,
                    theirs, args.rounds, ("latency_us", "bandwidth_MBps"))  # fmt: skip
            ours, theirs = side_by_side(
                lambda: app_allreduce(bed, folder, allreduce_args),
                lambda: app_allreduce(bed, folder, allreduce_args, **on_site),
                args.rounds,
            )
            compare("which MPI: two-host allreduce, pip's Open MPI 5 (app) vs the site's 4.1 (reference)", ours,
                    theirs, args.rounds, ("latency_us",))  # fmt: skip
            which_mpi_study(bed, folder, the_site, args.site_python, args)
            if args.keep is not None:
                shutil.copytree(folder, args.keep, ignore=shutil.ignore_patterns("bed", "modulefiles"))
                print(f"kept: {args.keep} (results-pip/, results-site/, compare/index.html)")
            print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
