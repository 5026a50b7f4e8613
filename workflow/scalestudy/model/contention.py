"""When a run was contended: its ranks waited for a CPU that something else held.

A pure rule over what launch.conditions records, so that the record (launch) and every verdict
(analysis, compare) apply the same one. Two rules, by what a record holds:

- the run-queue rule (records with `ranks_waited_s` per host: model.rank_probe.RankSched): the
  time the point's own ranks and their threads were runnable but waited on a run queue, as a
  share of their run (`wait_share`), beyond what the point's own oversubscription explains
  (`self_wait_share`), above RUN_QUEUE_WAIT_SHARE, while processes neither of the run nor of
  the workflow (`others_cpus`) held more than CONTENDED_SLACK_CPUS of the host's CPUs; or the
  hypervisor stole more than CONTENDED_SLACK_CPUS of them;
- the older rule (records without it, written before the run-queue figures): other processes'
  and the hypervisor's share of the machine's CPUs beyond those the run left free
  (`contention`), above CONTENDED_SLACK_CPUS. Kept so that an older record is judged as it was,
  and the verdicts that rest on it say which rule judged it (OLDER_RULE).

Why the ranks' waits and not others' CPU time: the CPU time nobody in the run's process tree
used counts the machine's daemons, Snakemake's job step, the runner, the probe's watcher and any
process of the run that was not waited for, and a share of a few percent of the machine marked
most runs of an idle machine contended (issue 42). A rank that waited for a CPU is what slows a
run; a process that ran on a CPU the ranks did not want slows nothing. The kernel keeps the wait
per thread (/proc/<pid>/task/<tid>/schedstat, its second field), in nanoseconds.
"""

from __future__ import annotations

# The older rule: a run is contended when other processes (and the hypervisor's steal) took more
# of the machine's CPUs than the run left free by more than this share of one CPU (docs/
# benchmarks.md "Contended runs" has the measurements it rests on). Also the steal the run-queue
# rule allows (steal is time the guest's scheduler counts as the rank's, not as a wait).
CONTENDED_SLACK_CPUS = 0.1

# The run-queue rule: a run is contended when its ranks waited for a CPU for more than this share
# of their run, beyond their own oversubscription. A rank that shares its CPU with one busy
# process waits about half its run (two runnable tasks on one CPU); a busy-polling MPI rank that
# loses its CPU for a time slice loses milliseconds where a message takes microseconds. What the
# workflow's own processes cost a rank is their wakes on its CPU: the watcher's under 1% of one
# CPU, Snakemake's job step polling. docs/benchmarks.md "Run-queue waits" (benchmarks/run_queue.py,
# the README's study on the idle machine) has the measurements.
RUN_QUEUE_WAIT_SHARE = 0.05

# What each rule is called where a record, a table or a verdict says which one judged a run.
RUN_QUEUE_RULE = "run-queue wait"
OLDER_RULE = "the older rule (others' share of the CPUs: records without run-queue figures)"

# A host's figures count ticks of its CPUs' and its processes' time (USER_HZ: 10 ms): over a
# window shorter than this a few ticks (0.03 CPU over 1 s, under a third of the slack) would
# decide whether a host was shared, so a host watched for less is recorded but not judged.
MIN_HOST_WINDOW_S = 1.0


def number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def contention(other_share, steal_share, machine_cpus, cpus_needed) -> float | None:
    """The older rule's figure: the CPUs other processes and steal took beyond those the run left
    free (> 0: that many CPUs' worth of the run's own were taken), from what `conditions`
    records; None where a figure is unknown. `cpus_needed`: the run's ranks on this host ×
    threads per rank."""
    figures = [other_share, steal_share, machine_cpus, cpus_needed]
    if any(not isinstance(v, int | float) or v != v for v in figures) or not machine_cpus:
        return None
    free = max(0.0, float(machine_cpus) - float(cpus_needed))
    return (float(other_share) + float(steal_share)) * float(machine_cpus) - free


def contended(other_share, steal_share, machine_cpus, cpus_needed) -> bool:
    """The older rule: were the CPUs the run's ranks needed taken by others (`contention` above
    the slack)?"""
    taken = contention(other_share, steal_share, machine_cpus, cpus_needed)
    return taken is not None and taken > CONTENDED_SLACK_CPUS


def wait_share(waited_s, wall_s, cpus_needed) -> float | None:
    """The ranks' wait for a CPU as a share of their run: the seconds their threads were runnable
    but waited (all summed) over the seconds of CPU they needed (wall × ranks on the host ×
    threads per rank); None where a figure is unknown."""
    if not all(number(v) for v in (waited_s, wall_s, cpus_needed)) or wall_s <= 0 or cpus_needed <= 0:
        return None
    return max(0.0, float(waited_s)) / (float(wall_s) * float(cpus_needed))


