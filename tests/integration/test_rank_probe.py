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
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    line = json.loads(out[0].removeprefix("scalestudy-rank "))
    assert line["rank"] == 3 and line["env"]["MY_FLAG"] == "x y" and line["env"]["NCCL_IB_DISABLE"] == "1"
    assert "UNRELATED" not in line["env"]
    assert out[1] == "app ran"
    # Then, the rank ended, its host's watcher (model.rank_probe.start_host_watch): what this
    # host's CPUs (those of the probe's parent, here this test) did over the rank's life.
    (host,) = host_lines("\n".join(out[2:]))
    assert len(out) == 3 and host["host"] == socket.gethostname() and host["wall_s"] > 0
    assert sorted(host["cpus"]) == sorted(str(cpu) for cpu in os.sched_getaffinity(0))
    missing = subprocess.run(probed_command(["/no/such/app"], sys.executable), capture_output=True, text=True)
    assert missing.returncode == 127 and "scalestudy-rank: cannot run /no/such/app" in missing.stdout
