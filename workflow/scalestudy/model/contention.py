"""When a run was contended: other processes held the CPUs its ranks needed.

A pure rule over what launch.conditions records (other processes' and the hypervisor's share of
the CPUs, the machine's CPUs) and what the point asked for (its ranks on a host × threads per
rank), so that the record (launch) and every verdict (analysis, compare) apply the same one.
"""

from __future__ import annotations

# A run is contended when other processes (and the hypervisor's steal) took more of the
# machine's CPUs than the run left free (the CPUs less those its ranks on this host needed), by
# more than this share of one CPU: a busy-polling rank that loses its CPU waits a whole time
# slice (milliseconds) where a message takes microseconds (README "Contended runs" has the
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
