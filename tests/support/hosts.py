"""Several hosts on one Linux machine, for real: the multi-node test bed.

Each host is
  - a network namespace with a veth link to a private bridge in the root namespace, and an
    address of its own in a private /24 (no default route: nothing leaves the machine);
  - a UTS namespace with its own host name (`unshare --uts=<file>`, entered with
    `nsenter --uts=<file>`);
  - its own /etc/hosts and resolv.conf (`/etc/netns/<namespace>/`, which `ip netns exec`
    mounts over /etc): every test host by name, and 127.0.0.1 as its resolver so that a
    lookup of anything else fails at once;
  - its own sshd, listening only on its address (root, with a key made for this bed), which
    gives every session the host's own TMPDIR (`SetEnv TMPDIR=...`), as a cluster's node-local
    /tmp would be. The client side is the `ssh` wrapper below (`SSH_CLIENT_SETTINGS`): it knows
    every host's key by name and address (a known_hosts of the bed's), asks nothing, and logs
    at ssh's default level as a site's ssh does, so that what a launcher's ssh says when a
    node is lost ("Timeout, server h2 not responding.") reaches the point's log;
  - its own CPU where the machine has a cpuset cgroup (v1, or v2 with the cpuset controller):
    CPU i modulo the machine's CPUs; `shared_cpu=True` puts every host on one CPU (a slow host).
The filesystem (home, the repository, /tmp) stays shared, as a cluster's home is.

How a test runs something "on" the hosts: `bed.command(0, argv)` is the argument list that
runs argv on the first host (inside its namespaces). A point runs as a PBS job would run it:
`python -m scalestudy run-point` on the first host with PBS_NODEFILE naming the hosts
(`bed.nodefile`), and the launchers told how to reach the others by the environment a site
would set (`bed.launch_env()`: Open MPI's PRTE_MCA_plm_ssh_agent, MPICH's HYDRA_LAUNCHER and
HYDRA_LAUNCHER_EXEC, both the wrapper).

Everything a bed makes is named after the test run's pid (other engineers run beds on the same
machine at the same time) and is removed by `stop()`: its sshd and every process left in its
namespaces (all started by it), the namespaces, the bridge, /etc/netns/<namespace>/, cpusets.
`unavailable_reason()` says why a bed cannot be made here (not root, no `ip`, no sshd, ...).
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

NETNS_ETC = Path("/etc/netns")
CPUSET_V1 = Path("/sys/fs/cgroup/cpuset")
CGROUP_V2 = Path("/sys/fs/cgroup")
# sshd's privilege separation directory (Debian's sshd refuses to start without it).
SSHD_RUN = Path("/run/sshd")
TOOLS = ("ip", "unshare", "nsenter", "ssh", "ssh-keygen")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
UP_TIMEOUT_S = 20.0
# The client's settings besides its key and known hosts. ssh's default LogLevel (INFO), as a
# site's: it says where a host stopped answering. ServerAliveInterval 2 x ServerAliveCountMax 3:
# a session to a host whose link went silent gives up 6-8 s after the last answer (a site's
# keepalive, or its scheduler's node check, is slower; ssh's default is never). ConnectTimeout 5:
# a host unreachable at launch is said so 5 s after.
SSH_CLIENT_SETTINGS = (
    "IdentitiesOnly yes",
    "StrictHostKeyChecking yes",
    "UpdateHostKeys no",
    "BatchMode yes",
    "ConnectTimeout 5",
    "ServerAliveInterval 2",
    "ServerAliveCountMax 3",
)
# Beds made by this process so far (their names differ by it).
BEDS_MADE = itertools.count()


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60, **kwargs)


def unavailable_reason() -> str | None:
    """Why a bed cannot be made on this machine, or None."""
    if os.geteuid() != 0:
        return "the multi-host test bed needs root (network namespaces, sshd on port 22)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if not os.path.exists(SSHD):
        missing.append("sshd")
    if missing:
        return f"the multi-host test bed needs {', '.join(missing)} (scripts/system-packages.sh installs them)"
    probe = f"ssprobe{os.getpid()}"
    try:
        run(["ip", "netns", "add", probe])
    except (subprocess.SubprocessError, OSError) as error:
        return f"network namespaces cannot be made here: {getattr(error, 'stderr', '') or error}".strip()
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def free_subnet(seed: int) -> ipaddress.IPv4Network:
    """A private /24 derived from `seed` (the pid) that no interface of this machine uses."""
    used = run(["ip", "-o", "-4", "addr", "show"]).stdout + run(["ip", "-4", "route", "show"]).stdout
    for step in range(256):
        number = (seed + step * 7919) % (40 * 256)
        net = ipaddress.IPv4Network(f"10.{200 + number // 256}.{number % 256}.0/24")
        if f"10.{200 + number // 256}.{number % 256}." not in used:
            return net
    raise RuntimeError("no free private /24 for the test bed")


class Host:
    """One host of a bed: its name (also its host name and its namespace's), address, TMPDIR."""

    def __init__(self, bed: Hosts, index: int, name: str, address: str) -> None:
        self.bed, self.index, self.name, self.address = bed, index, name, address
        self.dir = bed.base / name
        self.tmpdir = self.dir / "tmp"
        self.uts = self.dir / "uts"
        self.root_link = f"{bed.prefix}v{index}"  # the bridge's end of its link
        self.sshd: subprocess.Popen | None = None
        self.cpuset: Path | None = None

    def command(self, argv: list[str]) -> list[str]:
        """argv run on this host: in its network (and /etc) and UTS namespaces, on its CPU."""
        inside = ["ip", "netns", "exec", self.name, "nsenter", f"--uts={self.uts}"]
        if self.cpuset is None:
            return [*inside, *argv]
        tasks = self.cpuset / ("tasks" if self.bed.cpusets == "v1" else "cgroup.procs")
        # Joined before `ip netns exec`, which mounts a /sys of its own without the cgroups.
        return ["sh", "-c", f'echo $$ > {tasks} && exec "$@"', "on-host", *inside, *argv]

    def pids(self) -> list[int]:
        """Every process in this host's network namespace (all started by the bed)."""
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True, check=False)
        return [int(pid) for pid in out.stdout.split() if pid.isdigit()]

    def processes(self) -> list[str]:
        """`pid command line` of every process on this host but its sshd and the sessions'
        sshd processes (what a job left behind)."""
        found = []
        for pid in self.pids():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            if cmdline.startswith(("sshd", SSHD)):
                continue
            found.append(f"{pid} {cmdline}")
        return found

    def kill_all(self, signum: int = signal.SIGKILL) -> None:
        """Every process of this host, sshd included: the node died."""
        for pid in self.pids():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def link(self, up: bool) -> None:
        """Its network link up or down (down: the node is unreachable, its processes live on)."""
        run(["ip", "link", "set", self.root_link, "up" if up else "down"])

    def revive(self) -> None:
        """Back after a loss: its link up, whatever was left on it ended, its sshd started again."""
        self.link(True)
        self.kill_all()
        if self.sshd is not None:
            self.sshd.wait(timeout=10)
        self.bed.start_sshd(self)
        self.bed.wait_for_ssh()