def self_wait_share(cpus, cpus_needed) -> float:
    """The share of their run the ranks wait for each other where the point asks for more CPUs
    than its ranks may use (ranks × threads > the CPUs of their affinity: they take turns), which
    no other process causes; 0 where each has its own."""
    if not number(cpus) or not number(cpus_needed) or cpus <= 0 or cpus_needed <= cpus:
        return 0.0
    return 1.0 - float(cpus) / float(cpus_needed)


def waited_beyond(seen) -> float | None:
    """A host's wait share beyond its own oversubscription (`wait_share` − `self_wait_share`), from
    what launch.conditions.host_conditions records for it; None where the host has no run-queue
    figures (an older record)."""
    if not hasattr(seen, "get") or not number(seen.get("ranks_waited_s")):
        return None
    share = wait_share(seen["ranks_waited_s"], seen.get("wall_s"), seen.get("cpus_needed"))
    return None if share is None else share - self_wait_share(seen.get("cpus"), seen.get("cpus_needed"))


def others_cpus(seen, workflow_cpus: float = 0.0) -> float:
    """CPUs (a share of one each) that processes neither of the run nor of the workflow held on a
    host's CPUs: its others' share, less its watcher's CPU time and the workflow's orchestration
    (`workflow_cpus`: Snakemake and its job step, the runner; launch.conditions)."""
    cpus = seen.get("cpus") if number(seen.get("cpus")) else 0
    others = seen.get("other_cpu_share") if number(seen.get("other_cpu_share")) else 0.0
    watcher = seen.get("watch_cpu_s", 0.0) / seen["wall_s"] if number(seen.get("watch_cpu_s")) else 0.0
    return others * cpus - watcher - workflow_cpus


def host_contended(seen, workflow_cpus: float = 0.0) -> bool:
    """Was this host contended: by the run-queue rule where it has the figures, else by the older
    rule over the CPUs its ranks may use; a host watched for less than MIN_HOST_WINDOW_S is not
    judged. The run-queue rule asks for both: the ranks waited (beyond their own
    oversubscription) and something that is neither the run nor the workflow held more than
    CONTENDED_SLACK_CPUS of the host's CPUs (`others_cpus`). Ranks that fill every core wait
    for the workflow's own wakes and for each other's threads (a 2-rank torch-parallel point
    on 2 cores: 8-18% on the idle machine), which no other user caused."""
    if not hasattr(seen, "get") or not number(seen.get("wall_s")) or seen["wall_s"] < MIN_HOST_WINDOW_S:
        return False
    beyond = waited_beyond(seen)
    if beyond is not None:
        stolen = seen.get("steal_share", 0.0) if number(seen.get("steal_share")) else 0.0
        cpus = seen.get("cpus") if number(seen.get("cpus")) else 0
        held = others_cpus(seen, workflow_cpus) > CONTENDED_SLACK_CPUS
        return (beyond > RUN_QUEUE_WAIT_SHARE and held) or stolen * cpus > CONTENDED_SLACK_CPUS
    figures = (seen.get("other_cpu_share"), seen.get("steal_share", 0.0), seen.get("cpus"), seen.get("cpus_needed"))
    return contended(*figures)


def run_queue_figures(hosts) -> bool:
    """Does a run's record hold the run-queue figures (any host with `ranks_waited_s`)? Where not,
    its contention is the older rule's (OLDER_RULE)."""
    return hasattr(hosts, "values") and any(waited_beyond(seen) is not None for seen in hosts.values())


def contended_hosts(hosts, workflow_cpus: float = 0.0) -> list[str]:
    """The hosts of a run that were contended (`host_contended`, each on its own figures: what
    launch.conditions.host_conditions records per host). A host is held to the same rule as a
    machine: a busy-polling rank that loses its CPU on one host holds up every rank that waits
    for its messages on the others, so one shared host slows the whole run."""
    if not hasattr(hosts, "items"):
        return []
    return sorted(str(name) for name, seen in hosts.items() if host_contended(seen, workflow_cpus))


def workflow_cpus(conditions) -> float:
    """The CPUs the workflow's orchestration held during a run (its share of the machine's CPUs
    times their number, launch.conditions), 0 where a record does not say."""
    share, cpus = conditions.get("orchestration_cpu_share"), conditions.get("machine_cpus")
    return share * cpus if number(share) and number(cpus) else 0.0
