"""The conditions a run was measured under, read from /proc (and `nvidia-smi` where present).

A run's timing says as much about the machine as about the point: another process taking
half the CPUs, a virtual machine's steal time, a clock that dropped. Recorded per run
(`metrics.json` `conditions`), they let a verdict between two sides that ran under clearly
different conditions say so instead of "faster"/"slower" (scalestudy.analysis.verdicts).

    before = snapshot()
    ... run ...
    conditions(before, snapshot(), gpus, cpus_needed, host_conditions(host_lines, ranks, threads))

Each host of a multi-node run says what its CPUs did too (`host_conditions`, from the line its
watcher prints: model.rank_probe.start_host_watch), so that a slow host is named.

Linux only; where a file cannot be read its figure is left out (a run is never refused for it).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..model.contention import (
    OLDER_RULE,
    RUN_QUEUE_RULE,
    contended,
    contended_hosts,
    host_contended,
    run_queue_figures,
    wait_share,
    workflow_cpus,
)
from ..model.rank_probe import clock_ticks, cpu_seconds, parse_cpu_list, stat_fields

PROC_STAT = Path("/proc/stat")
PROC_LOADAVG = Path("/proc/loadavg")
CPUFREQ = Path("/sys/devices/system/cpu")
NVIDIA_SMI_QUERY = "clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu"
NVIDIA_SMI_TIMEOUT_S = 10


@dataclass(frozen=True)
class Snapshot:
    """Counters at one instant: the machine's CPU time by kind (seconds, all CPUs summed), the
    CPU time of this process and its waited-for children (the run's own process tree), the
    monotonic clock, the load average, the CPU clocks."""

    taken_s: float
    busy_s: float | None = None  # user + nice + system + irq + softirq (steal apart)
    steal_s: float | None = None
    cpus: int | None = None
    own_s: float = 0.0
    orchestration_s: float | None = None  # CPU of the processes above it (ancestors_cpu_s)
    load1: float | None = None
    mhz: list[float] = field(default_factory=list)


def cpu_times(text: str) -> tuple[float, float, int] | None:
    """(busy, steal, number of CPUs) from /proc/stat's text, in seconds (USER_HZ ticks)."""
    seconds = cpu_seconds(text)
    if "cpu" not in seconds:
        return None
    return *seconds["cpu"], (len(seconds) - 1) or 1


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def clocks_mhz() -> list[float]:
    """Each CPU's current clock (cpufreq's scaling_cur_freq, kHz), where the kernel exposes it."""
    found = []
    for path in sorted(CPUFREQ.glob("cpu[0-9]*/cpufreq/scaling_cur_freq")):
        text = read(path)
        if text and text.strip().isdigit():
            found.append(int(text) / 1000)
    return found


def own_cpu_s() -> float:
    """CPU time of this process and of its children that have ended and been waited for
    (the launcher, and through it the ranks)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def ancestors_cpu_s(pid: int | None = None) -> float:
    """CPU seconds of the processes above this one, up to init (not counted): what started the run
    and waits for it (the `run-point` job step's shell, Snakemake's job step and Snakemake itself,
    or a batch job's script), each live one's own time (/proc/<pid>/stat utime + stime). The
    workflow's own orchestration: while a run is measured its Snakemake polls and logs, and that
    is the workflow's work, not another user's load (issue 42)."""
    total, pid, seen = 0.0, os.getppid() if pid is None else pid, set()
    while pid and pid > 1 and pid not in seen:
        seen.add(pid)
        fields = stat_fields(pid)
        if fields is None:
            break
        total += (int(fields[11]) + int(fields[12])) / clock_ticks()
        pid = int(fields[1])
    return total


def snapshot() -> Snapshot:
    stat = read(PROC_STAT)
    times = cpu_times(stat) if stat else None
    load = read(PROC_LOADAVG)
    return Snapshot(
        taken_s=time.monotonic(),
        busy_s=times[0] if times else None,
        steal_s=times[1] if times else None,
        cpus=times[2] if times else None,
        own_s=own_cpu_s(),
        orchestration_s=ancestors_cpu_s(),
        load1=float(load.split()[0]) if load else None,
        mhz=clocks_mhz(),
    )


def gpu_conditions() -> list[dict]:
    """Per GPU: SM clock and its maximum (MHz), temperature (°C), utilisation (%), where
    `nvidia-smi` is on PATH; [] elsewhere or when it fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    names = ("sm_clock_mhz", "sm_clock_max_mhz", "temperature_c", "utilization_percent")
    for line in out.stdout.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(names):
            continue
        gpus.append({name: float(v) for name, v in zip(names, values, strict=True) if _number(v)})
    return gpus


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def shares(wall_s: float, cpus: int, busy_s: float, steal_s: float, own_s: float, orchestration_s=None) -> dict:
    """CPU seconds over `wall_s` as shares of `cpus` CPUs: other processes' (busy less the run's
    own and, where given, the workflow's orchestration), the hypervisor's steal, the run's own,
    the orchestration's (`orchestration_cpu_share`, where given); {} over no time."""
    if not wall_s > 0 or not cpus:
        return {}
    capacity, own, workflow = wall_s * cpus, max(0.0, own_s), max(0.0, orchestration_s or 0.0)
    found = {
        "other_cpu_share": round(min(1.0, max(0.0, busy_s - own - workflow) / capacity), 4),
        "steal_share": round(min(1.0, max(0.0, steal_s) / capacity), 4),
        "own_cpu_share": round(min(1.0, own / capacity), 4),
    }
    if orchestration_s is not None:
        found["orchestration_cpu_share"] = round(min(1.0, workflow / capacity), 4)
    return found


# What a host's watcher line says of the ranks' run-queue waits and of itself (model.rank_probe).
RUN_QUEUE_FIGURES = ("ranks_waited_s", "ranks_ran_s", "ranks_involuntary", "ranks_threads", "watch_cpu_s")


def host_conditions(host_lines: list[dict], ranks: list[dict], threads_per_rank: int) -> dict[str, dict]:
    """Per host of a run, what other processes did on the CPUs its ranks there may use, from
    each host's watcher line (model.rank_probe.start_host_watch: the CPUs' busy and steal seconds
    and the run's own over its first rank's life) and the ranks' lines (their CPUs):

    - `cpus`: how many CPUs the host's ranks may use (the union of their affinities);
    - `other_cpu_share`, `steal_share`, `own_cpu_share`: as the machine's (`conditions`), over
      those CPUs only;
    - `cpus_needed`: the host's ranks × threads per rank; `wall_s`: how long it was watched;
    - `ranks_waited_s`, `ranks_ran_s`: seconds the host's ranks and their threads (all summed)
      waited on a run queue for a CPU and ran on one (/proc/<pid>/task/<tid>/schedstat);
      `ranks_wait_share`: the wait over the CPU time they needed (wall × cpus_needed);
      `ranks_involuntary`: the times the kernel took a CPU from them; `ranks_threads`; and
      `watch_cpu_s`, the CPU time of the host's watcher (the workflow's own, not another's);
    - `contended`: the host's (model.contention.host_contended: the run-queue rule where its
      line has the figures, else the older rule over the host's CPUs).

    Why other processes' time on the ranks' CPUs and not the ranks' own CPU time over the wall
    time: a rank that blocks (a socket, a GPU, a file) uses little CPU on a quiet host, so a low
    own share says nothing by itself; time others took on the very CPUs the ranks may use is
    what a shared host is, the same figure the machine-wide rule already judges, on the host's
    own CPUs. A host without a watcher line (the launcher did not forward it) is left out."""
    found: dict[str, dict] = {}
    for line in host_lines:
        host = line.get("host")
        mine = [rank for rank in ranks if rank.get("host") == host]
        allowed = set().union(*(parse_cpu_list(rank["cpus"]) for rank in mine if rank.get("cpus")))
        per_cpu = line.get("cpus") or {}
        counted = [per_cpu[str(cpu)] for cpu in sorted(allowed) if str(cpu) in per_cpu] if allowed else []
        if not host or not counted or len(counted) < len(allowed):
            continue
        busy, steal = sum(c[0] for c in counted), sum(c[1] for c in counted)
        figures = shares(line.get("wall_s") or 0.0, len(counted), busy, steal, line.get("run_s") or 0.0)
        if not figures:
            continue
        figures |= {"cpus": len(counted), "cpus_needed": len(mine) * threads_per_rank, "wall_s": line["wall_s"]}
        figures |= {name: line[name] for name in RUN_QUEUE_FIGURES if isinstance(line.get(name), int | float)}
        share = wait_share(figures.get("ranks_waited_s"), figures["wall_s"], figures["cpus_needed"])
        if share is not None:
            figures["ranks_wait_share"] = round(share, 4)
        figures["contended"] = contended_hosts({host: figures}) == [host]
        found[host] = figures
    return found


def conditions(
    before: Snapshot,
    after: Snapshot,
    gpus: list[dict] | None = None,
    cpus_needed: int | None = None,
    hosts: dict[str, dict] | None = None,
) -> dict:
    """What the machine did during the run (between the two snapshots):

    - `other_cpu_share`: CPU time used by processes outside the run's own tree and outside the
      workflow's orchestration, as a share of all the CPUs over the run's wall time (0: nothing
      else ran; 1: every CPU was busy with other work). The run's own time is its process's and
      its waited-for children's; `orchestration_cpu_share`: that of the processes that started
      the run and wait for it (`ancestors_cpu_s`: Snakemake's job step, Snakemake), apart.
    - `steal_share`: CPU time the hypervisor gave to other guests, as the same share.
    - `load_before`, `load_after`: the 1-minute load average.
    - `cpu_mhz_mean`, `cpu_mhz_min`: the CPUs' clocks at the end (where readable).
    - `gpus`: per GPU, clocks, temperature, utilisation at the end (`nvidia-smi`).
    - `cpus_needed` (where given: the run's ranks on this host × threads per rank) and
      `contended`: whether the ranks waited for CPUs others held, on any host of `hosts`
      (model.contention.host_contended); where no host has the run-queue figures (no watcher
      line), by the older rule: other processes took CPUs the ranks needed (`contended`);
    - `contention_rule`: which of the two judged it (model.contention RUN_QUEUE_RULE, OLDER_RULE);
    - `ranks_waited_s` (all hosts summed), `ranks_wait_share` (the largest host's),
      `ranks_involuntary` (summed): how long the ranks waited for a CPU, and what share of the
      CPU time they needed that is;
    - `hosts`: where given, each host's own (`host_conditions`): a slow host by name.

    Other processes' share is still recorded (a verdict between sides measured under clearly
    different loads says so), but it judges no run that has the run-queue figures: it counts the
    workflow's own orchestration (Snakemake's job step, the runner, the watcher) and the
    machine's daemons, which run beside the ranks without making them wait (issue 42).
    """
    out: dict = {"load_before": before.load1, "load_after": after.load1}
    if before.busy_s is not None and after.busy_s is not None and after.cpus:
        busy, steal = after.busy_s - before.busy_s, (after.steal_s or 0.0) - (before.steal_s or 0.0)
        orchestration = None
        if after.orchestration_s is not None and before.orchestration_s is not None:
            orchestration = after.orchestration_s - before.orchestration_s
        own = after.own_s - before.own_s
        out.update(shares(after.taken_s - before.taken_s, after.cpus, busy, steal, own, orchestration))
    if "other_cpu_share" in out:
        out["machine_cpus"] = after.cpus
    waits = run_queue_figures(hosts)
    if cpus_needed is not None and "other_cpu_share" in out:
        out["cpus_needed"] = cpus_needed
        if not waits:
            out["contended"] = contended(out["other_cpu_share"], out["steal_share"], after.cpus, cpus_needed)
    if hosts:
        # A run is contended where any of its hosts was (model.contention.contended_hosts).
        out["hosts"] = hosts
        workflow = workflow_cpus(out)
        for seen in hosts.values():
            seen["contended"] = host_contended(seen, workflow)
        out["contended"] = bool(out.get("contended")) or bool(contended_hosts(hosts, workflow))
        out.update(run_queue_summary(hosts))
    if "contended" in out:
        out["contention_rule"] = RUN_QUEUE_RULE if waits else OLDER_RULE
    if after.mhz:
        out["cpu_mhz_mean"] = round(sum(after.mhz) / len(after.mhz), 1)
        out["cpu_mhz_min"] = round(min(after.mhz), 1)
    if gpus:
        out["gpus"] = gpus
    return {k: v for k, v in out.items() if v is not None}


def run_queue_summary(hosts: dict[str, dict]) -> dict:
    """A run's run-queue figures over its hosts: the seconds its ranks waited and the involuntary
    switches (summed), the largest host's wait share (the slowest host holds up the rest); {}
    where no host has them."""
    seen = [h for h in hosts.values() if isinstance(h.get("ranks_waited_s"), int | float)]
    if not seen:
        return {}
    found = {
        "ranks_waited_s": round(sum(h["ranks_waited_s"] for h in seen), 4),
        "ranks_involuntary": sum(int(h.get("ranks_involuntary") or 0) for h in seen),
    }
    shares = [h["ranks_wait_share"] for h in seen if isinstance(h.get("ranks_wait_share"), int | float)]
    if shares:
        found["ranks_wait_share"] = max(shares)
    return found
