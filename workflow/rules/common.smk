# Snakemake glue: the plan (scalestudy/plan.py) builds everything the rules need from the
# config and the files Snakemake read; this file hands it Snakemake's state through the
# adapter (scalestudy/snakemake_adapter.py, every Snakemake internal) and wraps its values
# as directives. No logic here: a unit test cannot reach it.
import sys
from pathlib import Path

# The package is imported from the checkout, here and in every job (also inside conda envs).
PACKAGE_DIR = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_DIR)

from scalestudy.apps import APPS  # noqa: E402
from scalestudy.config.files import file_problems  # noqa: E402
from scalestudy.config.packing import GROUP_COMPONENTS_NAME  # noqa: E402
from scalestudy.results import history  # noqa: E402
from scalestudy.results.locking import ResultsBusy  # noqa: E402
from scalestudy.model.errors import SweepError  # noqa: E402
from scalestudy.model.paths import DEFAULT_SWEEP, KEEP_LOG, PLOT_KINDS, compare_outputs  # noqa: E402
from scalestudy.planning.plan import LOCAL_STEP, Plan, python_module_shell, run_rule, shell_word  # noqa: E402
from scalestudy.planning.snakemake_adapter import SnakemakeRun, of_wildcards, resources_of_wildcards  # noqa: E402

RUN = SnakemakeRun(workflow)


def stop_on(problems):
    """Every problem in the sweep is one line naming its key (or its file and line); nothing runs."""
    for problem in problems:
        print(f"sweep error: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)


# A sweep given on the command line (--configfile, or a profile's configfiles) replaces the
# shipped example instead of being merged into it. The example is read strictly first: for
# a YAML mistake, Snakemake's message names neither the file nor the line.
if not RUN.configfiles_given:
    stop_on(file_problems([DEFAULT_SWEEP]))

    configfile: DEFAULT_SWEEP


# With a sidecar (the PBS profiles), "Nothing to be done" would otherwise wait forever.
if RUN.main_process:
    RUN.end_executor_wait_at_exit()
    RUN.end_status_wait_at_shutdown()  # exit when the last job has ended, not a polling interval later

try:
    PLAN = Plan.load(config, files=RUN.configfiles, main_process=RUN.main_process)
except SweepError as error:
    stop_on(error.problems)
STUDY, SWEEP, CLUSTER, LAYOUT, STUDIES = PLAN.study, PLAN.sweep, PLAN.cluster, PLAN.layout, PLAN.studies
RUN_RULES = [run_rule(name) for name in APPS]
RUN.count_group_components_as([pack.name for pack in PLAN.packs], GROUP_COMPONENTS_NAME)
for warning in PLAN.warnings():
    print(f"sweep warning: {warning}", file=sys.stderr)
if RUN.main_process:
    FORCING = RUN.forcing()
    stop_on(PLAN.budget_problems(FORCING))
    print("\n".join(PLAN.summary_lines(FORCING)), flush=True)
    if config.get("predict_from"):
        # --config predict_from=PATH: the larger planned scales, predicted from a measured study.
        from scalestudy.presentation.planned_predictions import predictions

        print("\n".join(f"scalestudy: {line}" for line in predictions(config["predict_from"])(STUDY)), flush=True)
# Held while this workflow runs (see Plan.start).
RESULTS_LOCK = []


def report_only():
    return PLAN.report_only(RUN.targets())


onstart:
    if not report_only():
        try:
            RESULTS_LOCK.extend(
                PLAN.start(
                    lock=RUN.lock_requested(),
                    reruns=RUN.jobs_to_rerun(RUN_RULES),
                    forcing=RUN.forcing(),
                    resumed=RUN.resumed_batch_jobs(RUN_RULES) if CLUSTER.scheduler == "pbspro" else {},
                    forget=RUN.forget_batch_job,
                )
            )
        except SweepError as error:
            stop_on(error.problems)
        except ResultsBusy as busy:
            print(f"scalestudy: {busy}", file=sys.stderr)
            sys.exit(1)
        # A point's record survives a batch job Slurm ended (TIMEOUT, CANCELLED); under Slurm
        # every ended job's points are priced at its Elapsed.
        RUN.keep_records_of_failed_batch_jobs(RUN_RULES, PLAN.record_ended_batch_job, PLAN.prices_ended_batch_jobs)


wildcard_constraints:
    study="[^/]+",


def job_shell(module):
    return python_module_shell(PACKAGE_DIR, RUN.job_python(), module)


def study_target(wildcards):
    return PLAN.targets(report_only())


point_json = of_wildcards(PLAN.point_json)
pack_group = of_wildcards(PLAN.pack_group)


def of_study(method, *args):
    """`method(study, *args)` of a job's wildcards; a function argument is asked at the call."""
    return lambda wildcards: method(wildcards.study, *(arg() if callable(arg) else arg for arg in args))


def round_output(study):
    """Round n's decision of `study` (rule repeats_round); raises until that round has run,
    which is how Snakemake puts the round into the DAG (a checkpoint)."""
    return lambda n: checkpoints.repeats_round.get(study=study, round=str(n)).output[0]


def aggregate_inputs(wildcards):
    return PLAN.aggregate_inputs(wildcards.study, report_only(), round_output(wildcards.study))


def round_inputs(wildcards):
    return PLAN.round_inputs(wildcards.study, int(wildcards.round), round_output(wildcards.study))


finished_fingerprint = of_study(PLAN.finished_fingerprint, report_only)


def compare_baseline():
    from scalestudy.presentation.comparison import check_side  # pandas: only when a comparison is asked for

    try:
        return PLAN.compare_baseline(config, check_side)
    except SweepError as error:
        stop_on(error.problems)


def compare_inputs(wildcards):  # this results directory's tables and the baseline's
    return PLAN.compare_inputs(compare_baseline())
