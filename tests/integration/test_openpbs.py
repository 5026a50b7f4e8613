"""The PBS profiles against a real OpenPBS server (issue 13), when one is up on this machine.

A one-host OpenPBS (server, scheduler, comm, mom) built from its source (docs/profiles.md) and
set up by tests/support/openpbs/setup.sh: queues normal/express/ai, Gadi's site resources, an
ordinary user `scaleuser` who submits (PBS runs no job as root), and logging shims for
qsub/qstat/qdel in /opt/pbs-shim/bin (one line per call in /var/log/pbs-shim/). Without a
running server every test here skips, saying why; CI keeps the Slurm-based PBS tests
(test_scheduler_integration.py).

- profiles/gadi and profiles/aspire2a run shipped-shaped ping-pong and LAMMPS studies (2 ranks
  per node) on the stock queue `normal` (no default_chunk tricks) from a site's own cluster
  files (SCALESTUDY_CLUSTERS_DIR): every point ends ok, and each polling round asks qstat
  once (the round that learns that the server's JSON lists one job of several asks twice);
- Ctrl-C with queued jobs deletes them; the rerun submits those points again and they run;
- a job PBS kills at its walltime (a single point, and a pack) and a running job deleted by
  qdel leave no rank of their point running (test_no_rank_left.py does the same locally and
  on Slurm);
- the site's MPI as on Gadi: the cluster file's `module_paths` and `modules` become the
  jobscript's `module use` and `module load` in PBS's batch shell, and the points run on the
  module's Open MPI 4.1 with the venv built under it (.venv-site/, test_site_mpi.py's).
"""

import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import site_modules
import yaml
from pbs_site import AS_USER, PBS_EXEC, SETUP, USER, python_problem, records, setup, user_workdir
from pbs_site import environment as site_environment

REPO = Path(__file__).resolve().parents[2]
PBS_BIN = PBS_EXEC / "bin"
SHIM_BIN = Path("/opt/pbs-shim/bin")
SHIM_LOG = Path("/var/log/pbs-shim/qstat.log")

pytestmark = pytest.mark.e2e


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (jobs are submitted as the ordinary user scaleuser)"
    if not (PBS_BIN / "qstat").exists():
        return f"no OpenPBS in /opt/pbs (build it from its source as docs/profiles.md says, then bash {SETUP})"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no user {USER} ({SETUP} makes it)"
    if subprocess.run([PBS_BIN / "qstat", "-B"], capture_output=True).returncode != 0:
        return f"the OpenPBS server is not running (/opt/pbs/libexec/pbs_init.d start, or bash {SETUP})"
    if not SHIM_BIN.is_dir():
        return f"no logging shims in /opt/pbs-shim/bin ({SETUP} installs them)"
    return python_problem(sys.executable, AS_USER)


