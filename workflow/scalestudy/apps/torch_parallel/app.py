"""Distributed training in plain PyTorch under mpirun: data (ddp), sharded (fsdp, ZeRO
stages 1-3), pipeline, tensor and hybrid parallelism on eight small model families.

The rank program is the package rank/ beside this module (`python -m
scalestudy.apps.torch_parallel.rank`); this module holds what planning needs without torch:
which strategies fit each family (the families themselves, the strategies and the lines rank 0
prints are in spec.py, which both sides import), the parameters, the command line
and the parser of those lines.

`batch_size` is per data-parallel replica (global batch = batch_size x replicas; ddp and
fsdp: every rank is a replica; pipeline and tensor: one; hybrid: ranks / group_size).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...model.memory import PRECISIONS, Need, Shape, Sharding, TooLarge, process_overhead
from ...model.metrics import declare
from ...model.paths import Layout
from ...model.point import Point
from ...model.units import GB, MEMORY_UNIT
from ..base import App, Param, ParseError
from ..saved_bytes import kept_on_disk
from .spec import (
    EPOCH_PREFIX,
    IMAGE,
    MODELS,
    PARTS,
    PROTOCOL,
    RESULT_PREFIX,
    SCALED_PRECISIONS,
    SCALER_STRATEGIES,
    STRATEGIES,
    TENSOR_MODELS,
    TRAINING_PRECISIONS,
    Counted,
    Data,
    model_setting,
)

# The rank program's model code: a change to it (or to the counting) counts again (kept_on_disk).
# The rank program, started with `python -m` (a package: it imports torch, so it is never imported here).
RANK_PROGRAM = f"{__package__}.rank"
RANK_MODELS = Path(__file__).with_name("rank") / "models.py"

# What the parts of the breakdown add up to, and how they are measured (spec.PARTS).
STEP_WHOLE = (
    "training step (torch.profiler over `breakdown_steps` steps after the timed ones, so the figure is timed "
    "without it; a profiled step is slower than a timed one, benchmarks/breakdown_overhead.py measures both; "
    "median profiled step, mean over ranks)"
)
BREAKDOWN = tuple(
    declare(f"step_{name}_s", f"{name}: {definition}", "s", "time", part=name, whole=STEP_WHOLE)
    for name, definition in PARTS.items()
)
# Beside the parts: communication in flight, and the part of it hidden behind compute (the overlap).
COMMUNICATION_IN_FLIGHT = declare(
    "step_communication_in_flight_s",
    "in flight: communication in flight, hidden behind compute or not (mean over ranks)",
    "s",
    "time",
    part="in flight",
    whole=STEP_WHOLE,
    beside=True,
)
COMMUNICATION_HIDDEN = declare(
    "step_communication_hidden_s",
    "overlap: communication in flight while a compute operator runs, hidden behind it (mean over ranks)",
    "s",
    "time",
    part="overlap",
    whole=STEP_WHOLE,
    beside=True,
)


# Horovod's spread: 1.96 x the standard deviation of the iterations' rates (numpy's std, over n).
CONFIDENCE_Z = 1.96
IMAGES_PER_S = (
    declare(
        "images_per_s_per_rank",
        f"images per second per rank (per GPU), mean over the timed iterations of rank 0 ({PROTOCOL})",
        "images/s",
        "rate",
        extensive=False,
    ),
    declare(
        "images_per_s_per_rank_ci",
        "spread of images_per_s_per_rank as Horovod prints it: 1.96 x the standard deviation of rank 0's "
        "iterations (over n)",
        "images/s",
        "size",
    ),
    declare(
        "images_per_s_total",
        f"images per second, all ranks: ranks x images_per_s_per_rank, as Horovod's total ({PROTOCOL})",
        "images/s",
        "rate",
    ),
    declare(
        "images_per_s_total_ci", "spread of images_per_s_total: ranks x images_per_s_per_rank_ci", "images/s", "size"
    ),
)


def horovod_figures(result: Mapping[str, Any]) -> dict[str, Any]:
    """Throughput of an image family by Horovod's synthetic benchmark protocol (PROTOCOL) from
    rank 0's timed iterations: images/s per rank (mean, 1.96 std) and the total (x ranks)."""
    times = result.get("iteration_time_s_rank0")
    if not times or MODELS[result["model"]].data != Data.IMAGES:
        return {}
    per_iteration = result["global_batch"] / result["world"] * result["batches_per_iter"]
    rates = [per_iteration / t for t in times]
    mean, spread = statistics.fmean(rates), CONFIDENCE_Z * statistics.pstdev(rates)
    return {
        "images_per_s_per_rank": mean,
        "images_per_s_per_rank_ci": spread,
        "images_per_s_total": result["world"] * mean,
        "images_per_s_total_ci": result["world"] * spread,
        "batches_per_iter": result["batches_per_iter"],
        "timed_iterations": len(times),
    }


