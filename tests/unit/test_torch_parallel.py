"""The torch-parallel app: its parser on recorded runs, its parameter checks (one line naming
the key), its command line (the CUDA path included: it cannot run here), and strategies
compared with ddp like MPI flag sets, accuracy beside speed."""

import json
import os

import pandas as pd
import pytest
from scalestudy.analysis.verdicts import variants
from scalestudy.apps.registry import APPS, ParseError
from scalestudy.apps.torch_parallel.app import parse_torch_parallel
from scalestudy.apps.torch_parallel.rank import __main__ as rank_program
from scalestudy.apps.torch_parallel.rank import models
from scalestudy.apps.torch_parallel.spec import IMPLEMENTATIONS, MODELS, RESULT_PREFIX, split_points
from scalestudy.config.study import load
from scalestudy.model.errors import SweepError
from scalestudy.model.metrics import metric
from scalestudy.model.point import Point

APP = APPS["torch-parallel"]


def tp_point(ranks=2, gpus=0, **params):
    return Point(study="tp", app="torch-parallel", scaling="strong", nodes=1, ranks_per_node=ranks,
                 gpus_per_node=gpus, threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                 walltime="00:05:00", params={"model": "gpt2", **params})  # fmt: skip


def test_converge_run_recorded_on_two_cpu_ranks(data_dir):
    # Recorded: gpt2, tensor parallel over 2 gloo ranks, 3 epochs of 128 samples, batch 8.
    figures = parse_torch_parallel((data_dir / "torch-parallel-gpt2-tensor-converge-2ranks.log").read_text())
    assert figures["samples_per_s"] == pytest.approx(8 / 0.06383046468766906)
    assert figures["samples_per_s_per_rank"] == pytest.approx(62.671, rel=1e-4)
    assert figures["optimizer_step_s"] == pytest.approx(0.06383046468766906)
    assert figures["epochs"] == 3
    assert figures["epoch_time_s"] == pytest.approx((2.0705198750001728 + 1.2547826079990045 + 0.8014245129998017) / 3)
    assert figures["first_train_loss"] == pytest.approx(3.8265, rel=1e-4)
    assert figures["final_train_loss"] == pytest.approx(1.6633, rel=1e-4)
    assert figures["final_loss"] == pytest.approx(1.5482, rel=1e-4)
    assert figures["final_accuracy"] == pytest.approx(0.58203125)
    assert figures["peak_memory_gb"] == pytest.approx(0.334381056)
    assert figures["memory_growth_gb"] == pytest.approx(0.060125184)
    assert figures["replicas"] == 1 and figures["global_batch"] == 8 and figures["backend"] == "gloo"


def test_throughput_run_recorded_has_no_epochs_and_its_spread(data_dir):
    figures = parse_torch_parallel((data_dir / "torch-parallel-mlp-ddp-throughput-2ranks.log").read_text())
    assert figures["global_batch"] == 32 and figures["replicas"] == 2 and figures["timed_steps"] == 10
    assert "epochs" not in figures and "final_accuracy" not in figures
    low, high = figures["samples_per_s_per_rank_min"], figures["samples_per_s_per_rank_max"]
    assert low <= figures["samples_per_s_per_rank"] <= high and figures["samples_per_s_per_rank_std"] >= 0
    # Total: the global batch over the slowest rank's step.
    assert figures["samples_per_s"] == pytest.approx(32 / figures["optimizer_step_s"])


def test_a_run_cut_short_is_unparseable():
    with pytest.raises(ParseError, match="no 'scalestudy-torch-result' line"):
        parse_torch_parallel("scalestudy-torch-epoch {}\n")
    with pytest.raises(ParseError, match="cut off"):
        parse_torch_parallel(RESULT_PREFIX + ' {"global_batch": 8, "step_')


