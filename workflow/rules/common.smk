# The study and the input functions every rule shares. Logic lives in the scalestudy
# package; this file only turns it into Snakemake terms.
import importlib.util
import inspect
import os
import re
import shlex
import sys
from pathlib import Path

# The package is imported from the checkout, here and in every job (also inside conda envs).
PACKAGE_DIR = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_DIR)

from scalestudy import study as study_loader  # noqa: E402
from scalestudy.apps import APPS  # noqa: E402
from scalestudy.config import forecast, packing  # noqa: E402
from scalestudy.config.files import file_problems  # noqa: E402
from scalestudy.launch import history, locking, retry  # noqa: E402
from scalestudy.model.errors import SweepError  # noqa: E402
from scalestudy.model.paths import DEFAULT_SWEEP, KEEP_LOG, PLOT_KINDS, compare_outputs  # noqa: E402
from scalestudy.model.point import first_repeats  # noqa: E402
from scalestudy.scheduler import site  # noqa: E402
from scalestudy.scheduler.pbs import cache as pbs_cache  # noqa: E402
from scalestudy.scheduler.pbs import resume as pbs_resume  # noqa: E402
from scalestudy.scheduler.pbs import sidecar as pbs_sidecar  # noqa: E402

try:  # see per_job
    from snakemake.common import overwrite_function_params
except ImportError:
    overwrite_function_params = None


