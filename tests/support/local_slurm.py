"""A real Slurm on localhost with two virtual nodes (n1, n2), for the scheduler tests.

Debian's slurm-wlm runs several slurmd on one host when each node has its own
port; `sbatch -N 2` then gets both and `mpirun` inside the job spans them. The
controller, both node daemons and munge are started here without systemd, with
every state file under one directory, and stopped when the tests end.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

NODES = ("n1", "n2")
PACKAGES = ("slurmctld", "slurmd", "munged", "sbatch", "qsub")


def unavailable_reason() -> str | None:
    """Why a local Slurm cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "local Slurm needs root (slurmd runs jobs as their user)"
    missing = [name for name in PACKAGES if not (shutil.which(name) or Path("/usr/sbin", name).exists())]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing; scripts/system-packages.sh installs it with apt)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(state: Path, cpus: int, memory_mb: int) -> str:
    host = socket.gethostname().split(".")[0]
    ports = [free_port() for _ in range(len(NODES) + 1)]
    lines = [
        "ClusterName=scalestudy",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        *settings(state, cpus, memory_mb),
    ]
    for node, port in zip(NODES, ports[1:], strict=True):
        lines.append(
            f"NodeName={node} NodeAddr=127.0.0.1 NodeHostname={host} Port={port} CPUs={cpus} "
            f"RealMemory={memory_mb} State=UNKNOWN"
        )
    lines.append(f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def settings(state: Path, cpus: int, memory_mb: int) -> list[str]:
    """slurm.conf lines of every test Slurm (this one, and the test bed's: bed_slurm.py) but its
    controller and nodes: every state and log file under `state`."""
    return [
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={state}/ctld",
        f"SlurmdSpoolDir={state}/d-%n",
        f"SlurmctldPidFile={state}/slurmctld.pid",
        f"SlurmdPidFile={state}/slurmd-%n.pid",
        f"SlurmctldLogFile={state}/slurmctld.log",
        f"SlurmdLogFile={state}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        f"DefMemPerCPU={memory_mb // cpus}",
        "DependencyParameters=kill_invalid_depend",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={state}/jobcomp.txt",
        "JobAcctGatherType=jobacct_gather/none",
        # Finished jobs stay visible to squeue/scontrol long enough for status polling.
        "MinJobAge=600",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=5",
        "MaxJobCount=10000",
    ]


# The munged a test session started: its pid, written by whichever process started it, read
# by the session's end (stop_munge_started_here) once every Slurm of the session has stopped.
MUNGED_STARTED_HERE = Path("/run/scalestudy-munged-started.pid")


def start_munge() -> None:
    """munged, as user munge, unless one already answers (one per machine serves every Slurm)."""
    if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
        return
    run_dir = Path("/run/munge")  # munged's socket and pid file
    run_dir.mkdir(exist_ok=True)
    shutil.chown(run_dir, "munge", "munge")
    subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged", "--force"], check=True)
    MUNGED_STARTED_HERE.write_text((run_dir / "munged.pid").read_text())


def stop_munge_started_here() -> None:
    """End the munged start_munge started, if it did: no daemon outlives the tests that needed it.
    A munged that answered before the tests (the machine's own) is left running."""
    try:
        pid = int(MUNGED_STARTED_HERE.read_text().strip())
    except (FileNotFoundError, ValueError):
        return
    MUNGED_STARTED_HERE.unlink()
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() == "munged":
            os.kill(pid, 15)
    except (FileNotFoundError, ProcessLookupError):
        pass


class LocalSlurm:
    def __init__(self, state: Path, cpus: int = 2, memory_mb: int = 4096):
        self.state = Path(state)
        self.conf = self.state / "slurm.conf"
        self.cpus, self.memory_mb = cpus, memory_mb
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=check, timeout=timeout)

    def start(self) -> LocalSlurm:
        self.state.mkdir(parents=True, exist_ok=True)
        for sub in ["ctld", *(f"d-{n}" for n in NODES)]:
            (self.state / sub).mkdir(exist_ok=True)
        self.conf.write_text(slurm_conf(self.state, self.cpus, self.memory_mb))
        # One local Slurm per machine at a time: a second test session waits here.
        self.machine_lock = open("/run/scalestudy-local-slurm.lock", "w")
        fcntl.flock(self.machine_lock, fcntl.LOCK_EX)
        # Snakemake's Slurm job step drops SLURM_* variables (SLURM_CONF too) before running a
        # job, so scontrol and srun inside jobs read the default path: point it at this cluster.
        etc = Path("/etc/slurm/slurm.conf")
        if etc.is_symlink() or not etc.exists():
            etc.unlink(missing_ok=True)
            etc.symlink_to(self.conf)
        self.start_munge()
        self.run("/usr/sbin/slurmctld", "-i", "-f", str(self.conf))
        for node in NODES:
            self.run("/usr/sbin/slurmd", "-N", node, "-f", str(self.conf))
        self.wait_idle()
        return self

    def start_munge(self) -> None:
        start_munge()

    def wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
            states = dict(zip(out[::2], out[1::2], strict=False))
            if all(states.get(n, "").startswith("idle") for n in NODES):
                return
            for node in NODES:
                if states.get(node, "").rstrip("*") in ("down", "drain", "unk"):
                    self.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
            time.sleep(0.5)
        raise RuntimeError(f"Slurm nodes not idle after {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self) -> str:
        log = self.state / "slurmctld.log"
        return log.read_text()[-2000:] if log.exists() else "(no slurmctld log)"

    def stop(self) -> None:
        self.run("scancel", "--user", "root", check=False)
        # Let the node daemons end their job steps before they are stopped themselves.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and self.run("squeue", "-h", check=False).stdout.strip():
            time.sleep(0.5)
        for pidfile in self.state.glob("*.pid"):
            try:
                os.kill(int(pidfile.read_text().strip()), 15)
            except (ValueError, ProcessLookupError):
                pass
        etc = Path("/etc/slurm/slurm.conf")
        if etc.is_symlink() and etc.resolve() == self.conf.resolve():
            etc.unlink()
        if getattr(self, "machine_lock", None):
            self.machine_lock.close()


if __name__ == "__main__":  # start one by hand: python tests/local_slurm.py /tmp/slurm
    import sys

    cluster = LocalSlurm(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/scalestudy-slurm")).start()
    print(f"export SLURM_CONF={cluster.conf}")
