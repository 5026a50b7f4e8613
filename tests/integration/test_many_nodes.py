"""Every app's multi-node point on real hosts (tests/support/hosts.py: network namespaces with
their own host name, address, sshd, TMPDIR and CPU), launched as a PBS job launches it: the
runner on the first host, PBS_NODEFILE naming the hosts, the launchers reaching the other
host over ssh."""

import dataclasses
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sweeps
from hosts import NETNS_ETC, Hosts
from load import BUSY_LOOP
from points import pingpong_point, point
from scalestudy.config.study import load
from scalestudy.model.contention import (
    CONTENDED_SLACK_CPUS,
    MIN_HOST_WINDOW_S,
    RUN_QUEUE_WAIT_SHARE,
    contended_hosts,
)
from scalestudy.model.point import Point
from scalestudy.model.rank_probe import LAUNCH_TMPDIR_PREFIX, cpu_seconds, process_table, rank_lines

REPO = Path(__file__).resolve().parents[2]


def on(bed, index, command):
    return subprocess.run(bed.command(index, ["sh", "-c", command]), capture_output=True, text=True, timeout=60)


def test_the_bed_is_two_hosts_each_with_its_name_address_tmpdir_and_cpu(hosts):
    first, second = hosts[0], hosts[1]
    seen = on(hosts, 0, f"{hosts.ssh} {second.name} 'hostname; echo $TMPDIR; grep Cpus_allowed_list /proc/self/status'")
    assert seen.returncode == 0, seen.stderr
    # ssh logs at its default level and knows every host's key: it says nothing on a good session.
    assert seen.stderr == ""
    name, tmpdir, cpus = seen.stdout.splitlines()
    assert name == second.name and tmpdir == str(second.tmpdir)
    assert on(hosts, 0, "hostname").stdout.strip() == first.name
    # Each host reaches the other by name, and nothing else by any name.
    assert on(hosts, 1, f"getent hosts {first.name}").stdout.split()[0] == first.address
    assert on(hosts, 1, "getent hosts example.com").returncode != 0
    if hosts.cpusets:
        mine = on(hosts, 0, "grep Cpus_allowed_list /proc/self/status").stdout.split()[-1]
        assert mine != cpus.split()[-1] or len(os.sched_getaffinity(0)) == 1
    else:
        pytest.skip("no cpuset cgroup here: the hosts share every CPU")


def test_a_bed_leaves_nothing_behind(tmp_path, hosts):
    # A bed of its own beside the module's, which stays up.
    bed = Hosts(tmp_path, 2).start()
    sshd = [host.sshd.pid for host in bed.hosts]
    assert bed.subnet != hosts.subnet and bed.bridge != hosts.bridge
    bed.stop()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert bed.prefix not in links and bed.prefix not in namespaces
    assert not any((NETNS_ETC / name).exists() for name in bed.names)
    assert not any(Path(f"/proc/{pid}").exists() for pid in sshd)
    assert all(host.cpuset is None or not host.cpuset.exists() for host in bed.hosts)


# ------------------------------------------------------------------ a point on the hosts


