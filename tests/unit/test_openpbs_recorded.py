"""The PBS backend on output recorded from a real OpenPBS server (23.06.06, built from
openpbs/openpbs cd7ab5ed; one host `vm`, jobs submitted by an ordinary user), in
tests/data/pbs/openpbs-23.06.06/ (issue 13). Each test fails on the code before the fix it
names.

job.sh (recorded beside the outputs) printed $PBS_NODEFILE and ran Open MPI 5's
`mpirun -np 2 --map-by ppr:2:node` inside jobs 0.vm (`select=1:ncpus=2:mem=1GB`, the select
dialect's chunk before the fix), 1.vm (`...:mpiprocs=2:ompthreads=1:...`, after) and 2.vm
(Gadi's `-l ncpus=2,...` totals on a stock queue); 6.vm was deleted while running and
7.vm while queued (Ctrl-C); the 4-id files answer `qstat -x -f [-F json] 0.vm 1.vm 6.vm 7.vm`.
"""

import json
import subprocess

import pytest
from scalestudy.config import clusters
from scalestudy.config.requests import job_request
from scalestudy.launch import command, failures
from scalestudy.model.point import Point
from scalestudy.scheduler.pbs import status, submit
from scalestudy.scheduler.pbs.dialects import dialect_of

IDS = ["0.vm", "1.vm", "6.vm", "7.vm"]


@pytest.fixture
def recorded(data_dir):
    return data_dir / "pbs" / "openpbs-23.06.06"


def jobs_of(path):
    return json.loads(path.read_text())["Jobs"]


def two_rank_point(**changes):
    values = dict(study="pp", app="pingpong", scaling="strong", nodes=1, ranks_per_node=2, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                  walltime="00:04:00", params={}, mpi_flags={}, nccl_env={})  # fmt: skip
    values.update(changes)
    return Point(**values)


# ---------------------------------------------------------------- fix 1: mpiprocs, slots


def test_the_select_chunk_is_what_made_pbs_list_the_host_once_per_rank(recorded):
    """The project's chunk for a 2-rank point is the one job 1.vm was submitted with; its
    node file listed the host twice and mpirun ran. 0.vm's chunk (no mpiprocs) gave one
    line and Open MPI's "Procs mapped: 1 ... PPR: 2:node", exit 213."""
    cluster = clusters.from_mapping(
        {"name": "openpbs", "scheduler": "pbspro", "pbs_dialect": "select", "cores_per_node": 96,
         "mem_per_node_gib": 48, "walltime_margin": "00:01:00"}
    )  # fmt: skip
    resources = dialect_of(cluster).resource_list(job_request(two_rank_point(), cluster), "ab12")
    with_mpiprocs = jobs_of(recorded / "qstat-x-f-F-json-select-with-mpiprocs.json")["1.vm"]
    assert f"-l {resources} " in with_mpiprocs["Submit_arguments"]
    assert with_mpiprocs["Resource_List"]["mpiprocs"] == 2 and with_mpiprocs["Exit_status"] == 0
    assert (recorded / "job-select-with-mpiprocs.log").read_text().startswith("NODEFILE:\nvm\nvm\n")
    without = jobs_of(recorded / "qstat-x-f-F-json-select-without-mpiprocs.json")["0.vm"]
    assert "mpiprocs" not in without["schedselect"]
    log = (recorded / "job-select-without-mpiprocs.log").read_text()
    assert log.startswith("NODEFILE:\nvm\nNCPUS") and "Procs mapped:  1" in log and "mpirun exit 213" in log


def test_ompthreads_follow_threads_per_rank():
    cluster = clusters.load("aspire2a")
    request = job_request(two_rank_point(ranks_per_node=16, threads_per_rank=8, nodes=2), cluster)
    assert dialect_of(cluster).resources(request, "ab12")[0] == (
        "select=2:ncpus=128:mpiprocs=16:ompthreads=8:mem=440GB"
    )


