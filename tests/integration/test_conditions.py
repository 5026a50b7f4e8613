"""The conditions a run records (launch.conditions), against the kernel's own accounting of each
process: a busy loop beside the run is other processes' CPU time, the run's own child is not."""

import os
import subprocess
import sys
import time

import pytest
from load import background_load
from scalestudy.launch import conditions

# The machine's other load is what these tests measure: run after the suite's other workers (scripts/test.sh).
pytestmark = pytest.mark.quiet

TICKS = os.sysconf("SC_CLK_TCK")
BUSY_1S = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1: pass"


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def test_a_busy_process_beside_the_run_is_other_work_and_the_runs_own_child_is_not():
    with background_load(on_s=30, off_s=0, limit_s=30) as load:
        time.sleep(0.5)
        load_before, before = cpu_seconds(load.pid), conditions.snapshot()
        child = subprocess.Popen([sys.executable, "-c", BUSY_1S])
        _pid, _status, usage = os.wait4(child.pid, 0)
        after, load_after = conditions.snapshot(), cpu_seconds(load.pid)
    seen = conditions.conditions(before, after)
    capacity = (after.taken_s - before.taken_s) * after.cpus
    tick = 2 / TICKS / capacity  # /proc/stat counts whole ticks
    child_share = (usage.ru_utime + usage.ru_stime) / capacity
    assert seen["own_cpu_share"] >= child_share - tick
    assert seen["other_cpu_share"] >= (load_after - load_before) / capacity - 3 * tick
    # The child's own time is not other work: other processes had at most what the child left.
    assert seen["other_cpu_share"] <= 1 - child_share + 3 * tick
    assert seen["load_before"] >= 0 and seen["machine_cpus"] == os.cpu_count()


def alltoall_point(repeat: int):
    from scalestudy.model.point import Point

    params = {"backend": "mpi", "operation": "alltoall", "min_bytes": 8, "max_bytes": 8, "iterations": 8000,
              "warmup": 100}  # fmt: skip
    return Point(study="rq", app="collectives", scaling="strong", nodes=1, ranks_per_node=2, gpus_per_node=0,
                 threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=repeat,
                 walltime="00:02:00", params=params)  # fmt: skip


def test_the_ranks_wait_for_a_cpu_when_busy_processes_share_theirs_and_the_run_says_so(tmp_path):
    # Two busy-polling MPI ranks on 2 CPUs, alone and then beside two busy loops: four runnable
    # tasks on two CPUs, so the kernel makes each wait about half the time. The ranks' own
    # run-queue wait (schedstat, read by each host's watcher) must show it, and mark the run.
    from scalestudy.config import clusters
    from scalestudy.launch.runner import run_point
    from scalestudy.model.contention import RUN_QUEUE_RULE, RUN_QUEUE_WAIT_SHARE
    from scalestudy.model.paths import Layout

    cluster, layout = clusters.load("local"), Layout(str(tmp_path))
    alone = run_point(alltoall_point(1), tmp_path / "alone", cluster, layout=layout)
    with background_load(on_s=300, off_s=0, limit_s=300), background_load(on_s=300, off_s=0, limit_s=300) as last:
        busy_before = cpu_seconds(last.pid)
        shared = run_point(alltoall_point(2), tmp_path / "shared", cluster, layout=layout)
        busy_s = cpu_seconds(last.pid) - busy_before
    for record in (alone, shared):
        assert record["status"] == "ok", record.get("reason")
        seen = record["conditions"]
        assert seen["contention_rule"] == RUN_QUEUE_RULE, seen
        (host,) = seen["hosts"].values()
        # Both ranks and their threads were seen (Open MPI's progress threads beside each rank).
        assert host["ranks_threads"] >= 2 and host["ranks_ran_s"] > 0 and host["watch_cpu_s"] < 0.5, host
        assert 0 <= host["ranks_waited_s"] <= host["wall_s"] * 2 * 1.05, host
    wait = shared["conditions"]["ranks_wait_share"]
    # The busy loop beside the ranks got CPU time (the kernel shared the CPUs four ways)...
    (host,) = shared["conditions"]["hosts"].values()
    # Work outside the test (the suite's other workers, another user) can take the loops' CPU
    # too: where it took what they lacked, the machine could not be shared four ways; said, not failed.
    outside_s = host["other_cpu_share"] * host["cpus"] * host["wall_s"] - 2 * busy_s
    if busy_s <= 0.2 * host["wall_s"] and outside_s >= 2 * (0.2 * host["wall_s"] - busy_s):
        pytest.skip(f"other work beside the test ({outside_s:.1f} CPU s) took the busy loops' share of the CPUs")
    assert busy_s > 0.2 * host["wall_s"], (busy_s, host)
    # ... so the ranks waited: far over the threshold, and more than alone on the same machine.
    assert wait > 2 * RUN_QUEUE_WAIT_SHARE and shared["conditions"]["contended"] is True, shared["conditions"]
    if alone["conditions"]["contended"]:  # the suite's other workers beside "alone": no baseline to beat
        share = alone["conditions"]["ranks_wait_share"]
        pytest.skip(f"work outside the test contended the run meant to be alone (its ranks waited {share:.0%})")
    assert wait > alone["conditions"]["ranks_wait_share"], (alone["conditions"], shared["conditions"])
