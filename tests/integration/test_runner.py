"""A failed run is data: every way a point can end leaves metrics.json with a reason."""

import json
import sys
import textwrap

from points import point
from scalestudy.config.clusters import Cluster, MpiLauncher
from scalestudy.config.requests import job_request
from scalestudy.launch import runner
from scalestudy.launch.runner import run_point


def cluster_with(launcher: str) -> Cluster:
    return Cluster("test", "none", 2, 0, 8.0, 2.0, MpiLauncher(launcher=launcher))


def fake_launcher(tmp_path, body: str):
    script = tmp_path / "fake-mpirun"
    # Like a real mpirun, it answers --version without running anything.
    version = "import sys\nif sys.argv[1:] == ['--version']: print('fake mpirun 1.0'); raise SystemExit(0)\n"
    script.write_text(f"#!{sys.executable}\n{version}" + textwrap.dedent(body))
    script.chmod(0o755)
    return str(script)


def metrics_of(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


def test_non_zero_exit_is_failed_with_the_last_lines(tmp_path):
    launcher = fake_launcher(tmp_path, "print('rank 1: bad value for --steps'); raise SystemExit(3)")
    run_point(point(), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["exit_code"] == 3
    assert metrics["category"] == "app_error"
    assert metrics["reason"] == "app exited with code 3: rank 1: bad value for --steps"
    assert (tmp_path / "run" / "launch.sh").read_text().startswith("#!/usr/bin/env bash")


def test_walltime_kills_the_run_and_says_so(tmp_path):
    launcher = fake_launcher(tmp_path, "import time; time.sleep(60)")
    run_point(point(walltime="00:00:01"), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["category"] == "walltime"
    assert metrics["reason"] == "walltime exceeded: stopped by scalestudy after 00:00:01"
    assert metrics["resources"]["walltime_used_s"] < 30


def test_a_launcher_hung_after_a_fatal_mpi_error_is_killed_early(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "FATAL_GRACE_S", 1.0)
    launcher = fake_launcher(
        tmp_path, "import time; print('It looks like MPI_INIT failed for some reason', flush=True); time.sleep(600)"
    )
    run_point(point(walltime="00:10:00"), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["category"] == "mpi_init_error"
    assert metrics["reason"].startswith("MPI failed to start (launcher hung after 'MPI_INIT failed' and was killed)")
    assert metrics["resources"]["walltime_used_s"] < 30


def test_a_launcher_hung_after_a_node_was_lost_is_killed_and_the_node_named(tmp_path, monkeypatch):
    # MPICH's Hydra after its ssh session to a silent node gave up: ssh's words, then nothing, for ever.
    monkeypatch.setattr(runner, "NODE_LOST_GRACE_S", 1.0)
    launcher = fake_launcher(
        tmp_path,
        """
        import sys, time
        sys.stderr.write('Timeout, server n2 not responding.\\r\\n'); sys.stderr.flush()
        time.sleep(600)
    """,
    )
    run_point(point(walltime="00:01:00"), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["category"] == "node_failure", metrics["reason"]
    said = "Timeout, server n2 not responding."
    assert metrics["reason"] == f"node n2 lost or unreachable (launcher hung after {said!r} and was killed)"
    assert metrics["resources"]["walltime_used_s"] < 30


def test_a_launcher_that_ends_by_itself_after_a_node_was_lost_is_not_killed(tmp_path):
    # Open MPI: ssh's words, then its own, then it ends within the grace.
    launcher = fake_launcher(
        tmp_path,
        """
        import sys, time
        print('Connection to n2 closed by remote host.', flush=True)
        time.sleep(1)
        raise SystemExit(255)
    """,
    )
    run_point(point(walltime="00:10:00"), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["category"] == "node_failure" and metrics["exit_code"] == 255
    assert metrics["reason"] == "node n2 lost or unreachable (exit code 255): Connection to n2 closed by remote host."


def test_output_without_the_figure_is_unparseable(tmp_path):
    launcher = fake_launcher(tmp_path, "print('Epoch 1 | iter 1 step 0 | loss train: 7.0, val: n/a | iter time: 1')")
    run_point(point(), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["reason"].startswith("unparseable output")
    assert metrics["category"] == "unparseable_output"


def test_parsed_run_is_ok_with_an_estimated_cost(tmp_path, data_dir):
    log = data_dir / "litgpt-0.5.13-finetune_full-2ranks.log"
    launcher = fake_launcher(tmp_path, f"print(open({str(log)!r}).read())")
    run_point(point(), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "ok", metrics["reason"]
    assert metrics["category"] is None
    assert metrics["figures"]["training_time_s"] == 16.60
    resources = metrics["resources"]
    assert resources["service_units_source"] == "estimated"
    # 2 SU per core-hour x max(cores asked, memory share in cores) x the wall time used; the
    # share is of the request in the cluster's numbers (the record's memory is in GB of 10^9 bytes)
    request = job_request(point(), cluster_with(launcher))
    cores = max(resources["cores_allocated"], request.mem_gib / (8.0 / 2))
    assert resources["service_units"] == round(2.0 * cores * resources["walltime_used_s"] / 3600, 6)


def test_preflight_refusal_runs_nothing(tmp_path):
    launcher = fake_launcher(tmp_path, f"open({str(tmp_path / 'ran')!r}, 'w')")
    params = {**point().params, "global_batch_size": 4}
    run_point(point(params=params), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["reason"].startswith("pre-flight refusal")
    assert metrics["category"] == "preflight_refusal"
    assert "8 x 2 = 16" in metrics["reason"]
    assert not (tmp_path / "ran").exists()


def test_missing_launcher_is_data_too(tmp_path):
    run_point(point(), tmp_path / "run", cluster_with(str(tmp_path / "no-such-mpirun")))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["exit_code"] == 127
    assert metrics["category"] == "dependency_missing"


def test_a_bug_in_a_parser_is_recorded_not_raised(tmp_path, monkeypatch, data_dir):
    from scalestudy.apps.registry import APPS

    def broken_parse(log_text, run_dir):
        raise KeyError("bug")

    monkeypatch.setattr(APPS["litgpt"], "parse", broken_parse)
    launcher = fake_launcher(tmp_path, "print('done')")
    run_point(point(), tmp_path / "run", cluster_with(launcher))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["reason"] == "parser error: KeyError('bug')"
    assert metrics["category"] == "scalestudy_error"
    assert metrics["resources"]["walltime_used_s"] > 0


def test_any_other_bug_still_leaves_metrics(tmp_path, monkeypatch):
    from scalestudy.apps.registry import APPS

    def broken_command(point, run_dir, layout):
        raise RuntimeError("cannot build")

    monkeypatch.setattr(APPS["litgpt"], "rank_command", broken_command)
    run_point(point(), tmp_path / "run", cluster_with("mpirun"))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["reason"] == "scalestudy error: RuntimeError('cannot build')"
    assert metrics["category"] == "scalestudy_error"


def torch_parallel_point():
    params = {"model": "mlp", "strategy": "ddp", "mode": "throughput", "device": "cpu", "batch_size": 16}
    return point(app="torch-parallel", gpus_per_node=0, ranks_per_node=2, nodes=1, params=params, mpi_flags={},
                 nccl_env={})  # fmt: skip


def test_a_rank_that_dies_at_exit_after_the_complete_result_keeps_the_figures(tmp_path, data_dir):
    """The local study's torch-parallel abort: the result printed, then a rank's teardown hit
    std::terminate (SIGABRT, Open MPI's 'exited on signal 6'): the run's figures stand, with
    the exit failure beside them."""
    log = data_dir / "torch-parallel-mlp-ddp-throughput-2ranks.log"
    body = f"""
    print(open({str(log)!r}).read())
    print("terminate called without an active exception")
    print("prterun noticed that process rank 1 with PID 123 on node vm exited on signal 6 (Aborted).")
    raise SystemExit(134)
    """
    run_point(torch_parallel_point(), tmp_path / "run", cluster_with(fake_launcher(tmp_path, body)))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "ok" and metrics["category"] is None, metrics["reason"]
    assert metrics["figures"]["samples_per_s"] > 0
    assert metrics["exit_code"] == 134 and metrics["exit_failure"]["category"] == "mpi_abort"
    assert metrics["reason"].startswith("result complete, then failed at exit: MPI job aborted or lost a rank")


def test_a_rank_that_dies_before_the_result_fails_the_run(tmp_path, data_dir):
    log = data_dir / "torch-parallel-mlp-ddp-throughput-2ranks.log"
    body = f"""
    text = open({str(log)!r}).read()
    print("\\n".join(line for line in text.splitlines() if not line.startswith("scalestudy-torch-result")))
    print("prterun noticed that process rank 1 with PID 123 on node vm exited on signal 6 (Aborted).")
    raise SystemExit(134)
    """
    run_point(torch_parallel_point(), tmp_path / "run", cluster_with(fake_launcher(tmp_path, body)))
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "failed" and metrics["category"] == "mpi_abort" and "exit_failure" not in metrics
