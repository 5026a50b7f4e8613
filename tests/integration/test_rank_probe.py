"""The rank probe run as a process."""


def test_the_probe_reports_the_variables_it_is_asked_for(tmp_path):
    import json
    import os
    import socket
    import subprocess
    import sys

    from scalestudy.launch.provenance import probed_command
    from scalestudy.model.rank_probe import host_lines

    argv = probed_command([sys.executable, "-c", "print('app ran')"], sys.executable, ["MY_FLAG"])
    env = {**os.environ, "MY_FLAG": "x y", "NCCL_IB_DISABLE": "1", "UNRELATED": "z", "OMPI_COMM_WORLD_RANK": "3"}
    said = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    # The report on stderr (a pipe under every launcher: model.rank_probe.write_report), the app's on stdout.
    line = json.loads(said.stderr.removeprefix("scalestudy-rank "))
    out = said.stdout.splitlines()
    assert line["rank"] == 3 and line["env"]["MY_FLAG"] == "x y" and line["env"]["NCCL_IB_DISABLE"] == "1"
    assert "UNRELATED" not in line["env"]
    assert out[0] == "app ran"
    # Then, the rank ended, its host's watcher (model.rank_probe.start_host_watch): what this
    # host's CPUs (those of the probe's parent, here this test) did over the rank's life.
    (host,) = host_lines("\n".join(out[1:]))
    assert len(out) == 2 and host["host"] == socket.gethostname() and host["wall_s"] > 0
    assert sorted(host["cpus"]) == sorted(str(cpu) for cpu in os.sched_getaffinity(0))
    missing = subprocess.run(probed_command(["/no/such/app"], sys.executable), capture_output=True, text=True)
    assert missing.returncode == 127 and "scalestudy-rank: cannot run /no/such/app" in missing.stdout


def test_every_ranks_report_survives_open_mpi_4_1s_output_forwarding(tmp_path):
    """Open MPI 4.1's daemon forwards a rank's output in reads of at most 2048 bytes, and mpirun
    writes each as it comes: a longer report line (a site's long paths in the OMPI_ variables) was
    cut and interleaved with another rank's (on the two-node Slurm: 1 of 4 reports left). Here 4
    ranks, each with a 3,000-byte variable to report, 5 launches: before model.rank_probe's
    write_report, 2 to 4 of 4 reports came back a launch (3 launches in 5 lost some)."""
    import os
    import subprocess
    import sys

    import pytest
    import site_modules
    from scalestudy.launch.provenance import probed_command
    from scalestudy.model.rank_probe import rank_lines

    if site_modules.installed_version("openmpi") is None:
        pytest.skip("no Debian Open MPI 4.1 (scripts/system-packages.sh installs openmpi-bin)")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "BIG": "x" * 3000}
    launch = [f"{site_modules.DEBIAN_BIN}/mpirun.openmpi", "--oversubscribe", "-np", "4", "-x", "BIG"]
    argv = launch + probed_command([sys.executable, "-c", "print('app ran')"], sys.executable, ["BIG"])
    for _ in range(5):
        said = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        assert said.returncode == 0, said.stdout[-2000:]
        ranks = rank_lines(said.stdout)
        assert [r["rank"] for r in ranks] == [0, 1, 2, 3] and {r["env"]["BIG"] for r in ranks} == {"x" * 3000}
        assert said.stdout.count("app ran") == 4
