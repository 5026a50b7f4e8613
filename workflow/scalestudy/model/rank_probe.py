"""Runs in front of every rank's command: reports the rank, then becomes the command.

    mpirun ... python rank_probe.py [--also NAME,...] [--mpi4py] -- <the app's rank command ...>

prints one line per rank to its stderr before the app starts (in parts where it is long:
`write_report`),

    scalestudy-rank {"rank": 0, "size": 2, "host": "n1", "pid": 123, "env": {...},
                     "cpus": "0", "cores": 1, "sockets": 1, "numa": 1, "launcher_cpus": "0-1", ...}

with the host the rank runs on (SLURMD_NODENAME if set, else the host name), the
OMPI_*/NCCL_*/... variables it was given, and the CPUs it may run on (its affinity, and
how many cores, sockets and NUMA nodes they span) beside those of the process that started
it (the launcher's daemon, which no binding restricts): the record of which hosts ran, the
proof that a flag set's variables reached every rank, and of the binding each rank got.
With --mpi4py (an app whose ranks load MPI through mpi4py) the line also names the MPI library
this rank's Python loads (`mpi_library`: MPI_Get_library_version's first line, e.g. "Open MPI
v4.1.4, ..."; `libmpi`: its file): the proof that a rank runs on the MPI its launcher is.
The local rank 0 of each host leaves a watcher behind (`start_host_watch`): once that rank has
ended, it prints one line for the host,

    scalestudy-host {"host": "n2", "wall_s": 4.2, "run_s": 4.1, "cpus": {"0": [8.3, 0.0], ...},
                     "ranks_waited_s": 0.01, "ranks_ran_s": 4.0, "ranks_involuntary": 12, ...}

what the run's processes there (the launcher's daemon and everything under it) and what each of
the host's CPUs did (busy and steal seconds) over the rank's life, and how long the ranks' own
threads there waited on a run queue for a CPU (`RankSched`): the record of a slow host
(launch.conditions.host_conditions) and of a contended run (model.contention).
Then it exec()s the command, so the app keeps this process (same pid, same environment
but the Slurm step's variables, `without_slurm_step`) and nothing else changes, except that
the rank now dies with the process that started it (`die_with_parent`): a launcher or daemon
killed outright takes its ranks with it.
A stand-alone script (standard library only) run by path: it needs nothing on
PYTHONPATH on the compute nodes. `rank_lines` reads the lines back (provenance, apps).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import json
import os
import re
import select
import signal
import socket
import struct
import sys
import termios
import time
from typing import NoReturn

RANK_PREFIX = "scalestudy-rank"
# A rank's report goes to its stderr (a pipe under Open MPI 4.1 and 5 and Hydra; their ranks'
# stdout is a pseudo-terminal, whose reader can take part of a write), one write(2) a line, the
# next only once the launcher has read the one before (`write_report`); a report longer than
# REPORT_PART_CHARS goes as numbered parts, `scalestudy-rank-part <pid>@<host> <i>/<n> <the i-th
# slice of its JSON>`. Why: Open MPI 4.1's daemon forwards a rank's output in reads of at most
# 2048 bytes (ORTE_IOF_BASE_MSG_MAX) and mpirun writes each read as it comes, so a longer line, or
# part of a line a read took, was interleaved with another rank's: on the two-node Slurm, 3 of 4
# ranks' 2,049-byte lines were lost; locally (one line on stdout), 4 ranks with a 3,000-byte
# variable kept 2 to 4 lines of 4.
RANK_PART_PREFIX = "scalestudy-rank-part"
REPORT_PART_CHARS = 2000
# How long a line waits for the launcher to read the one before it (`wait_read`), at most.
PART_READ_WAIT_S = 1.0
# The line rank 0 of a torch.distributed app prints with the address its ranks meet at
# (init_method): across nodes, the first node's host name, never localhost.
RENDEZVOUS_PREFIX = "scalestudy-rendezvous"
# Variables that show which MPI/NCCL settings reached the rank and where it ran.
ENV_PREFIXES = (
    "OMPI_MCA_",
    "OMPI_COMM_WORLD_",
    "NCCL_",
    "MPIR_CVAR_",
    "FI_",
    "UCX_",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "SLURM_JOB_ID",
    "SLURM_PROCID",
    "PBS_JOBID",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    # The rank's own scratch directory: a node's own TMPDIR on every node, not the first node's.
    "TMPDIR",
)
# The Slurm variables a rank keeps: the job's identity (those Snakemake's Slurm job step keeps
# too) and where Slurm's configuration is. Every other SLURM_* a rank has describes the Slurm
# step its launcher's daemon was started in (Open MPI's and Hydra's `srun` per remote node:
# SLURM_PROCID=0, SLURM_NNODES=1 on each), not the point, and an app that takes them for its
# own goes wrong (Lightning picks its SLURM environment on such a rank only: "You set
# num_nodes=2 in Lightning, but the number of nodes configured in SLURM --nodes=1 does not
# match"); the launcher's MPI variables say the rank and world.
SLURM_KEPT = (
    *("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CLUSTER_NAME", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST"),
    "SLURM_CONF",
)
# Open MPI bookkeeping that says nothing about the user's settings.
ENV_NOISE = ("OMPI_MCA_PREFIXES",)
# Where Linux describes each CPU (its core, package, NUMA node).
CPU_SYSFS = "/sys/devices/system/cpu"
# What a launcher tells each rank (Open MPI, MPICH/Hydra, PMIx, Slurm), the first one set wins:
# its rank and the number of ranks, in the world and on its node. Every rank program reads them
# here (this module is standard library only, cheap to import in a rank).
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID")
LOCAL_SIZE_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")


def first_int(names: tuple[str, ...], default: int | None = None) -> int | None:
    """The first of `names` set to a number in this process's environment, else `default`."""
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return default