def values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def parse_torch_parallel(log_text: str) -> dict[str, Any]:
    """Figures of a run from rank 0's result line (and its epoch lines)."""
    found = [line for line in log_text.splitlines() if line.startswith(RESULT_PREFIX + " ")]
    if not found:
        raise ParseError(f"no '{RESULT_PREFIX}' line in the output: the ranks stopped before the end")
    try:
        result = json.loads(found[-1][len(RESULT_PREFIX) + 1 :])
    except json.JSONDecodeError as error:
        raise ParseError(f"the '{RESULT_PREFIX}' line is cut off: {error}") from None
    step_times = result["step_time_s_per_rank"]
    per_rank = result["samples_per_s_per_rank"]
    step_time = max(step_times)  # a step ends when the slowest rank ends it
    figures: dict[str, Any] = {
        "samples_per_s": result["global_batch"] / step_time,
        "samples_per_s_per_rank": statistics.fmean(per_rank),
        "samples_per_s_per_rank_min": min(per_rank),
        "samples_per_s_per_rank_max": max(per_rank),
        "samples_per_s_per_rank_std": statistics.stdev(per_rank) if len(per_rank) > 1 else 0.0,
        "optimizer_step_s": step_time,
        "peak_memory_gb": max(result["peak_memory_bytes_per_rank"]) / GB,
        "memory_growth_gb": max(result["memory_growth_bytes_per_rank"]) / GB,
        "global_batch": result["global_batch"],
        "replicas": result["replicas"],
        "parameters": result["parameters"],
        "activation_values_per_sample": result.get("activation_values_per_sample"),
        "timed_steps": result["timed_steps"],
        "implementation": result["implementation"],
        "backend": result["backend"],
    }
    epochs = result.get("epochs") or [
        json.loads(line[len(EPOCH_PREFIX) + 1 :])
        for line in log_text.splitlines()
        if line.startswith(EPOCH_PREFIX + " ")
    ]
    figures.update(breakdown_figures(result.get("breakdown")))
    figures.update(horovod_figures(result))
    if epochs:
        last = epochs[-1]
        figures["epochs"] = len(epochs)
        figures["epoch_time_s"] = statistics.fmean(e["epoch_time_s"] for e in epochs)
        figures["first_train_loss"] = epochs[0]["train_loss"]
        figures["final_train_loss"] = last["train_loss"]
        figures["final_loss"] = last["val_loss"]
        if last.get("val_accuracy") is not None:
            figures["final_accuracy"] = last["val_accuracy"]
        figures["loss_per_epoch"] = [e["train_loss"] for e in epochs]
        figures["val_loss_per_epoch"] = [e["val_loss"] for e in epochs]
    elif result.get("last_loss") is not None:
        figures["final_train_loss"] = result["last_loss"]
    return figures