def sweep(tmp_path, **params):
    study = {"app": "torch-parallel", "nodes": [1], "ranks_per_node": [1, 2], "params": params}
    return {"cluster": "local", "results_dir": str(tmp_path), "studies": {"tp": study}}


def problems(config) -> list[str]:
    with pytest.raises(SweepError) as refused:
        load(config)
    return refused.value.problems


def test_tensor_parallelism_on_a_cnn_is_refused_at_load_in_one_line(tmp_path):
    (line,) = problems(sweep(tmp_path, model=["cnn", "gpt2"], strategy=["ddp", "tensor"]))
    assert line == (
        "studies.tp.params.strategy: tensor needs a model with a tensor-parallel plan, not 'cnn'; "
        "allowed with tensor: bow, mlp, gpt2"
    )


def test_a_pipeline_longer_than_the_model_and_uneven_micro_batches_are_refused(tmp_path):
    found = problems(sweep(tmp_path, model="mlp", strategy="pipeline", depth=1, batch_size=6, micro_batches=4))
    assert found == [
        "studies.tp.params.micro_batches: 4 does not divide batch_size 6; allowed: a divisor of it",
    ]
    assert APP.preflight(tp_point(ranks=4, model="mlp", strategy="pipeline", depth=1)) == [
        "params.model: mlp has 3 blocks, fewer than the 4 pipeline stages at 4 ranks; "
        "allowed: ranks <= blocks (raise depth)"
    ]


def test_zero_stage_without_fsdp_and_hybrid_groups_that_do_not_divide_are_refused(tmp_path):
    assert problems(sweep(tmp_path, model="mlp", zero_stage=2)) == [
        "studies.tp.params.zero_stage: only fsdp has ZeRO stages; allowed: with strategy fsdp"
    ]
    assert APP.preflight(tp_point(ranks=3, strategy="hybrid", group_size=2)) == [
        "params.group_size: 2 does not divide the 3 ranks at 3 ranks; allowed: a divisor"
    ]


def test_the_local_study_loads_with_every_strategy_and_three_models(repo):
    from scalestudy.config.files import load_files

    study = load(load_files(repo / "config/sweep.yaml", repo / "config/local.yaml"))
    points = study.sweep.points_of("torch-parallel")
    assert {p.params["strategy"] for p in points} == {"ddp", "fsdp", "pipeline", "tensor"}
    assert len({p.params["model"] for p in points}) >= 3 and {p.ranks for p in points} == {1, 2}
    assert {p.repeat for p in points} == {1, 2}


def test_the_command_line_carries_every_setting_and_cuda_asks_for_gpus():
    argv = APP.rank_command(tp_point(gpus=4, ranks=4, strategy="fsdp", zero_stage=2, device="cuda"), None, None)
    assert argv[1:3] == ["-m", "scalestudy.apps.torch_parallel.rank"]
    pairs = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert pairs["--device"] == "cuda" and pairs["--strategy"] == "fsdp" and pairs["--zero-stage"] == "2"
    assert pairs["--batch-size"] == "16" and "--group-size" not in pairs  # hybrid only
    assert APP.preflight(tp_point(device="cuda")) == [
        "params.device: cuda needs gpus_per_node (one rank per GPU); allowed: cpu with ranks_per_node"
    ]


def test_cuda_ranks_use_nccl_on_their_local_gpu_and_cpu_ranks_gloo(monkeypatch):
    assert rank_program.BACKENDS == {"cpu": "gloo", "cuda": "nccl"}
    joined = {}
    monkeypatch.setattr(rank_program.torch.cuda, "set_device", lambda index: joined.setdefault("gpu", index))
    monkeypatch.setattr(
        rank_program.dist, "init_process_group", lambda backend, **kw: joined.update(backend=backend, **kw)
    )
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3")
    rank, world, device = rank_program.join_process_group("cuda")
    assert (rank, world, str(device), joined["backend"], joined["gpu"]) == (0, 1, "cuda:3", "nccl", 3)
    assert joined["init_method"].startswith("tcp://127.0.0.1:")