def test_a_node_file_listing_the_host_once_gets_the_points_slots(recorded, tmp_path):
    """Gadi's totals on a stock PBS (job 2.vm) list the host once: the launcher is given a
    node file with the point's ranks per node; a node file that lists enough is kept."""
    gadi = jobs_of(recorded / "qstat-x-f-F-json-gadi-ncpus.json")["2.vm"]
    assert "-l ncpus=2," in gadi["Submit_arguments"] and "mpiprocs" not in gadi["schedselect"]
    once = tmp_path / "once"
    once.write_text("vm\n")  # what 2.vm's job printed (the first line after NODEFILE:)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    given = command.pbs_slots(two_rank_point(), run_dir, {"PBS_NODEFILE": str(once)})
    assert given == {"PBS_NODEFILE": str(run_dir / "pbs_nodefile")}
    assert (run_dir / "pbs_nodefile").read_text() == "vm\nvm\n"
    twice = tmp_path / "twice"
    twice.write_text("vm\nvm\n")  # 1.vm's (select with mpiprocs=2)
    assert command.pbs_slots(two_rank_point(), run_dir, {"PBS_NODEFILE": str(twice)}) == {}
    assert command.pbs_slots(two_rank_point(), run_dir, {}) == {}


# ---------------------------------------------------------------- fix 2: JSON lists one job


def recorded_qstat(recorded, calls):
    """subprocess.run for status.query: the recorded answers of the real server."""

    def run(argv, **_):
        calls.append(argv)
        ids = [a for a in argv[1:] if not a.startswith("-") and a != "json"]
        if "json" in argv:
            assert ids[0] == "0.vm", "recorded: the JSON answer for 0.vm first (it lists only 0.vm)"
            text = (recorded / "qstat-x-f-F-json-4ids.json").read_text()
        else:
            text = (recorded / "qstat-x-f-4ids.txt").read_text()
        return subprocess.CompletedProcess(argv, 0, text, "")

    return run


def test_openpbs_json_lists_only_the_first_of_several_jobs(recorded):
    assert list(jobs_of(recorded / "qstat-x-f-F-json-4ids.json")) == ["0.vm"]
    assert sorted(status.states_from_text((recorded / "qstat-x-f-4ids.txt").read_text())) == IDS


def test_ids_the_json_leaves_out_are_asked_again_as_text_in_the_same_round(recorded, monkeypatch):
    calls = []
    monkeypatch.setattr(status.subprocess, "run", recorded_qstat(recorded, calls))
    states, unknown, form = status.query(IDS, "qstat")
    assert sorted(states) == IDS and not unknown and form == "text"
    assert calls == [["qstat", "-x", "-f", "-F", "json", *IDS], ["qstat", "-x", "-f", "1.vm", "6.vm", "7.vm"]]
    assert states["1.vm"].verdict()[0] == "success" and states["6.vm"].exit_status == 271


def test_the_status_command_remembers_the_form_so_later_rounds_ask_once(recorded, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(status.subprocess, "run", recorded_qstat(recorded, calls))
    from scalestudy.scheduler.pbs import cache

    directory = tmp_path / "cache"
    for job_id in IDS:
        cache.register(directory, job_id)
    assert status.status("0.vm", directory) == "success"  # round 1: JSON, then text for the rest
    assert len(calls) == 2 and cache.load_states(directory)["form"] == "text"
    for job_id in IDS[1:]:
        status.status(job_id, directory)  # the same round: from the cache
    assert len(calls) == 2
    states = cache.load_states(directory)
    states["refreshed"] -= status.MAX_CACHE_AGE_S + 1
    for entry in states["jobs"].values():
        entry["state"] = "R"  # as if still running: the next round refreshes them
    cache.save_states(directory, states)
    status.status("0.vm", directory)
    assert len(calls) == 3 and calls[-1][:3] == ["qstat", "-x", "-f"] and "json" not in calls[-1]


# ---------------------------------------------------------------- fix 6: deleted while queued


def test_a_job_deleted_while_queued_never_ran(recorded):
    queued = status.states_from_json((recorded / "qstat-x-f-F-json-deleted-while-queued.json").read_text())["7.vm"]
    assert (queued.state, queued.substate, queued.exit_status) == ("F", 91, None)
    assert queued.never_ran and queued.verdict()[0] == "failed"
    running = status.states_from_json((recorded / "qstat-x-f-F-json-deleted-while-running.json").read_text())["6.vm"]
    assert not running.never_ran and running.verdict() == (
        "failed",
        "Exit_status 271: deleted (qdel) or ended by SIGTERM (Job run at Mon Nov 23 at 07:19 on "
        "(vm:ncpus=96:mem=1048576kb) and terminated by scaleuser@localhost)",
    )
    text = status.states_from_text((recorded / "qstat-x-f-4ids.txt").read_text())
    assert text["7.vm"].never_ran and not text["6.vm"].never_ran
    # PBS Pro wraps the comment onto a tab-indented line: read as one value.
    assert text["6.vm"].comment.endswith("and terminated by scaleuser@localhost")


def test_the_status_command_writes_no_failed_record_for_a_job_that_never_ran(recorded, tmp_path, monkeypatch):
    from scalestudy.scheduler.pbs import cache

    answer = (recorded / "qstat-x-f-F-json-deleted-while-queued.json").read_text()
    monkeypatch.setattr(status.subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 0, answer, ""))
    directory, metrics = tmp_path / "cache", tmp_path / "run" / "metrics.json"
    cache.register(directory, "7.vm", metrics=str(metrics), point=two_rank_point().to_json(), walltime_s=240)
    assert status.status("7.vm", directory, log=lambda _: None) == "failed"
    assert not metrics.exists()  # the point runs next time


