# Snakemake glue: the plan (scalestudy/planning/plan.py) is built once from the config and
# the files Snakemake read; the functions of scalestudy/planning/{summary,run_rules,tables,start}.py
# answer what the rules ask of it. This file hands them Snakemake's state through the adapter
# (scalestudy/planning/snakemake_adapter.py, every Snakemake internal) and wraps their values
# as directives. No logic here: a unit test cannot reach it.
import functools
import sys
from pathlib import Path

# The package is imported from the checkout, here and in every job (also inside conda envs).
PACKAGE_DIR = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_DIR)

from scalestudy.apps.registry import APPS, rules_files  # noqa: E402
from scalestudy.config.files import file_problems  # noqa: E402
from scalestudy.config.packing import GROUP_COMPONENTS_NAME  # noqa: E402
from scalestudy.bookkeeping import history  # noqa: E402
from scalestudy.bookkeeping.locking import ResultsBusy  # noqa: E402
from scalestudy.model.errors import SweepError  # noqa: E402
from scalestudy.model.paths import DEFAULT_SWEEP, KEEP_LOG, PLOT_KINDS, compare_outputs  # noqa: E402
from scalestudy.planning import run_rules, summary, tables  # noqa: E402
from scalestudy.planning.plan import LOCAL_STEP, load_plan, python_module_shell, run_rule, shell_word  # noqa: E402
from scalestudy.planning.start import Start, start  # noqa: E402
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

def ladder_judge(*args):
    """A node ladder's judge (scalestudy/analysis/ladder.py): numpy and pandas only where a
    study has a ladder."""
    from scalestudy.analysis.ladder import judge

    return judge(*args)


try:
    PLAN = load_plan(config, files=RUN.configfiles, main_process=RUN.main_process, judge=ladder_judge)
except SweepError as error:
    stop_on(error.problems)
STUDY, SWEEP, CLUSTER, LAYOUT, STUDIES = PLAN.study, PLAN.sweep, PLAN.cluster, PLAN.layout, PLAN.studies
# Each study's settings, typed (scalestudy.model.settings): the rules read attributes, never `config`.
SETTINGS, SETTINGS_OF = STUDY.settings, STUDY.settings.studies
RUN_RULES = [run_rule(name) for name in APPS]
RUN.count_group_components_as([pack.name for pack in PLAN.packs], GROUP_COMPONENTS_NAME)
for warning in summary.warnings(PLAN):
    print(f"sweep warning: {warning}", file=sys.stderr)
if RUN.main_process:
    FORCING = RUN.forcing()
    stop_on(summary.budget_problems(PLAN, FORCING))
    print("\n".join(summary.summary_lines(PLAN, FORCING)), flush=True)
    if SETTINGS.predict_from:
        # --config predict_from=PATH: the larger planned scales, predicted from a measured study.
        from scalestudy.presentation.planned_predictions import predictions

        print("\n".join(f"scalestudy: {line}" for line in predictions(SETTINGS.predict_from)(STUDY)), flush=True)
# Held while this workflow runs (see scalestudy/planning/start.py).
RESULTS_LOCK = []


def report_only():
    return summary.report_only(PLAN, RUN.targets())


onstart:
    if not report_only():
        try:
            RESULTS_LOCK.extend(
                start(
                    PLAN,
                    Start(
                        lock=RUN.lock_requested(),
                        reruns=RUN.jobs_to_rerun(RUN_RULES),
                        forcing=RUN.forcing(),
                        resumed=lambda: RUN.resumed_batch_jobs(RUN_RULES),
                        forget=RUN.forget_batch_job,
                        env_modules=RUN.deployment().env_modules,
                        conda=RUN.deployment().conda,
                    ),
                )
            )
        except SweepError as error:
            stop_on(error.problems)
        except ResultsBusy as busy:
            print(f"scalestudy: {busy}", file=sys.stderr)
            sys.exit(1)
        # A point's record survives a batch job Slurm ended (TIMEOUT, CANCELLED); under Slurm
        # every ended job's points are priced at its Elapsed.
        RUN.keep_records_of_failed_batch_jobs(
            RUN_RULES,
            functools.partial(run_rules.record_ended_batch_job, PLAN),
            run_rules.prices_ended_batch_jobs(PLAN),
        )
        # Ctrl-C cancels the batch jobs whose status is being asked at that moment too.
        RUN.cancel_the_jobs_of_a_status_round_too()


wildcard_constraints:
    study="[^/]+",


def job_shell(module):
    return python_module_shell(PACKAGE_DIR, RUN.job_python(), module)


def study_target(wildcards):
    return run_rules.targets(PLAN, report_only())


point_json = of_wildcards(functools.partial(run_rules.point_json, PLAN))
pack_group = RUN.groups_counted_as(functools.partial(run_rules.pack_group, PLAN), GROUP_COMPONENTS_NAME)


def round_output(study):
    """Round n's decision of `study` (rule repeats_round); raises until that round has run,
    which is how Snakemake puts the round into the DAG (a checkpoint)."""
    return lambda n: checkpoints.repeats_round.get(study=study, round=str(n)).output[0]


def aggregate_inputs(wildcards):
    return tables.aggregate_inputs(PLAN, wildcards.study, report_only(), round_output(wildcards.study))


def round_inputs(wildcards):
    return tables.round_inputs(PLAN, wildcards.study, int(wildcards.round), round_output(wildcards.study))


def finished_fingerprint(wildcards):
    return tables.finished_fingerprint(PLAN, wildcards.study, report_only())


def compare_baseline():
    from scalestudy.presentation.comparison import check_side  # pandas: only when a comparison is asked for

    try:
        return tables.compare_baseline(PLAN, check_side)
    except SweepError as error:
        stop_on(error.problems)


def compare_inputs(wildcards):  # this results directory's tables and the baseline's
    return tables.compare_inputs(PLAN, compare_baseline())
