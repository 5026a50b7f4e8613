"""A slow host of a multi-node run: what each host's watcher counts (model.rank_probe), the
figures per host (launch.conditions.host_conditions), the rule that names it
(model.contention.contended_hosts) and where it shows (runs.csv, the report)."""

import os

import pandas as pd
import pytest
from scalestudy.analysis.records import run_row
from scalestudy.launch.conditions import Snapshot, conditions, cpu_times, host_conditions
from scalestudy.model.contention import MIN_HOST_WINDOW_S, OLDER_RULE, contended_hosts
from scalestudy.model.rank_probe import (
    cpu_seconds,
    host_line,
    host_lines,
    parent_of,
    process_table,
    tree_cpu_s,
)

TICKS = os.sysconf("SC_CLK_TCK")
STAT = (
    f"cpu  {3 * TICKS} 0 {TICKS} 900 5 0 0 {TICKS} 0 0\n"
    f"cpu0 {2 * TICKS} 0 0 400 5 0 0 0 0 0\n"
    f"cpu1 {TICKS} 0 {TICKS} 500 0 0 0 {TICKS} 0 0\n"
    "intr 1 2 3\n"
)


def test_proc_stat_is_read_per_cpu_and_for_the_machine_in_seconds():
    # user nice system idle iowait irq softirq steal: busy = user + nice + system + irq + softirq.
    assert cpu_seconds(STAT) == {"cpu": (4.0, 1.0), "0": (2.0, 0.0), "1": (2.0, 1.0)}
    assert cpu_times(STAT) == (4.0, 1.0, 2)  # the machine's figures read the same lines


def write_stat(proc, pid: int, name: str, parent: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0):
    folder = proc / str(pid)
    folder.mkdir()
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
    rest = f"S {parent} 1 1 0 -1 0 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0"
    (folder / "stat").write_text(f"{pid} ({name}) {rest}\n")


def test_the_runs_processes_on_a_host_are_its_daemon_and_everything_under_it(tmp_path):
    write_stat(tmp_path, 1, "init", 0, 50, 50)
    write_stat(tmp_path, 10, "prted", 1, TICKS, 0, cutime=TICKS)  # 1 s its own, 1 s of an ended child
    write_stat(tmp_path, 11, "python) (rank", 10, 3 * TICKS, TICKS)  # a name with parentheses
    write_stat(tmp_path, 12, "helper", 11, TICKS, 0)
    write_stat(tmp_path, 20, "busy", 1, 9 * TICKS, 0)  # another process of the host: not the run's
    (tmp_path / "self").mkdir()
    table = process_table(str(tmp_path))
    assert table[11] == (10, 4.0) and 20 in table and set(table) == {1, 10, 11, 12, 20}
    assert tree_cpu_s(10, table) == 7.0
    assert tree_cpu_s(99, table) is None
    assert parent_of(11, str(tmp_path)) == 10 and parent_of(99, str(tmp_path)) is None


def test_a_hosts_line_reads_back_with_each_cpus_time_over_the_window():
    start = {"taken_s": 100.0, "run_s": 1.0, "cpus": {"0": (10.0, 0.0), "1": (20.0, 1.0), "cpu": (30.0, 1.0)}}
    end = {"taken_s": 104.0, "run_s": 5.0, "cpus": {"0": (14.0, 0.0), "1": (23.5, 1.5), "cpu": (37.5, 1.5)}}
    line = host_line(start, end, {0, 1}, "n2")
    assert line.startswith("scalestudy-host {") and line.endswith("}\n")
    assert host_lines("app output\n" + line + "scalestudy-host {cut\nscalestudy-host [1]") == [
        {"host": "n2", "wall_s": 4.0, "run_s": 4.0, "cpus": {"0": [4.0, 0.0], "1": [3.5, 0.5]}}
    ]


def ranks(*hosts_and_cpus):
    return [{"rank": i, "host": host, "cpus": cpus} for i, (host, cpus) in enumerate(hosts_and_cpus)]


def test_a_host_whose_cpu_another_process_shared_is_named():
    # n1: its rank had its CPU to itself; n2: a busy process took half of its one CPU.
    lines = [
        {"host": "n1", "wall_s": 10.0, "run_s": 9.8, "cpus": {"0": [9.9, 0.0]}},
        {"host": "n2", "wall_s": 10.0, "run_s": 5.0, "cpus": {"1": [10.0, 0.0]}},
    ]
    seen = host_conditions(lines, ranks(("n1", "0"), ("n2", "1")), threads_per_rank=1)
    assert seen["n2"] == {
        "other_cpu_share": 0.5, "steal_share": 0.0, "own_cpu_share": 0.5, "cpus": 1, "cpus_needed": 1,
        "wall_s": 10.0, "contended": True,
    }  # fmt: skip
    assert seen["n1"]["other_cpu_share"] == pytest.approx(0.01) and seen["n1"]["contended"] is False
    assert contended_hosts(seen) == ["n2"]


def test_only_the_cpus_the_hosts_ranks_may_use_count():
    # Two ranks bound to CPUs 0 and 1 of a 4-CPU host; CPUs 2-3 busy with another job: not theirs.
    line = {"host": "n1", "wall_s": 10.0, "run_s": 20.0, "cpus": {str(c): [10.0, 0.0] for c in range(4)}}
    seen = host_conditions([line], ranks(("n1", "0"), ("n1", "1")), threads_per_rank=1)["n1"]
    assert seen["cpus"] == 2 and seen["cpus_needed"] == 2 and seen["other_cpu_share"] == 0.0
    assert not seen["contended"]
    # Unbound (each may use all 4), the same busy CPUs leave the 2 ranks 2 free: not contended either.
    unbound = host_conditions([line], ranks(("n1", "0-3"), ("n1", "0-3")), threads_per_rank=1)["n1"]
    assert unbound["cpus"] == 4 and unbound["other_cpu_share"] == 0.5 and not unbound["contended"]
    # A hypervisor that stole a CPU's worth on the ranks' CPUs is contention as well.
    stolen = {**line, "cpus": {"0": [10.0, 5.0], "1": [10.0, 5.0]}}
    assert host_conditions([stolen], ranks(("n1", "0"), ("n1", "1")), 1)["n1"]["contended"]


def test_a_host_without_its_line_or_watched_too_briefly_is_not_judged():
    short = {"host": "n2", "wall_s": MIN_HOST_WINDOW_S / 2, "run_s": 0.0, "cpus": {"1": [0.5, 0.0]}}
    seen = host_conditions([short], ranks(("n1", "0"), ("n2", "1")), threads_per_rank=1)
    assert list(seen) == ["n2"] and seen["n2"]["other_cpu_share"] == 1.0 and seen["n2"]["contended"] is False
    # A line that lacks a CPU the ranks may use, or names no rank's host: left out.
    assert host_conditions([{**short, "cpus": {"0": [0.5, 0.0]}}], ranks(("n2", "1")), 1) == {}
    assert host_conditions([short], ranks(("n1", "0")), 1) == {}
    assert contended_hosts(None) == [] and contended_hosts({"n1": "?"}) == []


def test_a_run_with_a_slow_host_is_contended_in_its_record_and_in_runs_csv():
    before = Snapshot(taken_s=0.0, busy_s=100.0, steal_s=0.0, cpus=2, own_s=0.0)
    after = Snapshot(taken_s=10.0, busy_s=110.0, steal_s=0.0, cpus=2, own_s=10.0)  # the first host: quiet
    hosts = {
        "n1": {"other_cpu_share": 0.0, "steal_share": 0.0, "cpus": 1, "cpus_needed": 1, "wall_s": 9.0},
        "n2": {"other_cpu_share": 0.48, "steal_share": 0.0, "cpus": 1, "cpus_needed": 1, "wall_s": 9.0},
    }
    record = conditions(before, after, cpus_needed=1, hosts=hosts)
    assert record["contended"] is True and record["hosts"] == hosts
    assert conditions(before, after, cpus_needed=1)["contended"] is False
    point = {"ranks_per_node": 1, "threads_per_rank": 1, "ranks": 2, "nodes": 2}
    row = run_row({"point": point, "status": "ok", "conditions": record})
    assert row["contended"] is True and row["contended_hosts"] == "n2" and row["contended_cpus"] < 0
    quiet = run_row({"point": point, "status": "ok", "conditions": {**record, "hosts": {"n1": hosts["n1"]}}})
    assert quiet["contended"] is False and "contended_hosts" not in quiet


def test_the_report_names_the_slow_host():
    from scalestudy.presentation.runs_section import contended_line

    runs = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok"],
            "contended": [True, True, False],
            "other_cpu_share": [0.02, 0.03, 0.02],
            "contended_hosts": ["n2", "n2, n3", None],
        }
    )
    line = contended_line(runs)
    assert line.startswith("2 of the 3 successful runs were contended")
    assert (
        f"(their share of the CPUs 2%–3%, by {OLDER_RULE}; host n2's CPUs shared in 2 of them; host n3's CPUs shared"
        " in 1 of them)" in line
    )
