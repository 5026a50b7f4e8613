"""PBS Pro dialects on recorded output: exact qsub lines, refusals, qstat JSON states,
the Gadi resource-usage block, and one qstat per polling round."""

import json
import os
import signal
import stat
import subprocess

import pytest
from scalestudy.config import clusters
from scalestudy.config.requests import estimated_service_units, job_request, request_problems, sweep_problems
from scalestudy.model.point import Point
from scalestudy.scheduler import pbs


def point(nodes, *, study="hoomd-wca", app="hoomd", ranks_per_node=48, gpus_per_node=0, walltime="00:10:00", **more):
    return Point(
        study=study,
        app=app,
        scaling="strong",
        nodes=nodes,
        ranks_per_node=ranks_per_node,
        gpus_per_node=gpus_per_node,
        threads_per_rank=more.pop("threads_per_rank", 1),
        mpi_flag_set=more.pop("mpi_flag_set", "default"),
        nccl_env_set=more.pop("nccl_env_set", "default"),
        repeat=1,
        walltime=walltime,
        params={},
        **more,
    )


def gpu_point(nodes, **more):
    more = {"ranks_per_node": 4, "gpus_per_node": 4, **more}
    return point(nodes, study="litgpt-full", app="litgpt", **more)


def qsub_line(p, cluster_name):
    cluster = clusters.load(cluster_name)
    assert request_problems(p, cluster) == []
    argv = pbs.qsub_command(job_request(p, cluster), cluster, project="ab12", log_path="LOG")
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
    assert qsub_line(point(nodes), "gadi") == (
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
    line = qsub_line(gpu_point(nodes, mpi_flag_set="no-ucx-hcoll"), "gadi")
    assert line == (
        f"qsub -P ab12 -q gpuvolta -l {resources},jobfs=10GB,storage=scratch/ab12+gdata/ab12 "
        f"-N litgpt-full.n{nodes}g4.no-ucx-h.d.r1 -j oe -o LOG"
    )


def test_gadi_gpuvolta_32_nodes_is_refused_as_the_queue_would():
    (problem,) = request_problems(gpu_point(32), clusters.load("gadi"))
    assert problem == (
        "studies.litgpt-full: 128 GPUs at nodes=32, gpus_per_node=4 is more than queue gpuvolta accepts (80)"
    )


@pytest.mark.parametrize(
    ("nodes", "select"),
    [
        (1, "select=1:ncpus=128:mem=440GB,walltime=00:15:00"),
        (2, "select=2:ncpus=128:mem=440GB,place=scatter,walltime=00:15:00"),
        (32, "select=32:ncpus=128:mem=440GB,place=scatter,walltime=00:15:00"),
    ],
)
def test_aspire2a_normal_qsub_line(nodes, select):
    assert qsub_line(point(nodes, ranks_per_node=128), "aspire2a") == (
        f"qsub -P ab12 -q normal -l {select} -N hoomd-wca.n{nodes}r128.d.d.r1 -j oe -o LOG"
    )


@pytest.mark.parametrize(
    ("nodes", "select"),
    [
        (1, "select=1:ncpus=64:ngpus=4:mem=440GB,walltime=00:15:00"),
        (2, "select=2:ncpus=64:ngpus=4:mem=440GB,place=scatter,walltime=00:15:00"),
    ],
)
def test_aspire2a_ai_qsub_line(nodes, select):
    line = qsub_line(gpu_point(nodes, queue="ai", nccl_env_set="no-ib-gdr-shm"), "aspire2a")
    assert line == f"qsub -P ab12 -q ai -l {select} -N litgpt-full.n{nodes}g4.d.no-ib-gd.r1 -j oe -o LOG"


def test_aspire2a_gpu_points_default_to_normal_on_gpu_nodes():
    line = qsub_line(gpu_point(1), "aspire2a")
    assert line.startswith("qsub -P ab12 -q normal -l select=1:ncpus=64:ngpus=4:mem=440GB,")


def test_aspire2a_ai_32_nodes_is_refused():
    (problem,) = request_problems(gpu_point(32, queue="ai"), clusters.load("aspire2a"))
    assert problem.endswith("128 GPUs at nodes=32, gpus_per_node=4 is more than queue ai accepts (96)")


@pytest.mark.parametrize(
    ("p", "cluster", "expected"),
    [
        (
            point(2, ranks_per_node=36),
            "gadi",
            "studies.hoomd-wca: ncpus=72 at nodes=2, ranks_per_node=36 is not a multiple of 48; Gadi normal jobs "
            "past one node take whole nodes (ranks_per_node x threads_per_rank = 48)",
        ),
        (
            point(1, ranks_per_node=2, queue="gpuvolta"),
            "gadi",
            "studies.hoomd-wca: queue gpuvolta takes GPU jobs only (ncpus = 12 x ngpus); set gpus_per_node or "
            "another queue",
        ),
        (
            point(1, walltime="48:00:00"),
            "gadi",
            "studies.hoomd-wca.walltime: 48:05:00 (the point's 48:00:00 + margin 00:05:00) is over queue normal's "
            "limit 48:00:00 for 48 ncpus",
        ),
        (
            gpu_point(1, gpus_per_node=8, ranks_per_node=8),
            "aspire2a",
            "studies.litgpt-full.gpus_per_node: 8 GPUs per node but aspire2a queue normal-gpu nodes have 4",
        ),
        (
            point(1, queue="nosuch"),
            "gadi",
            "studies.hoomd-wca.queue: 'nosuch' is not a queue of gadi; allowed: normal, express, hugemem, gpuvolta",
        ),
    ],
)
def test_what_the_site_would_reject_is_one_line(p, cluster, expected):
    assert expected in request_problems(p, clusters.load(cluster))


def test_single_node_jobs_may_take_part_of_a_node():
    cluster = clusters.load("gadi")
    request = job_request(point(1, ranks_per_node=4), cluster)
    assert (request.ncpus, request.mem_gb) == (4, 15)  # 190 GB / 48 cores x 4, rounded down
    assert request_problems(point(1, ranks_per_node=4), cluster) == []


def test_refusals_are_reported_once_per_distinct_problem():
    points = [point(2, ranks_per_node=36)] * 3
    assert len(sweep_problems(points, clusters.load("gadi"))) == 1
    # One machine: its one node is the limit; more ranks than cores it runs on purpose.
    assert sweep_problems(points, clusters.load("local")) == [
        "studies.hoomd-wca.nodes: 2 nodes, but local is one machine (config/clusters/local.yaml nodes: 1); "
        "use nodes: [1]"
    ]
    assert sweep_problems([point(1, ranks_per_node=36)] * 3, clusters.load("local")) == []


def test_estimated_service_units_follow_gadi_charging():
    normal = clusters.load("gadi").queue("normal")
    # 576 CPUs for 40 s at 2 SU per core-hour: the 12.80 Gadi printed for that job.
    assert estimated_service_units(normal, 576, 0, 576 * 190 / 48, 40) == pytest.approx(12.8)
    # 8 CPUs with 128 GB are charged as 32 cores' memory (NCI's own example: 320 SU for 5 h).
    assert estimated_service_units(normal, 8, 0, 128, 5 * 3600) == pytest.approx(320, rel=0.02)


# ------------------------------------------------------------------ status


def test_qstat_json_states(data_dir):
    states = pbs.states_from_json((data_dir / "pbs" / "qstat-x-f-F-json.json").read_text())
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
    states = pbs.states_from_text(text)
    assert states["4"].verdict()[0] == "success" and states["5"].verdict()[0] == "running"


def fake_qstat(tmp_path, data_dir, calls_file):
    """A qstat that answers from the recorded JSON and counts its invocations."""
    script = tmp_path / "qstat"
    recorded = data_dir / "pbs" / "qstat-x-f-F-json.json"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, sys\n"
        f"open({str(calls_file)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"jobs = json.load(open({str(recorded)!r}))['Jobs']\n"
        "ids = [a for a in sys.argv[1:] if not a.startswith('-') and a not in ('json',)]\n"
        "known = {i: jobs.get(i, {'job_state': 'Q'}) for i in ids if not i.startswith('999')}\n"
        "for i in ids:\n"
        "    if i not in known: print(f'qstat: Unknown Job Id {i}', file=sys.stderr)\n"
        "print(json.dumps({'Jobs': known}))\n"
        "sys.exit(153 if len(known) < len(ids) else 0)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_status_words_and_unknown_job(tmp_path, data_dir):
    calls = tmp_path / "calls"
    qstat = fake_qstat(tmp_path, data_dir, calls)
    cache = tmp_path / "cache"
    for job in ["117204931.gadi-pbs", "117204933.gadi-pbs", "117204935.gadi-pbs", "999.gadi-pbs"]:
        pbs.register(cache, job)
    words = [pbs.status(job, cache, qstat) for job in ["117204931.gadi-pbs", "117204933.gadi-pbs"]]
    assert words == ["running", "success"]
    # Unknown to the server: "running" during a grace period, then given up.
    assert pbs.status("999.gadi-pbs", cache, qstat) == "running"
    entries = [json.loads(line) for line in (cache / "jobs.jsonl").read_text().splitlines()]
    for entry in entries:
        entry["submitted"] -= 2 * pbs.UNKNOWN_GRACE_S
    (cache / "jobs.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert pbs.status("999.gadi-pbs", cache, qstat) == "failed"


def test_killed_job_without_metrics_becomes_failed_data(tmp_path, data_dir):
    qstat = fake_qstat(tmp_path, data_dir, tmp_path / "calls")
    cache, metrics = tmp_path / "cache", tmp_path / "run" / "metrics.json"
    p = point(4)
    pbs.register(cache, "117204935.gadi-pbs", metrics=str(metrics), point=p.to_json(), walltime_s=600)
    assert pbs.status("117204935.gadi-pbs", cache, qstat) == "success"
    record = json.loads(metrics.read_text())
    assert record["status"] == "failed" and record["point"]["nodes"] == 4
    assert "Exit_status -29: killed: walltime over the limit" in record["reason"]


def test_transient_qstat_failure_answers_running(tmp_path):
    broken = tmp_path / "qstat"
    broken.write_text("#!/bin/sh\necho 'pbs_iff: cannot connect to host' >&2\nexit 2\n")
    broken.chmod(0o755)
    messages = []
    assert pbs.status("1.server", tmp_path / "cache", str(broken), messages.append) == "running"
    assert "qstat failed" in messages[0]


def test_status_command_prints_exactly_one_word(tmp_path, data_dir, repo):
    qstat = fake_qstat(tmp_path, data_dir, tmp_path / "calls")
    env = {**os.environ, "SCALESTUDY_PBS_CACHE": str(tmp_path / "cache"), "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(
        [str(repo / "profiles/pbs/scalestudy-pbs"), "status", "117204934.gadi-pbs"],
        env={**env, "SCALESTUDY_PYTHON": os.sys.executable},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "failed\n", (qstat, out.stderr)


def test_one_qstat_per_polling_round_for_50_jobs(tmp_path, data_dir):
    calls = tmp_path / "calls"
    qstat = fake_qstat(tmp_path, data_dir, calls)
    cache = tmp_path / "cache"
    jobs = [f"{117300000 + i}.gadi-pbs" for i in range(50)]
    for job in jobs:
        pbs.register(cache, job)
    rounds = 3
    for _ in range(rounds):
        pbs.MIN_REFRESH_S, saved = 0.0, pbs.MIN_REFRESH_S
        try:
            assert {pbs.status(job, cache, qstat) for job in jobs} == {"running"}
        finally:
            pbs.MIN_REFRESH_S = saved
    invocations = calls.read_text().splitlines()
    assert len(invocations) == rounds
    assert all(len(line.split()) == 4 + 50 for line in invocations)  # -x -f -F json + every job


def test_sidecar_deletes_only_the_unfinished_jobs_of_its_own_run_when_terminated(tmp_path, repo):
    """Snakemake empties its list of active jobs during each status round, so a Ctrl-C there
    cancels nothing; the sidecar deletes what is left when Snakemake terminates it."""
    cache, calls = tmp_path / "cache", tmp_path / "qdel-calls"
    qdel = tmp_path / "qdel"
    qdel.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    qdel.chmod(0o755)
    env = {**os.environ, "SCALESTUDY_PBS_CACHE": str(cache), "SCALESTUDY_QDEL": str(qdel)}
    sidecar = subprocess.Popen(
        [str(repo / "profiles/pbs/sidecar")],
        env={**env, "SCALESTUDY_PYTHON": os.sys.executable},
        stdout=subprocess.PIPE,
        text=True,
    )
    run = sidecar.stdout.readline().strip()
    assert len(run) == 32
    done = tmp_path / "done.json"
    done.write_text("{}")
    pbs.register(cache, "1.pbs", run=run, metrics=str(tmp_path / "missing.json"))  # running: delete
    pbs.register(cache, "2.pbs", run=run, metrics=str(done))  # wrote its record: keep
    pbs.register(cache, "3.pbs", run="another-run")  # another Snakemake's job: keep
    pbs.register(cache, "4.pbs", run=run)  # finished, as the status command saw: keep
    pbs.register(cache, "5.pbs", run=run)  # the cancel command already deleted it: keep
    pbs.register(cache, "6.pbs", run=run)  # queued, never polled yet: delete
    pbs.save_cache(cache, {"refreshed": 0.0, "jobs": {"4.pbs": {"state": "F"}, "1.pbs": {"state": "R"}}})
    (cache / pbs.CANCELLED).write_text("5.pbs\n")
    sidecar.send_signal(signal.SIGINT)  # Ctrl-C reaches the whole process group: not the moment
    with pytest.raises(subprocess.TimeoutExpired):
        sidecar.wait(timeout=1)
    sidecar.terminate()
    assert sidecar.wait(timeout=30) == 0
    assert calls.read_text().split() == ["1.pbs", "6.pbs"]
    assert "sidecar: qdel 1.pbs 6.pbs" in (cache / pbs.QDEL_LOG).read_text()


def test_sidecar_after_a_normal_end_deletes_nothing(tmp_path):
    cache = tmp_path / "cache"
    done = tmp_path / "metrics.json"
    done.write_text("{}")
    pbs.register(cache, "1.pbs", run="r", metrics=str(done))
    pbs.register(cache, "2.pbs", run="r")  # a job without metrics.json (e.g. the initial state)
    pbs.save_cache(cache, {"refreshed": 0.0, "jobs": {"1.pbs": {"state": "F"}, "2.pbs": {"state": "F"}}})
    assert pbs.unfinished_jobs(cache, "r") == []


def test_site_environment_quotes_config_values_for_the_job_shell():
    cluster = clusters.from_mapping(
        {"name": "x", "cores_per_node": 2, "mem_per_node_gb": 4, "modules": ["openmpi/4.1.5", "a b"],
         "job_env": {"HF_HUB_OFFLINE": "1", "NOTE": "$(touch /tmp/pwned) `id`"}}
    )  # fmt: skip
    lines = pbs.site_environment(cluster).splitlines()
    assert lines[1:] == [
        "module load openmpi/4.1.5 'a b'",
        "export HF_HUB_OFFLINE=1",
        "export NOTE='$(touch /tmp/pwned) `id`'",
    ]