def host_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def seen_environment(also: tuple[str, ...] = ()) -> dict[str, str]:
    return {
        name: value
        for name, value in sorted(os.environ.items())
        if (name.startswith(ENV_PREFIXES) or name in also) and name not in ENV_NOISE
    }


def cpu_list(cpus) -> str:
    """CPU numbers in the kernel's list form: {0, 1, 2, 3, 8} -> '0-3,8'."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def parse_cpu_list(text: str) -> set[int]:
    """The kernel's CPU list form back to numbers: '0-3,8' -> {0, 1, 2, 3, 8}."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def topology(cpus, root: str = CPU_SYSFS) -> dict[str, int | None]:
    """How many cores (package and core id), sockets (packages) and NUMA nodes `cpus` span;
    None where the kernel does not say."""
    cores, sockets, numa = set(), set(), set()
    try:
        for cpu in cpus:
            folder = os.path.join(root, f"cpu{cpu}")
            with open(os.path.join(folder, "topology", "physical_package_id")) as package:
                socket_id = package.read().strip()
            with open(os.path.join(folder, "topology", "core_id")) as core:
                cores.add((socket_id, core.read().strip()))
            sockets.add(socket_id)
            numa.update(name for name in os.listdir(folder) if name.startswith("node") and name[4:].isdigit())
    except (OSError, ValueError):
        return {"cores": None, "sockets": None, "numa": None}
    return {"cores": len(cores), "sockets": len(sockets), "numa": len(numa) or None}


def affinity() -> dict:
    """The CPUs this rank may run on and those of its parent (the launcher's daemon)."""
    try:
        mine = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return {}
    found = {"cpus": cpu_list(mine), **topology(mine)}
    try:
        found["launcher_cpus"] = cpu_list(os.sched_getaffinity(os.getppid()))
    except OSError:
        found["launcher_cpus"] = None
    return found