def breakdown_figures(breakdown: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parts of a profiled step (mean over ranks; the largest rank's beside, `_max`), the
    communication in flight and hidden behind compute (and its share), the profiled step's time."""
    if not breakdown:
        return {}
    mean = {name: statistics.fmean(breakdown[f"{name}_s_per_rank"]) for name in (*PARTS, "step", "in_flight")}
    figures: dict[str, Any] = {"breakdown_steps": breakdown["steps"], "profiled_step_s": mean["step"]}
    for part, name in zip(BREAKDOWN, PARTS, strict=True):
        figures[part.name] = mean[name]
        figures[f"{part.name}_max"] = max(breakdown[f"{name}_s_per_rank"])
    figures[COMMUNICATION_IN_FLIGHT.name] = mean["in_flight"]
    figures[COMMUNICATION_HIDDEN.name] = hidden = statistics.fmean(breakdown["hidden_s_per_rank"])
    figures["communication_hidden_fraction"] = hidden / mean["in_flight"] if mean["in_flight"] > 0 else None
    return figures


@kept_on_disk(
    Counted, RANK_MODELS, Path(__file__).parent.parent / "saved_bytes.py", Path(__file__).with_name("spec.py")
)
def counted(model: str, width: int, depth: int, vocab: int, seq_len: int, heads: int, batch: int, dtype: str):
    """The rank program's own model counted on torch's meta device at a batch and dtype
    (models.counted_training; torch is imported here, when a shape not counted before is
    asked). Kept on disk: the check at load counts each shape once, and a run job (whose
    record carries the prediction) reads it without importing torch (seconds of every job)."""
    from .rank import models

    return models.counted_training(model, width, depth, vocab, seq_len, heads, batch, dtype)


class TorchParallel(App):
    name = "torch-parallel"
    packages = ("torch", "mpi4py")
    primary_metric = "samples_per_s"
    compared = {"strategy": "ddp"}
    quality = ("final_accuracy", "final_loss")
    metrics = (
        declare(
            "samples_per_s",
            "training samples per second, all ranks (global batch / median step time of the slowest rank)",
            "samples/s",
            "rate",
        ),
        declare(
            "samples_per_s_per_rank",
            "training samples per second per rank (mean over ranks; min, max, std beside)",
            "samples/s",
            "rate",
            extensive=False,
        ),
        declare("optimizer_step_s", "optimizer-step time (slowest rank, median of timed steps)", "s", "time"),
        declare("epoch_time_s", "time per epoch (slowest rank, mean over epochs)", "s", "time"),
        *IMAGES_PER_S,
        *BREAKDOWN,
        COMMUNICATION_IN_FLIGHT,
        COMMUNICATION_HIDDEN,
        declare("final_loss", "validation loss after the last epoch", "", "size"),
        declare("final_accuracy", "validation accuracy after the last epoch", "", "size"),
        declare(
            "peak_memory_gb",
            "peak memory per rank (CUDA max allocated; max RSS on CPU), largest rank",
            MEMORY_UNIT,
            "size",
        ),
        declare(
            "memory_growth_gb",
            "peak of tensor bytes per rank from before the model is built (CPU: malloc's held bytes over the build"
            " and warm-up steps, less MKL's own GEMM buffers; GPU: CUDA max allocated's growth), largest rank",
            MEMORY_UNIT,
            "size",
        ),
    )
    params = {
        "model": Param(str, required=True, choices=tuple(MODELS), help="the model family"),
        "strategy": Param(str, choices=STRATEGIES, help="how the model is spread across ranks", default="ddp"),
        "zero_stage": Param(int, choices=(1, 2, 3), help="fsdp: 1 optimizer, 2 + gradients, 3 + parameters", default=3),
        "group_size": Param(int, minimum=1, help="hybrid: ranks per tensor-parallel group", default=1),
        "mode": Param(
            str, choices=("throughput", "converge"), help="timed steps, or epochs to a loss", default="throughput"
        ),
        "batch_size": Param(int, minimum=1, help="samples per data-parallel replica per step", default=16),
        "micro_batches": Param(int, minimum=1, help="pipeline: micro-batches per batch", default=2),
        "precision": Param(
            str,
            choices=TRAINING_PRECISIONS,
            help="16-mixed: float16 autocast with a loss scaler (GPUs without bfloat16, e.g. V100)",
            default="32-true",
        ),
        "steps": Param(
            int,
            minimum=1,
            help="throughput: timed iterations of batches_per_iter steps (Horovod's synthetic benchmark: 10)",
            default=20,
        ),
        "warmup_steps": Param(
            int, minimum=0, help="throughput: untimed steps first (Horovod's warm-up batches: 10)", default=3
        ),
        "batches_per_iter": Param(
            int,
            minimum=1,
            help="throughput: steps per timed iteration (Horovod's num-batches-per-iter: 10; 1: each step timed)",
            default=1,
        ),
        "epochs": Param(int, minimum=1, help="converge: epochs", default=3),
        "samples": Param(
            int,
            minimum=1,
            help="converge: training samples, at least one global batch (a quarter more for validation)",
            default=512,
        ),
        "width": Param(int, minimum=1, help="channels or hidden size (default: the family's)"),
        "depth": Param(int, minimum=1, help="layers (default: the family's)"),
        "heads": Param(int, minimum=1, divides="width", help="gpt2: attention heads", default=4),
        "vocab": Param(int, minimum=2, help="token models: vocabulary size", default=64),
        "seq_len": Param(int, minimum=2, help="token models: sequence length", default=16),
        "lr": Param((int, float), minimum=0.0, help="AdamW learning rate", default=3e-3),
        "seed": Param(int, minimum=0, default=0),
        "device": Param(str, choices=("cpu", "cuda"), help="cpu: gloo; cuda: NCCL, one GPU per rank", default="cpu"),
        "breakdown_steps": Param(
            int,
            minimum=0,
            help="steps profiled after the timed ones for the time breakdown (0: none)",
            default=5,
        ),
    }

    def param_problems(self, params: Mapping[str, Any]) -> list[str]:
        problems = super().param_problems(params)
        if problems:
            return problems
        models, strategies = values(params["model"]), values(params.get("strategy", "ddp"))
        for strategy in strategies:
            if strategy in ("tensor", "hybrid"):
                for model in models:
                    if model not in TENSOR_MODELS:
                        problems.append(
                            f"params.strategy: {strategy} needs a model with a tensor-parallel plan, not "
                            f"{model!r}; allowed with {strategy}: {', '.join(TENSOR_MODELS)}"
                        )
        if "zero_stage" in params and "fsdp" not in strategies:
            problems.append("params.zero_stage: only fsdp has ZeRO stages; allowed: with strategy fsdp")
        precision = params.get("precision")
        if precision in SCALED_PRECISIONS:
            for strategy in strategies:
                if strategy not in SCALER_STRATEGIES:
                    problems.append(
                        f"params.precision: {precision} scales the loss (GradScaler), which the rank program does "
                        f"not do with strategy {strategy}; allowed with {precision}: {', '.join(SCALER_STRATEGIES)}"
                    )
        if "group_size" in params and "hybrid" not in strategies:
            problems.append("params.group_size: only hybrid has groups; allowed: with strategy hybrid")
        return problems

    def value(self, point: Point, name: str) -> Any:
        return self.size(point, name) if name in ("width", "depth") else self.setting(point, name)

    def uses(self, point: Point, name: str) -> bool:
        return name != "heads" or MODELS[point.params["model"]].transformer

    def replicas(self, point: Point) -> int:
        """Data-parallel replicas (see the module's docstring): the global batch is batch_size x this."""
        strategy = self.setting(point, "strategy")
        if strategy in ("pipeline", "tensor"):
            return 1
        if strategy == "hybrid":
            return max(1, point.ranks // self.setting(point, "group_size"))
        return point.ranks

    def preflight(self, point: Point) -> list[str]:
        model, strategy = point.params["model"], self.setting(point, "strategy")
        scale = f"at {point.ranks} ranks"
        batch, micro = self.setting(point, "batch_size"), self.setting(point, "micro_batches")
        problems = []
        family = MODELS[model]
        depth = self.size(point, "depth")
        if family.max_depth is not None and depth > family.max_depth:
            problems.append(
                f"params.depth: {model} halves its image's side at every layer, so depth {depth} leaves nothing "
                f"of the {IMAGE[1]}x{IMAGE[2]} image; allowed: 1 to {family.max_depth}"
            )
        if self.setting(point, "mode") == "converge":
            global_batch = batch * self.replicas(point)
            samples = self.setting(point, "samples")
            if samples < global_batch:
                problems.append(
                    f"params.samples: {samples} is less than one global batch {scale} (batch_size {batch} x "
                    f"{self.replicas(point)} replicas = {global_batch}): no step would run; allowed: at least "
                    f"{global_batch}"
                )
        if strategy == "pipeline":
            blocks = self.blocks(point)
            if blocks < point.ranks:
                problems.append(
                    f"params.model: {model} has {blocks} blocks, fewer than the {point.ranks} pipeline stages {scale}; "
                    "allowed: ranks <= blocks (raise depth)"
                )
            if batch % micro:
                problems.append(
                    f"params.micro_batches: {micro} does not divide batch_size {batch}; allowed: a divisor of it"
                )
        group = point.ranks if strategy == "tensor" else self.setting(point, "group_size")
        if strategy == "hybrid" and point.ranks % group:
            problems.append(
                f"params.group_size: {group} does not divide the {point.ranks} ranks {scale}; allowed: a divisor"
            )
        if strategy in ("tensor", "hybrid"):
            width, heads = self.size(point, "width"), self.setting(point, "heads")
            if (4 * width) % group or (MODELS[model].transformer and heads % group):
                problems.append(
                    f"params.strategy: {strategy} splits {model}'s heads ({heads}) and hidden size 4 x {width} "
                    f"over {group} ranks {scale}; allowed: group sizes that divide both"
                )
        if self.setting(point, "device") == "cuda" and not point.gpus_per_node:
            problems.append(
                "params.device: cuda needs gpus_per_node (one rank per GPU); allowed: cpu with ranks_per_node"
            )
        return problems

    def size(self, point: Point, name: str) -> int:
        return int(point.params.get(name) or model_setting(point.params["model"], name))

    def blocks(self, point: Point) -> int:
        """How many blocks the model has (a pipeline needs one per stage at least)."""
        return MODELS[point.params["model"]].blocks(self.size(point, "depth"))

    def memory(self, point: Point, figures: Mapping[str, Any] | None = None) -> Need:
        """The rank program's model counted on the meta device (nothing allocated), sharded as
        the strategy shards: fsdp by its ZeRO stage (units: the blocks), pipeline and tensor
        split over the ranks (GPipe keeps every micro-batch's activations until its backward:
        the whole batch), hybrid over its groups. Measured by CUDA max allocated on GPU, the
        rank's memory growth on CPU."""
        model, strategy = point.params["model"], self.setting(point, "strategy")
        width, depth = self.size(point, "width"), self.size(point, "depth")
        vocab, seq_len, heads = (self.setting(point, name) for name in ("vocab", "seq_len", "heads"))
        precision = PRECISIONS[self.setting(point, "precision")]
        batch = self.setting(point, "batch_size")
        # AdamW with foreach off (the rank program's), except stage 1's (below).
        try:
            count = counted(model, width, depth, vocab, seq_len, heads, batch, precision.compute)
        except RuntimeError as error:
            if "overflow" not in str(error):
                raise
            # torch cannot even count one of the model's tensors (more than 2^63 bytes).
            raise TooLarge(
                "width", f"a tensor of the {model} model has more bytes than torch can count ({error})"
            ) from None
        shape = Shape(
            parameters=count.parameters,
            activations=count.saved,
            transient=2 * count.largest,
            largest_unit=max(count.block_parameters),
            largest_tensor=count.largest_tensor,
        )
        ranks, on_gpu = point.ranks, self.setting(point, "device") == "cuda"
        if strategy == "fsdp":
            stage = self.setting(point, "zero_stage")
            # Stage 1 is DDP with ZeroRedundancyOptimizer (its AdamW foreach on a GPU by default).
            sharding = Sharding(data=ranks, zero_stage=stage, buckets=stage == 1)
            if stage == 1 and on_gpu:
                shape = replace(shape, foreach=True)
        elif strategy in ("pipeline", "tensor", "hybrid"):
            group = ranks if strategy != "hybrid" else self.setting(point, "group_size")
            sharding = Sharding(model=group, model_share=count.share(strategy, group))
        else:
            sharding = Sharding(buckets=True)
        return Need(
            shape=shape,
            precision=precision,
            micro_batch=batch,
            sharding=sharding,
            overhead=process_overhead(on_gpu),
            measured="peak_memory_gb" if on_gpu else "memory_growth_gb",
        )

    def loads_mpi4py(self, point: Point) -> bool:
        return point.ranks > 1  # the rendezvous goes through mpi4py where no PMIx file serves

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        command = [sys.executable, "-m", RANK_PROGRAM]
        strategy = self.setting(point, "strategy")
        for name in self.params:
            if name == "zero_stage" and strategy != "fsdp" or name == "group_size" and strategy != "hybrid":
                continue
            value = self.setting(point, name)
            if value is not None:
                command += [f"--{name.replace('_', '-')}", str(value)]
        return command

    def rank_env(self, point: Point) -> dict[str, str]:
        return {**super().rank_env(point), "HF_HUB_OFFLINE": "1"}

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        return parse_torch_parallel(log_text)

    def result_complete(self, log_text: str) -> bool:
        """Rank 0 prints the result line after gathering every rank's figures (each rank's step
        times, peaks, breakdown: collectives all of them joined after their timed steps)."""
        return any(line.startswith(RESULT_PREFIX + " ") for line in log_text.splitlines())