def test_ranks_of_one_node_meet_in_a_file_named_by_their_launch(monkeypatch):
    monkeypatch.setenv("PMIX_NAMESPACE", "prterun-host-123@1")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
    assert rank_program.rendezvous(1, 2).startswith("file://")
    assert rank_program.rendezvous(1, 2).endswith("scalestudy-torch-" + str(os.getuid()) + "-prterun-host-123_1")


@pytest.mark.parametrize("model", list(MODELS))
def test_every_model_has_enough_blocks_for_two_stages_and_the_app_counts_them(model):
    size = (MODELS[model].width, MODELS[model].depth)
    blocks = models.blocks(model, *size, vocab=64, seq_len=16, heads=4)
    assert len(blocks) == APP.blocks(tp_point(model=model)) >= 2
    cuts = split_points([sum(p.numel() for p in b.parameters()) for b in blocks], 2)
    assert cuts[0] == 0 and cuts[-1] == len(blocks) and len(cuts) == 3 and cuts[0] < cuts[1] < cuts[2]


@pytest.mark.parametrize("model", list(MODELS))
def test_the_planner_counts_each_familys_blocks_at_any_depth(model):
    # The planner's count (torch_parallel.spec, no torch) against the rank program's model.
    blocks = models.blocks(model, MODELS[model].width, 3, vocab=64, seq_len=16, heads=4)
    assert len(blocks) == APP.blocks(tp_point(model=model, depth=3))


def test_every_strategy_names_its_torch_implementation():
    assert set(IMPLEMENTATIONS) == {"ddp", "fsdp", "pipeline", "tensor", "hybrid"}
    assert "ZeroRedundancyOptimizer" in IMPLEMENTATIONS["fsdp"][1] and "FSDP2" in IMPLEMENTATIONS["fsdp"][3]


def scaling_row(strategy, mean, std, n=2):
    return {"study": "tp", "app": "torch-parallel", "scaling": "strong", "mpi_flag_set": "default",
            "nccl_env_set": "default", "param.model": "mlp", "param.strategy": strategy, "nodes": 1,
            "ranks_per_node": 2, "gpus_per_node": 0, "ranks": 2, "metric": "samples_per_s",
            "metric_label": "samples/s", "kind": "rate", "primary": True, "mean": mean, "std": std, "n": n,
            "variant": f"model-mlp/strategy-{strategy}/mpi-default/nccl-default"}  # fmt: skip


def test_strategies_are_compared_with_ddp_with_accuracy_beside_the_verdict():
    table = pd.DataFrame([scaling_row("ddp", 1000, 10), scaling_row("fsdp", 500, 10), scaling_row("pipeline", 990, 30)])
    runs = pd.DataFrame(
        [
            {"study": "tp", "status": "ok", "nodes": 1, "ranks": 2, "variant": r["variant"], "final_accuracy": acc,
             "final_loss": loss}
            for r, acc, loss in ((scaling_row("ddp", 0, 0), 0.9, 0.3), (scaling_row("fsdp", 0, 0), 0.9, 0.3),
                                 (scaling_row("pipeline", 0, 0), 0.95, 0.2))
        ]
    )  # fmt: skip
    compared = variants(table, runs=runs).set_index("set")
    assert set(compared["axis"]) == {"strategy"} and set(compared["baseline"]) == {"ddp"}
    assert compared.loc["fsdp", "verdict"] == "slower" and compared.loc["fsdp", "ratio"] == pytest.approx(0.5)
    assert compared.loc["pipeline", "verdict"] == "no measurable difference"
    assert (
        compared.loc["pipeline", "final_accuracy"] == 0.95
        and compared.loc["pipeline", "final_accuracy_baseline"] == 0.9
    )