def run_on_hosts(bed, point, run_dir: Path, env: dict | None = None, timeout: int = 300) -> dict:
    """`python -m scalestudy run-point` on the first host, as a PBS job runs it there: the node
    file names the hosts, TMPDIR is the first host's; its metrics.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "scalestudy", "run-point", "--point", point.to_json(), "--cluster", "local",
            "--walltime-s", str(point.walltime_seconds), "--metrics", str(run_dir / "metrics.json")]  # fmt: skip
    environ = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), **bed.launch_env(), **(env or {})}
    done = subprocess.run(bed.command(0, argv), env=environ, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((run_dir / "metrics.json").read_text())


def assert_ran_on_every_host(bed, metrics: dict, ranks_per_node: int) -> dict:
    """Ok, ranks_per_node ranks on each host in rank order (node by node), each rank with its own
    host's TMPDIR (never the first host's on another), and every setting proven on every host.
    The proof per host, for the report."""
    assert metrics["status"] == "ok", metrics["reason"]
    ranks = metrics["provenance"]["ranks"]
    assert [r["host"] for r in ranks] == [h for h in bed.names for _ in range(ranks_per_node)]
    threads = str(metrics["point"]["threads_per_rank"])
    for rank in ranks:
        own = str(bed.hosts[bed.names.index(rank["host"])].tmpdir)
        # On the first host Open MPI's ranks keep the launch's own folder in it (removed with it).
        assert rank["env"]["TMPDIR"] == own or rank["env"]["TMPDIR"].startswith(f"{own}/{LAUNCH_TMPDIR_PREFIX}"), rank
        assert rank["env"].get("OMP_NUM_THREADS") == threads, rank  # the app's variables reached it
    proof = metrics["settings_proof"]
    proven = sorted(h for h, p in proof["hosts"].items() if p["verified"])
    print(f"{metrics['point']['app']} {metrics['point']['nodes']} nodes x {ranks_per_node}: {metrics['status']},"
          f" ranks on {[r['host'] for r in ranks]}, settings proven on {proven}")  # fmt: skip
    assert proof["verified"], proof["problems"]
    assert sorted(proof["hosts"]) == sorted(bed.names) and all(h["verified"] for h in proof["hosts"].values())
    assert metrics["provenance"]["hosts"] == bed.names
    assert nothing_left(bed)
    return proof["hosts"]


def nothing_left(bed, within_s: float = 10.0) -> bool:
    """No process of the point on any host once it ended (a remote daemon may take a moment)."""
    deadline = time.monotonic() + within_s
    while any(host.processes() for host in bed.hosts):
        if time.monotonic() > deadline:
            print({host.name: host.processes() for host in bed.hosts})
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("ranks_per_node", [1, 2])
def test_pingpong_runs_rank_0_and_the_last_rank_on_different_hosts(hosts, tmp_path, ranks_per_node):
    flags = {"btl": "self,tcp", "btl_tcp_links": "2"}
    metrics = run_on_hosts(hosts, pingpong_point(nodes=2, ranks_per_node=ranks_per_node, mpi_flags=flags), tmp_path)
    proven = assert_ran_on_every_host(hosts, metrics, ranks_per_node)
    assert all(
        "OMPI_MCA_btl_tcp_links" in h["settings"] and "NCCL_IB_DISABLE" in h["settings"] for h in proven.values()
    )
    assert metrics["figures"]["hosts_seen"] == 2
    # The pair the app timed: rank 0 and the last rank, on the first and the second host.
    summary = next(
        line for line in (tmp_path / "stdout.log").read_text().splitlines() if line.startswith("scalestudy-pingpong ")
    )
    timed = json.loads(summary.split(" ", 1)[1])
    assert timed["pair"] == [0, 2 * ranks_per_node - 1] and timed["hosts"] == hosts.names
    launch = (tmp_path / "launch.sh").read_text()
    assert f"--host {hosts.names[0]}:{ranks_per_node},{hosts.names[1]}:{ranks_per_node}" in launch


def collectives_point(backend: str, ranks_per_node: int) -> Point:
    params = {"operation": "allreduce", "backend": backend, "iterations": 5, "warmup": 1, "max_bytes": 4096}
    return point(app="collectives", study="coll", nodes=2, ranks_per_node=ranks_per_node, gpus_per_node=0,
                 walltime="00:02:00", mpi_flag_set="tcp", mpi_flags={"btl": "self,tcp"}, nccl_env_set="user",
                 nccl_env={"NCCL_DEBUG": "WARN"}, params=params)  # fmt: skip


@pytest.mark.parametrize(("backend", "ranks_per_node"), [("mpi", 1), ("mpi", 2), ("gloo", 1), ("gloo", 2)])
def test_collectives_run_across_the_hosts(hosts, tmp_path, backend, ranks_per_node):
    metrics = run_on_hosts(hosts, collectives_point(backend, ranks_per_node), tmp_path)
    proven = assert_ran_on_every_host(hosts, metrics, ranks_per_node)
    assert all({"NCCL_DEBUG", "OMPI_MCA_btl"} <= set(h["settings"]) for h in proven.values())


def test_a_command_study_runs_its_program_on_every_host(hosts, tmp_path):
    program = "import socket; print('on', socket.gethostname(), flush=True); print('t', 0.5)"
    study = {"app": "command", "nodes": [1], "ranks_per_node": [1], "command": "{python} -c {program}",
             "params": {"python": sys.executable, "program": program},
             "figures": {"t": {"regex": r"^t ([0-9.]+)$", "unit": "s", "better": "lower"}}}  # fmt: skip
    single = load({"cluster": "local", "results_dir": str(tmp_path / "results"), "studies": {"s": study}}).sweep.points[
        0
    ]
    user = {"nccl_env_set": "user", "nccl_env": {"NCCL_DEBUG": "WARN"}}
    metrics = run_on_hosts(hosts, dataclasses.replace(single, nodes=2, **user), tmp_path / "run")
    assert all("NCCL_DEBUG" in host["settings"] for host in assert_ran_on_every_host(hosts, metrics, 1).values())
    assert metrics["figures"]["t"] == 0.5
    said = (tmp_path / "run/stdout.log").read_text()
    assert all(f"on {name}" in said for name in hosts.names)


def test_a_package_a_module_puts_on_pythonpath_is_imported_by_every_hosts_ranks(hosts, tmp_path):
    """A site module puts an app's Python package on PYTHONPATH (HOOMD-blue's, a conda env's
    mpi4py) in the job's shell on the first node; the ranks on the other node import it too
    (Open MPI's ssh launch starts them from a login of their own, which has no such path)."""
    site = tmp_path / "module"
    site.mkdir()
    (site / "from_a_module.py").write_text("import socket\nHOST = socket.gethostname()\n")
    program = "import from_a_module; print('imported on', from_a_module.HOST, flush=True); print('t', 0.5)"
    study = {"app": "command", "nodes": [1], "ranks_per_node": [1], "command": "{python} -c {program}",
             "params": {"python": sys.executable, "program": program},
             "figures": {"t": {"regex": r"^t ([0-9.]+)$", "unit": "s", "better": "lower"}}}  # fmt: skip
    single = load({"cluster": "local", "results_dir": str(tmp_path / "results"), "studies": {"s": study}}).sweep.points[
        0
    ]
    module_path = {"PYTHONPATH": os.pathsep.join([str(REPO / "workflow"), str(site)])}
    metrics = run_on_hosts(hosts, dataclasses.replace(single, nodes=2), tmp_path / "run", env=module_path)
    assert metrics["status"] == "ok", metrics["reason"]
    said = (tmp_path / "run/stdout.log").read_text()
    assert all(f"imported on {name}" in said for name in hosts.names), said[-2000:]


# MPICH's UCX would meet over shared memory (one kernel); a cluster's nodes meet over the network.
HYDRA_TCP = {"UCX_TLS": "tcp,self"}


def lammps_point(ranks_per_node: int, benchmark_steps: int = 100, walltime: str = "00:02:00") -> Point:
    """A 2-node LAMMPS point (MPICH's Hydra across the hosts); skips where there is no LAMMPS venv."""
    if not (REPO / ".venv-lammps/bin/mpiexec").exists():
        pytest.skip("no LAMMPS venv (.venv-lammps, scripts/setup.sh makes it)")
    return point(app="lammps", study="md", nodes=2, ranks_per_node=ranks_per_node, gpus_per_node=0,
                 walltime=walltime, mpi_flag_set="mpich", mpi_flags={"MPIR_CVAR_ASYNC_PROGRESS": "0"},
                 nccl_env_set="default", nccl_env={},
                 params={"N": 500, "warmup_steps": 10, "benchmark_steps": benchmark_steps,
                         "executable": ".venv-lammps/bin/lmp"})  # fmt: skip


@pytest.mark.parametrize("ranks_per_node", [1, 2])
def test_lammps_runs_under_hydra_across_the_hosts(hosts, tmp_path, ranks_per_node):
    metrics = run_on_hosts(hosts, lammps_point(ranks_per_node), tmp_path, env=HYDRA_TCP)
    proven = assert_ran_on_every_host(hosts, metrics, ranks_per_node)
    assert all("MPIR_CVAR_ASYNC_PROGRESS" in h["settings"] for h in proven.values())
    assert "-hosts" in (tmp_path / "launch.sh").read_text()


def torch_point(ranks_per_node: int, **params) -> Point:
    return point(app="torch-parallel", study="tp", nodes=2, ranks_per_node=ranks_per_node, gpus_per_node=0,
                 walltime="00:03:00", mpi_flag_set="default", mpi_flags={}, nccl_env_set="user",
                 nccl_env={"NCCL_DEBUG": "WARN"}, axes=("model", "strategy"),
                 params={"mode": "throughput", "breakdown_steps": 0, "warmup_steps": 1, "steps": 2,
                         **params})  # fmt: skip


def met_on_the_first_host(bed, metrics: dict) -> bool:
    """The torch ranks met at the first host by name (init_method tcp://HOST:PORT), not localhost."""
    return metrics["provenance"]["rendezvous"].startswith(f"tcp://{bed.names[0]}:")


def test_torch_ddp_trains_across_the_hosts(hosts, tmp_path):
    metrics = run_on_hosts(hosts, torch_point(1, model="mlp", strategy="ddp", batch_size=8), tmp_path)
    assert_ran_on_every_host(hosts, metrics, 1)
    assert metrics["figures"]["samples_per_s"] > 0 and met_on_the_first_host(hosts, metrics)


def test_torch_hybrid_keeps_tensor_groups_inside_a_host_and_data_across(hosts, tmp_path):
    metrics = run_on_hosts(hosts, torch_point(2, model="gpt2", strategy="hybrid", group_size=2, batch_size=4), tmp_path)
    assert_ran_on_every_host(hosts, metrics, 2)
    # Ranks 0-1 (a tensor group) on the first host, 2-3 on the second: data parallel across.
    assert metrics["figures"]["samples_per_s"] > 0 and met_on_the_first_host(hosts, metrics)


@pytest.fixture(scope="module")
def litgpt_tiny(tmp_path_factory):
    """The local study's stand-in model and data (apps.litgpt.assets), made once per module."""
    from scalestudy.apps.litgpt.assets import make_tiny_assets

    folder = tmp_path_factory.mktemp("litgpt-tiny")
    make_tiny_assets(folder / "checkpoint", folder / "alpaca.json", samples=64)
    return folder


@pytest.mark.parametrize("method", ["full", "lora"])
def test_litgpt_fine_tunes_on_two_nodes(hosts, tmp_path, litgpt_tiny, method):
    params = {"method": method, "checkpoint_dir": str(litgpt_tiny / "checkpoint"),
              "data_path": str(litgpt_tiny / "alpaca.json"), "precision": "32-true", "max_seq_length": 64,
              "max_steps": 2, "global_batch_size": 4, "micro_batch_size": 2, "lr_warmup_steps": 1}  # fmt: skip
    litgpt = point(app="litgpt", study=f"litgpt-{method}", nodes=2, ranks_per_node=1, gpus_per_node=0,
                   walltime="00:04:00", mpi_flag_set="tcp", mpi_flags={"btl": "self,tcp"}, nccl_env_set="user",
                   nccl_env={"NCCL_DEBUG": "WARN"}, params=params)  # fmt: skip
    metrics = run_on_hosts(hosts, litgpt, tmp_path)
    assert_ran_on_every_host(hosts, metrics, 1)
    assert "--num_nodes 2" in (tmp_path / "launch.sh").read_text()
    # Lightning's world: both nodes, one device each (its own words in the log).
    log = (tmp_path / "stdout.log").read_text()
    assert "MEMBER: 2/2" in log and "Starting with 2 processes" in log


# ------------------------------------------------------------------ a node lost

# The longest a point may take to end once a node is gone: its processes killed, it ends as soon
# as the launcher's link to the node's daemon closes (under 2 s here); its link down, as soon as
# the ssh session to it gives up (the bed's ServerAliveInterval 2 s x ServerAliveCountMax 3, as a
# site's ssh keepalive or its scheduler's node check would), plus the runner's poll. A launcher
# that hangs after ssh's words (MPICH's Hydra, link down) is ended by the runner: their 6-8 s,
# NODE_LOST_GRACE_S (5 s), a poll (1 s), the stop grace (5 s) and the record, under 20 s.
LOST_NODE_BOUND_S = 30


@pytest.fixture
def bed(tmp_path):
    """Hosts of this test's own (a node of them is lost on purpose)."""
    from hosts import unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    made = Hosts(tmp_path / "bed", 2).start()
    yield made
    made.stop()


def start_on_hosts(bed, point, run_dir: Path, env: dict | None = None) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "scalestudy", "run-point", "--point", point.to_json(), "--cluster", "local",
            "--walltime-s", str(point.walltime_seconds), "--metrics", str(run_dir / "metrics.json")]  # fmt: skip
    environ = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), **bed.launch_env(), **(env or {})}
    return subprocess.Popen(bed.command(0, argv), env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_ranks(run_dir: Path, ranks: int, timeout_s: float = 60, running: str | None = None) -> None:
    """Until every rank started (and the app printed `running`, where given), then a second more."""
    deadline = time.monotonic() + timeout_s
    log = run_dir / "stdout.log"

    def started() -> bool:
        said = log.read_text(errors="replace") if log.exists() else ""
        return len(rank_lines(said)) >= ranks and (running is None or running in said)

    while not started():
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.2)
    time.sleep(1.0)  # past MPI_Init: timing


