"""The conditions a run records (launch.conditions), against the kernel's own accounting of each
process: a busy loop beside the run is other processes' CPU time, the run's own child is not."""

import os
import subprocess
import sys
import time

from load import background_load
from scalestudy.launch import conditions

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
