"""Every scheduler backend implements every operation of the one interface
(scheduler.interface.Scheduler), a PBS dialect overrides only how a request is written, and
scheduler_for picks each cluster file's backend. The operations are checked against what the
real schedulers answered (tests/data/slurm: Slurm 22.05; tests/data/pbs: Gadi's qstat)."""

import ast
import inspect
import json
import subprocess
import sys

import pytest
from scalestudy.config import clusters
from scalestudy.config.requests import job_request
from scalestudy.model.point import Point
from scalestudy.scheduler import interface, scheduler_for, slurm
from scalestudy.scheduler.interface import Scheduler
from scalestudy.scheduler.jobscript import SubmitRefused
from scalestudy.scheduler.pbs import cancel, dialects, pbspro
from scalestudy.scheduler.pbs.cache import save_states

OPERATIONS = {"submit", "status", "cancel", "cost", "hosts"}
# What a PBS dialect may change: how the request is written after `-l` and what only that refuses.
REQUEST_WRITING = {"name", "hyperthread_resource", "resources", "problems"}
BACKENDS = [*dialects.DIALECTS.values(), slurm.Slurm]


def overridden(cls: type) -> set[str]:
    """The members a class defines itself (not its docstring, module or abc's bookkeeping)."""
    return {name for name in vars(cls) if not name.startswith("__") and name != "_abc_impl"}


def test_the_interface_is_the_five_operations_each_abstract():
    assert Scheduler.__abstractmethods__ == OPERATIONS
    with pytest.raises(TypeError, match="abstract"):
        Scheduler()

    class WithoutHosts(Scheduler):  # a backend that forgets one operation cannot be made
        def submit(self, jobscript):
            return "1"

        status = cancel = cost = submit

    with pytest.raises(TypeError, match="hosts"):
        WithoutHosts()


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_every_backend_implements_every_operation_and_can_be_made(backend):
    assert not inspect.isabstract(backend)
    made = backend(clusters.load("gadi" if backend is dialects.Gadi else "aspire2a"))
    assert isinstance(made, Scheduler)
    for operation in OPERATIONS:
        defined_by = next(cls for cls in backend.__mro__ if operation in vars(cls))
        assert defined_by is not Scheduler, f"{backend.__name__}.{operation} is the interface's"
        assert getattr(made, operation).__doc__, f"{backend.__name__}.{operation} says nothing of its contract"


def test_a_pbs_dialect_is_a_subclass_of_pbs_pro_overriding_only_how_the_request_is_written():
    assert dialects.DIALECTS["select"] is pbspro.PbsPro  # OpenPBS's spelling: PBS Pro itself (ASPIRE 2A)
    for name, dialect in dialects.DIALECTS.items():
        assert issubclass(dialect, pbspro.PbsPro) and dialect.name == name
        if dialect is not pbspro.PbsPro:
            assert overridden(dialect) <= REQUEST_WRITING, overridden(dialect) - REQUEST_WRITING
            assert not overridden(dialect) & OPERATIONS
    assert overridden(dialects.Gadi) == REQUEST_WRITING


def test_scheduler_for_picks_each_cluster_files_backend():
    assert type(scheduler_for(clusters.load("gadi"))) is dialects.Gadi
    assert type(scheduler_for(clusters.load("aspire2a"))) is pbspro.PbsPro
    assert type(scheduler_for(clusters.load("slurm"))) is slurm.Slurm
    assert scheduler_for(clusters.load("local")) is None  # scheduler: none
    assert scheduler_for(clusters.load("slurm")).cluster.name == "slurm"


def test_the_interface_module_imports_only_the_standard_library_at_its_top():
    """The PBS status and cancel commands load it on every call (tests/integration/
    test_pbs_commands.py counts what they load)."""
    tree = ast.parse(inspect.getsource(interface))
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    names = [alias.name for node in top if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module for node in top if isinstance(node, ast.ImportFrom)]
    assert all(not getattr(node, "level", 0) for node in top)
    assert {name.split(".")[0] for name in names} <= set(sys.stdlib_module_names) | {"__future__"}


# ------------------------------------------------------------------ Slurm, from what Slurm answered


@pytest.fixture
def recorded(data_dir):
    return json.loads((data_dir / "slurm/slurm-22.05.8-local.json").read_text())


@pytest.fixture(autouse=True)
def no_command_timed_out_yet(monkeypatch):
    monkeypatch.setattr(slurm, "timed_out", {})


