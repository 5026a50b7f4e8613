"""The shipped Slurm profile on a real Slurm with two execution hosts (tests/support/bed_slurm.py
on the multi-host test bed: slurmctld on the first host, one slurmd per host): Snakemake runs on
the first host as a user would run it on a login node, `profiles/slurm` submits each point with
sbatch, and a 2-node point's job spans both hosts.

Skips, saying why, where the hosts (root, ip, sshd) or Slurm cannot be had.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scalestudy.model.rank_probe import rank_lines

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

# One CPU per host (the bed's cpuset), a GB of memory asked per node.
CLUSTER = {
    "name": "bed-slurm",
    "scheduler": "slurm",
    "cores_per_node": 1,
    "gpus_per_node": 0,
    "mem_per_node_gib": 1,
    "charge_rate": 1.0,
    "walltime_margin": "00:01:00",
    "mpi": {
        "flavour": "openmpi",
        "launcher": "mpirun",
        "allow_run_as_root": True,
        # A 1-node point's 2 ranks on a host's one CPU (the pack test).
        "oversubscribe": True,
        "source": "python_env",
        "mpich": {"launcher": ".venv-lammps/bin/mpiexec", "extra_args": []},
    },
}
QUICK = {"max_bytes": 4096, "iterations": 50, "warmup": 5}


@pytest.fixture(scope="module")
def bed_slurm(tmp_path_factory):
    from bed_slurm import BedSlurm
    from hosts import Hosts
    from hosts import unavailable_reason as no_hosts
    from local_slurm import unavailable_reason as no_slurm

    reason = no_hosts() or no_slurm()
    if reason:
        pytest.skip(reason)
    # A seed of its own: its subnet differs from any other bed of this process (its names do by the bed's letter).
    bed = Hosts(tmp_path_factory.mktemp("bed"), 2, seed=os.getpid() + 3).start()
    try:
        cluster = BedSlurm(bed, tmp_path_factory.mktemp("bed-slurm")).start()
        yield cluster
        cluster.stop()
    finally:
        bed.stop()


def workflow_on_the_head(
    cluster, tmp_path: Path, studies: dict, tmpdir: Path | None = None, **extra
) -> subprocess.CompletedProcess:
    """profiles/slurm run by Snakemake on the bed's first host (the Slurm head), printing its
    sbatch lines (--verbose); submitted with TMPDIR `tmpdir` where given (the head's is
    node-local: bed_slurm)."""
    clusters_dir = tmp_path / "clusters"
    clusters_dir.mkdir()
    (clusters_dir / "bed-slurm.yaml").write_text(yaml.safe_dump(CLUSTER))
    shipped = yaml.safe_load((REPO / "config/sweep.yaml").read_text())["studies"]
    overlay = {"studies": {**dict.fromkeys(shipped), **studies}, **extra}
    (tmp_path / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    argv = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
            "--profile", str(REPO / "profiles/slurm"), "--verbose",
            "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
            "--seconds-between-status-checks", "2",
            "--config", "cluster=bed-slurm", f"results_dir={tmp_path / 'results'}",
            "--configfile", str(REPO / "config/sweep.yaml"), str(tmp_path / "overlay.yaml")]  # fmt: skip
    env = {**os.environ, "SCALESTUDY_CLUSTERS_DIR": str(clusters_dir), "HF_HUB_OFFLINE": "1"}
    env.pop("SLURM_CONF", None)  # the head's own /etc/slurm/slurm.conf
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return subprocess.run(cluster.bed.command(0, argv), env=env, capture_output=True, text=True, timeout=900)


def sbatch_lines(run: subprocess.CompletedProcess) -> list[str]:
    lines = (run.stdout + run.stderr).splitlines()
    return [line.split("sbatch call: ", 1)[1] for line in lines if "sbatch call: " in line]


def records(results: Path, study: str) -> dict[str, dict]:
    runs = results / study / "runs"
    return {str(p.parent.relative_to(runs)): json.loads(p.read_text()) for p in sorted(runs.rglob("metrics.json"))}


def rank_hosts(record: dict) -> list[str]:
    return [rank["host"] for rank in sorted(record["provenance"]["ranks"], key=lambda rank: rank["rank"])]


def test_the_slurm_profiles_2_node_points_span_both_slurm_hosts(bed_slurm, tmp_path):
    """Ping-pong (Open MPI, whose mpirun starts the second host's daemon with srun) and LAMMPS
    (MPICH: Hydra on 1 node, its srun across 2) through profiles/slurm: the 2-node jobs get both
    hosts, rank 0 and the last rank on different ones; the 1-rank MPICH point does not hang.
    Submitted with the head's TMPDIR, node-local: every host's is empty after the jobs (no launch
    folder made on the other host by the srun that starts Open MPI's daemon there)."""
    names = bed_slurm.bed.names
    node_tmpdirs = [host.tmpdir for host in bed_slurm.bed.hosts]
    assert all(not any(folder.iterdir()) for folder in node_tmpdirs), node_tmpdirs
    lmp = REPO / ".venv-lammps/bin/lmp"
    studies = {"pingpong-hosts": {"app": "pingpong", "nodes": [2], "ranks_per_node": [1], "repeats": 1,
                                  "walltime": "00:03:00", "params": QUICK}}  # fmt: skip
    if lmp.exists():
        studies["lammps-hosts"] = {"app": "lammps", "nodes": [1, 2], "ranks_per_node": [1], "repeats": 1,
                                   "walltime": "00:03:00", "params": {"N": 500, "warmup_steps": 50,
                                   "benchmark_steps": 100, "executable": str(lmp)}}  # fmt: skip
    run = workflow_on_the_head(bed_slurm, tmp_path, studies, tmpdir=node_tmpdirs[0])
    assert run.returncode == 0, run.stderr[-3000:]
    lines = sbatch_lines(run)
    print("\n".join(lines))
    left = {str(folder): sorted(p.name for p in folder.iterdir()) for folder in node_tmpdirs}
    assert not any(left.values()), left
    assert len(lines) == len(studies) * 2 - 1 and sum("--nodes=2" in line for line in lines) == len(studies)
    pingpong = records(tmp_path / "results", "pingpong-hosts")["nodes2-rpn1/mpi-default/nccl-default/rep1"]
    assert pingpong["status"] == "ok", pingpong["reason"]
    assert pingpong["provenance"]["hosts"] == names and rank_hosts(pingpong) == names
    job = bed_slurm.run(0, "scontrol", "show", "job", "-o", pingpong["provenance"]["job_id"]).stdout
    assert f"NodeList={names[0].rstrip('1')}[1-2]" in job and "TimeLimit=00:04:00" in job, job
    if not lmp.exists():
        pytest.skip(f"{lmp} missing: the LAMMPS points (MPICH) need the LAMMPS venv (scripts/setup.sh)")
    lammps = records(tmp_path / "results", "lammps-hosts")
    for record in lammps.values():
        assert record["status"] == "ok", record["reason"]
    assert rank_hosts(lammps["nodes2-rpn1/mpi-default/nccl-default/rep1"]) == names
    assert rank_hosts(lammps["nodes1-rpn1/mpi-default/nccl-default/rep1"]) == names[:1]
    assert (tmp_path / "results/report/index.html").exists()


def test_a_2_node_litgpt_point_runs_on_both_slurm_hosts(bed_slurm, tmp_path):
    """LitGPT LoRA on 2 nodes x 1 rank through profiles/slurm: Open MPI starts the second host's
    daemon with `srun`, whose step variables (SLURM_NTASKS=1, SLURM_NNODES=1, SLURM_PROCID=0) its
    rank must not take for the point's: Lightning stopped there ("You set num_nodes=2 in
    Lightning, but the number of nodes configured in SLURM --nodes=1 does not match")."""
    names = bed_slurm.bed.names
    tiny = {"n_layer": 2, "n_head": 4, "n_embd": 64, "intermediate_size": 172, "vocab_size": 1024,
            "block_size": 128, "samples": 64, "seed": 0}  # fmt: skip
    params = {"method": "lora", "checkpoint_dir": "{results_dir}/assets/litgpt-tiny/checkpoint",
              "data_path": "{results_dir}/assets/litgpt-tiny/alpaca.json", "precision": "32-true",
              "max_seq_length": 64, "global_batch_size": 4, "micro_batch_size": 2, "lr_warmup_steps": 1,
              "max_steps": 2}  # fmt: skip
    study = {"app": "litgpt", "nodes": [2], "ranks_per_node": [1], "repeats": 1, "walltime": "00:04:00",
             "params": params}  # fmt: skip
    run = workflow_on_the_head(bed_slurm, tmp_path, {"litgpt-hosts": study}, assets={"litgpt_tiny": tiny})
    assert run.returncode == 0, run.stderr[-3000:]
    print("\n".join(sbatch_lines(run)))
    [record] = records(tmp_path / "results", "litgpt-hosts").values()
    assert record["status"] == "ok", record["reason"]
    assert record["provenance"]["hosts"] == names and rank_hosts(record) == names
    # Each rank saw the point's world, not its daemon's step: no SLURM_PROCID reached the app.
    assert record["figures"]


def test_points_of_different_node_counts_in_one_2_node_allocation_run_on_their_hosts(bed_slurm, tmp_path):
    """A batch job running several points one after another in one 2-node allocation (as a
    pack's does), each in an environment without Slurm's allocation variables (Snakemake's job
    step removes all SLURM_* but the job's identity; the runner reads them back from
    scontrol): the 2-node point runs on both hosts, the 1-node point on the first only."""
    from points import assert_pack_ran_on_its_hosts, pack_of_node_counts

    names = bed_slurm.bed.names
    clusters_dir = tmp_path / "clusters"
    clusters_dir.mkdir()
    (clusters_dir / "bed-slurm.yaml").write_text(yaml.safe_dump(CLUSTER))
    # Stricter than Snakemake's Slurm job step, which also keeps SLURM_JOBID and the like.
    unset = "for name in $(compgen -e | grep '^SLURM_' | grep -vx 'SLURM_JOB_ID'); do unset $name; done"
    script = pack_of_node_counts(tmp_path, "bed-slurm", clusters_dir, (unset,))
    job = bed_slurm.run(0, "sbatch", "--wait", "--parsable", "-N", "2", "--ntasks-per-node=1", "-t", "5",
                        "-o", str(tmp_path / "pack.log"), str(script), timeout=600)  # fmt: skip
    assert job.returncode == 0, (tmp_path / "pack.log").read_text()[-2000:]
    assert_pack_ran_on_its_hosts(tmp_path, job.stdout.strip(), names)


def test_a_node_lost_under_slurm_ends_its_point_as_a_node_failure(bed_slurm, tmp_path):
    """The second host dies (every process on it killed, its slurmd too) while a 2-node point's
    ranks run in a Slurm job: the point ends long before its walltime (4-6 s seen), `node_failure`
    naming the host, and nothing of it is left on the first host soon after (8 s seen)."""
    import time

    from points import batch_script, pingpong_point

    clusters_dir = tmp_path / "clusters"
    clusters_dir.mkdir()
    (clusters_dir / "bed-slurm.yaml").write_text(yaml.safe_dump(CLUSTER))
    slow = {"max_bytes": 1 << 20, "iterations": 1_000_000, "warmup": 5}
    point = pingpong_point(study="lost", nodes=2, ranks_per_node=1, params=slow, walltime="00:05:00")
    script = batch_script(tmp_path / "lost.sh", "bed-slurm", clusters_dir, [(point, tmp_path / "run")], walltime_s=300)
    job = subprocess.Popen(bed_slurm.bed.command(0, ["sbatch", "--wait", "-N", "2", "--ntasks-per-node=1", "-t", "6",
                           "-o", str(tmp_path / "lost.log"), str(script)]))  # fmt: skip
    log = tmp_path / "run/stdout.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (log.exists() and len(rank_lines(log.read_text())) == 2):
        time.sleep(0.5)
    lost_at = time.monotonic()
    bed_slurm.bed[1].kill_all()
    try:
        job.wait(timeout=400)
        took = time.monotonic() - lost_at
        while True:
            left = [p for p in bed_slurm.bed[0].processes() if "scalestudy" in p or "prte" in p]
            if not left or time.monotonic() - lost_at > 120:
                break
            time.sleep(1)
        gone = time.monotonic() - lost_at
    finally:  # the host back, for any test after this one
        bed_slurm.bed[1].revive()
        bed_slurm.start_slurmd(bed_slurm.bed[1])
        bed_slurm.wait_idle()
    record = json.loads((tmp_path / "run/metrics.json").read_text())
    print(f"ended {took:.0f} s after the host was lost, nothing left {gone:.0f} s after: {record['reason']}")
    assert record["category"] == "node_failure", record["reason"]
    # Open MPI's `srun` that started the lost host's daemon ends a few seconds after the point (4 s seen).
    assert took < 60 and not left and gone < 60, left
