"""Every scheduler backend is a scheduler.interface.Scheduler found by discovery and picked by
scheduler_for, the interface holds what the workflow calls and nothing else, and a PBS dialect
overrides only how a request is written. The operations are checked against what the real
schedulers answered (tests/data/slurm: Slurm 22.05; tests/data/pbs: Gadi's qstat)."""

import ast
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scalestudy.config import clusters
from scalestudy.config.requests import job_request, request_problems
from scalestudy.model.errors import SweepError
from scalestudy.model.point import Point
from scalestudy.scheduler import backends, interface, local, scheduler_for, slurm
from scalestudy.scheduler.interface import Scheduler
from scalestudy.scheduler.pbs import cancel, dialects, pbspro

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "workflow/scalestudy"
# What the workflow asks of a backend (interface.py's docstring says where), and nothing else.
OPERATIONS = {"for_cluster", "cluster_problems", "problems", "pack_problems", "job_resources", "submit_line",
              "never_ran", "save_packs", "cost"}  # fmt: skip
# What a PBS dialect may change: how the request is written and what only that refuses.
REQUEST_WRITING = {"name", "hyperthread_resource", "resources", "problems"}


def members(cls: type) -> set[str]:
    """The members a class defines itself (not its docstring, module or bookkeeping)."""
    return {name for name in vars(cls) if not name.startswith("__")}


def test_the_interface_is_what_the_workflow_asks_and_each_operation_is_called_outside_the_backends():
    operations = {name for name in members(Scheduler) if callable(getattr(Scheduler, name))}
    assert operations == OPERATIONS
    outside = "\n".join(
        path.read_text() for path in PACKAGE.rglob("*.py") if "scheduler" not in path.relative_to(PACKAGE).parts
    )
    outside += "\n".join(path.read_text() for path in (REPO / "workflow/rules").glob("*.smk"))
    for operation in OPERATIONS - {"for_cluster"}:  # for_cluster: scheduler_for's
        assert re.search(rf"\.{operation}\b", outside), f"nothing outside the scheduler package calls {operation}"
    for attribute in ("batch", "prices_ended_jobs"):
        assert re.search(rf"\.{attribute}\b", outside), attribute


def test_code_outside_the_scheduler_package_never_names_a_scheduler():
    """The workflow calls the interface; which scheduler a cluster has is scheduler_for's."""
    for path in [*PACKAGE.rglob("*.py"), *(REPO / "workflow/rules").glob("*.smk")]:
        if "scheduler" in path.relative_to(REPO).parts[:3]:
            continue
        text = path.read_text()
        for name in ('"pbspro"', '"slurm"', '"none"'):
            assert f"scheduler == {name}" not in text and f"scheduler != {name}" not in text, path


def test_backends_are_found_and_scheduler_for_picks_each_cluster_files():
    assert {name: cls for name, cls in backends().items() if cls.__module__.startswith("scalestudy.")} == {
        "none": local.NoScheduler, "pbspro": pbspro.PbsPro, "slurm": slurm.Slurm}  # fmt: skip
    assert type(scheduler_for(clusters.load("gadi"))) is dialects.Gadi
    assert type(scheduler_for(clusters.load("aspire2a"))) is pbspro.PbsPro
    assert type(scheduler_for(clusters.load("slurm"))) is slurm.Slurm
    assert type(scheduler_for(clusters.load("local"))) is local.NoScheduler
    assert scheduler_for(clusters.load("slurm")).cluster.name == "slurm"
    unknown = clusters.from_mapping({"name": "x", "scheduler": "lsf", "cores_per_node": 4, "mem_per_node_gib": 8})
    with pytest.raises(SweepError) as raised:
        scheduler_for(unknown)
    assert raised.value.problems == [
        "config/clusters/x.yaml: scheduler 'lsf' is not known; allowed: none, pbspro, slurm"
    ]


@pytest.mark.parametrize("backend", [*dialects.DIALECTS.values(), slurm.Slurm], ids=lambda cls: cls.__name__)
def test_every_batch_backend_says_how_it_submits_and_each_of_its_operations_what_it_does(backend):
    made = backend(clusters.load("gadi" if backend is dialects.Gadi else "aspire2a"))
    assert isinstance(made, Scheduler) and made.batch
    assert any("submit_line" in vars(cls) for cls in backend.__mro__[:-2]), backend
    for operation in OPERATIONS:
        assert getattr(made, operation).__doc__, f"{backend.__name__}.{operation} says nothing of its contract"


def test_a_pbs_dialect_is_a_subclass_of_pbs_pro_overriding_only_how_the_request_is_written():
    assert dialects.DIALECTS["select"] is pbspro.PbsPro  # OpenPBS's spelling: PBS Pro itself (ASPIRE 2A)
    for name, dialect in dialects.DIALECTS.items():
        assert issubclass(dialect, pbspro.PbsPro) and dialect.name == name
        if dialect is not pbspro.PbsPro:
            assert members(dialect) <= REQUEST_WRITING, members(dialect) - REQUEST_WRITING
    assert members(dialects.Gadi) == REQUEST_WRITING
    assert "scheduler" not in vars(dialects.Gadi)  # a variant of PBS Pro, not a backend of its own


def test_the_interface_module_imports_only_the_standard_library_at_its_top():
    """The PBS status and cancel commands load it on every call (tests/integration/
    test_pbs_commands.py counts what they load)."""
    tree = ast.parse(inspect.getsource(interface))
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    names = [alias.name for node in top if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module for node in top if isinstance(node, ast.ImportFrom)]
    assert all(not getattr(node, "level", 0) for node in top)
    assert {name.split(".")[0] for name in names} <= set(sys.stdlib_module_names) | {"__future__"}