def answering(answers: dict, asked: list | None = None):
    """A subprocess.run that answers each command as the recorded Slurm did."""

    def run(argv, **kwargs):
        if asked is not None:
            asked.append(argv)
        source = "sacct-c" if argv[:2] == ["sacct", "-c"] else argv[0]
        if source not in answers:
            raise FileNotFoundError(argv[0])
        answer = answers[source]
        return subprocess.CompletedProcess(argv, answer["returncode"], answer["stdout"], answer["stderr"])

    return run


@pytest.mark.parametrize(
    ("case", "job_id", "word", "seconds"),
    [("completed", "1", "success", 3.0), ("cancelled", "2", "failed", 3.0), ("timeout", "3", "failed", 87.0),
     ("running", "2", "running", None), ("unknown", "999999", "running", None)],
)  # fmt: skip
def test_slurm_status_and_cost_from_what_slurm_answered(recorded, case, job_id, word, seconds):
    """As Snakemake's Slurm plugin: COMPLETED success, CANCELLED and TIMEOUT failed, a job no
    source lists still running; the cost is the job's Elapsed once it ended."""
    scheduler = slurm.Slurm(clusters.load("slurm"), run=answering(recorded[case]))
    assert scheduler.status(job_id) == word
    assert scheduler.cost(job_id) == seconds


def test_slurm_cancel_is_one_scancel_of_the_ids_and_never_raises():
    asked: list = []
    slurm.Slurm(run=answering({"scancel": {"returncode": 0, "stdout": "", "stderr": ""}}, asked)).cancel(["4", "5"])
    assert asked == [["scancel", "4", "5"]]
    slurm.Slurm(run=answering({})).cancel(["4"])  # no scancel: nothing raised
    asked.clear()
    slurm.Slurm(run=answering({}, asked)).cancel([])
    assert asked == []


def test_slurm_hosts_are_the_allocations_expanded_and_read_back_when_the_job_step_lost_them(monkeypatch):
    scheduler = slurm.Slurm()
    assert scheduler.hosts({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2],gpu07"}) == ["n1", "n2", "gpu07"]
    line = "JobId=7 JobName=x NodeList=n[1-2] NumNodes=2 NumTasks=4"
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda argv, **kw: subprocess.CompletedProcess(argv, 0, line if argv[0] == "scontrol" else ""),
    )
    assert scheduler.hosts({"SLURM_JOB_ID": "7"}) == ["n1", "n2"]
    assert scheduler.hosts({}) == []


def point_jobscript(tmp_path, cluster_name: str, nodes: int = 2, ranks_per_node: int = 2):
    point = Point(study="pp", app="pingpong", scaling="strong", nodes=nodes, ranks_per_node=ranks_per_node,
                  gpus_per_node=0, threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                  walltime="00:04:00", params={})  # fmt: skip
    metrics = tmp_path / "results/pp/runs" / point.id / "metrics.json"
    properties = {"rule": "run_pingpong", "params": {"point": point.to_json()},
                  "resources": {"walltime_s": 240, "queue": "", "planned_cluster": cluster_name},
                  "output": [str(metrics)]}  # fmt: skip
    jobscript = tmp_path / "job.sh"
    jobscript.write_text(f"#!/bin/bash\n# properties = {json.dumps(properties)}\nexit 0\n")
    return jobscript, point, metrics


def test_slurm_submit_is_sbatch_sized_as_the_plugin_sizes_a_points_job(tmp_path):
    """nodes, tasks = ranks, cpus per task = threads per rank, the time limit with the
    cluster's margin, the memory per node: run_rules.point_resources' values."""
    cluster = clusters.load("slurm")
    jobscript, point, metrics = point_jobscript(tmp_path, "slurm")
    asked: list = []
    sbatch = {"sbatch": {"returncode": 0, "stdout": "42;cluster\n", "stderr": ""}}
    assert slurm.Slurm(cluster, run=answering(sbatch, asked)).submit(jobscript) == "42"
    request = job_request(Point.from_json(point.to_json(), 240), cluster)
    ((argv),) = asked
    assert argv[:2] == ["sbatch", "--parsable"] and argv[-1] == str(jobscript)
    assert argv[argv.index("--output") + 1] == str(metrics.parent / "batch.log")
    assert {"--nodes=2", "--ntasks=4", "--cpus-per-task=1", f"--mem={request.mem_per_node_gib}G"} <= set(argv)
    assert f"--time={request.walltime_s // 3600:02d}:{request.walltime_s // 60 % 60:02d}:00" in argv
    refused = {"sbatch": {"returncode": 1, "stdout": "", "stderr": "sbatch: error: invalid partition"}}
    with pytest.raises(SubmitRefused, match="sbatch exited with 1: sbatch: error: invalid partition"):
        slurm.Slurm(cluster, run=answering(refused)).submit(jobscript)


