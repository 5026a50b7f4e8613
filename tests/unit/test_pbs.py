"""PBS Pro in-process, on recorded output: the exact qsub line of each dialect, what a
site refuses, qstat JSON and text states, the cancel command's bookkeeping, which jobs the
sidecar deletes, and the config plan reads. The commands as processes (status against a
stand-in qstat, one qstat per polling round, the sidecar, the cancel command) are in
tests/integration/test_pbs_commands.py."""

import os
from pathlib import Path

import pytest
import yaml
from points import batch_point, gpu_batch_point
from scalestudy.config import clusters
from scalestudy.config.requests import estimated_service_units, job_request, request_problems, sweep_problems
from scalestudy.model.errors import SweepError
from scalestudy.planning import dry_plan
from scalestudy.scheduler import site
from scalestudy.scheduler.pbs import cache, cancel, dialects, pbspro, sidecar, status, submit


def refusals(p, cluster):
    """What the submit command and the study loader refuse: the queue's limits and the dialect's rules."""
    return request_problems(p, cluster, dialects.site_rules(cluster))


def qsub_line(p, cluster_name):
    cluster = clusters.load(cluster_name)
    assert refusals(p, cluster) == []
    argv = dialects.dialect_of(cluster).qsub_command(job_request(p, cluster), project="ab12", log_path="LOG")
    return " ".join(argv)


@pytest.mark.parametrize(
    ("nodes", "resources"),
    [
        (1, "ncpus=48,mem=190GB,walltime=00:15:00,jobfs=10GB,storage=scratch/ab12+gdata/ab12"),
        (2, "ncpus=96,mem=380GB,walltime=00:15:00,jobfs=10GB,storage=scratch/ab12+gdata/ab12"),
        (32, "ncpus=1536,mem=6080GB,walltime=00:15:00,jobfs=10GB,storage=scratch/ab12+gdata/ab12"),
    ],
)
def test_gadi_normal_qsub_line(nodes, resources):
    assert qsub_line(batch_point(nodes), "gadi") == (
        f"qsub -P ab12 -q normal -l {resources} -N hoomd-wca.n{nodes}r48.d.d.r1 -j oe -o LOG"
    )


@pytest.mark.parametrize(
    ("nodes", "resources"),
    [
        (1, "ncpus=48,ngpus=4,mem=382GB,walltime=00:15:00"),
        (2, "ncpus=96,ngpus=8,mem=764GB,walltime=00:15:00"),
    ],
)
def test_gadi_gpuvolta_qsub_line_ties_12_cores_to_each_gpu(nodes, resources):
    line = qsub_line(gpu_batch_point(nodes, mpi_flag_set="no-ucx-hcoll"), "gadi")
    assert line == (
        f"qsub -P ab12 -q gpuvolta -l {resources},jobfs=10GB,storage=scratch/ab12+gdata/ab12 "
        f"-N litgpt-full.n{nodes}g4.no-ucx-h.d.r1 -j oe -o LOG"
    )


def test_gadi_gpuvolta_32_nodes_is_refused_as_the_queue_would():
    (problem,) = refusals(gpu_batch_point(32), clusters.load("gadi"))
    assert problem == (
        "studies.litgpt-full: 128 GPUs at nodes=32, gpus_per_node=4 is more than queue gpuvolta accepts (80)"
    )


@pytest.mark.parametrize(
    ("nodes", "select"),
    [
        (1, "select=1:ncpus=128:mpiprocs=128:ompthreads=1:mem=440GB,walltime=00:15:00"),
        (2, "select=2:ncpus=128:mpiprocs=128:ompthreads=1:mem=440GB,place=scatter,walltime=00:15:00"),
        (32, "select=32:ncpus=128:mpiprocs=128:ompthreads=1:mem=440GB,place=scatter,walltime=00:15:00"),
    ],
)
def test_aspire2a_normal_qsub_line(nodes, select):
    assert qsub_line(batch_point(nodes, ranks_per_node=128), "aspire2a") == (
        f"qsub -P ab12 -q normal -l {select} -N hoomd-wca.n{nodes}r128.d.d.r1 -j oe -o LOG"
    )


@pytest.mark.parametrize(
    ("nodes", "select"),
    [
        (1, "select=1:ncpus=64:ngpus=4:mpiprocs=4:ompthreads=1:mem=440GB,walltime=00:15:00"),
        (2, "select=2:ncpus=64:ngpus=4:mpiprocs=4:ompthreads=1:mem=440GB,place=scatter,walltime=00:15:00"),
    ],
)
def test_aspire2a_ai_qsub_line(nodes, select):
    line = qsub_line(gpu_batch_point(nodes, queue="ai", nccl_env_set="no-ib-gdr-shm"), "aspire2a")
    assert line == f"qsub -P ab12 -q ai -l {select} -N litgpt-full.n{nodes}g4.d.no-ib-gd.r1 -j oe -o LOG"


