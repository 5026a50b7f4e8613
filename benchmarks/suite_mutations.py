"""Does the test suite still catch the defects it was written to catch? Hand-made mutations of
the core code, each a realistic defect (a wrong comparison, a state mapped wrong, a unit wrong,
a check dropped), each run against the tests named to catch it.

For each mutation the revision's tree is copied into a folder of its own (the working tree's
tracked and not-ignored files, or `git archive` of --rev), its tests are run there once as they
are (they must pass, else the mutation proves nothing), then the mutation is applied (its old
text must occur exactly once) and the same tests are run again: caught where pytest fails
(exit 1). tests/conftest.py puts the copy's workflow/ first on sys.path, and PYTHONPATH names it
for the processes the tests start, so the copy's code is what is tested. A test named by a file
that no longer defines it is looked for by its name elsewhere under tests/ (the suite may have
been reorganised between revisions).

    python benchmarks/suite_mutations.py                  # the working tree
    python benchmarks/suite_mutations.py --rev 761a33d    # the suite before issue 46
    python benchmarks/suite_mutations.py --only 1,2 -j 2  # a subset, two at a time
    python benchmarks/suite_mutations.py --list           # what each mutation is

Prints a line per mutation (`<n> <area>: <defect> -- caught by <test> | NOT CAUGHT | error: ...`)
and `mutations caught: K/N at <rev> (each test passed unmutated)`; exits 1 unless all are caught.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
# One pytest run (the integration tests named below take seconds; a hang is an error, not a catch).
PYTEST_TIMEOUT_S = 600


class Mutation(NamedTuple):
    area: str
    path: str
    old: str
    new: str
    defect: str
    tests: tuple[str, ...]


SRC, UNIT, INTEGRATION = "workflow/scalestudy/", "tests/unit/", "tests/integration/"

MUTATIONS = [
    Mutation(
        "launch", SRC + "launch/failures.py",
        '        ("out_of_memory", OUT_OF_MEMORY, "out of memory"),\n'
        '        ("nccl_error", NCCL_ERROR, "NCCL error"),\n'
        '        ("dependency_missing", DEPENDENCY_MISSING, "dependency missing"),\n'
        '        ("mpi_init_error", MPI_INIT_ERROR, "MPI failed to start"),\n'
        '        ("mpi_abort", MPI_ABORT, "MPI job aborted or lost a rank"),\n',
        '        ("nccl_error", NCCL_ERROR, "NCCL error"),\n'
        '        ("dependency_missing", DEPENDENCY_MISSING, "dependency missing"),\n'
        '        ("mpi_init_error", MPI_INIT_ERROR, "MPI failed to start"),\n'
        '        ("mpi_abort", MPI_ABORT, "MPI job aborted or lost a rank"),\n'
        '        ("out_of_memory", OUT_OF_MEMORY, "out of memory"),\n',
        "a rank killed for running out of memory is recorded mpi_abort (the consequence, not the cause)",
        (UNIT + "test_failures.py::test_the_cause_wins_over_its_consequence",),
    ),
    Mutation(
        "launch", SRC + "launch/failures.py",
        'SCHEDULER_WALLTIME = {"TIMEOUT", "DEADLINE", "-29"}',
        'SCHEDULER_WALLTIME = {"TIMEOUT", "DEADLINE"}',
        "a job PBS killed at its walltime (Exit_status -29) is not recorded as walltime",
        (UNIT + "test_failures.py::test_each_failure_gets_its_category",),
    ),
    Mutation(
        "launch", SRC + "launch/runner.py",
        '                return Execution(time.perf_counter() - start, code, "walltime")',
        "                return Execution(time.perf_counter() - start, code)",
        "a point the runner stops at its walltime is recorded as the app's own error (app_error), not walltime",
        (INTEGRATION + "test_faults.py::test_a_point_longer_than_its_walltime_is_stopped_as_walltime",),
    ),
    Mutation(
        "launch", SRC + "launch/runner.py",
        "    except BaseException:\n        tmp.unlink(missing_ok=True)\n        raise",
        "    except BaseException:\n        raise",
        "a metrics.json write that fails (disk full) leaves its half-written copy in the run directory",
        (INTEGRATION + "test_faults.py::test_a_metrics_write_that_fails_leaves_no_half_file",),
    ),
    Mutation(
        "launch", SRC + "launch/command.py",
        'return ",".join(f"{host}:{point.ranks_per_node}" for host in hosts[: point.nodes])',
        'return ",".join(f"{host}:{point.ranks_per_node}" for host in hosts)',
        "a 2-node point in a 3-node allocation is launched on all 3 hosts",
        (UNIT + "test_launch.py::test_hosts_come_from_the_pbs_nodefile_once_each",),
    ),
    Mutation(
        "launch", SRC + "launch/command.py",
        'argv = [mpi.launcher, "-np", str(point.ranks), *placement.openmpi_args(point)]',
        'argv = [mpi.launcher, "-np", str(point.ranks_per_node), *placement.openmpi_args(point)]',
        "mpirun starts one node's ranks (-np ranks_per_node) for a multi-node point",
        (UNIT + "test_launch.py::test_mpirun_command_is_exact",),
    ),
    Mutation(
        "scheduler", SRC + "scheduler/pbs/status.py",
        'FINISHED_STATES = ("F", "X", "C")',
        'FINISHED_STATES = ("F", "X")',
        "a Torque job in state C (completed) is read as still running, for ever",
        (UNIT + "test_pbs.py::test_qstat_text_states_of_torque_style_qstat",),
    ),
    Mutation(
        "scheduler", SRC + "scheduler/pbs/status.py",
        "        if self.exit_status == 0:\n",
        "        if self.exit_status <= 0:\n",
        "a PBS job killed at its walltime (Exit_status -29) is reported to Snakemake as a success",
        (UNIT + "test_pbs.py::test_qstat_json_states",),
    ),
    Mutation(
        "scheduler", SRC + "scheduler/pbs/status.py",
        "return self.finished and self.exit_status is None and self.substate == JOB_SUBSTATE_TERMINATED",
        "return self.finished and self.substate == JOB_SUBSTATE_TERMINATED",
        "a PBS job qdel'd while running is taken for one deleted while queued: its failed run goes unrecorded",
        (UNIT + "test_openpbs_recorded.py::test_a_job_deleted_while_queued_never_ran",),
    ),
    Mutation(
        "scheduler", SRC + "scheduler/slurm.py",
        '"BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "ERROR",',
        '"BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "ERROR",',
        "a Slurm job past its time limit (TIMEOUT) is reported as still running",
        (UNIT + "test_scheduler_interface.py::test_slurm_status_and_cost_from_what_slurm_answered",),
    ),
    Mutation(
        "scheduler", SRC + "scheduler/slurm.py",
        '    return state.split(" ")[0].rstrip("+") in ENDED_STATES',
        '    return state.rstrip("+") in ENDED_STATES',
        "a Slurm job a user cancelled (sacct: 'CANCELLED by 0') is never seen to end, so never charged",
        (UNIT + "test_slurm_elapsed.py::test_sacct_lines_of_a_slurmdbd",),
    ),
    Mutation(
        "memory model", SRC + "model/memory.py",
        "optimizer = (2 * precision.moment + precision.master) * t / (d if z >= 1 else 1)",
        "optimizer = (2 * precision.moment + precision.master) * t / (d if z >= 2 else 1)",
        "ZeRO stage 1 is predicted to hold the whole optimizer state on every rank, not its shard",
        (UNIT + "test_memory_model.py::test_each_zero_stage_shards_its_term_and_stage_3_gathers_units_in_flight",),
    ),
    Mutation(
        "memory model", SRC + "model/memory.py",
        "    if prediction.bound(1) <= capacity:\n        return FITS",
        "    if prediction.bound(0) <= capacity:\n        return FITS",
        "a point whose upper estimate exceeds the memory is said to fit (no may-not-fit warning)",
        (UNIT + "test_memory_model.py::test_three_answers_follow_the_stated_uncertainty_of_each_term",),
    ),
    Mutation(
        "memory model", SRC + "model/memory.py",
        '"bf16-mixed": Precision(4, 4, 4, cast_copy=2, compute="bfloat16"),',
        '"bf16-mixed": Precision(4, 4, 4, compute="bfloat16"),',
        "bf16-mixed training's 16-bit copy of the weights is left out of the prediction",
        (UNIT + "test_memory_model.py::test_ddp_holds_its_gradient_buckets_and_mixed_precision_a_16_bit_weight_copy",),
    ),
    Mutation(
        "memory model", SRC + "config/clusters.py",
        'return gib_in_gb(chosen.mem_per_node_gib) / max(ranks_per_node, 1), "rank"',
        'return gib_in_gb(chosen.mem_per_node_gib), "rank"',
        "a CPU rank is checked against the whole node's memory, not its share of it",
        (UNIT + "test_memory_model.py::"
         "test_ranks_per_node_that_leave_a_rank_less_than_its_process_is_refused_naming_ranks_per_node",),
    ),
    Mutation(
        "verdicts", SRC + "analysis/statistics.py",
        'out["std"] = float(x.std(ddof=1))',
        'out["std"] = float(x.std())',
        "the repeats' standard deviation divides by n, not n - 1: every confidence interval too narrow",
        (UNIT + "test_analysis.py::test_confidence_interval_is_student_t_of_the_mean",),
    ),
    Mutation(
        "verdicts", SRC + "analysis/statistics.py",
        "    mad = max((x - median).abs().median(), MAD_FLOOR * abs(median))",
        "    mad = (x - median).abs().median()",
        "two nearly equal repeats make any third one an outlier (no 1% floor under the MAD)",
        (UNIT + "test_analysis.py::test_two_nearly_equal_repeats_do_not_make_the_third_an_outlier",),
    ),
    Mutation(
        "verdicts", SRC + "analysis/statistics.py",
        "median_ci_high=float(x[n - best])",
        "median_ci_high=float(x[n - best - 1])",
        "the median's upper confidence bound is one order statistic too low",
        (UNIT + "test_verdicts.py::test_the_medians_ci_is_the_published_order_statistics",),
    ),
    Mutation(
        "verdicts", SRC + "analysis/statistics.py",
        "    if estimator == TRIMMED_MEAN and n >= 3:\n        x = x[1:-1]",
        "    if estimator == TRIMMED_MEAN and n >= 3:\n        x = x[1:]",
        "the trimmed mean (MLPerf's rule) drops only the fastest run, not the slowest too",
        (UNIT + "test_compare.py::test_the_trimmed_mean_drops_the_fastest_and_the_slowest",),
    ),
    Mutation(
        "verdicts", SRC + "analysis/verdicts.py",
        '    if out["ci_low"] > 1:\n        out["verdict"] = "faster"',
        '    if out["ratio"] > 1:\n        out["verdict"] = "faster"',
        "a variant is called faster whenever its mean is, even where the confidence interval includes 1",
        (UNIT + "test_compare.py::test_an_unchanged_pair_gives_no_verdict_but_no_measurable_difference",),
    ),
    Mutation(
        "sweep", SRC + "config/sweep.py",
        'for repeat in range(1, repeat_limits(study["repeats"]).max + 1):',
        'for repeat in range(1, repeat_limits(study["repeats"]).max):',
        "a study of 3 repeats plans only 2 runs of each point",
        (UNIT + "test_sweep.py::test_expansion_is_the_full_product",),
    ),
    Mutation(
        "sweep", SRC + "config/sweep.py",
        "    resolved = os.path.realpath(given)",
        "    resolved = os.path.abspath(given)",
        "a results_dir that is a link to / is accepted (links no longer resolved)",
        (UNIT + "test_sweep_strict.py::test_results_dir_is_resolved_through_dots_and_links",),
    ),
    Mutation(
        "sweep", SRC + "config/sweep.py",
        r'    return re.compile(re.sub(r"(?<!\\)\$", r"\\Z", pattern))',
        "    return re.compile(pattern)",
        "a walltime with a trailing newline ('00:10:00\\n') passes the schema",
        (UNIT + "test_hostile_input.py::test_a_pattern_does_not_pass_a_trailing_newline",),
    ),
    Mutation(
        "sweep", SRC + "config/placement.py",
        "        if len(set(values)) != len(values):\n",
        "        if len(set(values)) > len(values):\n",
        "a placement value listed twice (binding: [core, core]) is accepted",
        (UNIT + "test_placement.py::test_a_value_listed_twice_is_refused",),
    ),
    Mutation(
        "report", SRC + "presentation/page.py",
        r'    return text.replace("|", "\\|").replace("\n", " ")',
        r'    return text.replace("\n", " ")',
        "a '|' in a table cell (a failure's reason) splits the Markdown table's columns",
        (UNIT + "test_page.py::test_markdown_tables_escape_pipes",),
    ),
    Mutation(
        "report", SRC + "presentation/scaling_section.py",
        '    if row.get("n_failed", 0):\n        notes.append(f"{int(row[\'n_failed\'])} failed")\n',
        "",
        "the report's table no longer notes a scale's failed runs",
        (UNIT + "test_report.py::test_summary_and_table_of_a_weak_study",),
    ),
    Mutation(
        "report", SRC + "presentation/plots.py",
        "    return np.vstack([np.minimum(err, np.nan_to_num(np.maximum(y, 0))), err])",
        "    return np.vstack([err, err])",
        "the plots' error bars reach below zero (a negative time or rate)",
        (UNIT + "test_report.py::test_error_bars_stop_at_zero",),
    ),
    Mutation(
        "scaling figures", SRC + "model/scaling_figures.py",
        "    return efficiency < threshold",
        "    return efficiency <= threshold",
        "a scale exactly at the efficiency threshold is reported as falling below it",
        (UNIT + "test_scaling_figures.py::test_the_threshold_at_its_boundary",),
    ),
    Mutation(
        "scaling figures", SRC + "model/scaling_figures.py",
        'return ratio if kind == "time" or not extensive else divide(ratio, q)',
        'return ratio if kind == "time" else divide(ratio, q)',
        "a weak curve's per-step rate (MD steps/s) is divided by p/p0: its weak efficiency falls with the scale",
        (UNIT + "test_scaling_figures.py::test_weak_scaling_figures_give_gustafsons_scaled_speedup",),
    ),
    Mutation(
        "scaling figures", SRC + "model/scaling_figures.py",
        'return divide(base, value) if kind == "time" else divide(value, base)',
        'return divide(value, base) if kind == "time" else divide(base, value)',
        "speedup is inverted: a time that halves reads as a speedup of 0.5",
        (UNIT + "test_scaling_figures.py::test_speedup_and_efficiency_follow_amdahls_law",),
    ),
]  # fmt: skip


def git(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, **kwargs)


def copy_of_revision(rev: str | None, folder: Path) -> Path:
    """The tree the mutations are checked against: `git archive` of `rev`, or (None) the working
    tree's tracked and not-ignored files as they are now (no .venv, results or .git)."""
    folder.mkdir(parents=True)
    if rev is not None:
        subprocess.run(["tar", "-x", "-C", str(folder)], input=git("archive", rev).stdout, check=True)
        return folder
    for name in git("ls-files", "-z", "-co", "--exclude-standard").stdout.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():  # a tracked file deleted in the working tree is left out
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def located(tree: Path, node_id: str) -> str:
    """`node_id` in `tree`: as given where its file defines the test, else the one other file
    under tests/ that does (a reorganised suite moves tests between files)."""
    path, _, name = node_id.partition("::")
    definition = re.compile(rf"^\s*(?:async )?def {re.escape(name.split('::')[-1].split('[')[0])}\(", re.M)
    if (tree / path).is_file() and definition.search((tree / path).read_text()):
        return node_id
    found = [file for file in sorted((tree / "tests").rglob("test_*.py")) if definition.search(file.read_text())]
    return f"{found[0].relative_to(tree)}::{name}" if len(found) == 1 else node_id


