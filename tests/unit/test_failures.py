"""Failure categories from exit codes, the scheduler's record and log lines (the lines are
those real runs print: Open MPI 5, PyTorch, NCCL, Python). The real failing processes
are in test_faults.py."""

import json
import re

import pytest
from points import point
from scalestudy.launch.ended import ended_batch_job
from scalestudy.launch.failures import CATEGORIES, NODE_LOST, Failure, classify, node_lost_words
from scalestudy.launch.runner import record_lost_job

CASES = [
    # exit code, killed_for, log, scheduler record, category
    (0, None, "all fine", None, None),
    (None, "walltime", "iter 1", None, "walltime"),
    (0, None, "done", {"State": "TIMEOUT"}, "walltime"),
    (None, None, "", {"Exit_status": -29}, "walltime"),
    (0, None, "", {"State": "OUT_OF_MEMORY"}, "out_of_memory"),
    (1, None, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", None, "out_of_memory"),
    (1, None, "Traceback (most recent call last):\n    buf = bytearray(n)\nMemoryError", None, "out_of_memory"),
    (1, None, "n1:123:456 [0] NCCL WARN NET/Socket : no interface found", None, "nccl_error"),
    (
        1,
        None,
        "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
        None,
        "nccl_error",
    ),
    (1, None, "ModuleNotFoundError: No module named 'hoomd'", None, "dependency_missing"),
    (127, None, "cannot start /opt/mpi/bin/mpirun: [Errno 2] No such file or directory", None, "dependency_missing"),
    (14, None, "*** An error occurred in MPI_Init_thread\n*** on a NULL communicator", None, "mpi_init_error"),
    (
        213,
        None,
        "-----\nThe PMIx server's listener thread failed to start. We cannot\ncontinue.\n-----",
        None,
        "mpi_init_error",
    ),
    (
        137,
        None,
        "prterun noticed that process rank 1 with PID 1234 on node n1 exited on signal 9 (Killed).",
        None,
        "mpi_abort",
    ),
    (1, None, "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD with errorcode 3", None, "mpi_abort"),
    (2, None, "usage: app [-h]\napp: error: bad value", None, "app_error"),
]


@pytest.mark.parametrize(("exit_code", "killed_for", "log", "record", "category"), CASES)
def test_each_failure_gets_its_category(exit_code, killed_for, log, record, category):
    failure = classify(exit_code, killed_for, log, record, walltime="00:10:00")
    assert (failure.category if failure else None) == category
    if failure:
        assert failure.category in CATEGORIES and failure.reason


def test_the_cause_wins_over_its_consequence():
    # An OOM-killed rank also makes mpirun report a rank lost on a signal.
    log = "MemoryError\nprterun noticed that process rank 0 with PID 9 on node n1 exited on signal 9 (Killed)."
    assert classify(137, None, log).category == "out_of_memory"
    # A run stopped at its walltime also loses ranks.
    assert classify(-15, "walltime", "exited on signal 15").category == "walltime"


def test_reason_quotes_the_evidence_line_and_the_exit_code():
    failure = classify(1, None, "line a\nn1:1:2 [0] NCCL WARN Invalid NCCL_PROTO value\nline c")
    assert failure.reason == "NCCL error (exit code 1): n1:1:2 [0] NCCL WARN Invalid NCCL_PROTO value"
    assert classify(2, None, "a\nb\n\nc").reason == "app exited with code 2: a | b | c"


def test_a_job_that_died_without_metrics_gets_the_schedulers_category(tmp_path):
    cases = {
        "batch job 1.gadi-pbs ended without metrics.json: Exit_status -29: killed: walltime over the limit": "walltime",
        "batch job 2.gadi-pbs ended without metrics.json: Exit_status -27: killed: mem over the limit": "out_of_memory",
        "batch job 3 ended without metrics.json: State TIMEOUT": "walltime",
        "batch job 4 ended without metrics.json: Exit_status 271: killed by signal 15": "scheduler_error",
    }
    for i, (reason, category) in enumerate(cases.items()):
        path = tmp_path / str(i) / "metrics.json"
        record_lost_job(path, point().to_json(), 600, reason)
        record = json.loads(path.read_text())
        assert record["status"] == "failed" and record["category"] == category and record["reason"] == reason
        assert category in CATEGORIES


def test_a_batch_job_the_executor_reports_failed_keeps_or_gets_its_points_records(tmp_path):
    """Snakemake's Slurm executor reports TIMEOUT / CANCELLED as failed (launch.ended.ended_batch_job):
    the runner's record is kept with Slurm's word, a point that ran without writing one gets a
    failed record, and a job none of whose points started writes nothing (they run next time)."""
    why = "SLURM-job '7' failed, SLURM status is: 'TIMEOUT'."
    queued = tmp_path / "queued" / "metrics.json"
    entry = {"point": point().to_json(), "walltime_s": 600, "queue": "normal", "cluster": None, "submitted": 0.0}
    assert not ended_batch_job("7", {**entry, "metrics": str(queued)}, why)
    assert not queued.parent.exists()
    stopped = tmp_path / "stopped" / "metrics.json"
    stopped.parent.mkdir()
    runner_words = {"status": "failed", "category": "scheduler_error", "reason": "stopped from outside by SIGTERM"}
    stopped.write_text(json.dumps({**runner_words, "stop_signal": "SIGTERM"}))
    assert ended_batch_job("7", {**entry, "metrics": str(stopped)}, why)
    kept = json.loads(stopped.read_text())
    assert kept["category"] == "walltime" and kept["reason"].endswith(f"the scheduler says: {why}")
    lost = tmp_path / "lost" / "metrics.json"
    lost.parent.mkdir()
    (lost.parent / "stdout.log").write_text("scalestudy-rank {}\n")
    assert ended_batch_job("7", {**entry, "metrics": str(lost)}, why)
    record = json.loads(lost.read_text())
    assert record["status"] == "failed" and record["category"] == "walltime"
    assert record["reason"] == f"batch job 7 ended without metrics.json: {why}"


# The launcher's words when a node went, as Open MPI 5.0 and ssh wrote them on the multi-host
# test bed (tests/integration/test_many_nodes.py).
PRTE_LOST = """An MPI communication peer process has unexpectedly disconnected.  This
--------------------------------------------------------------------------
PRTE has lost communication with a remote daemon.

  HNP daemon   : [prterun-n1-29126@0,0] on node n1
  Remote daemon: [prterun-n1-29126@0,1] on node n2
"""
NOT_REPORTED = """ssh: connect to host n2 port 22: Connection timed out
------------------------------------------------------------
A daemon failed to report back after being spawned. This could
be due to several factors, including inability to find the
  Local host:    n1
  Remote host:   n2
  Daemon exit status: 255
"""


@pytest.mark.parametrize(
    ("exit_code", "log", "said"),
    [
        # Open MPI 5 exited 0 after it lost the daemon of a node whose processes were killed.
        (0, PRTE_LOST, "PRTE has lost communication with a remote daemon."),
        (255, NOT_REPORTED, "ssh: connect to host n2 port 22: Connection timed out"),
        (255, NOT_REPORTED.split("\n", 2)[2], "A daemon failed to report back after being spawned."),
    ],
)
def test_a_lost_node_is_named_with_the_launchers_words(exit_code, log, said):
    failure = classify(exit_code, None, log)
    assert failure.category == "node_failure"
    assert failure.reason == f"node n2 lost or unreachable (exit code {exit_code}): {said}"


# Each phrasing of NODE_LOST as its program writes it (ssh ends its lines with CR LF), and the
# host it names: a bed's name, a site's full name, an address.
PHRASINGS = [
    ("ssh: connect to host 10.200.7.2 port 22: No route to host\r\n", "10.200.7.2"),
    ("ssh: Could not resolve hostname gadi-cpu-clx-0042: Name or service not known\r\n", "gadi-cpu-clx-0042"),
    # ssh at its default level where a silent host's ServerAliveCountMax passed (MPICH's Hydra hangs after it).
    ("Timeout, server ss4242ah2 not responding.\r\n", "ss4242ah2"),
    (
        "Connection to x1000c0s2b0n1.hsn.cm.aspire2a.nscc.sg closed by remote host.\r\n",
        "x1000c0s2b0n1.hsn.cm.aspire2a.nscc.sg",
    ),
    (PRTE_LOST, "n2"),
    (NOT_REPORTED.split("\n", 2)[2], "n2"),
]


def test_every_phrasing_of_a_lost_node_is_tried():
    assert len(PHRASINGS) == len(NODE_LOST)
    assert all(any(re.search(words, said) for said, _ in PHRASINGS) for words, _ in NODE_LOST)


@pytest.mark.parametrize(("said", "host"), PHRASINGS)
def test_the_host_is_read_from_each_phrasing(said, host):
    words = node_lost_words(f"LAMMPS (29 Aug 2024)\nStep Temp E_pair\n{said}")
    assert words is not None and "\n" not in words and "\r" not in words
    failure = classify(255, None, said)
    assert failure.category == "node_failure"
    assert failure.reason == f"node {host} lost or unreachable (exit code 255): {words}"


def test_a_launcher_killed_after_the_words_is_said_so_quoting_them_once():
    said = "Timeout, server ss4242ah2 not responding."
    log = f"scalestudy-rank {{}}\nscalestudy: timed run 1 of 1, 100000000 steps\n{said}\r\n"
    failure = classify(-15, node_lost_words(log), log)
    assert failure == Failure(
        "node_failure", f"node ss4242ah2 lost or unreachable (launcher hung after {said!r} and was killed)"
    )
    # Killed after other words (a fatal MPI line): the node's words are quoted beside them.
    failure = classify(-15, "PMIX_ERR_UNREACH", log)
    assert failure.reason.endswith(f"(launcher hung after 'PMIX_ERR_UNREACH' and was killed): {said}")


def test_the_first_words_in_the_output_are_the_ones_watched_for():
    log = f"Connection to n3 closed by remote host.\r\n{PRTE_LOST}"
    assert node_lost_words(log) == "Connection to n3 closed by remote host."
    assert node_lost_words(PRTE_LOST) == "PRTE has lost communication with a remote daemon."


@pytest.mark.parametrize(
    "said",
    [
        "",
        "Connection to n2 closed.\r\n",  # an interactive session that ended as asked
        "Loop time of 1.2 on 2 procs for 100 steps with 500 atoms\n",
        "Timeout, server n2 not resp",  # not whole yet: read again with the rest
        "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD with errorcode 3\n",
    ],
)
def test_other_output_is_no_lost_node(said):
    assert node_lost_words(said) is None