def horovod_result(model="resnet50", times=(0.5, 0.4, 0.5, 0.6), world=2, batch=32, batches_per_iter=10):
    result = {"model": model, "global_batch": batch * world, "world": world, "replicas": world,
              "batches_per_iter": batches_per_iter, "iteration_time_s_rank0": list(times),
              "step_time_s_per_rank": [0.05, 0.05], "samples_per_s_per_rank": [640.0, 640.0],
              "peak_memory_bytes_per_rank": [1e8, 1e8], "memory_growth_bytes_per_rank": [5e7, 5e7],
              "parameters": 10, "timed_steps": len(times), "implementation": "DistributedDataParallel",
              "backend": "gloo", "epochs": [], "last_loss": 2.0}  # fmt: skip
    return f"{RESULT_PREFIX} {json.dumps(result)}\n"


def test_an_image_familys_throughput_follows_horovods_synthetic_benchmark():
    figures = parse_torch_parallel(horovod_result())
    # Per iteration: 32 images x 10 batches / its time; mean and 1.96 x numpy's std (over n).
    rates = [320 / t for t in (0.5, 0.4, 0.5, 0.6)]
    mean = sum(rates) / 4
    spread = 1.96 * (sum((r - mean) ** 2 for r in rates) / 4) ** 0.5
    assert figures["images_per_s_per_rank"] == pytest.approx(mean)
    assert figures["images_per_s_per_rank_ci"] == pytest.approx(spread)
    assert figures["images_per_s_total"] == pytest.approx(2 * mean)
    assert figures["images_per_s_total_ci"] == pytest.approx(2 * spread)
    assert (figures["batches_per_iter"], figures["timed_iterations"]) == (10, 4)
    assert "Horovod synthetic benchmark protocol" in metric("images_per_s_per_rank").label


def test_token_families_and_runs_before_the_protocol_get_no_image_figures():
    assert "images_per_s_per_rank" not in parse_torch_parallel(horovod_result(model="gpt2"))
    before = horovod_result().replace('"iteration_time_s_rank0"', '"not_recorded"')
    assert "images_per_s_per_rank" not in parse_torch_parallel(before)


def test_batches_per_iter_is_a_default_param_that_leaves_existing_points_as_they_were(tmp_path):
    point = tp_point(model="resnet50")
    assert "batches_per_iter" not in point.params and "batches_per_iter" not in point.id
    command = APP.rank_command(point, tmp_path, None)
    assert command[command.index("--batches-per-iter") + 1] == "1"  # each step timed alone, as before


def test_16_mixed_is_a_precision_with_its_memory_and_a_loss_scaler_only_where_the_step_has_one(tmp_path):
    from scalestudy.model.memory import PRECISIONS

    assert APP.memory(tp_point(model="mlp", precision="16-mixed", strategy="ddp")).precision is PRECISIONS["16-mixed"]
    (line,) = problems(sweep(tmp_path, model="mlp", strategy="pipeline", precision="16-mixed"))
    assert line == (
        "studies.tp.params.precision: 16-mixed scales the loss (GradScaler), which the rank program does not do "
        "with strategy pipeline; allowed with 16-mixed: ddp, fsdp"
    )
    load(sweep(tmp_path, model="mlp", strategy="fsdp", precision="16-mixed"))  # accepted


def test_bf16_on_gadis_v100s_is_refused_for_torch_parallel_too(tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT", "p00")
    study = {"app": "torch-parallel", "nodes": [1], "gpus_per_node": [1],
             "params": {"model": "mlp", "device": "cuda", "precision": "bf16-mixed"}}  # fmt: skip
    config = {"cluster": "gadi", "results_dir": str(tmp_path), "studies": {"tp": study}}
    with pytest.raises(SweepError) as refused:
        load(config, check_memory=False)
    assert (
        "studies.tp.params.precision: bf16-mixed needs bfloat16, which the GPUs of gadi's gpuvolta queue cannot "
        "compute; allowed: 32-true, 16-mixed" in refused.value.problems
    )