def test_a_python_the_user_may_not_run_is_a_reason_to_skip_not_an_error(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (to run a command as another user)")
    hidden = tmp_path / "hidden"  # root's alone, as /root is
    hidden.mkdir(mode=0o700)
    python = hidden / "python"
    python.symlink_to(sys.executable)
    reason = python_problem(str(python), {"user": "nobody", "group": "nogroup", "extra_groups": []})
    assert reason and reason.startswith(f"nobody cannot run {python} (Permission denied")


@pytest.fixture(scope="module")
def openpbs():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def workdir():
    yield from user_workdir("openpbs-")


def environment(workdir: Path) -> dict[str, str]:
    return site_environment(workdir, [SHIM_BIN, PBS_BIN])


PINGPONG = {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "repeats": 2, "walltime": "00:03:00",
            "params": {"max_bytes": 16384, "iterations": 100, "warmup": 10}}  # fmt: skip
LAMMPS = {"app": "lammps", "scaling": "strong", "nodes": [1], "ranks_per_node": [2], "repeats": 1,
          "mpi_flags": ["default", "mpich-nolocal"], "walltime": "00:05:00",
          "params": {"N": 2000, "warmup_steps": 200, "benchmark_steps": 500,
                     "executable": ".venv-lammps/bin/lmp"}}  # fmt: skip


def qstat_rounds(since: float, job_ids: set[str]) -> list[int]:
    """qstat calls per polling round for these jobs (the shim's log; calls less than 1 s
    apart are one round)."""
    times = []
    for line in SHIM_LOG.read_text().splitlines():
        stamp, *words = line.split()
        if float(stamp) >= since and job_ids & set(words):
            times.append(float(stamp))
    rounds: list[int] = []
    for i, stamp in enumerate(times):
        if i and stamp - times[i - 1] < 1.0:
            rounds[-1] += 1
        else:
            rounds.append(1)
    return rounds


@pytest.mark.parametrize("cluster", ["gadi", "aspire2a"])
def test_pingpong_and_lammps_at_2_ranks_per_node_end_ok_with_one_qstat_per_round(openpbs, workdir, cluster):
    command = setup(workdir, cluster, {"pingpong": PINGPONG, "lammps-wca": LAMMPS})
    started = time.time()
    run = subprocess.run(command, env=environment(workdir), **AS_USER, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    done = records(workdir)
    assert len(done) == 4 and {r["status"] for r in done.values()} == {"ok"}, {
        k: r.get("reason") for k, r in done.items()
    }
    # The site's file, not the checkout's namesake: its charge rate reached the job.
    assert {r["resources"]["charge_rate"] for r in done.values()} == {
        yaml.safe_load((workdir / "site" / f"{cluster}.yaml").read_text())["queues"]["normal"]["charge_rate"]
    }
    if cluster == "gadi":
        assert charged_as_qstat_says(workdir) == 4
    registry = workdir / ".snakemake/scalestudy-pbs/jobs.jsonl"
    job_ids = {json.loads(line)["id"] for line in registry.read_text().splitlines()}
    rounds = qstat_rounds(started, job_ids)
    print(f"{cluster}: {len(job_ids)} batch jobs; qstat calls per polling round: {rounds}")
    # One per round; the first round that meets the server's one-job JSON also asks as text.
    assert rounds and rounds[0] <= 2 and set(rounds[1:]) <= {1}, rounds
    # Nothing left to do: the run ends at once (the sidecar does not hold it).
    again = subprocess.run(command, env=environment(workdir), **AS_USER, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def qstat_json(job_id: str) -> dict:
    out = subprocess.run([PBS_BIN / "qstat", "-x", "-f", "-F", "json", job_id], capture_output=True, text=True)
    return json.loads(out.stdout)["Jobs"][job_id]


def charged_as_qstat_says(workdir: Path) -> int:
    """Every batch job's points are charged, together, the resources_used.walltime that
    `qstat -x -f` reports for the job (within 1 s) x the site's rate x the job's ncpus; returns
    how many jobs were checked."""
    from scalestudy.model.timefmt import hms_seconds

    rate = yaml.safe_load((workdir / "site/gadi.yaml").read_text())["queues"]["normal"]["charge_rate"]
    registry = workdir / ".snakemake/scalestudy-pbs/jobs.jsonl"
    jobs = [json.loads(line) for line in registry.read_text().splitlines()]
    for job in jobs:
        said = qstat_json(job["id"])
        walltime = float(hms_seconds(said["resources_used"]["walltime"]))
        ncpus = int(said["Resource_List"]["ncpus"])
        paths = [entry["metrics"] for entry in job["pack"]] if job.get("pack") else [job["metrics"]]
        used = [json.loads(Path(path).read_text())["resources"] for path in paths]
        assert sum(u.get("batch_walltime_used_s", 0.0) for u in used) == pytest.approx(walltime, abs=1.0), used
        assert sum(u["service_units"] for u in used) == pytest.approx(
            rate * ncpus * walltime / 3600, abs=rate * ncpus / 3600
        )
    return len(jobs)


def test_ctrl_c_with_queued_jobs_then_a_rerun_runs_the_interrupted_points(openpbs, workdir):
    command = setup(workdir, "gadi", {"pingpong": PINGPONG})
    env = environment(workdir)
    # The node's 96 cpus taken: the study's jobs stay queued.
    blocker = subprocess.run([PBS_BIN / "qsub", "-q", "normal", "-l", "select=1:ncpus=96:mem=1GB,walltime=00:10:00",
                              "-N", "blocker", "-j", "oe", "-o", "/dev/null", "--", "/bin/sleep", "600"],
                             env=env, **AS_USER, capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    registry = workdir / ".snakemake/scalestudy-pbs/jobs.jsonl"
    try:
        snakemake = subprocess.Popen(command, env=env, **AS_USER, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(registry.read_text().splitlines() if registry.exists() else []) < 2:
            time.sleep(1)
        queued = [json.loads(line)["id"] for line in registry.read_text().splitlines()]
        assert len(queued) == 2 and {qstat_json(j)["job_state"] for j in queued} == {"Q"}
        time.sleep(4)  # a status round or two
        os.kill(snakemake.pid, signal.SIGINT)
        output, _ = snakemake.communicate(timeout=120)
        for _ in range(30):
            if {qstat_json(j)["job_state"] for j in queued} == {"F"}:
                break
            time.sleep(1)
        ended = [qstat_json(j) for j in queued]
        assert [(j["job_state"], j["substate"], "Exit_status" in j) for j in ended] == [("F", 91, False)] * 2, output
    finally:
        subprocess.run([PBS_BIN / "qdel", blocker], env=env, **AS_USER, capture_output=True)
        if snakemake.poll() is None:  # the test failed before the interrupt ended it: no run outlives it
            os.killpg(snakemake.pid, signal.SIGKILL)
            snakemake.communicate()
    rerun = subprocess.run(command, env=env, **AS_USER, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (rerun.stdout + rerun.stderr).count("its batch job was deleted before it ran; submitted again") == 2
    done = records(workdir)
    assert len(done) == 2 and {r["status"] for r in done.values()} == {"ok"}


def test_a_packed_study_runs_in_one_batch_job_interleaved_one_point_after_another(openpbs, workdir):
    """`pack: scale`: 2 flag sets x 2 repeats of ping-pong in ONE qsub, in run order, no two points
    at once, each its own record; the report names the batch job they shared."""
    pack = {**PINGPONG, "mpi_flags": ["default", "tcp"], "pack": "scale"}
    command = setup(workdir, "gadi", {"pingpong": pack})
    sweep = yaml.safe_load((workdir / "sweep.yaml").read_text())
    sweep["mpi_flag_sets"]["tcp"] = {"btl": "self,tcp"}
    (workdir / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    run = subprocess.run(command, env=environment(workdir), **AS_USER, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "packed 4 points into 1 batch jobs (pingpong.n1r2.pack1)" in run.stdout + run.stderr
    registry = (workdir / ".snakemake/scalestudy-pbs/jobs.jsonl").read_text().splitlines()
    assert len(registry) == 1  # one qsub
    done = records(workdir)
    assert {r["status"] for r in done.values()} == {"ok"} and len(
        {r["provenance"]["job_id"] for r in done.values()}
    ) == 1
    order = sorted(done.values(), key=lambda r: r["started"])
    # Round by round, in the sweep's seeded order within a round (the same as unpacked points).
    assert [r["point"]["repeat"] for r in order] == [1, 1, 2, 2]
    assert [(r["order"]["round"], r["order"]["key"]) for r in order] == sorted(
        (r["order"]["round"], r["order"]["key"]) for r in order
    )
    assert all(a["finished"] <= b["started"] for a, b in zip(order, order[1:], strict=False))
    page = (workdir / "results/report/index.md").read_text()
    assert f"batch job {order[0]['provenance']['job_id']}: " in page
    assert charged_as_qstat_says(workdir) == 1


def rank_pids(workdir: Path) -> list[int]:
    """The pids of every rank the study's points started (their rank lines)."""
    from scalestudy.launch.provenance import rank_lines

    logs = sorted((workdir / "results").rglob("runs/**/stdout.log"))
    return [rank["pid"] for log in logs for rank in rank_lines(log.read_text(errors="replace"))]


def ranks_running(pids: list[int]) -> list[int]:
    """Those of `pids` still alive as a rank of ours (the rank program's path in its command
    line: a pid the system gave to another process since is not counted)."""
    alive = []
    for pid in pids:
        try:
            if b"pingpong" in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            continue
    return alive


LONG = {"max_bytes": 64, "iterations": 10**8, "warmup": 0}


@pytest.mark.parametrize("pack", [False, True])
def test_a_walltime_kill_by_pbs_leaves_no_rank_and_records_the_point(openpbs, workdir, pack):
    """No walltime margin: PBS's walltime ends the job before the runner's own timer (which
    starts after the job's Snakemake has started). The runner passes PBS's SIGTERM on to
    mpirun's group and records the point; the status command makes it `walltime` from PBS's
    Exit_status -29. In a pack, the points after it never started: `scheduler_error`."""
    study = {**PINGPONG, "repeats": 2 if pack else 1, "walltime": "00:00:40", "params": LONG}
    if pack:
        study["pack"] = "scale"
    command = setup(workdir, "gadi", {"pingpong": study})
    site = workdir / "site/gadi.yaml"
    site.write_text(yaml.safe_dump({**yaml.safe_load(site.read_text()), "walltime_margin": "00:00:00"}))
    run = subprocess.run(command, env=environment(workdir), **AS_USER, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    pids = rank_pids(workdir)
    assert pids
    deadline = time.monotonic() + 15
    while ranks_running(pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ranks_running(pids) == [], "ranks outlived the job PBS killed"
    done = sorted(records(workdir).values(), key=lambda r: r["point"]["repeat"])
    # With no margin, PBS's walltime and the runner's own timer both end a point at its walltime,
    # and PBS enforces its limit only at the mom's next check (5-10 s here): either may win. In
    # a pack the job's walltime is the points' summed, so PBS ends the job during a later point.
    # Whoever stopped it, the point is `walltime` and no rank is left (checked above); a point
    # PBS stopped names the signal and carries the estimated cost of the time charged.
    assert all(record["category"] == "walltime" for record in done[:1]), done[0]
    for record in done:
        if record.get("stop_signal"):
            assert record["stop_signal"] == "SIGTERM" and record["category"] == "walltime", record
            assert record["resources"]["service_units_source"] == "scheduler", record
        elif "ended before this point wrote metrics.json" in record["reason"]:
            # PBS's kill came as the point's runner started, before it could write a record: the
            # status command writes it from PBS's Exit_status, with the time the job ran.
            assert record["category"] == "walltime" and "Exit_status -29" in record["reason"], record
        else:
            assert "stopped by scalestudy" in record["reason"] or "never started" in record["reason"], record
    assert charged_as_qstat_says(workdir) == 1


def test_qdel_of_a_running_job_leaves_no_rank(openpbs, workdir):
    study = {**PINGPONG, "repeats": 1, "walltime": "00:03:00", "params": LONG}
    command = setup(workdir, "gadi", {"pingpong": study})
    env = environment(workdir)
    registry = workdir / ".snakemake/scalestudy-pbs/jobs.jsonl"
    snakemake = subprocess.Popen(command, env=env, **AS_USER, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        pids: list[int] = []
        while time.monotonic() < deadline and len(pids) < 2:
            time.sleep(1)
            pids = rank_pids(workdir)
        assert len(pids) == 2, "the ranks never started"
        job_id = json.loads(registry.read_text().splitlines()[0])["id"]
        subprocess.run([PBS_BIN / "qdel", job_id], env=env, **AS_USER, check=True)
        output, _ = snakemake.communicate(timeout=180)
    finally:
        if snakemake.poll() is None:
            snakemake.kill()
    deadline = time.monotonic() + 15
    while ranks_running(pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ranks_running(pids) == [], "ranks outlived the deleted job"
    (record,) = records(workdir).values()
    assert record["status"] == "failed" and record["category"] == "scheduler_error", output[-2000:]
    assert "Exit_status 271: deleted (qdel) or ended by SIGTERM" in record["reason"], record["reason"]
    assert charged_as_qstat_says(workdir) == 1


SITE_PYTHON = REPO / ".venv-site" / "bin" / "python"


def test_the_jobscripts_module_load_runs_the_points_on_the_sites_open_mpi(openpbs, workdir):
    """profiles/gadi on a site whose MPI is a module: nothing loaded where Snakemake runs; in the
    batch job, PBS's shell has Lmod (/etc/profile.d), the jobscript's `module use <tree>` and
    `module load openmpi/4.1.x` load it, and every rank of each point names the module's library."""
    if not Path(site_modules.LMOD_INIT).is_file() or site_modules.installed_version("openmpi") is None:
        pytest.skip("no Lmod or no Debian Open MPI (scripts/system-packages.sh installs them)")
    if not SITE_PYTHON.is_file():
        pytest.skip(".venv-site not built (scripts/test.sh builds it)")
    reason = python_problem(str(SITE_PYTHON), AS_USER)
    if reason:
        pytest.skip(reason)
    tree = workdir / "modulefiles"
    openmpi = site_modules.write_tree(tree)["openmpi"]
    study = {**PINGPONG, "mpi_flags": ["vader", "tcp"], "repeats": 1}
    command = setup(workdir, "gadi", {"pingpong": study})
    sweep = yaml.safe_load((workdir / "sweep.yaml").read_text())
    sweep["mpi_flag_sets"].update(vader={"btl": "self,vader"}, tcp={"btl": "self,tcp"})
    (workdir / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    site = workdir / "site/gadi.yaml"
    data = yaml.safe_load(site.read_text())
    data.update(module_paths=[str(tree)], modules=[openmpi])
    data["mpi"].update(source="site", launcher="mpirun")
    site.write_text(yaml.safe_dump(data))
    for path in tree.rglob("*"):
        os.lchown(path, pwd.getpwnam(USER).pw_uid, pwd.getpwnam(USER).pw_gid)
    # A login shell's on the site: Lmod started, nothing loaded; the site venv's Python, on a
    # PATH without pip's MPI (the module's mpirun or none).
    env = {**environment(workdir), "SCALESTUDY_PYTHON": str(SITE_PYTHON)}
    env["PATH"] = ":".join([str(SHIM_BIN), str(PBS_BIN), str(SITE_PYTHON.parent), "/usr/bin", "/bin"])
    env = site_modules.shell_environment(env, **AS_USER)
    command[0] = str(SITE_PYTHON)
    run = subprocess.run(command, env=env, **AS_USER, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    done = records(workdir)
    assert len(done) == 2 and {r["status"] for r in done.values()} == {"ok"}, {
        k: r.get("reason") for k, r in done.items()
    }
    version = openmpi.split("/")[1]
    for record in done.values():
        provenance = record["provenance"]
        assert provenance["modules"] == [openmpi] and provenance["job_id"]
        assert provenance["mpi"]["release"] == version, provenance["mpi"]
        assert provenance["mpi_libraries"] == {next(iter(provenance["mpi_libraries"])): [0, 1]}
        assert next(iter(provenance["mpi_libraries"])).startswith(f"Open MPI v{version}")
        assert record["settings_proof"]["verified"], record["settings_proof"]["problems"]
