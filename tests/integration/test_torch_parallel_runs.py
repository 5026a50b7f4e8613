"""Every torch-parallel model x strategy trains for real under mpirun on 1 and 2 CPU ranks
(gloo), and its loss goes down; model-parallel strategies reproduce the single-process
losses and data-parallel ones reproduce DDP's. One launch per rank count trains every pair
(the rank program takes lists), so the whole matrix costs two start-ups; then one point
goes through the runner as the workflow runs it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scalestudy.apps.torch_parallel.spec import MODELS, PARTS, RESULT_PREFIX, TENSOR_MODELS
from scalestudy.config import clusters
from scalestudy.launch.runner import run_point
from scalestudy.model.point import Point

REPO = Path(__file__).resolve().parents[2]
STRATEGIES = {1: ["ddp", "fsdp:1", "fsdp:2", "fsdp:3", "pipeline", "tensor", "hybrid:1"]}
STRATEGIES[2] = [*STRATEGIES[1], "hybrid:2"]
# Batch norm keeps statistics per replica and per micro-batch: its losses differ by design.
NO_BATCH_NORM = ("cnn", "autoencoder", "bow", "seq2seq", "seq2seq-lstm", "mlp", "gpt2")
# Whole-batch data on every rank: the losses of one process.
MODEL_PARALLEL = ("pipeline", "tensor", "hybrid:2")
# Each rank a replica: DDP's losses.
DATA_PARALLEL = ("fsdp:1", "fsdp:2", "fsdp:3", "hybrid:1")


def label(result: dict) -> str:
    if result["strategy"] == "fsdp":
        return f"fsdp:{result['zero_stage']}"
    if result["strategy"] == "hybrid":
        return f"hybrid:{result['group_size']}"
    return result["strategy"]


@pytest.fixture(scope="module")
def trained() -> dict[int, dict[tuple[str, str], dict]]:
    """{ranks: {(strategy, model): result line}} from one mpirun per rank count."""
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    out = {}
    for ranks, strategies in STRATEGIES.items():
        command = [mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1",
                   "-x", f"PYTHONPATH={REPO / 'workflow'}", sys.executable, "-m", "scalestudy.apps.torch_parallel.rank",
                   "--model", ",".join(MODELS), "--strategy", ",".join(strategies), "--mode", "converge",
                   "--epochs", "2", "--samples", "48", "--batch-size", "8", "--micro-batches", "2",
                   "--breakdown-steps", "2"]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
        results = [json.loads(line[len(RESULT_PREFIX) + 1 :]) for line in done.stdout.splitlines()
                   if line.startswith(RESULT_PREFIX + " ")]  # fmt: skip
        out[ranks] = {(label(r), r["model"]): r for r in results}
    return out


CASES = [
    (ranks, strategy, model)
    for ranks, strategies in STRATEGIES.items()
    for strategy in strategies
    for model in MODELS
    if not strategy.startswith(("tensor", "hybrid")) or model in TENSOR_MODELS
]


@pytest.mark.parametrize(("ranks", "strategy", "model"), CASES)
def test_it_trains_and_its_loss_goes_down(trained, ranks, strategy, model):
    result = trained[ranks][(strategy, model)]
    assert result["world"] == ranks and result["backend"] == "gloo" and result["device"] == "cpu"
    losses = [epoch["train_loss"] for epoch in result["epochs"]]
    assert len(losses) == 2 and losses[-1] < losses[0], losses
    assert all(t > 0 for t in result["step_time_s_per_rank"]) and len(result["step_time_s_per_rank"]) == ranks
    replicas = {"pipeline": 1, "tensor": 1, "hybrid:2": 1}.get(strategy, ranks)
    assert result["replicas"] == replicas and result["global_batch"] == 8 * replicas


@pytest.mark.parametrize(("ranks", "strategy", "model"), CASES)
def test_every_profiled_step_splits_into_parts_and_two_ranks_communicate(trained, ranks, strategy, model):
    breakdown = trained[ranks][(strategy, model)]["breakdown"]
    assert breakdown["steps"] == 2
    for rank in range(ranks):
        parts = {name: breakdown[f"{name}_s_per_rank"][rank] for name in PARTS}
        assert all(value >= 0 for value in parts.values()) and parts["compute"] > 0, parts
        assert sum(parts.values()) == pytest.approx(breakdown["step_s_per_rank"][rank], rel=1e-6)
        if ranks == 2:
            # Every strategy on two ranks exchanges something each step (gradients, activations,
            # shards, partial sums): the profile must see it in flight.
            assert breakdown["in_flight_s_per_rank"][rank] > 0, (strategy, model, breakdown)


@pytest.mark.parametrize("model", NO_BATCH_NORM)
@pytest.mark.parametrize("strategy", MODEL_PARALLEL)
def test_model_parallel_strategies_on_two_ranks_reproduce_one_process(trained, strategy, model):
    if strategy != "pipeline" and model not in TENSOR_MODELS:
        pytest.skip(f"{strategy} has no plan for {model}")
    one = [e["train_loss"] for e in trained[1][("ddp", model)]["epochs"]]
    two = [e["train_loss"] for e in trained[2][(strategy, model)]["epochs"]]
    assert two == pytest.approx(one, rel=2e-3)


@pytest.mark.parametrize("model", NO_BATCH_NORM)
@pytest.mark.parametrize("strategy", DATA_PARALLEL)
def test_sharded_and_replicated_strategies_on_two_ranks_reproduce_ddp(trained, strategy, model):
    if strategy.startswith("hybrid") and model not in TENSOR_MODELS:
        pytest.skip(f"{strategy} has no plan for {model}")
    ddp = [e["train_loss"] for e in trained[2][("ddp", model)]["epochs"]]
    other = [e["train_loss"] for e in trained[2][(strategy, model)]["epochs"]]
    assert other == pytest.approx(ddp, rel=2e-3)


def test_a_point_runs_through_the_runner_with_its_memory_prediction(tmp_path):
    point = Point(study="tp", app="torch-parallel", scaling="strong", nodes=1, ranks_per_node=2, gpus_per_node=0,
                  threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1, walltime="00:05:00",
                  params={"model": "gpt2", "strategy": "tensor", "mode": "converge", "epochs": 2, "samples": 64,
                          "batch_size": 8}, axes=("model", "strategy"))  # fmt: skip
    metrics = run_point(point, tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    figures = metrics["figures"]
    assert figures["samples_per_s"] > 0 and figures["epochs"] == 2
    assert figures["final_train_loss"] < figures["first_train_loss"]
    assert 0 <= figures["final_accuracy"] <= 1
    # The prediction from the shape the rank counted, beside what it measured.
    assert figures["predicted_memory_gb"] > 0 and figures["memory_ratio"] > 0
    assert "DTensor" in figures["implementation"]


def tp_point(**params) -> Point:
    return Point(study="tp", app="torch-parallel", scaling="strong", nodes=1, ranks_per_node=2, gpus_per_node=0,
                 threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1, walltime="00:05:00",
                 params={"mode": "throughput", "breakdown_steps": 0, **params})  # fmt: skip


def test_resnet50_throughput_follows_horovods_protocol_on_two_ranks(tmp_path):
    point = tp_point(model="resnet50", batch_size=8, warmup_steps=2, steps=3, batches_per_iter=3)
    metrics = run_point(point, tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    figures = metrics["figures"]
    assert (figures["batches_per_iter"], figures["timed_iterations"]) == (3, 3)
    assert figures["images_per_s_per_rank"] > 0 and figures["images_per_s_per_rank_ci"] >= 0
    assert figures["images_per_s_total"] == pytest.approx(2 * figures["images_per_s_per_rank"])
    assert figures["images_per_s_total_ci"] == pytest.approx(2 * figures["images_per_s_per_rank_ci"])
    # The same iterations give the step-based figure: within a quarter of it (median vs mean).
    assert figures["images_per_s_total"] == pytest.approx(figures["samples_per_s"], rel=0.25)


def test_16_mixed_trains_on_cpu_ranks_with_its_loss_scaler(tmp_path):
    point = tp_point(model="mlp", strategy="fsdp", precision="16-mixed", warmup_steps=1, steps=3)
    metrics = run_point(point, tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    figures = metrics["figures"]
    assert figures["samples_per_s"] > 0 and figures["final_train_loss"] > 0
    assert "images_per_s_per_rank" not in figures  # not an image family