def test_resume_forgets_only_the_jobs_that_never_ran(recorded, monkeypatch):
    from scalestudy.scheduler.pbs import resume

    calls = []
    monkeypatch.setattr(status.subprocess, "run", recorded_qstat(recorded, calls))
    assert resume.never_ran({"a": "0.vm", "b": "1.vm", "c": "6.vm", "d": "7.vm"}) == ["d"]
    assert resume.never_ran({}) == [] and len(calls) == 2


# ---------------------------------------------------------------- fix 5: PBS exit codes


@pytest.mark.parametrize(
    ("code", "words", "category"),
    [
        (-10, "invalid uid/gid", "scheduler_error"),
        (-11, "requeued to run again", "scheduler_error"),
        (-23, "Kerberos", "scheduler_error"),
        (-24, "ncpus over the limit, burst", "scheduler_error"),
        (-25, "ncpus over the limit, sum", "scheduler_error"),
        (-26, "vmem over the limit", "out_of_memory"),
        (-27, "mem over the limit", "out_of_memory"),
        (-28, "cput over the limit", "scheduler_error"),
        (-29, "walltime over the limit", "walltime"),
    ],
)
def test_pbs_exit_codes_follow_openpbs_job_h(code, words, category):
    verdict, why = status.JobState("1.vm", "F", code).verdict()
    assert verdict == "failed" and words in why
    assert failures.scheduler_category(f"batch job 1.vm ended without metrics.json: {why}") == category


def test_a_walltime_kill_recorded_on_the_real_server(recorded):
    killed = status.states_from_json((recorded / "qstat-x-f-F-json-walltime-kill.json").read_text())
    (state,) = killed.values()
    assert state.exit_status == -29 and state.verdict()[1].startswith("Exit_status -29: killed: walltime")


# ---------------------------------------------------------------- fix 3: the site's cluster file


def test_the_job_reads_the_cluster_file_the_submit_command_read(tmp_path, monkeypatch):
    site = tmp_path / "site-clusters"
    site.mkdir()
    monkeypatch.setenv("SCALESTUDY_CLUSTERS_DIR", str(site))
    cluster = clusters.from_mapping({"name": "mysite", "cores_per_node": 2, "mem_per_node_gib": 4})
    lines = submit.site_environment(cluster).splitlines()
    assert f"export SCALESTUDY_CLUSTERS_DIR={site}" in lines


# ---------------------------------------------------------------- fix 7: stale cache, qsub refusal