def lost_node_case(app: str) -> tuple[Point, Point, dict, str, str | None]:
    """A 2-node point of `app` (1 rank per node) that runs for minutes, the same point short, the
    environment it runs in, a word of its rank's command line, and what its log says once it runs."""
    if app == "pingpong":
        long = pingpong_point(nodes=2, ranks_per_node=1, walltime="00:05:00",
                              params={"iterations": 10**6, "warmup": 1, "max_bytes": 8})  # fmt: skip
    elif app == "collectives":
        long = dataclasses.replace(collectives_point("mpi", 1), walltime="00:05:00",
                                   params={"operation": "allreduce", "iterations": 10**6, "max_bytes": 8})  # fmt: skip
    else:  # MPICH's Hydra: it hangs after ssh gave up on a silent node, and the runner ends it
        long = lammps_point(1, benchmark_steps=10**8, walltime="00:05:00")
        short = lammps_point(1, benchmark_steps=100, walltime="00:05:00")
        return long, short, HYDRA_TCP, "bin/lmp", "scalestudy: timed run"
    return long, dataclasses.replace(long, params={**long.params, "iterations": 5}), {}, "/rank.py", None


@pytest.mark.parametrize("how", ["processes killed", "link down"])
@pytest.mark.parametrize("app", ["pingpong", "collectives", "lammps"])
def test_a_node_lost_mid_run_ends_the_point_naming_it_and_a_rerun_runs_it_again(bed, tmp_path, how, app):
    long, short, env, rank_word, running = lost_node_case(app)
    finished = run_on_hosts(bed, short, tmp_path / "done", env=env)
    assert finished["status"] == "ok", finished["reason"]
    kept = (tmp_path / "done/metrics.json").read_bytes()

    run = start_on_hosts(bed, long, tmp_path / "run", env=env)
    try:
        wait_for_ranks(tmp_path / "run", 2, running=running)
        lost = bed[1]
        assert any(rank_word in p for p in lost.processes())  # its rank runs there
        started = time.monotonic()
        lost.kill_all() if how == "processes killed" else lost.link(False)
        run.wait(timeout=LOST_NODE_BOUND_S + 60)
        ended_after = time.monotonic() - started
    finally:
        if run.poll() is None:
            run.kill()
    metrics = json.loads((tmp_path / "run/metrics.json").read_text())
    print(f"{app}, {how}: ended {ended_after:.1f} s after the loss; {metrics['reason']}")
    assert ended_after < LOST_NODE_BOUND_S
    assert metrics["status"] == "failed" and metrics["category"] == "node_failure", metrics["reason"]
    assert f"node {lost.name} " in metrics["reason"]
    assert bed[0].processes() == []  # nothing of the point left on the host that survived, at once
    assert (tmp_path / "done/metrics.json").read_bytes() == kept

    lost.revive()
    again = run_on_hosts(bed, short, tmp_path / "run", env=env)
    assert_ran_on_every_host(bed, again, 1)


