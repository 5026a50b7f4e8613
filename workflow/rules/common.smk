# The study and the input functions every rule shares. Logic lives in the scalestudy
# package; this file only turns it into Snakemake terms.
import importlib.util
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
from scalestudy.config.files import file_problems  # noqa: E402
from scalestudy.launch import locking, retry  # noqa: E402
from scalestudy.model.errors import SweepError  # noqa: E402
from scalestudy.model.paths import DEFAULT_SWEEP, PLOT_KINDS  # noqa: E402
from scalestudy.scheduler import site  # noqa: E402


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
# Failed records of the points `--config retry_failed=true` reruns, by metrics.json path:
# noted while the DAG is planned, archived in `onstart` (planning writes nothing).
RETRY_ARCHIVES = {}


onstart:
    if MISSING_INPUTS and not STUDY.partial:
        for problem in MISSING_INPUTS:
            print(f"sweep error: {problem}", file=sys.stderr)
        sys.exit(1)
    # Not for --nolock (asks for no lock, e.g. a partial report beside a running study) or a
    # partial report (runs no point).
    try:
        if workflow.execution_settings.lock and not STUDY.partial:
            RESULTS_LOCK.append(locking.hold(LAYOUT.results))
    except locking.ResultsBusy as busy:
        print(f"scalestudy: {busy}", file=sys.stderr)
        sys.exit(1)
    retry.archive(RETRY_ARCHIVES)


wildcard_constraints:
    study="[^/]+",


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


def run_inputs(app):
    """The input directive of `app`'s run rule. Planning cost grows with every input file
    and every function Snakemake calls per job, so when all points of the app read the
    same made files (the usual case) this is a plain list, else a function of the point."""
    by_key = STUDY.inputs_by_key(app.name)
    shared = {tuple(made_inputs(inputs)) for _point, inputs in by_key.values()}
    if len(shared) <= 1:
        return list(shared.pop()) if shared else []
    return lambda wildcards: made_inputs(by_key[(app.name, app.inputs_key(point_of(wildcards)))][1])


def point_json(wildcards):
    """Everything that defines a point; a change reruns it (rerun-trigger params). Under
    `--config retry_failed=true` a failed point gains a retry number, so it reruns
    (scalestudy/launch/retry.py); an ok point never changes."""
    metrics = LAYOUT.metrics(wildcards.study, wildcards.point)
    number, failed = retry.planned_retry(metrics, STUDY.retry_failed)
    if failed is not None:
        RETRY_ARCHIVES[metrics] = failed
    return retry.with_retry(point_of(wildcards).to_json(), number)


def run_metrics(wildcards):
    return [LAYOUT.metrics(p.study, p.id) for p in SWEEP.points_of(wildcards.study)]


def expected_runs(study):
    """(point record, metrics.json path) of every point of `study`, finished or not."""
    return [(p.as_record(), LAYOUT.metrics(p.study, p.id)) for p in SWEEP.points_of(study)]


def finished_fingerprint(wildcards):
    """Partial report: which metrics.json exist, and when written (a change rebuilds the tables)."""
    found = []
    for _record, path in expected_runs(wildcards.study):
        try:
            found.append(f"{path}@{os.stat(path).st_mtime_ns}")
        except FileNotFoundError:
            continue
    return found


def study_budget(wildcards):
    return SWEEP.studies[wildcards.study].get("budget_su")


def slurm_mpi(wildcards):
    """Slurm plugin: a multi-rank point runs mpirun itself in the allocation (no srun -n1
    wrapper, which would hold the CPUs mpirun's daemons need); one rank needs nothing."""
    return "mpirun" if point_of(wildcards).ranks > 1 else None


# What every app's run job asks of a batch system (the run rules unpack RUN_RESOURCES); the PBS
# submit command and the Slurm plugin size each batch job from them.
RUN_RESOURCES = dict(
    nodes=lambda wildcards: point_of(wildcards).nodes,
    ranks_per_node=lambda wildcards: point_of(wildcards).ranks_per_node,
    gpus_per_node=lambda wildcards: point_of(wildcards).gpus_per_node,
    tasks=lambda wildcards: point_of(wildcards).ranks,
    cpus_per_task=lambda wildcards: point_of(wildcards).threads_per_rank,
    mpi=slurm_mpi,
    queue=lambda wildcards: CLUSTER.queue_name(point_of(wildcards).gpus_per_node, point_of(wildcards).queue),
    # Snakemake's runtime is minutes, rounded up.
    runtime=lambda wildcards: max(1, -(-point_of(wildcards).walltime_seconds // 60)),
    walltime_s=lambda wildcards: point_of(wildcards).walltime_seconds,
    # One point at a time per machine when measuring locally (profile sets the limit).
    measurement_slot=1,
)