def test_aspire2a_gpu_points_default_to_normal_on_gpu_nodes():
    line = qsub_line(gpu_batch_point(1), "aspire2a")
    assert line.startswith("qsub -P ab12 -q normal -l select=1:ncpus=64:ngpus=4:mpiprocs=4:ompthreads=1:mem=440GB,")


def test_aspire2a_ai_32_nodes_is_refused():
    (problem,) = refusals(gpu_batch_point(32, queue="ai"), clusters.load("aspire2a"))
    assert problem.endswith("128 GPUs at nodes=32, gpus_per_node=4 is more than queue ai accepts (96)")


@pytest.mark.parametrize(
    ("p", "cluster", "expected"),
    [
        (
            batch_point(2, ranks_per_node=36),
            "gadi",
            "studies.hoomd-wca: ncpus=72 at nodes=2, ranks_per_node=36 is not a multiple of 48; Gadi normal jobs "
            "past one node take whole nodes (ranks_per_node x threads_per_rank = 48)",
        ),
        (
            batch_point(1, ranks_per_node=2, queue="gpuvolta"),
            "gadi",
            "studies.hoomd-wca: queue gpuvolta takes GPU jobs only (ncpus = 12 x ngpus); set gpus_per_node or "
            "another queue",
        ),
        (
            batch_point(1, walltime="48:00:00"),
            "gadi",
            "studies.hoomd-wca.walltime: 48:05:00 (the point's 48:00:00 + margin 00:05:00) is over queue normal's "
            "limit 48:00:00 for 48 ncpus",
        ),
        (
            gpu_batch_point(1, gpus_per_node=8, ranks_per_node=8),
            "aspire2a",
            "studies.litgpt-full.gpus_per_node: 8 GPUs per node but aspire2a queue normal-gpu nodes have 4",
        ),
        (
            batch_point(1, queue="nosuch"),
            "gadi",
            "studies.hoomd-wca.queue: 'nosuch' is not a queue of gadi; allowed: normal, express, hugemem, gpuvolta",
        ),
    ],
)
def test_what_the_site_would_reject_is_one_line(p, cluster, expected):
    assert expected in refusals(p, clusters.load(cluster))


def test_single_node_jobs_may_take_part_of_a_node():
    cluster = clusters.load("gadi")
    request = job_request(batch_point(1, ranks_per_node=4), cluster)
    assert (request.ncpus, request.mem_gib) == (4, 15)  # 190 GB / 48 cores x 4, rounded down
    assert refusals(batch_point(1, ranks_per_node=4), cluster) == []


def test_refusals_are_reported_once_per_distinct_problem():
    points = [batch_point(2, ranks_per_node=36)] * 3
    gadi = clusters.load("gadi")
    assert len(sweep_problems(points, gadi, dialects.site_rules(gadi))) == 1
    # One machine: its one node is the limit; more ranks than cores it runs on purpose.
    assert sweep_problems(points, clusters.load("local")) == [
        "studies.hoomd-wca.nodes: 2 nodes, but local is one machine (config/clusters/local.yaml nodes: 1); "
        "use nodes: [1]"
    ]
    assert sweep_problems([batch_point(1, ranks_per_node=36)] * 3, clusters.load("local")) == []


# ------------------------------------------------------------------ dialects


def test_each_cluster_file_names_a_registered_dialect():
    assert list(dialects.DIALECTS) == ["gadi", "select"]
    assert type(dialects.dialect_of(clusters.load("gadi"))) is dialects.Gadi
    assert type(dialects.dialect_of(clusters.load("aspire2a"))) is pbspro.PbsPro
    assert type(dialects.dialect_of(clusters.load("local"))) is pbspro.PbsPro  # the default


def test_an_unknown_dialect_is_one_line_naming_the_registered_ones():
    cluster = clusters.from_mapping({"name": "x", "cores_per_node": 2, "mem_per_node_gib": 4, "pbs_dialect": "nosuch"})
    with pytest.raises(SweepError) as refused:
        dialects.dialect_of(cluster)
    (problem,) = refused.value.problems
    assert problem == "config/clusters/x.yaml: pbs_dialect 'nosuch' is not known; allowed: gadi, select"


def test_a_new_dialect_overrides_only_how_the_request_is_written(monkeypatch):
    class NodesDialect(pbspro.PbsPro):
        name = "nodes"

        def resources(self, request, project):
            return [f"nodes={request.nodes}:ppn={request.ncpus_per_node}", self.walltime(request)]

    monkeypatch.setitem(dialects.DIALECTS, "nodes", NodesDialect)
    cluster = clusters.from_mapping({"name": "x", "cores_per_node": 8, "mem_per_node_gib": 16, "pbs_dialect": "nodes"})
    p = batch_point(2, ranks_per_node=8)
    assert refusals(p, cluster) == []
    argv = dialects.dialect_of(cluster).qsub_command(job_request(p, cluster), project="ab12", log_path="LOG")
    assert argv[argv.index("-l") + 1] == "nodes=2:ppn=8,walltime=00:10:00"