def pytest(tree: Path, node_ids: list[str]) -> tuple[int, str]:
    """pytest's exit status and output for `node_ids`, run in `tree` on its own code."""
    # No .pyc: a mutation the same size as its old text, written in the same second, could be
    # read from a stale one.
    path = os.pathsep.join(filter(None, [str(tree / "workflow"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *node_ids]
    try:
        ran = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1, f"pytest ran past {PYTEST_TIMEOUT_S} s"
    return ran.returncode, ran.stdout + ran.stderr


def last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


class Outcome(NamedTuple):
    caught: bool
    passed_unmutated: bool
    said: str


def check(number: int, mutation: Mutation, pristine: Path, scratch: Path) -> Outcome:
    """Whether the mutation's tests pass on a copy of `pristine`, then fail (exit 1) once the
    mutation is applied to that copy."""
    tree = scratch / f"mutation-{number}"
    shutil.copytree(pristine, tree, symlinks=True)
    try:
        target = tree / mutation.path
        text = target.read_text() if target.is_file() else ""
        occurrences = text.count(mutation.old)
        if occurrences != 1:
            return Outcome(False, False, f"error: its old text occurs {occurrences} times in {mutation.path}")
        node_ids = [located(tree, node_id) for node_id in mutation.tests]
        code, output = pytest(tree, node_ids)
        if code != 0:
            return Outcome(False, False, f"error: its tests do not pass unmutated (exit {code}: {last_line(output)})")
        target.write_text(text.replace(mutation.old, mutation.new))
        code, output = pytest(tree, node_ids)
        if code == 0:
            return Outcome(False, True, "NOT CAUGHT")
        if code != 1:
            return Outcome(False, True, f"error: pytest exit {code} on the mutated code: {last_line(output)}")
        failed = re.search(r"^FAILED (\S+)", output, re.M)
        return Outcome(True, True, f"caught by {failed.group(1) if failed else ' '.join(node_ids)}")
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", help="check another revision's code and tests (default: the working tree)")
    parser.add_argument("--only", help="the mutations to run, by number: 1,2,5")
    parser.add_argument("--list", action="store_true", help="print the mutations, run nothing")
    parser.add_argument("-j", type=int, default=1, help="mutations checked at once")
    args = parser.parse_args()
    numbers = [str(n) for n in range(1, len(MUTATIONS) + 1)]
    chosen = list(dict.fromkeys(args.only.split(","))) if args.only else numbers
    if not set(chosen) <= set(numbers):
        parser.error(f"--only: {args.only!r}; allowed: numbers from 1 to {len(MUTATIONS)}, separated by commas")
    chosen = [int(n) for n in chosen]
    if args.list:
        for n in chosen:
            m = MUTATIONS[n - 1]
            print(f"{n} {m.area}: {m.defect}\n    in {m.path}: {m.old.strip()!r}\n    becomes {m.new.strip()!r}")
            print("".join(f"    its test: {node_id}\n" for node_id in m.tests), end="")
        return 0
    try:
        rev = git("rev-parse", "--verify", "--short", f"{args.rev or 'HEAD'}^{{commit}}", text=True).stdout.strip()
    except subprocess.CalledProcessError:
        parser.error(f"--rev: {args.rev!r} is no commit of {REPO}")
    shown = rev if args.rev else f"the working tree of {rev}"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="scalestudy-mutations-") as scratch:
        pristine = copy_of_revision(args.rev, Path(scratch) / "pristine")
        with ThreadPoolExecutor(max_workers=max(args.j, 1)) as pool:
            done = pool.map(lambda n: check(n, MUTATIONS[n - 1], pristine, Path(scratch)), chosen)
            outcomes = []
            for n, outcome in zip(chosen, done, strict=True):
                print(f"{n} {MUTATIONS[n - 1].area}: {MUTATIONS[n - 1].defect} -- {outcome.said}", flush=True)
                outcomes.append(outcome)
    caught, unrun = sum(o.caught for o in outcomes), sum(not o.passed_unmutated for o in outcomes)
    passed = f"the tests of {unrun} did not pass unmutated or were not run" if unrun else "each test passed unmutated"
    print(f"checked in {time.perf_counter() - start:.0f} s")
    print(f"mutations caught: {caught}/{len(outcomes)} at {shown} ({passed})")
    return 0 if caught == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
