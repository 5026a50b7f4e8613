"""When a run was contended: other processes held the CPUs its ranks needed.

A pure rule over what launch.conditions records (other processes' and the hypervisor's share of
the CPUs, the machine's CPUs) and what the point asked for (its ranks on a host × threads per
rank), so that the record (launch) and every verdict (analysis, compare) apply the same one.
"""

from __future__ import annotations

# A run is contended when other processes (and the hypervisor's steal) took more of the
# machine's CPUs than the run left free (the CPUs less those its ranks on this host needed), by
# more than this share of one CPU: a busy-polling rank that loses its CPU waits a whole time
# slice (milliseconds) where a message takes microseconds (docs/benchmarks.md "Contended runs" has the
# measurements). The slack keeps the machine's own daemons, a few percent of a CPU, from
# marking every run of a fully used node.
CONTENDED_SLACK_CPUS = 0.1


def contention(other_share, steal_share, machine_cpus, cpus_needed) -> float | None:
    """The CPUs other processes and steal took beyond those the run left free (> 0: that many
    CPUs' worth of the run's own were taken), from what `conditions` records; None where a
    figure is unknown. `cpus_needed`: the run's ranks on this host × threads per rank."""
    figures = [other_share, steal_share, machine_cpus, cpus_needed]
    if any(not isinstance(v, int | float) or v != v for v in figures) or not machine_cpus:
        return None
    free = max(0.0, float(machine_cpus) - float(cpus_needed))
    return (float(other_share) + float(steal_share)) * float(machine_cpus) - free


def contended(other_share, steal_share, machine_cpus, cpus_needed) -> bool:
    """Were the CPUs the run's ranks needed taken by others (`contention` above the slack)?"""
    taken = contention(other_share, steal_share, machine_cpus, cpus_needed)
    return taken is not None and taken > CONTENDED_SLACK_CPUS


# A host's figures count ticks of its CPUs' and its processes' time (USER_HZ: 10 ms): over a
# window shorter than this a few ticks (0.03 CPU over 1 s, under a third of the slack) would
# decide whether a host was shared, so a host watched for less is recorded but not judged.
MIN_HOST_WINDOW_S = 1.0


def contended_hosts(hosts) -> list[str]:
    """The hosts of a run that were contended: the rule above applied to each host's own CPUs
    (what launch.conditions.host_conditions records per host: the CPUs its ranks may use, other
    processes' and steal's share of them, the CPUs its ranks there needed), each watched for at
    least MIN_HOST_WINDOW_S. A host is held to the same slack as a machine: a busy-polling rank
    that loses its CPU on one host holds up every rank that waits for its messages on the others,
    so one shared host slows the whole run."""
    if not hasattr(hosts, "items"):
        return []
    found = []
    for name, seen in hosts.items():
        if not hasattr(seen, "get") or not isinstance(seen.get("wall_s"), int | float):
            continue
        figures = (seen.get("other_cpu_share"), seen.get("steal_share", 0.0), seen.get("cpus"), seen.get("cpus_needed"))
        if seen["wall_s"] >= MIN_HOST_WINDOW_S and contended(*figures):
            found.append(str(name))
    return sorted(found)