def stop_on(problems):
    """Every problem in the sweep is one line naming its key (or its file and line); nothing runs."""
    for problem in problems:
        print(f"sweep error: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)


def load_study(raw_config, files):
    """The study from Snakemake's config and the files it read (read again strictly), through
    the same loader as `python -m scalestudy.scheduler.pbs plan`: the site's refusals (e.g.
    Gadi's whole nodes) stop the dry run too. Inside a batch job (not the main process)
    nothing is submitted: no project is needed there."""
    try:
        return site.load_study(raw_config, files=files, submits=workflow.is_main_process)
    except SweepError as error:
        stop_on(error.problems)


# A sweep given on the command line (--configfile, or a profile's configfiles) replaces the
# shipped example instead of being merged into it. The example is read strictly first: for
# a YAML mistake, Snakemake's message names neither the file nor the line.
if not workflow.overwrite_configfiles:
    stop_on(file_problems([DEFAULT_SWEEP]))

    configfile: DEFAULT_SWEEP


# With a sidecar (the PBS profiles), "Nothing to be done" would otherwise wait forever.
if workflow.is_main_process:
    pbs_sidecar.end_executor_wait_at_exit(workflow)

# workflow.configfiles: the --configfile (or profile) files, else the example, in order.
STUDY = load_study(config, workflow.configfiles)
SWEEP, CLUSTER, LAYOUT = STUDY.sweep, STUDY.cluster, STUDY.layout
STUDIES = list(SWEEP.studies)
# Inputs that no rule makes (a real checkpoint, a dataset) are checked once per study,
# instead of being DAG edges of every job. A dry run only warns (it may rehearse on a
# machine without the data); a real run stops in `onstart`, before any job.
MISSING_INPUTS = STUDY.missing_inputs() if workflow.is_main_process else []
for problem in MISSING_INPUTS:
    print(f"sweep warning: {problem} (a real run stops here)", file=sys.stderr)
# Held while this workflow runs: a second workflow on the same results directory from
# another working directory (which Snakemake's own lock does not see) stops here.
RESULTS_LOCK = []


def report_only():
    """`snakemake report` or `compare` (or `--config partial=true`): the report (or the
    comparison) from the runs that have finished; no point runs. Known once the DAG is
    planned (the targets are not known while this file is read)."""
    settings = workflow.dag_settings
    targets = set(settings.targets) if settings is not None else set()
    return STUDY.partial or (bool(targets) and targets <= {"report", "compare"})


onstart:
    if report_only():
        return
    if MISSING_INPUTS:
        for problem in MISSING_INPUTS:
            print(f"sweep error: {problem}", file=sys.stderr)
        sys.exit(1)
    # Not for --nolock (asks for no lock) or a report (runs no point).
    try:
        if workflow.execution_settings.lock:
            RESULTS_LOCK.append(locking.hold(LAYOUT.results))
    except locking.ResultsBusy as busy:
        print(f"scalestudy: {busy}", file=sys.stderr)
        sys.exit(1)
    retry.archive(SURVEY.retry_archives)
    history.keep_before_rerun(points_to_rerun(), planned=SURVEY.keeping)
    submit_again_what_never_ran()
    write_packs()


def submit_again_what_never_ran():
    """Points whose batch job an interrupted run deleted while it was queued run afresh
    instead of being resumed under the dead job's id (scheduler/pbs/resume.py)."""
    if CLUSTER.scheduler != "pbspro":
        return
    dag = workflow.dag
    resumed = {
        job: job_id
        for job in dag.needrun_jobs()
        if job.rule.name in RUN_RULES and (job_id := dag.incomplete_external_jobid(job))
    }
    for job in pbs_resume.never_ran(resumed):
        print(f"scalestudy: {job.output.metrics}: its batch job was deleted before it ran; submitted again")
        workflow.persistence.cleanup(job)


def points_to_rerun():
    """metrics.json -> why, of every finished point Snakemake is about to rerun: whatever the
    reason (one of its own too: an input made again, --forcerun), the
    record is kept before the first job starts (launch/history.py)."""
    dag = workflow.dag
    return {job.output.metrics: str(dag.reason(job)) for job in dag.needrun_jobs() if job.rule.name in RUN_RULES}


wildcard_constraints:
    study="[^/]+",


def per_job(function):
    """A function Snakemake calls for every job (an input, param or resource function). Snakemake
    reads its signature on every call (inspect.signature, twice: most of the cost of calling
    it); given once here, a 100,000-point plan saves seconds per function. With a Snakemake
    that lacks the hook, the function is inspected per call, as before."""
    if overwrite_function_params is not None:
        overwrite_function_params(function, inspect.signature(function).parameters)
    return function


def shell_word(value):
    """A value from config as one shell word inside a rule's shell string (braces escaped
    for Snakemake's formatting)."""
    return shlex.quote(str(value)).replace("{", "{{").replace("}", "}}")


def job_python():
    """The interpreter of run jobs: the conda env's under --sdm conda, else the one running
    this workflow (its venv need not be activated; clusters share its path)."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
        return "python"
    return sys.executable


def python_module_shell(module):
    """The start of a job's shell command: `python -m module` with the checkout's package first
    on the path. Written into the command, not given as params: a param is a rerun trigger, so
    moving the checkout or the venv would rerun every finished point (and every param costs
    each job of a plan its evaluation)."""
    return f"PYTHONPATH={shell_word(PACKAGE_DIR)}${{{{PYTHONPATH:+:$PYTHONPATH}}}} {shell_word(job_python())} -m {module}"


def jobs_can_import(module, site_modules):
    """Can run jobs import `module`? Under conda, or a site module under env-modules, they get
    it in the job; otherwise they run this interpreter, which is asked."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    methods = workflow.deployment_settings.deployment_method
    if module is None or DeploymentMethod.CONDA in methods or (DeploymentMethod.ENV_MODULES in methods and site_modules):
        return True
    return importlib.util.find_spec(module) is not None


def point_of(wildcards):
    return STUDY.point(wildcards.study, wildcards.point)


def study_pattern(app):
    """Wildcard constraint: only the studies of `app` match that app's run rule."""
    names = SWEEP.studies_of_app(app)
    return "|".join(map(re.escape, names)) if names else "(?!)"


def made_inputs(inputs):
    """Only inputs a rule makes are dependencies; the rest were checked at load. They are
    spelled from the assets directory, as the rules' outputs are (a relative path in the
    sweep still matches an absolute results_dir)."""
    assets = LAYOUT.assets
    return [study_loader.under_assets(p, assets) for p in inputs.values() if study_loader.made_here(p, assets)]


def point_made_inputs(point):
    """The files the workflow makes that `point` reads (its app's inputs under the assets)."""
    app = APPS[point.app]
    return MADE_INPUTS.setdefault((point.app, app.inputs_key(point)), made_inputs(app.inputs(point, LAYOUT)))


MADE_INPUTS = {}
# What each point's run directory holds, read once (launch/history.py): which points are not
# run yet, changed, to retry; their kept records. Reads only. Jobs run in a process of their
# own (a batch job) do not need it.
SURVEY = (
    history.survey(STUDY.points, LAYOUT, CLUSTER.name, STUDY.retry_failed, point_made_inputs)
    if workflow.is_main_process
    else history.Survey()
)
# Packs (config/packing.py): the points to run of the studies that say `pack:`, each pack a
# Snakemake group that the cluster executor submits as one batch job. Local runs ignore
# groups (Snakemake runs grouped jobs one by one there, as any other).
# The points this invocation submits, once: packed here, priced by the forecast below.
TO_SUBMIT = SURVEY.to_submit(STUDY.points) if workflow.is_main_process and not STUDY.partial else []
PACKS = packing.packs(TO_SUBMIT, CLUSTER, SWEEP.studies)
stop_on(site.pack_problems(PACKS, CLUSTER) if CLUSTER.scheduler != "none" else [])
PACK_OF = {(point.study, point.id): pack.name for pack in PACKS for point in pack.points}
# Snakemake makes one group job per connected component of a group, and a pack's points are
# not connected: the profiles' `group-components: [pack=...]` lets a group span that many,
# and each pack's group id is looked up under the name `pack` (Snakemake's own mapping of a
# group id to the name its components count is read under).
workflow.parent_groupids.update({pack.name: packing.GROUP_COMPONENTS_NAME for pack in PACKS})


@per_job
def pack_group(wildcards):
    """The run rules' `group:` (None: the point is a batch job of its own)."""
    return PACK_OF.get((wildcards.study, wildcards.point))


def write_packs():
    """For the submit command: which points each group job runs (scheduler/pbs/cache.py)."""
    if PACKS and CLUSTER.scheduler == "pbspro":
        pbs_cache.save_packs(
            pbs_cache.cache_dir(),
            {
                pack.name: [
                    {"metrics": LAYOUT.metrics(p.study, p.id), "point": p.to_json(), "walltime_s": p.walltime_seconds,
                     "queue": p.queue}
                    for p in pack.points
                ]
                for pack in PACKS
            },
        )  # fmt: skip


if workflow.is_main_process:
    print(history.summary_line(SURVEY, STUDY.partial), flush=True)
    if PACKS:
        packed = sum(len(pack.points) for pack in PACKS)
        print(f"scalestudy: packed {packed} points into {len(PACKS)} batch jobs ({', '.join(p.name for p in PACKS)})")
    if CLUSTER.scheduler != "none" and not STUDY.partial and SURVEY.to_run:
        # What the jobs about to be submitted may cost (config/forecast.py), before the first one.
        FORECAST = forecast.forecast(TO_SUBMIT, CLUSTER, SURVEY.measured(), PACKS)
        print("\n".join(forecast.forecast_lines(FORECAST, f"the {SURVEY.to_run} run jobs to submit")), flush=True)


def study_target(wildcards):
    """The default target: the report, after every point not run yet and every record to keep.
    Snakemake 9 does not rerun a finished table for a missing input (a new repeat, a new study)
    when it has no metadata, e.g. in a fresh clone; asked for by name, the missing record
    makes its run job run, then its study's table, whose other missing records follow: one
    per study is enough (each target file costs planning time). Every record to keep is
    asked for: it makes its point rerun."""
    if report_only():
        return [LAYOUT.report_html]
    return [LAYOUT.report_html, *SURVEY.first_missing.values(), *SURVEY.to_keep]


def run_inputs(app):
    """The input directive of `app`'s run rule: the made files its points read, and each
    point's kept records (launch/history.py). Planning cost grows with every input file and
    every function Snakemake calls per job, so when all points of the app read the same made
    files and none has a kept record (the usual case) this is a plain list, else a function
    of the point."""
    by_key = STUDY.inputs_by_key(app.name)
    shared = {tuple(made_inputs(inputs)) for _point, inputs in by_key.values()}
    kept = {key: state.kept for key, state in SURVEY.states.items() if state.kept and STUDY.point(*key).app == app.name}
    if len(shared) <= 1 and not kept:
        return list(shared.pop()) if shared else []
    if len(shared) <= 1:
        made = list(shared.pop()) if shared else []
        return per_job(lambda wildcards: [*made, *kept.get((wildcards.study, wildcards.point), ())])
    return per_job(
        lambda wildcards: [
            *made_inputs(by_key[(app.name, app.inputs_key(point_of(wildcards)))][1]),
            *kept.get((wildcards.study, wildcards.point), ()),
        ]
    )


@per_job
def point_json(wildcards):
    """Everything that defines a point; a change reruns it (rerun-trigger params). Under
    `--config retry_failed=true` a failed point gains a retry number, so it reruns
    (scalestudy/launch/retry.py); an ok point never changes."""
    return retry.with_retry(point_of(wildcards).to_json(), SURVEY.state(wildcards.study, wildcards.point).retry)


def run_metrics(wildcards):
    return [LAYOUT.metrics(p.study, p.id) for p in SWEEP.points_of(wildcards.study)]


def expected_runs(study):
    """(point record, metrics.json path) of every point of `study`, finished or not."""
    return [(p.as_record(), LAYOUT.metrics(p.study, p.id)) for p in SWEEP.points_of(study)]


def aggregate_inputs(wildcards):
    """The study's records, except for a report from what has finished: then none (no run job
    enters the DAG) and `finished_fingerprint` rebuilds the tables as results come in. A table
    job run in a process of its own (a run block without --force-use-threads) does not know the
    targets; it reads the records itself, and the main process has planned them."""
    return [] if report_only() or not workflow.is_main_process else run_metrics(wildcards)


def finished_fingerprint(wildcards):
    """Report only: which metrics.json exist, and when written (a change rebuilds the tables)."""
    if not report_only():
        return ""
    found = []
    for _record, path in expected_runs(wildcards.study):
        try:
            found.append(f"{path}@{os.stat(path).st_mtime_ns}")
        except FileNotFoundError:
            continue
    return sorted(found)


def study_budget(wildcards):
    return SWEEP.studies[wildcards.study].get("budget_su")


def compare_baseline():
    """The compare target's baseline (`--config compare_baseline=PATH`); without one, one line
    and nothing runs."""
    baseline = config.get("compare_baseline")
    if not baseline:
        stop_on(["compare_baseline: not given; the compare target needs --config compare_baseline=PATH "
                 "(a results directory)"])  # fmt: skip
    return str(baseline)


def compare_inputs(wildcards):
    """This results directory's tables, and the baseline's (its runs.csv per study)."""
    baseline = Path(compare_baseline())
    found = [str(baseline)] if baseline.is_file() else sorted(str(p) for p in baseline.glob("*/runs.csv"))
    return [LAYOUT.table(study, name) for study in STUDIES for name in ("runs", "scaling")] + found


def study_estimator(wildcards):
    """mean or trimmed_mean (the schema's default is filled in)."""
    return SWEEP.studies[wildcards.study]["estimator"]


def slurm_mpi(point):
    """Slurm plugin: a multi-rank point runs mpirun itself in the allocation (no srun -n1
    wrapper, which would hold the CPUs mpirun's daemons need); one rank needs nothing."""
    return "mpirun" if point.ranks > 1 else None


# One point at a time per machine when measuring locally (profiles/local sets the limit to 1),
# and nothing else beside a point being timed: every rule asks for the slot. Given per rule and
# not as the profile's default-resources, which would also switch on Snakemake's defaults
# mem_mb and disk_mb, computed from the input files' sizes for every job (most of a large
# dry run's time).
LOCAL_STEP = dict(measurement_slot=1)
# What every app's run job asks of a batch system, as functions of its point; the PBS submit
# command and the Slurm plugin size each batch job from them.
POINT_RESOURCES = dict(
    nodes=lambda point: point.nodes,
    ranks_per_node=lambda point: point.ranks_per_node,
    gpus_per_node=lambda point: point.gpus_per_node,
    tasks=lambda point: point.ranks,
    cpus_per_task=lambda point: point.threads_per_rank,
    mpi=slurm_mpi,
    queue=lambda point: CLUSTER.queue_name(point.gpus_per_node, point.queue),
    # Snakemake's runtime is minutes, rounded up.
    runtime=lambda point: max(1, -(-point.walltime_seconds // 60)),
    walltime_s=lambda point: point.walltime_seconds,
)


def run_resources(app):
    """The resources directive of `app`'s run rule. A resource that is the same for every
    point of the app (the walltime of its studies, often the queue and threads) is a
    constant; only the others are functions, which Snakemake calls for every job it lists or
    submits (each call costs more than the value: its signature is read twice)."""
    points = [point for point in first_repeats(STUDY.points) if point.app == app.name]
    resources = {}
    for name, of_point in POINT_RESOURCES.items():
        values = {of_point(point) for point in points}
        if len(values) == 1:
            resources[name] = values.pop()
        else:
            resources[name] = per_job(lambda wildcards, of_point=of_point: of_point(point_of(wildcards)))
    # The cluster the job was planned for: the PBS submit command refuses a job planned for
    # another. A resource, not a param (params are rerun triggers); not named `cluster`, which
    # Snakemake's Slurm plugin passes to sbatch as --clusters.
    return {**resources, **LOCAL_STEP, "planned_cluster": CLUSTER.name}