def test_slurm_submit_refuses_what_the_cluster_cannot_run_before_sbatch(tmp_path):
    jobscript, _point, _metrics = point_jobscript(tmp_path, "slurm", nodes=1, ranks_per_node=1000)
    asked: list = []
    with pytest.raises(SubmitRefused):
        slurm.Slurm(clusters.load("slurm"), run=answering({}, asked)).submit(jobscript)
    assert asked == []


# ------------------------------------------------------------------ PBS Pro, from what Gadi's qstat answered


def recorded_qstat(data_dir, asked: list):
    """A subprocess.run that answers `qstat -x -f -F json IDS` from Gadi's recorded qstat."""
    jobs = json.loads((data_dir / "pbs/qstat-x-f-F-json.json").read_text())["Jobs"]

    def run(argv, **kwargs):
        asked.append(argv)
        assert argv[:5] == ["qstat", "-x", "-f", "-F", "json"], argv
        listed = {job_id: jobs[job_id] for job_id in argv[5:] if job_id in jobs}
        return subprocess.CompletedProcess(argv, 0, json.dumps({"Jobs": listed}), "")

    return run


def test_pbs_cost_is_the_ended_jobs_walltime_from_the_status_commands_cache_or_one_qstat(
    tmp_path, data_dir, monkeypatch
):
    asked: list = []
    monkeypatch.setattr(subprocess, "run", recorded_qstat(data_dir, asked))
    scheduler = pbspro.PbsPro(environ={"SCALESTUDY_PBS_CACHE": str(tmp_path / "cache")})
    assert scheduler.cost("117204935.gadi-pbs") == 15 * 60 + 4  # ended by PBS (Exit_status -29), 00:15:04
    assert scheduler.cost("117204933.gadi-pbs") == 55.0  # ended, Exit_status 0, 00:00:55
    assert scheduler.cost("117204932.gadi-pbs") is None  # still running
    assert scheduler.cost("117204931.gadi-pbs") is None  # queued
    assert len(asked) == 4
    # The status command's last answer is used as it is, without a qstat.
    (tmp_path / "cache").mkdir()
    save_states(tmp_path / "cache", {"refreshed": 0.0, "jobs": {"9.x": {"state": "F", "walltime_used": "01:00:00"}}})
    assert scheduler.cost("9.x") == 3600.0 and len(asked) == 4
    monkeypatch.setattr(subprocess, "run", lambda *a, **kw: (_ for _ in ()).throw(OSError("no qstat")))
    assert scheduler.cost("8.x") is None  # never raises


def test_pbs_hosts_are_the_node_files_each_once(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("gadi-cpu-1\ngadi-cpu-1\ngadi-cpu-2\ngadi-cpu-2\n")
    assert pbspro.PbsPro().hosts({"PBS_NODEFILE": str(nodefile)}) == ["gadi-cpu-1", "gadi-cpu-2"]
    assert pbspro.PbsPro().hosts({"SLURM_JOB_NODELIST": "n[1-2]"}) == []


def test_pbs_submit_status_and_cancel_are_the_commands(tmp_path, data_dir, monkeypatch):
    """submit runs qsub in the cluster's dialect; status and cancel need no cluster."""
    asked: list = []

    def qsub_then_qstat(argv, **kwargs):
        if argv[0] == "qsub":
            asked.append(argv)
            return subprocess.CompletedProcess(argv, 0, "117204932.gadi-pbs\n", "")
        return recorded_qstat(data_dir, asked)(argv, **kwargs)

    monkeypatch.setattr(subprocess, "run", qsub_then_qstat)
    started: list = []
    monkeypatch.setattr(cancel, "start_detached", lambda argv, fd: started.append(argv))
    environ = {"SCALESTUDY_PBS_CACHE": str(tmp_path / "cache"), "PROJECT": "ab12", "SCALESTUDY_QDEL": "myqdel"}
    jobscript, _point, _metrics = point_jobscript(tmp_path, "gadi", nodes=1)
    assert dialects.Gadi(clusters.load("gadi"), environ=environ).submit(jobscript) == "117204932.gadi-pbs"
    assert asked[0][asked[0].index("-l") + 1].startswith("ncpus=2,mem=")  # Gadi's totals
    scheduler = pbspro.PbsPro(environ=environ)
    assert scheduler.status("117204932.gadi-pbs") == "running"  # job_state R
    scheduler.cancel(["117204932.gadi-pbs"])
    assert started == [["myqdel", "117204932.gadi-pbs"]]