# A file name of an MPI library in /proc/self/maps (Open MPI's libmpi, MPICH's libmpich or libmpi).
LIBMPI_NAMES = ("libmpi.so", "libmpich.so", "libmpi_")


def mapped_libmpi(maps: str = "/proc/self/maps") -> str | None:
    """The MPI library file this process has mapped, None where none (or no /proc)."""
    try:
        with open(maps) as handle:
            for line in handle:
                path = line.split(maxsplit=5)[-1].strip()
                if path.startswith("/") and os.path.basename(path).startswith(LIBMPI_NAMES):
                    return path
    except OSError:
        return None
    return None


def library_name(text: str) -> str:
    """The first line of MPI_Get_library_version, its blanks one space each: MPICH's is
    "MPICH Version:<TAB>4.0.2", which would reach runs.csv and the report with its tab."""
    lines = text.replace("\x00", "").strip().splitlines()
    return " ".join(lines[0].split()) if lines else ""


def mpi_library() -> dict:
    """The MPI library this rank's Python loads through mpi4py, as the library names itself
    (MPI_Get_library_version's first line, callable before MPI_Init), and its file: what the
    app, the same interpreter in the same environment, will run on. MPI is not initialized here,
    and exec() then drops the library with the rest of this process."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        text = MPI.Get_library_version()
    except Exception as error:  # no mpi4py, or no library it can load: said, not fatal here
        return {"mpi_library": None, "mpi_library_error": f"{type(error).__name__}: {error}"[:300]}
    return {"mpi_library": library_name(text), "libmpi": mapped_libmpi()}


def library_version(path: str) -> dict:
    """What the MPI library file `path` says it is (MPI_Get_library_version's first line, callable
    before MPI_Init): asked by the runner of each library a rank mapped (`RankSched`)."""
    try:
        library = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        text = ctypes.create_string_buffer(16384)  # MPI_MAX_LIBRARY_VERSION_STRING: 256 to 8192
        length = ctypes.c_int()
        if library.MPI_Get_library_version(text, ctypes.byref(length)) != 0:
            return {"mpi_library": None, "mpi_library_error": f"{path}: MPI_Get_library_version failed"}
    except (OSError, AttributeError) as error:
        return {"mpi_library": None, "mpi_library_error": f"{type(error).__name__}: {error}"[:300]}
    return {"mpi_library": library_name(text.value.decode(errors="replace")), "libmpi": path}


def report(also: tuple[str, ...] = (), mpi4py: bool = False) -> dict:
    return {
        "rank": first_int(RANK_VARIABLES),
        "size": first_int(SIZE_VARIABLES),
        "host": host_name(),
        "pid": os.getpid(),
        "env": seen_environment(also),
        **affinity(),
        **(mpi_library() if mpi4py else {}),
    }


def without_slurm_step(environ: dict[str, str]) -> dict[str, str]:
    """The environment the rank's command gets: `environ` without the Slurm step's variables
    (SLURM_KEPT and job arrays' SLURM_ARRAY_* stay)."""
    return {
        name: value
        for name, value in environ.items()
        if not name.startswith("SLURM_") or name in SLURM_KEPT or name.startswith("SLURM_ARRAY_")
    }


def report_lines(text: str, key: str) -> list[str]:
    """The lines that carry one rank's report `text` (its JSON): one where it fits in
    REPORT_PART_CHARS, else numbered parts of it (RANK_PART_PREFIX), `key` naming the rank."""
    if len(RANK_PREFIX) + len(text) + 2 <= REPORT_PART_CHARS:
        return [f"{RANK_PREFIX} {text}\n"]
    size = REPORT_PART_CHARS - len(RANK_PART_PREFIX) - len(key) - 16  # room for " i/n " and the newline
    slices = [text[start : start + size] for start in range(0, len(text), size)]
    return [f"{RANK_PART_PREFIX} {key} {i}/{len(slices)} {part}\n" for i, part in enumerate(slices, 1)]


def write_report(lines: list[str], fd: int = 2) -> None:
    """Each line in one write(2) (json.dumps' ASCII: a character a byte, under PIPE_BUF, so a
    pipe's reader takes it whole), the next, and the app's own output, only once the reader has
    taken it (`wait_read`), so that no read holds part of two."""
    for line in lines:
        os.write(fd, line.encode())
        wait_read(fd)


def wait_read(fd: int, timeout_s: float = PART_READ_WAIT_S) -> None:
    """Until what was written to the pipe `fd` has been read (FIONREAD: bytes not yet read), or
    `timeout_s`; at once for a file (nothing unread past its end) or what cannot say."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            unread = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
        except OSError:
            return
        if unread <= 0:
            return
        time.sleep(0.001)


RANK_LINE = re.compile(rf"{RANK_PREFIX} (\{{.*)$")
RANK_PART = re.compile(rf"{RANK_PART_PREFIX} (\S+) (\d+)/(\d+) (.*)$")


def rank_lines(log_text: str) -> list[dict]:
    """Every rank's report (rank, host, pid, the environment it saw): its `scalestudy-rank {...}`
    line, or its parts put back together (`report_lines`), wherever in a line it begins (after
    another process's unended line)."""
    texts, parts = [], {}
    for line in log_text.splitlines():
        if part := RANK_PART.search(line):  # first: a part's slice may hold anything
            key, number, count, text = part.groups()
            parts.setdefault((key, int(count)), {})[int(number)] = text
        elif whole := RANK_LINE.search(line):
            texts.append(whole.group(1))
    for (_, count), got in parts.items():
        if sorted(got) == list(range(1, count + 1)):  # a part missing: the rank's report is not evidence
            texts.append("".join(got[number] for number in sorted(got)))
    found = []
    for text in texts:
        try:
            found.append(json.loads(text))
        except json.JSONDecodeError:
            continue  # a line cut off (the log was truncated) is not evidence
    return sorted(found, key=lambda r: (r.get("rank") is None, r.get("rank") or 0))


# The prefix of the TMPDIR of a launch of its own (launch.runner.launch_tmpdir), made on the
# first node only, for the launcher's session files.
LAUNCH_TMPDIR_PREFIX = "scalestudy-launch-"


def parent_environment(pid: int) -> dict[str, str] | None:
    """The environment process `pid` started with (/proc), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            entries = handle.read().split(b"\0")
    except OSError:
        return None
    return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)


def node_tmpdir(environ, daemon: dict[str, str] | None) -> str | None:
    """This rank's TMPDIR: the one its node's daemon (the process that started the rank: Open
    MPI's prted, Hydra's proxy, started on that node with the node's own environment; on the
    first node the launcher itself) was given, else its own. Where that is the launch's own
    folder (launch.runner.launch_tmpdir, made on the first node) and no folder here (another
    node, whose daemon a launcher that passes on every variable started: srun under Slurm), the
    job's TMPDIR it was made in. On the first node the ranks keep the launch's folder: whatever
    they leave there (torch's rendezvous file named after the launch) goes with it. None where
    that is no folder on this node (TMPDIR is left as it is)."""
    found = (daemon or {}).get("TMPDIR") or environ.get("TMPDIR")
    if found and not os.path.isdir(found) and os.path.basename(found.rstrip("/")).startswith(LAUNCH_TMPDIR_PREFIX):
        found = os.path.dirname(found.rstrip("/"))
    return found if found and os.path.isdir(found) else None


# prctl(2): the signal the kernel sends this process when its parent (the thread that
# started it) ends; kept across exec().
PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL) -> bool:
    """Ask Linux to send `signum` to this process when its parent ends (prctl PR_SET_PDEATHSIG),
    so that nothing it runs outlives the process that started it, even one killed by SIGKILL,
    which no handler sees. Meant for a child between fork and exec. False where it cannot be
    set (not Linux); True when set, or when the parent had already gone (then `signum` is
    sent to this process at once)."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the parent ended before the request was made
        os.kill(os.getpid(), signum)
    return True


# ---------------------------------------------------------------- what a host's CPUs did

# The line a host's watcher prints once its local rank 0 has ended (`start_host_watch`).
HOST_PREFIX = "scalestudy-host"
# How long the watcher waits for the ended rank's parent to wait for it (a launcher's daemon does
# at once), looking every REAP_POLL_S; past it, the rank is counted as it stands (a zombie's
# /proc entry still has its time).
REAP_WAIT_S = 1.0
REAP_POLL_S = 0.005
PROC = "/proc"
# /proc/stat's CPU columns: user nice system idle iowait irq softirq steal (guest is inside user).
BUSY_COLUMNS = (0, 1, 2, 5, 6)
STEAL_COLUMN = 7


def clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(stat_text: str) -> dict[str, tuple[float, float]]:
    """Busy and steal seconds since boot from /proc/stat's text, by CPU: 'cpu' (the machine's
    line, every CPU summed) and each CPU's number ('0', '1', ...)."""
    ticks, found = clock_ticks(), {}
    for line in stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and (name == "cpu" or name[3:].isdigit()):
            values = [int(v) for v in rest.split()] + [0] * 8
            found[name[3:] or "cpu"] = (sum(values[i] for i in BUSY_COLUMNS) / ticks, values[STEAL_COLUMN] / ticks)
    return found


def process_table(proc: str = PROC) -> dict[int, tuple[int, float]]:
    """Every process: pid -> (its parent's pid, the CPU seconds of its threads and of its ended,
    waited-for descendants: /proc/<pid>/stat utime + stime + cutime + cstime). One pass over /proc
    (a node's few hundred processes: milliseconds); a process that ends meanwhile is left out."""
    ticks, table = clock_ticks(), {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        fields = stat_fields(int(name), proc)
        if fields is not None:
            table[int(name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / ticks)
    return table


def tree_cpu_s(root: int, table: dict[int, tuple[int, float]]) -> float | None:
    """CPU seconds of `root` and every process under it (each live one's own and its waited-for
    descendants'), None where `root` is not in the table."""
    if root not in table:
        return None
    children: dict[int, list[int]] = {}
    for pid, (parent, _cpu) in table.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += table[pid][1]
        todo += children.get(pid, [])
    return total


def stat_fields(pid: int, proc: str = PROC) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (which may hold spaces and parentheses):
    [0] the state, [1] the parent's pid, [11:15] utime stime cutime cstime; None where it has gone."""
    try:
        with open(os.path.join(proc, str(pid), "stat")) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 14 and all(v.lstrip("-").isdigit() for v in fields[1:15]) else None


def parent_of(pid: int, proc: str = PROC) -> int | None:
    """The parent of process `pid` (a zombie's too), None where it has gone."""
    fields = stat_fields(pid, proc)
    return None if fields is None else int(fields[1])


def host_sample(daemon: int, proc: str = PROC) -> dict | None:
    """The clock, the CPU seconds of `daemon` (the launcher's daemon on this host) and everything
    under it (the run's processes here), each CPU's busy and steal seconds; None where unreadable."""
    try:
        run = tree_cpu_s(daemon, process_table(proc))
        with open(os.path.join(proc, "stat")) as handle:
            cpus = cpu_seconds(handle.read())
    except OSError:
        return None
    return None if run is None else {"taken_s": time.monotonic(), "run_s": run, "cpus": cpus}


def host_line(start: dict, end: dict, cpus: set[int], host: str, ranks: dict | None = None) -> str:
    """The HOST_PREFIX line: wall seconds between the samples, the run's CPU seconds, and per
    CPU of `cpus` its busy and steal seconds (2 decimals: /proc counts ticks of 10 ms); `ranks`:
    the ranks' run-queue figures (RankSched.figures), where taken."""
    per_cpu = {}
    for cpu in sorted(cpus):
        before, after = start["cpus"].get(str(cpu)), end["cpus"].get(str(cpu))
        if before and after:
            per_cpu[str(cpu)] = [round(after[0] - before[0], 2), round(after[1] - before[1], 2)]
    found = {
        "host": host,
        "wall_s": round(end["taken_s"] - start["taken_s"], 3),
        "run_s": round(max(0.0, end["run_s"] - start["run_s"]), 2),
        "cpus": per_cpu,
        **(ranks or {}),
    }
    return f"{HOST_PREFIX} {json.dumps(found, sort_keys=True)}\n"


def host_lines(log_text: str) -> list[dict]:
    """Every host's `scalestudy-host {...}` line (a line cut off is left out)."""
    found, prefix = [], HOST_PREFIX + " "
    for line in log_text.splitlines():
        if line.startswith(prefix):
            try:
                said = json.loads(line[len(prefix) :])
            except json.JSONDecodeError:
                continue
            if isinstance(said, dict) and isinstance(said.get("wall_s"), int | float):
                found.append(said)
    return found


def start_host_watch() -> None:
    """Leave behind, before this process becomes the rank, a watcher that prints the host's line
    (`host_line`) once this process has ended. Why so: the rank's whole life on the host, for
    every app and launcher, at the cost of two samples (one here, one at the end) and a process
    that sleeps in the kernel (a pidfd) in between, waking only to read the ranks' run-queue
    figures (RankSched: SCHED_EVERY_MAX_S at most once a second, milliseconds each). The
    watcher is a grandchild, left to init, so that the app never sees a child it did not start;
    it keeps this process's stdout, where the launcher forwards its line (Open MPI's daemons
    forward a rank's output until every holder closed it). Only where Linux has pidfds (5.3)."""
    daemon = os.getppid()
    try:
        cpus = os.sched_getaffinity(daemon)  # the host's CPUs (the daemon's: no binding restricts it)
    except OSError:
        cpus = os.sched_getaffinity(0)
    start = host_sample(daemon)
    if start is None or not hasattr(os, "pidfd_open"):
        return
    rank, host = os.getpid(), host_name()
    sys.stdout.flush()
    try:
        middle = os.fork()
    except OSError:
        return
    if middle:
        os.waitpid(middle, 0)
        return
    try:
        if os.fork() == 0:
            watch_host(rank, daemon, cpus, start, host)
    finally:
        os._exit(0)  # the middle process, and the watcher once done: never back into main()


def watch_host(rank: int, daemon: int, cpus: set[int], start: dict, host: str) -> None:
    """The watcher: wait (in the kernel) until `rank` has ended, sampling the ranks' run-queue
    figures meanwhile (RankSched), sample again, print the line with its own CPU time
    (`watch_cpu_s`: the workflow's own, on this host, beside the ranks')."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.closerange(3, 1 << 16)  # nothing of the launcher's (its PMI sockets) kept open
    try:
        ended = os.pidfd_open(rank)
    except OSError:
        ended = None  # it has already ended
    sched = RankSched(daemon)
    sched.sample()
    every = SCHED_FIRST_S
    while ended is not None and not select.select([ended], [], [], every)[0]:
        sched.sample()
        every = min(SCHED_EVERY_MAX_S, every * 2)
    sched.sample()  # the rank has ended: a zombie's figures are still there until it is waited for
    # Until the daemon has waited for it: then its time is in the daemon's (cutime), not in the
    # /proc entry of a process that may go while /proc is read (its time would be lost). Not where
    # the daemon has gone (the rank was left to init: nothing to count, nothing to wait for).
    deadline = time.monotonic() + REAP_WAIT_S
    while parent_of(rank) == daemon and time.monotonic() < deadline:
        time.sleep(REAP_POLL_S)
    end = host_sample(daemon)
    if end is not None:
        try:
            own = os.times()
            figures = {**sched.figures(), "watch_cpu_s": round(own.user + own.system, 3)}
            os.write(1, host_line(start, end, cpus, host, figures).encode())
        except OSError:
            pass  # nobody reads the rank's output any more


# ------------------------------------------------- how long the ranks waited for a CPU

# The watcher samples the ranks' threads first after SCHED_FIRST_S, then ever less often (the
# interval doubles) up to every SCHED_EVERY_MAX_S. Why sample at all: a thread's run-queue figures
# go with it when it ends and is waited for, so the last sample before that is what is counted
# (what a thread waited after it is lost: at most one interval of its life, and none of the rank
# the watcher waits on, which is sampled as it ends). Each sample reads /proc once (a node's few
# hundred processes: milliseconds), so the watcher takes well under 1% of a CPU.
SCHED_FIRST_S = 0.05
SCHED_EVERY_MAX_S = 1.0
NS = 1e9


def task_sched(pid: int, proc: str = PROC) -> dict[int, tuple[int, int, int]]:
    """Each thread of process `pid`: its id -> (ns it ran on a CPU, ns it was runnable but waited
    on a run queue: /proc/<pid>/task/<tid>/schedstat's first two fields, and its involuntary
    context switches: status's nonvoluntary_ctxt_switches); {} where it has gone. A thread that
    ends meanwhile is left out (its figures from an earlier sample stand)."""
    found: dict[int, tuple[int, int, int]] = {}
    folder = os.path.join(proc, str(pid), "task")
    try:
        tids = [int(name) for name in os.listdir(folder) if name.isdigit()]
    except OSError:
        return found
    for tid in tids:
        try:
            with open(os.path.join(folder, str(tid), "schedstat")) as handle:
                ran, waited = (int(v) for v in handle.read().split()[:2])
            switches = 0
            with open(os.path.join(folder, str(tid), "status")) as handle:
                for line in handle:
                    if line.startswith("nonvoluntary_ctxt_switches:"):
                        switches = int(line.split()[1])
        except (OSError, ValueError):
            continue
        found[tid] = (ran, waited, switches)
    return found


def ranks_under(daemon: int, table: dict[int, tuple[int, float]]) -> list[int]:
    """The processes under `daemon` (the launcher's daemon on a host), not the daemon itself: the
    host's ranks and whatever they started. The daemon is the launcher's (its progress threads
    wait on sockets), not the point's: its waits are not the ranks'."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _cpu) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(children.get(daemon, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


class RankSched:
    """The run-queue figures of a host's ranks and their threads, kept per thread from sample to
    sample (each thread's last figures stand once it has gone): how long they ran and waited for
    a CPU over their lives, and how often the kernel took the CPU from them."""

    def __init__(self, daemon: int, proc: str = PROC):
        self.daemon, self.proc = daemon, proc
        self.threads: dict[int, tuple[int, int, int]] = {}
        self.samples = 0
        # The MPI library file each rank mapped (for every app: the proof of which MPI it ran on).
        self.libmpi: dict[int, str] = {}

    def sample(self) -> None:
        try:
            table = process_table(self.proc)
        except OSError:
            return
        for pid in ranks_under(self.daemon, table):
            self.threads.update(task_sched(pid, self.proc))
        self.map_libraries(table)
        self.samples += 1

    def map_libraries(self, table: dict[int, tuple[int, float]]) -> None:
        """The MPI library file of each rank (a process the daemon started) not known yet: its own
        mapping, else one of a process under it (a wrapper script's program, e.g. LAMMPS's `lmp`)."""
        for rank in (pid for pid, (parent, _cpu) in table.items() if parent == self.daemon):
            if rank in self.libmpi:
                continue
            for pid in (rank, *ranks_under(rank, table)):
                path = mapped_libmpi(os.path.join(self.proc, str(pid), "maps"))
                if path:
                    self.libmpi[rank] = path
                    break

    def figures(self) -> dict:
        """`ranks_ran_s`, `ranks_waited_s` (seconds, all the ranks' threads summed),
        `ranks_involuntary` (switches), `ranks_threads` and `ranks_samples`; {} where no thread
        was seen (a figure left out, never a zero that is not one)."""
        if not self.threads:
            return {}
        values = list(self.threads.values())
        return {
            "ranks_ran_s": round(sum(v[0] for v in values) / NS, 4),
            "ranks_waited_s": round(sum(v[1] for v in values) / NS, 4),
            "ranks_involuntary": sum(v[2] for v in values),
            "ranks_threads": len(values),
            "ranks_samples": self.samples,
            **({"ranks_libmpi": {str(pid): path for pid, path in self.libmpi.items()}} if self.libmpi else {}),
        }


def main(argv: list[str]) -> int:
    if argv == ["--mpi-library"]:  # asked before a launch (launch.provenance.python_mpi_library)
        print(json.dumps(mpi_library(), sort_keys=True))
        return 0
    if (
        argv[:1] == ["--library-version"] and len(argv) == 2
    ):  # asked after (provenance.name_mapped_libraries, through ask_probe)
        print(json.dumps(library_version(argv[1]), sort_keys=True))
        return 0
    # --also A,B: variables the point set (e.g. an MPICH flag set's) to report besides the prefixes.
    also: tuple[str, ...] = ()
    if argv[:1] == ["--also"] and len(argv) > 1:
        also, argv = tuple(filter(None, argv[1].split(","))), argv[2:]
    # --mpi4py: the app's ranks load MPI through mpi4py; report which library it loads.
    mpi4py = argv[:1] == ["--mpi4py"]
    argv = argv[1:] if mpi4py else argv
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(f"usage: python {sys.argv[0]} [--also NAME,...] [--mpi4py] [--] COMMAND [ARGS...]", file=sys.stderr)
        return 2
    # The node's own scratch folder, not the first node's (a launcher may pass on every variable).
    tmpdir = node_tmpdir(os.environ, parent_environment(os.getppid()))
    if tmpdir:
        os.environ["TMPDIR"] = tmpdir
    # Whole lines, so that lines of ranks sharing the launcher's output do not interleave.
    said = report(also, mpi4py)
    sys.stderr.flush()
    write_report(report_lines(json.dumps(said, sort_keys=True), f"{said['pid']}@{said['host']}"))
    if first_int(LOCAL_RANK_VARIABLES, 0) == 0:  # one watcher per host: its first rank's
        start_host_watch()
    # A rank outlives no launcher: Open MPI's ranks spin on after prterun is killed outright.
    die_with_parent(signal.SIGKILL)
    try:
        os.execvpe(argv[0], argv, without_slurm_step(dict(os.environ)))
    except OSError as error:
        print(f"{RANK_PREFIX}: cannot run {argv[0]}: {error}", flush=True)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def end_rank(code: int | str | None) -> NoReturn:
    """End a rank program that has finished (its lines printed) without the interpreter's
    teardown. Seen in the local study (torch-parallel) and on the two-host Slurm (LitGPT): a rank
    printed its whole result, then died with "terminate called without an active exception"
    (SIGABRT) in pthread_exit. That is CPython's finalization: a daemon thread that wants the GIL
    after it is told to exit with pthread_exit, whose forced unwind through a C++ frame that may
    not throw (pybind11's gil_scoped_release destructor in torch's threads) calls std::terminate
    (pybind/pybind11#2215, pytorch/pytorch#38228). Which thread gets there first is a race,
    hence one run in many. os._exit skips finalization. Nothing is left to do but flush the
    output and end MPI where mpi4py started it (Open MPI counts a rank that ends without
    MPI_Finalize as failed). `code`: what sys.exit would take (a message is printed, and is 1)."""
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
    os._exit(code or 0)