def smt_point(cluster_name="x", hyperthreads=True, ranks_per_node=4):
    return Point(study="pp", app="pingpong", scaling="strong", nodes=1, ranks_per_node=ranks_per_node,
                 gpus_per_node=0, threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                 walltime="00:04:00", params={}, hyperthreads=hyperthreads)  # fmt: skip


def test_site_rules_are_each_backends_own_hardware_threads_are_refused_by_pbs_select_only():
    """The issue's case: a Slurm cluster with 2 threads per core took the PBS dialect's refusal."""
    smt = {"cores_per_node": 2, "mem_per_node_gib": 4, "threads_per_core": 2}
    on_slurm = clusters.from_mapping({"name": "x", "scheduler": "slurm", **smt})
    on_pbs = clusters.from_mapping({"name": "x", "scheduler": "pbspro", **smt})
    point = smt_point()
    assert request_problems(point, on_slurm, (scheduler_for(on_slurm).problems,)) == []
    assert request_problems(point, on_pbs, (scheduler_for(on_pbs).problems,)) == [
        "studies.pp.hyperthreads: true, but the PBS dialect 'select' of config/clusters/x.yaml has no way "
        "to ask for hardware threads; use [false]"
    ]
    # Slurm asks for them as Slurm does, in the plugin's sbatch and in the dry plan's line.
    slurm_resources = scheduler_for(on_slurm).job_resources()
    assert slurm_resources["slurm_extra"](point) == "--threads-per-core=2"
    assert slurm_resources["slurm_extra"](smt_point(hyperthreads=False, ranks_per_node=2)) is None
    line = scheduler_for(on_slurm).submit_line(job_request(point, on_slurm), log_path="LOG", jobscript="JOB")
    assert "--threads-per-core=2" in line and "--ntasks=4" in line and "--cpus-per-task=1" in line
    assert scheduler_for(on_pbs).job_resources() == {} and local.NoScheduler().job_resources() == {}


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
    ("case", "job_id", "seconds"),
    [("completed", "1", 3.0), ("cancelled", "2", 3.0), ("timeout", "3", 87.0), ("running", "2", None),
     ("unknown", "999999", None)],
)  # fmt: skip
def test_slurm_cost_from_what_slurm_answered(recorded, case, job_id, seconds):
    """The cost is the job's Elapsed once it ended (COMPLETED, CANCELLED, TIMEOUT), None before."""
    scheduler = slurm.Slurm(clusters.load("slurm"), run=answering(recorded[case]))
    assert scheduler.prices_ended_jobs and scheduler.cost(job_id) == seconds


def test_slurm_submit_line_is_sbatch_sized_as_the_plugin_sizes_a_points_job():
    """nodes, tasks = ranks, cpus per task = threads per rank, the time limit with the
    cluster's margin, the memory per node: run_rules.point_resources' values."""
    cluster = clusters.load("slurm")
    point = Point(study="pp", app="pingpong", scaling="strong", nodes=2, ranks_per_node=2, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                  walltime="00:04:00", params={})  # fmt: skip
    request = job_request(point, cluster)
    argv = slurm.Slurm(cluster).submit_line(request, log_path="LOG", jobscript="JOB")
    assert argv[:2] == ["sbatch", "--parsable"] and argv[-1] == "JOB" and argv[argv.index("--output") + 1] == "LOG"
    assert {"--nodes=2", "--ntasks=4", "--cpus-per-task=1", f"--mem={request.mem_per_node_gib}G"} <= set(argv)
    assert f"--time={request.walltime_s // 3600:02d}:{request.walltime_s // 60 % 60:02d}:00" in argv
    assert not any(word.startswith("--threads-per-core") for word in argv)


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


def test_pbs_submit_status_and_cancel_are_the_commands(tmp_path, data_dir, monkeypatch):
    """submit runs qsub in the cluster's dialect; status and cancel need no cluster (PBS Pro's
    own commands, profiles/pbs/scalestudy-pbs: Snakemake's cluster-generic executor calls them)."""
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


def test_pbs_asks_for_a_project_saves_packs_and_tells_resumed_jobs_that_never_ran(tmp_path, data_dir, monkeypatch):
    gadi = clusters.load("gadi")
    environ = {"SCALESTUDY_PBS_CACHE": str(tmp_path / "cache")}
    assert dialects.Gadi(gadi, environ=environ).cluster_problems()[0].startswith("config/clusters/gadi.yaml project:")
    assert dialects.Gadi(gadi, environ={**environ, "PROJECT": "ab12"}).cluster_problems() == []
    assert slurm.Slurm(clusters.load("slurm"), environ={}).cluster_problems() == []  # the user's default account
    dialects.Gadi(gadi, environ=environ).save_packs({"pack-1": [{"metrics": "m.json"}]})
    assert json.loads((tmp_path / "cache/packs.json").read_text()) == {"pack-1": [{"metrics": "m.json"}]}
    # Of the jobs Snakemake would resume, those qstat shows deleted before they ran (F, substate 91).
    asked: list = []
    monkeypatch.setattr(subprocess, "run", recorded_qstat(data_dir, asked))
    monkeypatch.setenv("SCALESTUDY_PBS_CACHE", str(tmp_path / "cache"))
    assert pbspro.PbsPro().never_ran(lambda: {"a/metrics.json": "117204933.gadi-pbs"}) == []  # it ran
    assert len(asked) == 1
    assert slurm.Slurm().never_ran(lambda: pytest.fail("asked")) == []  # the plugin resubmits; nothing asked
