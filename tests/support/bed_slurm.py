"""A real Slurm on the multi-host test bed (hosts.py): slurmctld on the first host (the head,
where Snakemake runs, as on a login node that is also a compute node), one `slurmd -N <host>`
on every host, each node its host's own name, address and CPU.

What it takes, beside the local Slurm's settings (local_slurm.settings), and a node-local
TMPDIR (the head's path, each host's own folder; start_slurmd):
  - each host sees its own /etc/slurm/slurm.conf: the file is written to
    /etc/netns/<host>/slurm/, which `ip netns exec` mounts over /etc/slurm for every process
    started on the host (Snakemake's Slurm job step drops SLURM_CONF, so `scontrol` and `srun`
    inside a job read the default path); nothing outside the bed's namespaces changes, so
    several beds (and the local Slurm) run side by side;
  - slurmd needs the cgroup filesystems, which `ip netns exec` leaves out of the /sys it mounts
    ("No filesystem mounted on /sys/fs/cgroup", then "can't stat /sys/fs/cgroup/systemd/"):
    they are mounted again (cgroup v1, as on this machine) in slurmd's own mount namespace;
  - the hosts have a network namespace each, so the default ports serve every bed at once.
munged (one per machine) is shared through its socket under /run. `stop()` ends the daemons;
the bed's own stop() ends whatever is left on its hosts and removes /etc/netns/<host>/.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from hosts import NETNS_ETC, Hosts
from local_slurm import settings, start_munge

# cgroup v1 hierarchies slurmd's cgroup plugin looks for, mounted again inside a host.
CGROUP_MOUNTS = (
    "mount -t tmpfs cgroups /sys/fs/cgroup"
    " && for c in cpuset cpu cpuacct memory devices freezer blkio pids;"
    " do mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c; done"
    " && mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd"
)


class BedSlurm:
    def __init__(self, bed: Hosts, state: Path, memory_mb: int = 2048) -> None:
        self.bed, self.state, self.memory_mb = bed, Path(state), memory_mb
        self.head = bed[0]

    def conf(self) -> str:
        # One CPU per host: the bed gives each host one (its cpuset).
        lines = [f"ClusterName=bed{self.bed.prefix}", f"SlurmctldHost={self.head.name}({self.head.address})"]
        lines += settings(self.state, 1, self.memory_mb)
        lines += [
            f"NodeName={host.name} NodeAddr={host.address} CPUs=1 RealMemory={self.memory_mb} State=UNKNOWN"
            for host in self.bed.hosts
        ]
        names = ",".join(self.bed.names)
        lines.append(f"PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def start(self) -> BedSlurm:
        for folder in ["ctld", *(f"d-{name}" for name in self.bed.names)]:
            (self.state / folder).mkdir(parents=True, exist_ok=True)
        text = self.conf()
        for host in self.bed.hosts:
            etc = NETNS_ETC / host.name / "slurm"
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "slurm.conf").write_text(text)
        start_munge()
        self.run(0, "/usr/sbin/slurmctld", "-i")
        for host in self.bed.hosts:
            self.start_slurmd(host)
        self.wait_idle()
        return self

    def start_slurmd(self, host) -> None:
        """The host's slurmd (again, after the host was lost: bed.Host.revive first). A job
        submitted from the head with the head's TMPDIR finds that path node-local, as on a
        cluster whose TMPDIR is a local disk: on every other host it is the host's own
        folder (mounted over the head's path in slurmd's mount namespace, so only the jobs'
        steps see it there)."""
        mounts = CGROUP_MOUNTS
        if host is not self.head:
            mounts += f" && mount --bind {host.tmpdir} {self.head.tmpdir}"
        command = ["sh", "-c", f'{mounts} && exec "$@"', "slurmd", "/usr/sbin/slurmd", "-N", host.name]
        subprocess.run(host.command(command), capture_output=True, text=True, check=True, timeout=60)

    def run(self, index: int, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """A Slurm command on host `index` (its own slurm.conf)."""
        return subprocess.run(
            self.bed.command(index, list(argv)), capture_output=True, text=True, check=check, timeout=timeout
        )

    def wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.run(0, "sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
            if dict(zip(out[::2], out[1::2], strict=False)) == dict.fromkeys(self.bed.names, "idle"):
                return
            time.sleep(0.3)
        logs = {log.name: log.read_text()[-800:] for log in self.state.glob("*.log")}
        raise RuntimeError(f"Slurm on the bed not idle after {timeout:.0f} s: {logs}")

    def stop(self) -> None:
        self.run(0, "scancel", "--user", "root", check=False)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and self.run(0, "squeue", "-h", check=False).stdout.strip():
            time.sleep(0.5)
        for pidfile in self.state.glob("*.pid"):
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass
