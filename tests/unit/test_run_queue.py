"""A run is contended when its ranks waited for a CPU (issue 42): what each host's watcher reads
of the ranks' threads (model.rank_probe: schedstat, involuntary switches), the figures per host
and per run (launch.conditions), the rule (model.contention), and how runs.csv and a verdict
judge a record with those figures and an older one without them."""

import json
import os

import pandas as pd
import pytest
from scalestudy.analysis.records import run_row
from scalestudy.analysis.scaling import scaling
from scalestudy.analysis.verdicts import variants
from scalestudy.launch.conditions import Snapshot, ancestors_cpu_s, conditions, host_conditions
from scalestudy.model.contention import (
    OLDER_RULE,
    RUN_QUEUE_RULE,
    RUN_QUEUE_WAIT_SHARE,
    contended_hosts,
    host_contended,
    self_wait_share,
    wait_share,
)
from scalestudy.model.rank_probe import RankSched, host_line, host_lines, ranks_under, task_sched

TICKS = os.sysconf("SC_CLK_TCK")


def write_process(proc, pid: int, parent: int, threads: dict[int, tuple[int, int, int]]):
    """A fake /proc/<pid>: its stat (parent) and per thread schedstat (ran ns, waited ns) and status."""
    folder = proc / str(pid)
    (folder / "task").mkdir(parents=True)
    (folder / "stat").write_text(f"{pid} (p) S {parent} 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0\n")
    for tid, (ran, waited, switches) in threads.items():
        (folder / "task" / str(tid)).mkdir()
        (folder / "task" / str(tid) / "schedstat").write_text(f"{ran} {waited} 7\n")
        (folder / "task" / str(tid) / "status").write_text(
            f"Name:\tp\nvoluntary_ctxt_switches:\t3\nnonvoluntary_ctxt_switches:\t{switches}\n"
        )


def test_the_watcher_counts_the_ranks_threads_not_the_daemon_nor_other_processes(tmp_path):
    write_process(tmp_path, 1, 0, {1: (10**9, 10**9, 1)})
    write_process(tmp_path, 10, 1, {10: (5 * 10**9, 9 * 10**9, 99)})  # the launcher's daemon: not a rank
    write_process(tmp_path, 11, 10, {11: (2 * 10**9, 10**8, 4), 13: (10**9, 5 * 10**7, 1)})  # a rank, 2 threads
    write_process(tmp_path, 12, 11, {12: (10**9, 5 * 10**7, 2)})  # a process the rank started
    write_process(tmp_path, 20, 1, {20: (9 * 10**9, 10**9, 50)})  # another user's busy loop
    assert task_sched(11, str(tmp_path)) == {11: (2 * 10**9, 10**8, 4), 13: (10**9, 5 * 10**7, 1)}
    assert task_sched(99, str(tmp_path)) == {}
    table = {pid: (parent, 0.0) for pid, parent in ((1, 0), (10, 1), (11, 10), (12, 11), (20, 1))}
    assert sorted(ranks_under(10, table)) == [11, 12]
    sched = RankSched(10, str(tmp_path))
    sched.sample()
    # A thread that ends keeps its last figures: a later sample that no longer sees it counts them.
    (tmp_path / "11" / "task" / "13" / "schedstat").unlink()
    sched.sample()
    assert sched.figures() == {
        "ranks_ran_s": 4.0, "ranks_waited_s": 0.2, "ranks_involuntary": 7, "ranks_threads": 3, "ranks_samples": 2,
    }  # fmt: skip
    assert RankSched(99, str(tmp_path)).figures() == {}  # nothing seen: no figure, not a zero


def test_a_hosts_line_carries_the_ranks_waits_and_its_share_of_their_run():
    start = {"taken_s": 0.0, "run_s": 0.0, "cpus": {"0": (0.0, 0.0), "1": (0.0, 0.0)}}
    end = {"taken_s": 10.0, "run_s": 18.0, "cpus": {"0": (10.0, 0.0), "1": (10.0, 0.0)}}
    waits = {"ranks_waited_s": 0.2, "ranks_ran_s": 19.5, "ranks_involuntary": 30, "ranks_threads": 4,
             "watch_cpu_s": 0.02}  # fmt: skip
    lines = host_lines(host_line(start, end, {0, 1}, "vm", waits))
    seen = host_conditions(lines, [{"host": "vm", "cpus": "0"}, {"host": "vm", "cpus": "1"}], threads_per_rank=1)
    # 0.2 s waited over 2 ranks × 10 s: 1% of their run. Others' 2 s of the CPUs (the job step,
    # the machine's daemons) made no rank wait: not contended, where the older rule marked it.
    assert seen["vm"]["ranks_wait_share"] == 0.01 and seen["vm"]["other_cpu_share"] == 0.1
    assert seen["vm"]["watch_cpu_s"] == 0.02 and seen["vm"]["contended"] is False
    older = {k: v for k, v in seen["vm"].items() if not k.startswith("ranks_")}
    assert host_contended(older) is True  # the same host by the older rule: 0.2 CPU > the slack
    loaded = host_conditions(
        host_lines(host_line(start, end, {0, 1}, "vm", {**waits, "ranks_waited_s": 6.0})),
        [{"host": "vm", "cpus": "0-1"}] * 2,
        threads_per_rank=1,
    )
    assert loaded["vm"]["ranks_wait_share"] == 0.3 and loaded["vm"]["contended"] is True


def test_the_rule_is_the_share_waited_beyond_the_points_own_oversubscription():
    assert wait_share(1.0, 10.0, 2) == 0.05 and wait_share(1.0, 0.0, 2) is None and wait_share(None, 1, 1) is None
    assert self_wait_share(2, 2) == 0.0 and self_wait_share(2, 4) == 0.5 and self_wait_share(None, 4) == 0.0
    # Another process held half a CPU of the host's two: the waits decide.
    host = {"wall_s": 10.0, "cpus": 2, "cpus_needed": 2, "steal_share": 0.0, "other_cpu_share": 0.25}
    just_over = (RUN_QUEUE_WAIT_SHARE + 0.001) * 20
    assert not host_contended({**host, "ranks_waited_s": RUN_QUEUE_WAIT_SHARE * 20})
    assert host_contended({**host, "ranks_waited_s": just_over})
    # The same waits with nobody else on the CPUs but the workflow (its orchestration, the
    # watcher): ranks that fill every core wait for those wakes and for each other's threads
    # (the idle machine's README study: 2-rank torch-parallel 8-18%), which no other user caused.
    alone = {**host, "other_cpu_share": 0.06, "watch_cpu_s": 0.1, "ranks_waited_s": 0.15 * 20}
    assert host_contended(alone) and not host_contended(alone, workflow_cpus=0.05)
    assert not host_contended({**alone, "other_cpu_share": 0.04})
    # 4 ranks on 2 CPUs take turns: half their run waiting is their own doing, not another's.
    assert not host_contended({**host, "cpus_needed": 4, "ranks_waited_s": 0.5 * 40})
    assert host_contended({**host, "cpus_needed": 4, "ranks_waited_s": (0.5 + RUN_QUEUE_WAIT_SHARE + 0.01) * 40})
    # The hypervisor's steal is not a wait the guest sees: held to the slack of the older rule.
    assert host_contended({**host, "ranks_waited_s": 0.0, "steal_share": 0.1})
    # Too short a window is not judged; bad figures judge nothing.
    assert not host_contended({**host, "wall_s": 0.5, "ranks_waited_s": 5.0})
    assert contended_hosts({"a": {**host, "ranks_waited_s": 9.0}, "b": {**host, "ranks_waited_s": 0.0}}) == ["a"]
    assert contended_hosts(None) == [] and not host_contended("x")


def test_a_run_with_the_waits_is_judged_by_them_and_says_which_rule():
    before = Snapshot(taken_s=0.0, busy_s=100.0, steal_s=0.0, cpus=2, own_s=0.0)
    after = Snapshot(taken_s=10.0, busy_s=119.0, steal_s=0.0, cpus=2, own_s=15.0)  # others: 4 of 20 CPU-s
    quiet = {"cpus": 2, "cpus_needed": 2, "wall_s": 10.0, "other_cpu_share": 0.2, "steal_share": 0.0,
             "ranks_waited_s": 0.1, "ranks_involuntary": 5, "ranks_wait_share": 0.005, "contended": False}  # fmt: skip
    seen = conditions(before, after, cpus_needed=2, hosts={"vm": quiet})
    assert seen["contended"] is False and seen["contention_rule"] == RUN_QUEUE_RULE
    assert (seen["ranks_waited_s"], seen["ranks_wait_share"], seen["ranks_involuntary"]) == (0.1, 0.005, 5)
    assert conditions(before, after, cpus_needed=2)["contended"] is True  # no watcher line: the older rule
    loaded = conditions(before, after, cpus_needed=2, hosts={"vm": {**quiet, "ranks_waited_s": 4.0}})
    assert loaded["contended"] is True and loaded["ranks_wait_share"] == 0.005  # the host's own figure