@pytest.mark.parametrize("app", ["pingpong", "lammps"])
def test_a_host_unreachable_at_launch_fails_at_once_naming_it(bed, tmp_path, app):
    launched = (lammps_point(1), HYDRA_TCP) if app == "lammps" else (pingpong_point(nodes=2, ranks_per_node=1), {})
    bed[1].link(False)
    started = time.monotonic()
    metrics = run_on_hosts(bed, launched[0], tmp_path, env=launched[1])
    took = time.monotonic() - started
    print(f"{app}, unreachable at launch: failed after {took:.1f} s; {metrics['reason']}")
    assert metrics["category"] == "node_failure" and f"node {bed[1].name} " in metrics["reason"]
    assert "\n" not in metrics["reason"] and took < LOST_NODE_BOUND_S


# ------------------------------------------------------------------ a study on the hosts


def snakemake_on_hosts(bed, workdir: Path, config: dict) -> subprocess.CompletedProcess:
    """Snakemake with the local profile on the first host, as a study runs on hosts of its own
    with no scheduler: a cluster file with `scheduler: none` and `nodes:` the hosts' count (the
    local one's otherwise), the hosts in a node file (PBS_NODEFILE). The sweep `config` runs on
    that cluster (`hosts`). A PYTHONPATH this test run has (where a site module puts an app's
    package: HOOMD-blue's) stays after the workflow's."""
    import yaml

    clusters = workdir / "clusters"
    clusters.mkdir()
    cluster = yaml.safe_load((REPO / "config/clusters/local.yaml").read_text())
    (clusters / "hosts.yaml").write_text(yaml.safe_dump({**cluster, "name": "hosts", "nodes": len(bed)}))
    sweeps.write({**config, "cluster": "hosts"}, workdir / "sweep.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--profile", str(REPO / "profiles/local"), "--configfile", str(workdir / "sweep.yaml")]  # fmt: skip
    python_path = os.pathsep.join(filter(None, [str(REPO / "workflow"), os.environ.get("PYTHONPATH")]))
    environ = {**os.environ, "PYTHONPATH": python_path, **bed.launch_env(), "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    return subprocess.run(bed.command(0, command), cwd=workdir, env=environ, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def test_snakemake_runs_a_study_on_the_hosts_without_a_scheduler(hosts, tmp_path):
    """The way a study runs on hosts of its own, no scheduler (snakemake_on_hosts)."""
    config = sweeps.sweep("pingpong-tcp", results_dir=str(tmp_path / "results"))
    config["nccl_env_sets"] = {"user": {"NCCL_DEBUG": "WARN"}}
    config["studies"]["pp"].update(nodes=[1, 2], ranks_per_node=[2], mpi_flags=["tcp"], nccl_env=["user"])
    done = snakemake_on_hosts(hosts, tmp_path, config)
    assert done.returncode == 0, done.stderr[-3000:]
    records = {p.parent: json.loads(p.read_text()) for p in (tmp_path / "results/pp/runs").glob("**/metrics.json")}
    assert sorted(r["point"]["nodes"] for r in records.values()) == [1, 2]
    for record in records.values():
        assert record["status"] == "ok", record["reason"]
        hosts_seen = [rank["host"] for rank in record["provenance"]["ranks"]]
        assert hosts_seen == [h for h in hosts.names[: record["point"]["nodes"]] for _ in range(2)][:4]
        proof = record["settings_proof"]
        assert proof["verified"], proof["problems"]
        assert all({"NCCL_DEBUG", "OMPI_MCA_btl"} <= set(host["settings"]) for host in proof["hosts"].values())
        assert sorted(proof["hosts"]) == sorted(set(hosts_seen))
    assert (tmp_path / "results/report/index.html").is_file()


# HOOMD-blue is not on PyPI: where it is installed (a site module or a conda env on PYTHONPATH),
# its study runs on the hosts; elsewhere the test says why it cannot.
NO_HOOMD = "import hoomd fails: HOOMD-blue is not installed in this Python (a site module puts it on PYTHONPATH)"
HOOMD_N = 1000
HOOMD_STEPS = {"warmup_steps": 100, "benchmark_steps": 500, "repeat": 2}


@pytest.mark.skipif(importlib.util.find_spec("hoomd") is None, reason=NO_HOOMD)
def test_hoomd_study_runs_its_two_node_point_on_the_hosts(hosts, tmp_path):
    """A HOOMD-blue study of 1 and 2 nodes (a rank each) through Snakemake on the hosts: the
    initial state made once, both points read it; the 2-node point's ranks on both hosts, the
    box split between them along z, and steps/s measured."""
    study = {"app": "hoomd", "nodes": [1, 2], "ranks_per_node": [1], "mpi_flags": ["tcp"], "nccl_env": ["user"],
             "walltime": "00:05:00", "params": {"N": HOOMD_N, **HOOMD_STEPS}}  # fmt: skip
    config = {"results_dir": str(tmp_path / "results"), "mpi_flag_sets": {"tcp": {"btl": "self,tcp"}},
              "nccl_env_sets": {"user": {"NCCL_DEBUG": "WARN"}}, "studies": {"md": study}}  # fmt: skip
    done = snakemake_on_hosts(hosts, tmp_path, config)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("rule hoomd_initial_state:") == 1
    loaded = [json.loads(path.read_text()) for path in (tmp_path / "results/md/runs").glob("**/metrics.json")]
    records = {record["point"]["nodes"]: record for record in loaded}
    assert sorted(records) == [1, 2]
    for nodes, record in sorted(records.items()):
        assert record["status"] == "ok", record["reason"]
        assert [rank["host"] for rank in record["provenance"]["ranks"]] == hosts.names[:nodes]
        proof = record["settings_proof"]
        assert proof["verified"], proof["problems"]
        assert sorted(proof["hosts"]) == sorted(hosts.names[:nodes])
        assert all({"NCCL_DEBUG", "OMPI_MCA_btl"} <= set(host["settings"]) for host in proof["hosts"].values())
        figures = record["figures"]
        print(f"hoomd {nodes} node(s) x 1 rank, N = {figures['particles']}: {figures['steps_per_s']:.1f} steps/s"
              f" (mean of {figures['steps_per_s_runs']})")  # fmt: skip
        assert figures["particles"] == HOOMD_N and len(figures["steps_per_s_runs"]) == HOOMD_STEPS["repeat"]
        assert figures["steps_per_s"] > 0
        # One rank prints no decomposition; two ranks, one on each host, split the box along z.
        assert figures.get("domain_decomposition") == (None if nodes == 1 else "1x1x2")
    assert nothing_left(hosts)


# ------------------------------------------------------------------ a slow host

# One CPU kept busy for at most 300 s (tests/support/load.py's loop, always on).
BUSY = [sys.executable, "-c", BUSY_LOOP, "1", "0", "300"]
# This machine is shared: other work may land on a host's CPU during any one run and rightly
# name it. Each case is run until it shows what it should, this many times at most; where the
# last try's wrongly named host is explained by work outside the bed measured beside it
# (`explained_by_outside`), the case says so and is skipped.
ATTEMPTS = 3


def slow_host_point() -> Point:
    """A 2-node ping-pong, 1 rank a node, whose ranks live several seconds (past
    MIN_HOST_WINDOW_S: about 4 s here, with a host's CPU shared or not)."""
    return pingpong_point(nodes=2, ranks_per_node=1, params={"iterations": 50000, "warmup": 10, "max_bytes": 8})


def bed_and_machine_cpu_s(bed) -> tuple[float, float]:
    """CPU seconds so far of everything of the bed (each live process in its namespaces with its
    ended, waited-for descendants, and what this test waited for: the runner) and of the machine
    (/proc/stat's busy time)."""
    table = process_table()
    live = sum(table[pid][1] for host in bed.hosts for pid in host.pids() if pid in table)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return live + reaped.ru_utime + reaped.ru_stime, cpu_seconds(Path("/proc/stat").read_text())["cpu"][0]


def until_named(bed, run_dir: Path, named: list[str], busy_host: int | None = None) -> tuple[dict, float]:
    """Run the point (with a busy process on host `busy_host` throughout) until its record names
    `named` as the contended hosts: the last record, and the CPU seconds work outside the bed
    took during it."""
    for attempt in range(ATTEMPTS):
        busy = None
        if busy_host is not None:
            busy = subprocess.Popen(bed.command(busy_host, BUSY), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # on its CPU before the point starts
        try:
            (bed_before, machine_before), started = bed_and_machine_cpu_s(bed), time.monotonic()
            metrics = run_on_hosts(bed, slow_host_point(), run_dir / str(attempt))
            (bed_after, machine_after), wall = bed_and_machine_cpu_s(bed), time.monotonic() - started
        finally:
            if busy is not None:
                busy.kill()  # by its pid (bed.command execs down to the loop itself)
                busy.wait()
        outside_s = max(0.0, (machine_after - machine_before) - (bed_after - bed_before))
        seen = metrics["conditions"].get("hosts")
        print(f"busy on {busy_host}, outside the bed {outside_s / wall:.2f} CPUs:", json.dumps(seen, sort_keys=True))
        if contended_hosts(seen) == named:
            break
    return metrics, outside_s


def explained_by_outside(host: dict, outside_s: float) -> bool:
    """Could work outside the bed (`outside_s` CPU seconds over the whole run) have been what
    made this host's ranks wait beyond the threshold (the run-queue rule: a rank waits at most
    as long as others ran on its CPU), or, by the older rule, what other processes took on its
    CPUs beyond the slack?"""
    if "ranks_waited_s" in host:
        return host["ranks_waited_s"] - RUN_QUEUE_WAIT_SHARE * host["wall_s"] * host["cpus_needed"] <= outside_s
    return (host["other_cpu_share"] * host["cpus"] - CONTENDED_SLACK_CPUS) * host["wall_s"] <= outside_s


# It judges what the CPUs did beside the point (a busy process on one host's CPU): `quiet`, so it
# runs after the rest, alone, where the suite's own workers are not the load it measures (in the
# suite they were, and its retries took ~190 CPU seconds from the others).
@pytest.mark.quiet
def test_a_host_whose_cpu_another_process_shares_is_named_and_its_run_is_contended(hosts, tmp_path):
    if not hosts.cpusets:
        pytest.skip("no cpuset cgroup here: the hosts share every CPU")
    first, second = hosts.names
    shared, outside = until_named(hosts, tmp_path / "shared", [second], busy_host=1)
    assert_ran_on_every_host(hosts, shared, 1)
    seen = shared["conditions"]["hosts"]
    assert sorted(seen) == [first, second] and all(h["wall_s"] >= MIN_HOST_WINDOW_S for h in seen.values())
    # The busy process took a third of the second host's one CPU (the busy-polling rank the rest:
    # 31-34% measured here), so that rank waited for its CPU: by the run-queue rule. Work outside
    # the bed (the suite's other workers) can take that CPU from the busy process too: said, as below.
    share = seen[second]["other_cpu_share"]
    if share <= 0.2 and outside >= (0.2 - share) * seen[second]["wall_s"]:
        pytest.skip(f"other work beside the bed ({outside:.1f} CPU s) took the busy process's share of the CPU")
    assert seen[second]["contended"] and share > 0.2, seen
    assert seen[second]["ranks_wait_share"] > RUN_QUEUE_WAIT_SHARE, seen
    assert shared["conditions"]["contended"] is True
    if seen[first]["contended"] and explained_by_outside(seen[first], outside):
        pytest.skip(f"other work beside the bed ({outside:.1f} CPU s) took the first host's CPU in every try")
    assert contended_hosts(seen) == [second] and not seen[first]["contended"], seen
    # The same point without it: no host named, though each host's one CPU runs its rank and the
    # watcher beside it (every core in use by the point's ranks, as on a full cluster node: the
    # orchestration alone marks nothing). (The machine-wide figure of the runner's host is no
    # judge here: on this bed the second host's rank runs on the same machine, outside the
    # runner's process tree.)
    quiet, outside = until_named(hosts, tmp_path / "quiet", [])
    assert sorted(quiet["conditions"]["hosts"]) == [first, second]
    named = [quiet["conditions"]["hosts"][name] for name in contended_hosts(quiet["conditions"]["hosts"])]
    if named and all(explained_by_outside(host, outside) for host in named):
        pytest.skip(f"other work beside the bed ({outside:.1f} CPU s) took a host's CPU in every try")
    assert contended_hosts(quiet["conditions"]["hosts"]) == [], quiet["conditions"]["hosts"]
