"""A real OpenPBS on the multi-host test bed (hosts.py): the server, scheduler and comm on the
first host (the head, where Snakemake runs and qsub is called, as on a login node that is
also a compute node), one `pbs_mom` on every host, each node its host's own name, address
and CPU.

What it takes, beside an OpenPBS installed in /opt/pbs and set up once on this machine by
tests/support/openpbs/setup.sh (its data-service account and the ordinary user
`scaleuser` who submits: PBS runs no job as root):
  - each host its own pbs.conf (`PBS_CONF_FILE`, given to every daemon and client of the bed):
    its own PBS_HOME under the bed's state folder, the head as PBS_SERVER, and its own
    PBS_TMPDIR (the host's TMPDIR), so that the mom makes each job's TMPDIR on its own host;
  - the datastore on a port of its own: PostgreSQL's socket is named after its port, in a
    folder every namespace shares, so the machine's own OpenPBS (15007) and each bed run side
    by side; every other port is the host's network namespace's own;
  - the site's environment for every job (each mom's `pbs_environment`, as a site sets it):
    the launchers reach the other hosts over ssh with a key of the submitting user's
    (`user_ssh`), known to every host's sshd;
  - Gadi's rule that a job past one node takes whole nodes, and its node file that lists each
    host once per CPU (the head's `QSUB` turns a job's totals, `-l ncpus=`, into one chunk per
    node, as Gadi's server does; a job that names `select` is left as it is);
  - moms that copy a job's output on the shared filesystem (`$usecp`), and poll their jobs
    every 5-10 s (a walltime kill within seconds).
`stop()` ends every job and daemon; the bed's own stop() ends whatever is left on its hosts.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from hosts import Hosts
from pbs_site import PBS_EXEC, SETPRIV, SETUP, USER

# The datastore's port: PostgreSQL names its socket after it, in a folder every namespace
# shares, so each bed takes one no socket has (the machine's own OpenPBS has 15007, PBS's default).
POSTGRES_SOCKETS = Path("/var/run/postgresql")
FIRST_DATA_SERVICE_PORT = 15017
QUEUE = "normal"
# The bed's PBS_HOMEs: a mom refuses one below a folder others may write ("Security violation
# ... resolves to /tmp"), as /tmp is.
STATES = Path("/var/spool/scalestudy-pbs-beds")

# qsub as the bed's head has it: it writes its line to a log, and does what Gadi's server does
# with a job's totals (`-l ncpus=96,mem=..`): past one node, whole nodes, one chunk each, and a
# node file that lists each host once per CPU (mpiprocs = its CPUs). Stock OpenPBS cannot do
# this in a queuejob hook: a hook may add `select` but not take the totals away ("-lresource=
# cannot be used with select or place, resource is: ncpus"), so the bed does it before PBS
# sees the job. A job that names `select` (ASPIRE 2A's) goes to PBS as it is.
QSUB = """#!/usr/bin/python3
import os, re, sys

CORES, LOG, QSUB = {cores}, {log!r}, {qsub!r}
UNITS = {{"": 1, "b": 1, "kb": 2**10, "mb": 2**20, "gb": 2**30, "tb": 2**40}}