def record(waited_s=None, other=0.3):
    host = {"cpus": 2, "cpus_needed": 2, "wall_s": 10.0, "other_cpu_share": other, "steal_share": 0.0}
    measured = {"other_cpu_share": other, "steal_share": 0.0, "machine_cpus": 2, "hosts": {"vm": host}}
    if waited_s is not None:
        host |= {"ranks_waited_s": waited_s, "ranks_wait_share": waited_s / 20}
        measured |= {"ranks_waited_s": waited_s, "ranks_wait_share": waited_s / 20}
    point = {"ranks_per_node": 2, "threads_per_rank": 1, "ranks": 2, "nodes": 1}
    return {"point": point, "status": "ok", "conditions": measured}


def test_runs_csv_judges_a_record_by_the_rule_its_figures_allow():
    # The same others' share (0.3 of 2 CPUs: 0.6 CPU over none left free): with the waits of a
    # quiet run not contended; an older record without them, by the older rule, and says so.
    quiet, older, loaded = run_row(record(0.1)), run_row(record(None)), run_row(record(5.0))
    assert quiet["contended"] is False and quiet["contention_rule"] == RUN_QUEUE_RULE
    assert quiet["ranks_wait_share"] == 0.005 and quiet["contended_cpus"] == pytest.approx(0.6)
    assert older["contended"] is True and older["contention_rule"] == OLDER_RULE
    assert loaded["contended"] is True and loaded["contended_hosts"] == "vm"
    # The record itself is not changed by reading it (a record's definition never moves).
    kept = record(None)
    before = json.dumps(kept, sort_keys=True)
    run_row(kept)
    assert json.dumps(kept, sort_keys=True) == before


def runs(values_a, values_b, waited):
    """runs.csv of an A/A study read from records: identical sides, 4 runs each, interleaved."""
    rows = []
    for i, (a, b) in enumerate(zip(values_a, values_b, strict=True)):
        for side, value, minute in (("default", a, 2 * i), ("x", b, 2 * i + 1)):
            row = run_row(record(waited[len(rows)], other=0.3))
            row |= {"study": "s", "app": "pingpong", "scaling": "strong", "variant": f"pp mpi-{side}",
                    "mpi_flag_set": side, "nccl_env_set": "default", "hyperthreads": False, "binding": "default",
                    "mapping": "default", "gpus_per_node": 0, "repeat": i + 1, "latency_us": value,
                    "started": f"2026-11-25T10:{minute:02d}:00+00:00",
                    "finished": f"2026-11-25T10:{minute:02d}:30+00:00"}  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows)


def test_identical_sets_on_a_quiet_machine_are_judged_not_held_back():
    # Others held 30% of the CPUs in every run (the job step, the daemons): the older rule would
    # hold the verdict back; the ranks waited 0.5% of their run, so the verdict is given.
    table = runs([10.0, 10.3, 9.8, 10.1], [10.1, 9.9, 10.2, 10.0], [0.1] * 8)
    row = variants(scaling(table), runs=table)
    row = row[row["primary"]].iloc[0]
    assert row["verdict"] == "no measurable difference" and row["contended_runs"] == 0
    loaded = runs([10.0, 10.3, 9.8, 10.1], [10.1, 9.9, 10.2, 10.0], [5.0] * 8)
    row = variants(scaling(loaded), runs=loaded)
    row = row[row["primary"]].iloc[0]
    assert row["verdict"].startswith(
        "contended: other processes held the CPUs the ranks needed in 4 of 4 runs of default and 4 of 4 of x "
        "(they waited for a CPU 25% and 25% of their run); raise repeats"
    ), row["verdict"]


def test_the_workflows_orchestration_is_its_own_share_not_other_processes():
    # From this process up: its own CPU time (the kernel's, os.times) is in it.
    spent = os.times()
    assert ancestors_cpu_s(os.getpid()) >= spent.user + spent.system - 2 / TICKS
    assert ancestors_cpu_s(1) == 0.0 and ancestors_cpu_s(2**22 + 1) == 0.0  # init, and no such process
    before = Snapshot(taken_s=0.0, busy_s=100.0, steal_s=0.0, cpus=2, own_s=0.0, orchestration_s=1.0)
    after = Snapshot(taken_s=10.0, busy_s=112.0, steal_s=0.0, cpus=2, own_s=10.0, orchestration_s=2.0)
    seen = conditions(before, after)
    # 12 busy CPU-s: 10 the run's, 1 Snakemake's and its job step's, 1 another's.
    assert (seen["other_cpu_share"], seen["orchestration_cpu_share"], seen["own_cpu_share"]) == (0.05, 0.05, 0.5)