def test_whole_nodes_past_one_node_are_a_rule_of_the_gadi_dialect_alone():
    p = batch_point(2, ranks_per_node=36)
    gadi = clusters.load("gadi")
    whole_nodes = "studies.hoomd-wca: ncpus=72 at nodes=2, ranks_per_node=36 is not a multiple of 48"
    assert dialects.dialect_of(gadi).problems(p, job_request(p, gadi))[0].startswith(whole_nodes)
    assert request_problems(p, gadi) == []  # the queue's limits alone accept it
    # Select chunks say how many cores per node: the same shape on 48-core nodes is fine.
    select = clusters.from_mapping({"name": "x", "cores_per_node": 48, "mem_per_node_gib": 190})
    assert refusals(p, select) == []


def test_the_site_loader_stops_a_study_the_gadi_dialect_refuses(tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    config = {
        "cluster": "gadi",
        "mpi_flag_sets": {"default": {}},
        "nccl_env_sets": {"default": {}},
        "studies": {"pp": {"app": "pingpong", "nodes": [1, 2], "ranks_per_node": [36]}},
    }
    with pytest.raises(SweepError) as refused:
        site.load_study(config)
    assert refused.value.problems == [
        "studies.pp: ncpus=72 at nodes=2, ranks_per_node=36 is not a multiple of 48; Gadi normal jobs past one "
        "node take whole nodes (ranks_per_node x threads_per_rank = 48)"
    ]


def test_estimated_service_units_follow_gadi_charging():
    normal = clusters.load("gadi").queue("normal")
    # 576 CPUs for 40 s at 2 SU per core-hour: the 12.80 Gadi printed for that job.
    assert estimated_service_units(normal, 576, 0, 576 * 190 / 48, 40) == pytest.approx(12.8)
    # 8 CPUs with 128 GB are charged as 32 cores' memory (NCI's own example: 320 SU for 5 h).
    assert estimated_service_units(normal, 8, 0, 128, 5 * 3600) == pytest.approx(320, rel=0.02)


# ------------------------------------------------------------------ status


def test_qstat_json_states(data_dir):
    states = status.states_from_json((data_dir / "pbs" / "qstat-x-f-F-json.json").read_text())
    verdicts = {job: state.verdict()[0] for job, state in states.items()}
    assert verdicts == {
        "117204931.gadi-pbs": "running",  # queued
        "117204932.gadi-pbs": "running",
        "117204933.gadi-pbs": "success",
        "117204934.gadi-pbs": "failed",
        "117204935.gadi-pbs": "failed",
    }
    assert states["117204935.gadi-pbs"].verdict()[1].startswith("Exit_status -29: killed: walltime over the limit")
    assert states["117204934.gadi-pbs"].verdict()[1].startswith("Exit_status 1: the job script failed")


def test_qstat_text_states_of_torque_style_qstat():
    text = "Job Id:\t4\n\tJob_Name = t\n\tjob_state = C\n\tqueue = debug\nJob Id: 5\n    job_state = R\n"
    states = status.states_from_text(text)
    assert states["4"].verdict()[0] == "success" and states["5"].verdict()[0] == "running"


def test_sidecar_after_a_normal_end_deletes_nothing(tmp_path):
    directory = tmp_path / "cache"
    done = tmp_path / "metrics.json"
    done.write_text("{}")
    cache.register(directory, "1.pbs", run="r", metrics=str(done))
    cache.register(directory, "2.pbs", run="r")  # a job without metrics.json (e.g. the initial state)
    cache.save_states(directory, {"refreshed": 0.0, "jobs": {"1.pbs": {"state": "F"}, "2.pbs": {"state": "F"}}})
    assert sidecar.unfinished_jobs(directory, "r") == []


def test_site_environment_quotes_config_values_for_the_job_shell():
    cluster = clusters.from_mapping(
        {"name": "x", "cores_per_node": 2, "mem_per_node_gib": 4, "modules": ["openmpi/4.1.5", "a b"],
         "job_env": {"HF_HUB_OFFLINE": "1", "NOTE": "$(touch /tmp/pwned) `id`"}}
    )  # fmt: skip
    lines = submit.site_environment(cluster).splitlines()
    assert lines[2:] == [
        "module load openmpi/4.1.5 'a b'",
        "export HF_HUB_OFFLINE=1",
        "export NOTE='$(touch /tmp/pwned) `id`'",
    ]


# ------------------------------------------------------------------ cancel


def test_cache_and_qdel_follow_the_environment():
    assert cache.cache_dir({}) == Path(".snakemake/scalestudy-pbs")
    assert cache.cache_dir({"SCALESTUDY_PBS_CACHE": "/scratch/c"}) == Path("/scratch/c")
    assert cancel.qdel_command({}) == "qdel"
    assert cancel.qdel_command({"SCALESTUDY_QDEL": "/opt/pbs/bin/qdel"}) == "/opt/pbs/bin/qdel"


def spawn_recorder(monkeypatch, directory, said=b""):
    """Replaces the start of qdel: records what would start, what `cancelled` held then,
    and writes `said` where qdel's output would go."""
    started = []

    def start(argv, output_fd):
        started.append((argv, (directory / cache.CANCELLED).read_text()))
        os.write(output_fd, said)

    monkeypatch.setattr(cancel, "start_detached", start)
    return started


def test_cancel_notes_the_ids_before_it_starts_one_qdel_for_all(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    started = spawn_recorder(monkeypatch, directory, b"qdel: job 2.pbs already finished\n")
    cancel.cancel(["1.pbs", "2.pbs"], directory, "/opt/pbs/bin/qdel")
    # The sidecar reads `cancelled`: the ids are there before qdel runs.
    assert started == [(["/opt/pbs/bin/qdel", "1.pbs", "2.pbs"], "1.pbs\n2.pbs\n")]
    assert (directory / cache.QDEL_LOG).read_text() == "cancel: qdel 1.pbs 2.pbs\nqdel: job 2.pbs already finished\n"
    cancel.cancel(["3.pbs"], directory)
    assert cache.cancelled(directory) == {"1.pbs", "2.pbs", "3.pbs"}


def test_cancel_without_ids_starts_nothing(tmp_path, monkeypatch):
    started = spawn_recorder(monkeypatch, tmp_path / "cache")
    cancel.cancel([], tmp_path / "cache")
    assert started == [] and not (tmp_path / "cache").exists()


def test_a_qdel_that_cannot_start_is_logged_and_the_command_still_returns(tmp_path, monkeypatch):
    def missing(argv, output_fd):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(cancel, "start_detached", missing)
    cancel.cancel(["1.pbs"], tmp_path, "/no/qdel")
    assert (tmp_path / cache.QDEL_LOG).read_text().splitlines() == [
        "cancel: qdel 1.pbs",
        "cancel: /no/qdel failed: [Errno 2] No such file or directory",
    ]


def test_the_sidecar_leaves_the_jobs_the_cancel_command_took(tmp_path, monkeypatch):
    spawn_recorder(monkeypatch, tmp_path)
    for job in ("1.pbs", "2.pbs"):
        cache.register(tmp_path, job, run="r")
    cancel.cancel(["1.pbs"], tmp_path)
    assert sidecar.unfinished_jobs(tmp_path, "r") == ["2.pbs"]


# ------------------------------------------------------------------ plan


def study_names(lines):
    return {line.split(" -N ")[1].split(".")[0] for line in qsub_lines(lines)}


def qsub_lines(lines):
    """plan's output without the cost forecast (its `# ` lines)."""
    return [line for line in lines if not line.startswith("# ")]


def test_plan_reads_the_profile_as_snakemake_does(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)  # a profile's paths resolve against the directory snakemake runs in
    monkeypatch.setenv("PROJECT", "ab12")
    shipped = yaml.safe_load((repo / "config/sweep.yaml").read_text())
    assert study_names(dry_plan.plan(repo / "profiles/gadi")) == set(shipped["studies"])
    # --configfile replaces the profile's configfiles (config/sweep.yaml): only X's studies.
    only_hoomd = tmp_path / "hoomd-only.yaml"
    only_hoomd.write_text(yaml.safe_dump({**shipped, "studies": {"hoomd-wca": shipped["studies"]["hoomd-wca"]}}))
    lines = qsub_lines(dry_plan.plan(repo / "profiles/gadi", [str(only_hoomd)]))
    assert study_names(lines) == {"hoomd-wca"} and len(lines) == 18
    # The profile's `config:` names the cluster; --config on the command line replaces it.
    assert " -l ncpus=" in lines[0]
    aspire = qsub_lines(dry_plan.plan(repo / "profiles/gadi", [str(only_hoomd)], ["cluster=aspire2a"]))
    assert " -l select=" in aspire[0]


def test_plan_refuses_what_the_dry_run_refuses(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"studies": {"pp": {"app": "pingpong", "nodes": [1, 2], "ranks_per_node": [36]}}}))
    with pytest.raises(SweepError) as refused:
        dry_plan.plan(repo / "profiles/gadi", [str(sweep)])
    assert refused.value.problems[0].startswith("studies.pp: ncpus=72 at nodes=2, ranks_per_node=36 is not a multiple")
