"""Every app's multi-node point on real hosts (tests/support/hosts.py: network namespaces with
their own host name, address, sshd, TMPDIR and CPU), launched as a PBS job launches it: the
runner on the first host, PBS_NODEFILE naming the hosts, the launchers reaching the other
host over ssh."""

import os
import subprocess
from pathlib import Path

import pytest
from hosts import NETNS_ETC, Hosts


def on(bed, index, command):
    return subprocess.run(bed.command(index, ["sh", "-c", command]), capture_output=True, text=True, timeout=60)


def test_the_bed_is_two_hosts_each_with_its_name_address_tmpdir_and_cpu(hosts):
    first, second = hosts[0], hosts[1]
    seen = on(hosts, 0, f"{hosts.ssh} {second.name} 'hostname; echo $TMPDIR; grep Cpus_allowed_list /proc/self/status'")
    assert seen.returncode == 0, seen.stderr
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
    # A bed of its own (the module's stays up), named apart from it by its seed.
    bed = Hosts(tmp_path, 2, seed=os.getpid() + 1).start()
    sshd = [host.sshd.pid for host in bed.hosts]
    assert bed.subnet != hosts.subnet and bed.bridge != hosts.bridge
    bed.stop()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert bed.prefix not in links and bed.prefix not in namespaces
    assert not any((NETNS_ETC / name).exists() for name in bed.names)
    assert not any(Path(f"/proc/{pid}").exists() for pid in sshd)
    assert all(host.cpuset is None or not host.cpuset.exists() for host in bed.hosts)