class Hosts:
    """A bed of `count` hosts under `base` (a fresh folder, on the filesystem all hosts share)."""

    def __init__(self, base: Path, count: int = 2, shared_cpu: bool = False, seed: int | None = None) -> None:
        self.base = Path(base)
        seed = os.getpid() if seed is None else seed
        # Interface names have at most 15 characters: the prefix leaves room for 'v<i>'/'p<i>'.
        # This process's pid and a letter per bed of it: one test run may hold several beds at
        # once, in several processes (pytest-xdist's workers, whose pids may be a seed apart).
        self.prefix = f"ss{os.getpid() % 10**7}{'abcdefghijklmnopqrstuvwxyz'[next(BEDS_MADE) % 26]}"
        self.bridge = f"{self.prefix}br"
        self.subnet = free_subnet(seed + 101 * int(self.prefix[-1], 36))
        addresses = list(self.subnet.hosts())
        self.hosts = [Host(self, i, f"{self.prefix}h{i + 1}", str(addresses[i])) for i in range(count)]
        self.shared_cpu = shared_cpu
        self.key = self.base / "id_ed25519"
        self.ssh = self.base / "ssh"  # the wrapper every launcher is given
        self.nodefile = self.base / "nodefile"
        self.cpusets: str | None = None  # 'v1' / 'v2', or None where hosts share every CPU
        self.started = False

    def __getitem__(self, index: int) -> Host:
        return self.hosts[index]

    def __len__(self) -> int:
        return len(self.hosts)

    @property
    def names(self) -> list[str]:
        return [host.name for host in self.hosts]

    # ------------------------------------------------------------ making it

    def start(self) -> Hosts:
        self.started = True
        try:
            self.make_keys()
            run(["ip", "link", "add", self.bridge, "type", "bridge"])
            run(["ip", "link", "set", self.bridge, "up"])
            for host in self.hosts:
                self.make_host(host)
            for host in self.hosts:
                self.start_sshd(host)
            self.nodefile.write_text("".join(f"{name}\n" for name in self.names))
            self.wait_for_ssh()
        except BaseException:
            self.stop()
            raise
        return self

    def make_keys(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        for key in (self.key, self.base / "hostkey"):  # the client's, and every host's sshd's
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "scalestudy test bed", "-f", str(key)])
        (self.base / "authorized_keys").write_text(self.key.with_suffix(".pub").read_text())
        # Every host's sshd has the bed's host key: known by each host's name and address, so
        # that ssh neither asks nor warns ("Permanently added ... to the list of known hosts").
        host_key = " ".join((self.base / "hostkey.pub").read_text().split()[:2])
        known_hosts = self.base / "known_hosts"
        known_hosts.write_text("".join(f"{host.name},{host.address} {host_key}\n" for host in self.hosts))
        self.ssh_client(self.ssh, self.base / "ssh_config", self.key, "root")

    def ssh_client(self, wrapper: Path, config: Path, key: Path, user: str) -> None:
        """An ssh wrapper (`wrapper`, the launchers' agent) that logs in to the bed's hosts as
        `user` with `key`, knowing every host's key."""
        settings = (
            f"IdentityFile {key}",
            f"UserKnownHostsFile {self.base / 'known_hosts'}",
            "GlobalKnownHostsFile /dev/null",
            f"User {user}",
            *SSH_CLIENT_SETTINGS,
        )
        config.write_text("Host *\n" + "".join(f"  {line}\n" for line in settings))
        wrapper.write_text(f'#!/bin/sh\nexec ssh -F {config} "$@"\n')
        wrapper.chmod(0o755)

    def make_host(self, host: Host) -> None:
        host.tmpdir.mkdir(parents=True, exist_ok=True)
        host.uts.touch()
        run(["ip", "netns", "add", host.name])
        peer = f"{self.prefix}p{host.index}"
        run(["ip", "link", "add", host.root_link, "type", "veth", "peer", "name", peer])
        run(["ip", "link", "set", peer, "netns", host.name])
        run(["ip", "link", "set", host.root_link, "master", self.bridge, "up"])
        inside = ["ip", "netns", "exec", host.name]
        run([*inside, "ip", "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", peer])
        run([*inside, "ip", "link", "set", peer, "up"])
        run([*inside, "ip", "link", "set", "lo", "up"])
        run(["unshare", f"--uts={host.uts}", "hostname", host.name])
        etc = NETNS_ETC / host.name
        etc.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost", *(f"{other.address} {other.name}" for other in self.hosts)]
        (etc / "hosts").write_text("\n".join(lines) + "\n")
        (etc / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        host.cpuset = self.make_cpuset(host)

    def make_cpuset(self, host: Host) -> Path | None:
        """The host's own CPU (a cpuset cgroup), or None where the machine has no cpuset to give."""
        cpus = sorted(os.sched_getaffinity(0))
        cpu = str(cpus[0] if self.shared_cpu else cpus[host.index % len(cpus)])
        v2_controllers = CGROUP_V2 / "cgroup.controllers"
        if (CPUSET_V1 / "cpuset.cpus").is_file():
            folder, version = CPUSET_V1 / host.name, "v1"
        elif v2_controllers.is_file() and "cpuset" in v2_controllers.read_text().split():
            folder, version = CGROUP_V2 / host.name, "v2"
        else:
            return None
        try:
            if version == "v2":
                (CGROUP_V2 / "cgroup.subtree_control").write_text("+cpuset")
            folder.mkdir()
            if version == "v1":  # v1 needs the memory nodes set before a task may join
                (folder / "cpuset.mems").write_text((CPUSET_V1 / "cpuset.mems").read_text().strip())
            (folder / "cpuset.cpus").write_text(cpu)
        except OSError:
            if folder.is_dir():
                folder.rmdir()
            return None
        self.cpusets = version
        return folder

    def start_sshd(self, host: Host) -> None:
        SSHD_RUN.mkdir(mode=0o755, exist_ok=True)
        config = host.dir / "sshd_config"
        config.write_text(
            f"ListenAddress {host.address}\nPort 22\nHostKey {self.base / 'hostkey'}\n"
            f"PidFile {host.dir / 'sshd.pid'}\nAuthorizedKeysFile {self.base / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes no\nPrintMotd no\nPrintLastLog no\nLogLevel ERROR\n"
            # Many launches at once (a daemon per node per point): never refuse a session.
            "MaxStartups 100\nMaxSessions 100\n"
            f"SetEnv TMPDIR={host.tmpdir}\n"
        )
        log = open(host.dir / "sshd.log", "ab")  # noqa: SIM115 - open while sshd runs
        host.sshd = subprocess.Popen(
            host.command([SSHD, "-D", "-e", "-f", str(config)]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        if host.cpuset is not None:
            # Every session of this sshd (the launcher's daemon, the ranks) inherits its CPU.
            (host.cpuset / ("tasks" if self.cpusets == "v1" else "cgroup.procs")).write_text(str(host.sshd.pid))

    def wait_for_ssh(self) -> None:
        """Until the first host reaches every host by name over ssh."""
        first = self.hosts[0]
        deadline = time.monotonic() + UP_TIMEOUT_S
        for host in self.hosts:
            while True:
                out = subprocess.run(
                    first.command([str(self.ssh), host.name, "hostname"]),
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )
                if out.returncode == 0 and out.stdout.strip() == host.name:
                    break
                if time.monotonic() > deadline:
                    log = (host.dir / "sshd.log").read_text(errors="replace")
                    raise RuntimeError(f"ssh to {host.name} failed: {out.stderr.strip()} {log.strip()}")
                time.sleep(0.1)

    # ------------------------------------------------------------ using it

    def command(self, index: int, argv: list[str]) -> list[str]:
        return self.hosts[index].command(argv)

    def launch_env(self) -> dict[str, str]:
        """What a site sets so that its launchers reach the other nodes (here: over ssh, with the
        bed's key): Open MPI 5's ssh agent (PRTE_MCA_plm_ssh_agent; OMPI_MCA_plm_rsh_agent is
        ignored), MPICH Hydra's launcher, and the job's node file and TMPDIR on the first host."""
        return {
            "PRTE_MCA_plm_ssh_agent": str(self.ssh),
            # Open MPI 4.1 (ORTE) reads its ssh agent here; 5 ignores it.
            "OMPI_MCA_plm_rsh_agent": str(self.ssh),
            "HYDRA_LAUNCHER": "ssh",
            "HYDRA_LAUNCHER_EXEC": str(self.ssh),
            "PBS_NODEFILE": str(self.nodefile),
            "TMPDIR": str(self.hosts[0].tmpdir),
        }

    # ------------------------------------------------------------ removing it

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        for host in self.hosts:
            host.kill_all()
        for host in self.hosts:
            if host.sshd is not None:
                try:
                    host.sshd.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            # The link first: a namespace goes (and its end of the link with it) only once the
            # last process in it has.
            subprocess.run(["ip", "link", "del", host.root_link], capture_output=True, check=False)
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, check=False)
            subprocess.run(["umount", str(host.uts)], capture_output=True, check=False)
            shutil.rmtree(NETNS_ETC / host.name, ignore_errors=True)
            if host.cpuset is not None:
                for _ in range(50):  # a killed process leaves its cgroup a moment later
                    try:
                        host.cpuset.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)

    def __enter__(self) -> Hosts:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()