def whole_nodes(items):
    totals = dict(item.split("=", 1) for item in items.split(","))
    if "select" in totals or "ncpus" not in totals:
        return [items]
    ncpus = int(totals.pop("ncpus"))
    nodes = -(-ncpus // CORES)
    chunk = "select=%d:ncpus=%d:mpiprocs=%d" % (nodes, ncpus // nodes, ncpus // nodes)
    if "mem" in totals:
        number, unit = re.fullmatch(r"(\\d+)([kmgt]?b?)", totals.pop("mem").lower()).groups()
        chunk += ":mem=%dkb" % (int(number) * UNITS[unit] // nodes // 1024)
    for name in ("jobfs", "ngpus"):
        if name in totals:
            chunk += ":%s=%s" % (name, totals.pop(name))
    rest = ",".join("%s=%s" % item for item in totals.items())
    return [chunk, "place=" + ("scatter:excl" if nodes > 1 else "pack")] + ([rest] if rest else [])


argv = sys.argv[1:]
with open(LOG, "a") as log:
    log.write("qsub " + " ".join(argv) + "\\n")
out = []
for i, word in enumerate(argv):
    if i and argv[i - 1] == "-l":
        out[-1:] = [x for item in whole_nodes(word) for x in ("-l", item)]
    else:
        out.append(word)
os.execv(QSUB, [QSUB] + out)
"""


def unavailable_reason() -> str | None:
    """Why an OpenPBS cannot be made on the bed here (None when it can)."""
    if not (PBS_EXEC / "sbin/pbs_server.bin").exists():
        return f"no OpenPBS in /opt/pbs (build it from its source as docs/profiles.md says, then bash {SETUP})"
    if not Path("/etc/pbs.conf").exists():
        return f"OpenPBS is not set up on this machine (bash {SETUP})"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no user {USER} ({SETUP} makes it)"
    return None


class BedPBS:
    def __init__(self, bed: Hosts, ncpus: int = 2, mem_gib: int = 4) -> None:
        self.bed, self.ncpus, self.mem_gib = bed, ncpus, mem_gib
        self.state = STATES / bed.prefix
        self.data_service_port = next(
            port
            for port in range(FIRST_DATA_SERVICE_PORT, 16000)
            if not (POSTGRES_SOCKETS / f".s.PGSQL.{port}").exists()
        )
        self.head = bed[0]
        self.user_ssh = self.state / "ssh"
        self.qsub_log = self.state / "qsub.log"
        self.bin = self.state / "bin"  # qsub that logs its line, then PBS's own client commands

    def conf_file(self, index: int) -> Path:
        return self.state / f"pbs-{self.bed[index].name}.conf"

    def home(self, index: int) -> Path:
        return self.state / self.bed[index].name

    def conf(self, index: int) -> str:
        head = int(index == 0)
        host = self.bed[index]
        settings = {
            "PBS_EXEC": PBS_EXEC,
            "PBS_HOME": self.home(index),
            "PBS_SERVER": self.head.name,
            "PBS_START_SERVER": head,
            "PBS_START_SCHED": head,
            "PBS_START_COMM": head,
            "PBS_START_MOM": 1,
            "PBS_CORE_LIMIT": "unlimited",
            "PBS_SCP": "/usr/bin/scp",
            "PBS_DATA_SERVICE_PORT": self.data_service_port,
            "PBS_TMPDIR": host.tmpdir,
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def env(self, index: int) -> dict[str, str]:
        """What every PBS command and daemon on host `index` runs with."""
        return {
            "PBS_CONF_FILE": str(self.conf_file(index)),
            "PATH": f"{self.bin}:{PBS_EXEC / 'bin'}:{PBS_EXEC / 'sbin'}:/usr/sbin:/usr/bin:/sbin:/bin",
        }

    # ------------------------------------------------------------ making it

    def start(self) -> BedPBS:
        try:
            self.state.mkdir(parents=True)
            for folder in (STATES, self.state):
                folder.chmod(0o755)
            self.make_user_ssh()
            self.make_qsub_log()
            for index, host in enumerate(self.bed.hosts):
                host.tmpdir.chmod(0o1777)  # the jobs' (and their ssh sessions') TMPDIR
                self.conf_file(index).write_text(self.conf(index))
                self.make_home(index)
                self.configure_mom(index)
            for index in range(len(self.bed)):
                self.must(index, str(PBS_EXEC / "libexec/pbs_init.d"), "start")
            self.wait_for_server()
            self.configure_server()
            self.wait_free()
        except BaseException:  # nothing of a half-made complex is left (its datastore, its PBS_HOMEs)
            self.stop()
            raise
        return self

    def make_home(self, index: int, tries: int = 3) -> None:
        """The host's PBS_HOME, made as PBS's own first start makes it (pbs_habitat). On a busy
        machine PostgreSQL may say it runs before its socket is there, and the datastore is not
        made ("createdb: error: connection to server on socket ... failed"): again, from nothing."""
        for _ in range(tries - 1):
            done = self.run(index, str(PBS_EXEC / "libexec/pbs_habitat"), check=False, timeout=180)
            if done.returncode == 0:
                return
            for line in self.bed[index].processes():
                if str(self.home(index)) in line:
                    os.kill(int(line.split()[0]), signal.SIGKILL)
            time.sleep(1)
            shutil.rmtree(self.home(index), ignore_errors=True)
        self.must(index, str(PBS_EXEC / "libexec/pbs_habitat"))

    def must(self, index: int, *argv: str) -> None:
        done = self.run(index, *argv, check=False, timeout=180)
        if done.returncode != 0:
            said = (done.stdout + done.stderr)[-1500:]
            raise RuntimeError(f"{' '.join(argv)} on {self.bed[index].name} exited {done.returncode}: {said}")

    def make_user_ssh(self) -> None:
        """The submitting user's key, known to every host's sshd, and an ssh wrapper that uses it
        (the bed's own wrapper is root's); the account unlocked for sshd (UsePAM no refuses a
        locked one: '!' in /etc/shadow, as useradd leaves it)."""
        subprocess.run(["usermod", "-p", "*", USER], check=True, capture_output=True)
        key = self.state / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        with open(self.bed.base / "authorized_keys", "a") as keys:
            keys.write(key.with_suffix(".pub").read_text())
        config = self.state / "ssh_config"
        self.bed.ssh_client(self.user_ssh, config, key, USER)
        for path in (key, key.with_suffix(".pub"), config, self.user_ssh):
            shutil.chown(path, USER, USER)
        # sshd reads a user's authorized keys as that user.
        for path in (self.bed.base, self.bed.base / "authorized_keys", self.bed.base / "known_hosts"):
            path.chmod(0o755 if path.is_dir() else 0o644)

    def make_qsub_log(self) -> None:
        """The head's qsub (QSUB)."""
        self.bin.mkdir()
        self.qsub_log.touch(mode=0o666)
        self.qsub_log.chmod(0o666)
        qsub = self.bin / "qsub"
        qsub.write_text(QSUB.format(cores=self.ncpus, log=str(self.qsub_log), qsub=str(PBS_EXEC / "bin/qsub")))
        qsub.chmod(0o755)

    def configure_mom(self, index: int) -> None:
        home = self.home(index)
        config = home / "mom_priv/config"
        config.write_text(
            f"$clienthost {self.head.name}\n$logevent 0x1ff\n$usecp *:/ /\n$min_check_poll 5\n$max_check_poll 10\n"
        )
        # What a site gives every job: the launchers reach the other nodes over ssh.
        launch = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PRTE_MCA_plm_ssh_agent": str(self.user_ssh),
            "HYDRA_LAUNCHER": "ssh",
            "HYDRA_LAUNCHER_EXEC": str(self.user_ssh),
        }
        (home / "pbs_environment").write_text("".join(f"{k}={v}\n" for k, v in launch.items()))

    def wait_for_server(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while self.run(0, "qstat", "-B", check=False).returncode != 0:
            if time.monotonic() > deadline:
                logs = sorted((self.home(0) / "server_logs").glob("*"))
                tail = logs[-1].read_text(errors="replace")[-1500:] if logs else "(no server log)"
                raise RuntimeError(f"the bed's PBS server did not answer in {timeout:.0f} s: {tail}")
            time.sleep(0.5)

    def qmgr(self, command: str) -> None:
        done = self.run(0, "qmgr", "-c", command, check=False)
        if done.returncode != 0 and "already exists" not in done.stderr + done.stdout:
            raise RuntimeError(f"qmgr -c '{command}': {done.stderr.strip() or done.stdout.strip()}")

    def configure_server(self) -> None:
        for command in (
            "create resource jobfs type=size, flag=h",
            "create resource storage type=string",
            "create resource ngpus type=long, flag=nh",
            f"create queue {QUEUE} queue_type=execution, enabled=true, started=true",
            f"set server default_queue = {QUEUE}",
            "set server job_history_enable = true",
            "set server scheduler_iteration = 5",
            "set server flatuid = true",
        ):
            self.qmgr(command)
        for host in self.bed.hosts:
            self.qmgr(f"create node {host.name}")
            for resource, value in (("ncpus", self.ncpus), ("mem", f"{self.mem_gib}gb"), ("jobfs", "400gb")):
                self.qmgr(f"set node {host.name} resources_available.{resource} = {value}")

    def wait_free(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            out = self.run(0, "pbsnodes", "-a", "-F", "dsv", check=False).stdout
            states = {
                fields.get("Mom", fields.get("vnode")): fields.get("state")
                for fields in (dict(f.split("=", 1) for f in line.split("|") if "=" in f) for line in out.splitlines())
            }
            if all(states.get(name) == "free" for name in self.bed.names):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bed's moms not free after {timeout:.0f} s: {states}")
            time.sleep(0.5)

    # ------------------------------------------------------------ using it

    def command(self, index: int, *argv: str, as_user: bool = False) -> list[str]:
        """A PBS command on host `index` (its own pbs.conf), as root or as the submitting user."""
        environ = [f"{k}={v}" for k, v in self.env(index).items()]
        return self.bed.command(index, ["env", *environ, *(SETPRIV if as_user else []), *argv])

    def run(self, index: int, *argv: str, check: bool = True, timeout: float = 60, as_user: bool = False):
        return subprocess.run(
            self.command(index, *argv, as_user=as_user),
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def qsub_lines(self) -> list[str]:
        return self.qsub_log.read_text().splitlines()

    def stop(self) -> None:
        """Every job and daemon of the bed's PBS ended, its datastore stopped as PostgreSQL wants
        (a killed one leaves its socket behind), its PBS_HOMEs removed. Not pbs_init.d stop: it
        waits up to 180 s for a daemon that has a job to clean up."""
        self.run(0, "qdel", "-W", "force", "-x", "all", check=False, timeout=30)
        # The server, its scheduler and every mom (-s -m); quick: running jobs stay (they are ended with the hosts).
        self.run(0, "qterm", "-t", "quick", "-s", "-m", check=False, timeout=30)
        self.run(0, str(PBS_EXEC / "sbin/pbs_dataservice"), "stop", check=False, timeout=60)
        shutil.rmtree(self.state, ignore_errors=True)