def test_jobs_left_running_in_the_cache_by_a_killed_run_are_not_queried_again(recorded, tmp_path, monkeypatch):
    from scalestudy.scheduler.pbs import cache

    calls = []
    monkeypatch.setattr(status.subprocess, "run", recorded_qstat(recorded, calls))
    directory = tmp_path / "cache"
    long_ago = status.ACTIVE_WINDOW_S + 60
    # A killed run left 6.vm 'R' in the cache, and 1.vm registered but never polled.
    cache.register(directory, "1.vm")
    cache.save_states(directory, {"refreshed": 0.0, "jobs": {"6.vm": {"state": "R", "asked": 1.0}}})
    entries = [json.loads(line) for line in (directory / "jobs.jsonl").read_text().splitlines()]
    entries[0]["submitted"] -= long_ago
    (directory / "jobs.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    cache.register(directory, "0.vm")  # this run's job
    status.status("0.vm", directory)
    assert calls[0][-1:] == ["0.vm"] and "6.vm" not in calls[0] and "1.vm" not in calls[0]


def test_a_point_qsub_refuses_becomes_a_failed_record(tmp_path, monkeypatch):
    """qsub's refusal (here the real server's words for a queue limit) is the point's failed
    record, and the status command answers at once: the tables and the report still build."""
    monkeypatch.setenv("SCALESTUDY_PBS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PROJECT", "ab12")
    refusal = "qsub: Job violates queue and/or server resource limits"
    monkeypatch.setattr(submit.subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 188, "", refusal))
    point = two_rank_point(study="pp")
    metrics = tmp_path / "results" / "pp" / "runs" / point.id / "metrics.json"
    properties = {"rule": "run_pingpong", "params": {"point": point.to_json(), "cluster": "gadi"},
                  "resources": {"walltime_s": 240, "queue": ""}, "output": [str(metrics)]}  # fmt: skip
    jobscript = tmp_path / "job.sh"
    jobscript.write_text(f"#!/bin/bash\n# properties = {json.dumps(properties)}\n")
    job_id = dialect_of(clusters.load("gadi")).submit(jobscript)
    assert job_id.startswith(status.REFUSED_PREFIX) and status.status(job_id, tmp_path / "cache") == "success"
    record = json.loads(metrics.read_text())
    assert record["status"] == "failed" and record["category"] == "scheduler_error"
    assert record["reason"].startswith(f"qsub exited with 188: {refusal} (the batch job was never submitted: qsub -P")


# ---------------------------------------------------------------- issue 23: packs, kills, cost


def walltime_kill(recorded, monkeypatch, tmp_path):
    """The status command against 8.vm, killed by the real server at its walltime after 38 s."""
    from scalestudy.scheduler.pbs import cache

    answer = (recorded / "qstat-x-f-F-json-walltime-kill.json").read_text()
    monkeypatch.setattr(status.subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 0, answer, ""))
    return cache, tmp_path / "cache"


def record_of(path):
    return json.loads(path.read_text())


def test_a_job_pbs_killed_records_its_cost_from_the_request_and_the_time_it_ran(recorded, tmp_path, monkeypatch):
    cache, directory = walltime_kill(recorded, monkeypatch, tmp_path)
    metrics = tmp_path / "run" / "metrics.json"
    point = two_rank_point()
    cache.register(directory, "8.vm", metrics=str(metrics), point=point.to_json(), walltime_s=240, cluster="gadi")
    assert status.status("8.vm", directory, log=lambda _: None) == "success"
    record = record_of(metrics)
    assert record["category"] == "walltime" and "Exit_status -29" in record["reason"]
    used = record["resources"]
    # Gadi's normal queue: 2 SU per core-hour x 2 cores (the request) x the 38 s qstat says it ran.
    assert used["walltime_used_s"] == 38.0 and used["service_units_source"] == "scheduler"
    assert used["batch_walltime_used_s"] == 38.0 and "service_units_launch" not in used  # nothing was launched
    assert used["service_units"] == pytest.approx(2 * 2 * 38 / 3600, abs=1e-6)


