"""Launcher command lines: exact arguments, hostile values stay one argument."""

from points import HOSTILE, point
from scalestudy.apps.registry import APPS
from scalestudy.config.clusters import MpiLauncher
from scalestudy.launch.command import (
    allocated_hosts,
    allocation_of_job,
    forwarded_variables,
    mpirun_command,
    slurm_allocation,
)
from scalestudy.model.paths import Layout
from scalestudy.model.rank_probe import without_slurm_step


def test_mpirun_command_is_exact():
    argv = mpirun_command(point(), ["python", "app.py"], {"OMP_NUM_THREADS": "1"}, MpiLauncher())
    assert argv == [
        "mpirun", "-np", "8", "--map-by", "ppr:4:node",
        "--mca", "btl", "^ucx", "--mca", "coll_hcoll_enable", HOSTILE,
        "-x", "OMP_NUM_THREADS=1", "-x", "NCCL_IB_DISABLE=1", "-x", "NCCL_SOCKET_IFNAME=$(touch /tmp/pwned)",
        "python", "app.py",
    ]  # fmt: skip


def test_the_launchers_pythonpath_is_passed_to_every_rank_by_name_and_value():
    # A site module's HOOMD-blue on PYTHONPATH: an ssh-started rank on another node would not see it.
    module = "/apps/hoomd/4.8.2/lib/python3.11/site-packages:/home/u/scalestudy/workflow"
    forwarded = forwarded_variables({"PYTHONPATH": module, "HOME": "/home/u", "LD_PRELOAD": "x.so"})
    assert forwarded == {"PYTHONPATH": module}
    assert forwarded_variables({"PYTHONPATH": ""}) == {} == forwarded_variables({})
    openmpi = mpirun_command(point(mpi_flags={}, nccl_env={}), ["a"], forwarded, MpiLauncher())
    assert openmpi[-3:] == ["-x", f"PYTHONPATH={module}", "a"]
    hydra = mpirun_command(point(mpi_flags={}, nccl_env={}), ["a"], forwarded, MpiLauncher("mpich", "mpiexec"))
    assert hydra[-4:] == ["-genv", "PYTHONPATH", module, "a"]


def test_site_switches_only_when_the_cluster_file_asks():
    plain = mpirun_command(point(), ["a"], {}, MpiLauncher())
    assert "--oversubscribe" not in plain and "--allow-run-as-root" not in plain
    local = mpirun_command(point(), ["a"], {}, MpiLauncher(oversubscribe=True, allow_run_as_root=True))
    assert "--oversubscribe" in local and "--allow-run-as-root" in local


def test_hosts_come_from_the_pbs_nodefile_once_each(tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("gadi-cpu-1\n" * 48 + "gadi-cpu-2\n" * 48 + "gadi-cpu-3\n" * 48)
    hosts = allocated_hosts({"PBS_NODEFILE": str(nodefile)})
    assert hosts == ["gadi-cpu-1", "gadi-cpu-2", "gadi-cpu-3"]
    argv = mpirun_command(point(), ["a"], {}, MpiLauncher(), hosts)
    assert argv[argv.index("--host") + 1] == "gadi-cpu-1:4,gadi-cpu-2:4"
    assert allocated_hosts({}) == []


def test_threads_per_rank_reserve_cores():
    argv = mpirun_command(point(threads_per_rank=12), ["a"], {}, MpiLauncher())
    assert argv[argv.index("--map-by") + 1] == "ppr:4:node:PE=12"


def test_litgpt_rank_command(tmp_path):
    app = APPS["litgpt"]
    command = app.rank_command(point(), tmp_path, Layout())
    assert command[1:4] == ["-m", "scalestudy.apps.litgpt.rank", "finetune_full"]
    assert command[4] == "/ckpt"
    flags = dict(zip(command[5::2], command[6::2], strict=False))
    assert flags["--devices"] == "4" and flags["--num_nodes"] == "2"
    assert flags["--train.global_batch_size"] == "16" and flags["--train.micro_batch_size"] == "2"
    assert flags["--train.max_steps"] == "20"
    assert app.rank_env(point())["HF_HUB_OFFLINE"] == "1"


def test_a_rank_keeps_the_jobs_slurm_identity_but_not_the_slurm_step_its_daemon_ran_in():
    """Open MPI starts a remote node's daemon with `srun`: its ranks inherit SLURM_PROCID=0,
    SLURM_NNODES=1, SLURM_NTASKS=1 of that step, which Lightning took for its own."""
    step = {"SLURM_PROCID": "0", "SLURM_NNODES": "1", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0", "SLURM_NODEID": "0"}
    kept = {"SLURM_JOB_ID": "5", "SLURM_CONF": "/etc/slurm/x.conf", "SLURM_ARRAY_TASK_ID": "3",
            "SLURMD_NODENAME": "n2", "OMPI_COMM_WORLD_RANK": "1", "PATH": "/bin"}  # fmt: skip
    assert without_slurm_step({**step, **kept}) == kept


def test_the_slurm_allocation_is_read_back_from_scontrol_with_the_job_id_open_mpi_reads():
    """Snakemake's Slurm job step leaves a rule the job id alone (SLURM_JOB_ID); mpirun needs the
    host list and, for Open MPI's Slurm support, SLURM_JOBID (else it tries ssh)."""
    line = "JobId=7 JobName=x NumNodes=2 NumTasks=4 NodeList=n[1-2] TimeLimit=00:07:00\n"
    restored = allocation_of_job(line, "7", {"SLURM_JOB_ID": "7"})
    assert restored == {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODELIST": "n[1-2]", "SLURM_JOBID": "7",
                        "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "2(x2)"}  # fmt: skip
    assert allocated_hosts(restored) == ["n1", "n2"]
    assert slurm_allocation({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1"}) == {}


def test_under_slurm_a_launchs_folder_is_removed_on_its_other_nodes_by_a_step_with_the_jobs_tmpdir(
    tmp_path, monkeypatch
):
    """slurmstepd makes a step's TMPDIR where it is missing, so the srun that starts Open MPI's
    daemons makes the launch's folder on every other node: one step removes it there, started
    with the job's TMPDIR (tests/integration/test_launcher_leftovers.py runs it with a fake srun;
    test_slurm_hosts.py on a real Slurm)."""
    import os

    from scalestudy.launch import runner

    started = []
    monkeypatch.setattr(runner.subprocess, "run", lambda argv, env, **_: started.append((argv, env["TMPDIR"])))
    slurm = {"TMPDIR": str(tmp_path), "SLURM_JOB_ID": "7"}
    with runner.launch_tmpdir(slurm, own=True, other_hosts=["n2", "n3"]) as env:
        folder = env["TMPDIR"]
        assert os.path.basename(folder).startswith(runner.LAUNCH_TMPDIR_PREFIX) and not started
    assert started == [
        (["srun", "--overlap", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n2,n3",
          "rm", "-rf", "--", folder], str(tmp_path))
    ]  # fmt: skip
    assert not os.path.exists(folder)
    started.clear()
    with runner.launch_tmpdir({**slurm, "SLURM_JOB_ID": ""}, own=True, other_hosts=["n2"]):
        pass  # outside a Slurm job (PBS's ssh sessions make no folder elsewhere)
    with runner.launch_tmpdir(slurm, own=True, other_hosts=[]):
        pass  # a 1-node launch
    with runner.launch_tmpdir(slurm, own=False, other_hosts=["n2"]):
        pass  # Hydra keeps the job's TMPDIR everywhere
    runner.remove_on_other_nodes(str(tmp_path), ["n2"], slurm)  # never a folder that is not a launch's
    assert started == []