def launched_record(path, wall_s, point=None, status="ok"):
    """A record as the runner writes it: the launch's own time and its estimate (Gadi's normal
    queue, 2 SU per core-hour x 2 cores)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    used = {"walltime_used_s": wall_s, "service_units": 2 * 2 * wall_s / 3600, "service_units_source": "estimated"}
    path.write_text(json.dumps({"status": status, "figures": {"t": 1.0}, "resources": used}))


def test_a_point_that_wrote_its_record_is_charged_pbs_walltime_with_the_launch_beside_it(
    recorded, tmp_path, monkeypatch
):
    """8.vm ran 38 s by qstat; the launch inside it took 30 s: the cost is the 38 s PBS charges."""
    cache, directory = walltime_kill(recorded, monkeypatch, tmp_path)
    metrics = tmp_path / "run" / "metrics.json"
    launched_record(metrics, 30.0)
    cache.register(directory, "8.vm", metrics=str(metrics), point=two_rank_point().to_json(), walltime_s=240,
                   cluster="gadi")  # fmt: skip
    assert status.status("8.vm", directory, log=lambda _: None) == "success"
    used = record_of(metrics)["resources"]
    assert used["batch_walltime_used_s"] == 38.0 and used["walltime_used_s"] == 30.0
    assert used["service_units"] == pytest.approx(2 * 2 * 38 / 3600, abs=1e-6)
    assert used["service_units_source"] == "scheduler"
    assert used["service_units_launch"] == pytest.approx(2 * 2 * 30 / 3600, abs=1e-9)
    assert record_of(metrics)["figures"] == {"t": 1.0}


def test_a_qdeled_point_is_charged_the_16_s_pbs_says_and_271_reads_as_qdel(recorded, tmp_path, monkeypatch):
    """6.vm: deleted while running (the real server's record: Exit_status 271, walltime 00:00:16,
    96 cores on the normal queue); the runner's own record says 11.4 s."""
    from scalestudy.scheduler.pbs import cache

    answer = (recorded / "qstat-x-f-F-json-deleted-while-running.json").read_text()
    monkeypatch.setattr(status.subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 0, answer, ""))
    directory = tmp_path / "cache"
    metrics = tmp_path / "run" / "metrics.json"
    metrics.parent.mkdir()
    stopped = failures.stopped_from_outside("SIGTERM", 11.4)
    written = {"status": "failed", "category": stopped.category, "reason": stopped.reason, "stop_signal": "SIGTERM",
               "resources": {"walltime_used_s": 11.4}}  # fmt: skip
    metrics.write_text(json.dumps(written))
    point = two_rank_point(ranks_per_node=96)
    cache.register(directory, "6.vm", metrics=str(metrics), point=point.to_json(), walltime_s=300, cluster="gadi")
    assert status.status("6.vm", directory, log=lambda _: None) == "success"
    record = record_of(metrics)
    assert "the scheduler says: Exit_status 271: deleted (qdel) or ended by SIGTERM" in record["reason"]
    used = record["resources"]
    assert used["batch_walltime_used_s"] == 16.0 and used["walltime_used_s"] == 11.4
    assert used["service_units"] == pytest.approx(2 * 96 * 16 / 3600, abs=1e-6)


def test_a_packs_time_is_split_between_its_points_by_their_share(recorded, tmp_path, monkeypatch):
    """A pack of three that all finished inside 8.vm (38 s by qstat) in 10, 12 and 8 s of launch:
    each is charged its share of the 38 s, and the shares add up to the pack's."""
    cache, directory = walltime_kill(recorded, monkeypatch, tmp_path)
    points = [two_rank_point(repeat=n) for n in (1, 2, 3)]
    pack = [{"metrics": str(tmp_path / f"p{n}" / "metrics.json"), "point": p.to_json(), "walltime_s": 240,
             "queue": None} for n, p in enumerate(points, 1)]  # fmt: skip
    cache.register(directory, "8.vm", pack=pack, cluster="gadi")
    for n, wall in zip((1, 2, 3), (10.0, 12.0, 8.0), strict=True):
        launched_record(tmp_path / f"p{n}" / "metrics.json", wall)
    assert status.status("8.vm", directory, log=lambda _: None) == "success"
    used = [record_of(tmp_path / f"p{n}" / "metrics.json")["resources"] for n in (1, 2, 3)]
    assert [u["batch_walltime_used_s"] for u in used] == pytest.approx([38 * 10 / 30, 38 * 12 / 30, 38 * 8 / 30])
    assert sum(u["batch_walltime_used_s"] for u in used) == pytest.approx(38.0)
    assert sum(u["service_units"] for u in used) == pytest.approx(2 * 2 * 38 / 3600, abs=1e-6)
    assert [u["walltime_used_s"] for u in used] == [10.0, 12.0, 8.0]


def test_a_record_the_runner_wrote_when_stopped_takes_pbs_walltime_as_its_category(recorded, tmp_path, monkeypatch):
    cache, directory = walltime_kill(recorded, monkeypatch, tmp_path)
    metrics = tmp_path / "run" / "metrics.json"
    metrics.parent.mkdir()
    stopped = failures.stopped_from_outside("SIGTERM", 37.0)
    written = {"status": "failed", "category": stopped.category, "reason": stopped.reason, "stop_signal": "SIGTERM"}
    metrics.write_text(json.dumps(written))
    cache.register(directory, "8.vm", metrics=str(metrics), point=two_rank_point().to_json(), walltime_s=240)
    assert status.status("8.vm", directory, log=lambda _: None) == "success"
    record = record_of(metrics)
    assert record["category"] == "walltime" and record["stop_signal"] == "SIGTERM"
    assert record["reason"].startswith("stopped from outside by SIGTERM after 37 s")
    assert "the scheduler says: Exit_status -29: killed: walltime over the limit" in record["reason"]


def test_a_packed_point_that_never_started_is_scheduler_error_and_the_running_one_is_charged(
    recorded, tmp_path, monkeypatch
):
    """A pack of three killed at its walltime (8.vm, 38 s): the first point finished in 10 s,
    the second was running (its log written by the job), the third never started."""
    cache, directory = walltime_kill(recorded, monkeypatch, tmp_path)
    points = [two_rank_point(repeat=n) for n in (1, 2, 3)]
    pack = [{"metrics": str(tmp_path / f"p{n}" / "metrics.json"), "point": p.to_json(), "walltime_s": 240,
             "queue": None} for n, p in enumerate(points, 1)]  # fmt: skip
    cache.register(directory, "8.vm", pack=pack, cluster="gadi")
    (tmp_path / "p1").mkdir(), (tmp_path / "p2").mkdir()
    (tmp_path / "p1" / "metrics.json").write_text(json.dumps({"status": "ok", "resources": {"walltime_used_s": 10.0}}))
    (tmp_path / "p2" / "stdout.log").write_text("scalestudy-rank {}\n")
    assert status.status("8.vm", directory, log=lambda _: None) == "success"
    assert record_of(tmp_path / "p1" / "metrics.json")["status"] == "ok"
    running, never = record_of(tmp_path / "p2" / "metrics.json"), record_of(tmp_path / "p3" / "metrics.json")
    assert running["category"] == "walltime" and running["resources"]["walltime_used_s"] == 28.0
    assert running["resources"]["service_units"] == pytest.approx(2 * 2 * 28 / 3600, abs=1e-6)
    assert never["category"] == "scheduler_error" and never["reason"].startswith(
        "never started: batch job 8.vm (a pack of 3 points) ended before its turn: Exit_status -29"
    )
    assert never["resources"]["service_units"] == 0


def test_a_pack_qsub_refuses_leaves_a_failed_record_for_each_point(tmp_path, monkeypatch):
    """qsub refusing a pack (the real server's words for a queue limit): every point of it is a
    failed record, and the status command answers at once, so the tables and the report build."""
    from scalestudy.scheduler.pbs import cache

    monkeypatch.setenv("SCALESTUDY_PBS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PROJECT", "ab12")
    refusal = "qsub: Job violates queue and/or server resource limits"
    monkeypatch.setattr(submit.subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 188, "", refusal))
    points = [two_rank_point(study="pp", repeat=n) for n in (1, 2)]
    metrics = [tmp_path / "results" / "pp" / "runs" / p.id / "metrics.json" for p in points]
    entries = [{"metrics": str(m), "point": p.to_json(), "walltime_s": 240, "queue": None}
               for m, p in zip(metrics, points, strict=True)]  # fmt: skip
    cache.save_packs(tmp_path / "cache", {"pp.n1r2.pack1": entries})
    properties = {"type": "group", "groupid": "pp.n1r2.pack1", "output": [str(m) for m in metrics],
                  "resources": {"walltime_s": 480}}  # fmt: skip
    jobscript = tmp_path / "job.sh"
    jobscript.write_text(f"#!/bin/bash\n# properties = {json.dumps(properties)}\n")
    job_id = dialect_of(clusters.load("gadi")).submit(jobscript)
    assert job_id.startswith(status.REFUSED_PREFIX) and status.status(job_id, tmp_path / "cache") == "success"
    for path in metrics:
        record = record_of(path)
        assert record["status"] == "failed" and record["category"] == "scheduler_error"
        assert record["reason"].startswith(f"qsub exited with 188: {refusal} (the batch job was never submitted: qsub")
