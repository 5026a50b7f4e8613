# Stays whole: one rank's life on one argument namespace (group, strategy, Trainer, loops); models, breakdown are apart.
"""One rank of a torch-parallel point, launched by mpirun (see the package's docstring).

Rank and world come from the MPI environment (Open MPI, MPICH/Hydra, PMIx, Slurm); rank 0's
host and a free port reach every rank through MPI (mpi4py), then torch.distributed joins
with gloo on CPU or NCCL on GPU (one GPU per rank: the local rank's).

Strategies (what each is in torch):
- ddp: DistributedDataParallel.
- fsdp: zero_stage 1: DDP with ZeroRedundancyOptimizer (optimizer states sharded);
  2: FSDP2 `fully_shard(reshard_after_forward=False)` (gradients and optimizer states
  sharded, parameters gathered from forward to backward); 3: FSDP2 `fully_shard` (all three).
- pipeline: the blocks split across all ranks into stages of about equal parameters,
  torch.distributed.pipelining's GPipe schedule over `micro_batches` micro-batches.
- tensor: DTensor tensor parallelism over all ranks of the MLP / decoder blocks
  (column-parallel in, row-parallel out), the rest replicated.
- hybrid: tensor parallelism within groups of `group_size` ranks, the groups replicated
  (gradients averaged across groups after each backward).

`batch_size` is per data-parallel replica: the global batch is batch_size x replicas
(ddp, fsdp: every rank is a replica; pipeline, tensor: one replica; hybrid: ranks /
group_size). Rank 0 prints one `scalestudy-torch-epoch {json}` line per epoch (converge)
and one `scalestudy-torch-result {json}` line at the end, with every rank's figures.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import resource
import socket
import statistics
import sys
import tempfile
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ....model.rank_probe import (
    LOCAL_RANK_VARIABLES,
    LOCAL_SIZE_VARIABLES,
    RANK_VARIABLES,
    RENDEZVOUS_PREFIX,
    SIZE_VARIABLES,
    end_rank,
    first_int,
)
from ....model.units import KIB
from ...tensor_peak import TensorPeak, malloc_held
from ..spec import (
    EPOCH_PREFIX,
    IMPLEMENTATIONS,
    MODELS,
    RESULT_PREFIX,
    TRAINING_PRECISIONS,
    model_setting,
    split_points,
)
from . import models
from .breakdown import no_region, profiled_parts

# The autocast dtype of each mixed precision (weights, gradients and AdamW stay float32).
AUTOCAST = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
# The backend of each device: gloo between CPU ranks, NCCL between GPUs (one per rank).
BACKENDS = {"cpu": "gloo", "cuda": "nccl"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def rendezvous(rank: int, world: int) -> str:
    """Where the ranks meet. One rank: itself. All ranks on one node under Open MPI / PMIx: a
    file named by the launch's PMIx namespace (no MPI start-up, about a second per rank).
    Otherwise rank 0's host and a free port, sent to every rank through MPI (mpi4py)."""
    if world == 1:
        return f"tcp://127.0.0.1:{free_port()}"
    namespace = os.environ.get("PMIX_NAMESPACE", "")
    if namespace and first_int(LOCAL_SIZE_VARIABLES, 0) == world:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in namespace)
        return f"file://{tempfile.gettempdir()}/scalestudy-torch-{os.getuid()}-{safe}"
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    found = (os.environ.get("MASTER_ADDR") or socket.gethostname(), free_port()) if rank == 0 else None
    address, port = comm.bcast(found, root=0)
    return f"tcp://{address}:{port}"


def join_process_group(device: str) -> tuple[int, int, torch.device]:
    """torch.distributed from the MPI launch: rank and world from the MPI environment, the
    backend from the device, one GPU per rank (the local rank's)."""
    rank, world = first_int(RANK_VARIABLES, 0), first_int(SIZE_VARIABLES, 1)
    local_rank = first_int(LOCAL_RANK_VARIABLES, 0)
    if device == "cuda":
        torch.cuda.set_device(local_rank)
        where = torch.device("cuda", local_rank)
    else:
        where = torch.device("cpu")
    meet = rendezvous(rank, world)
    if rank == 0:
        print(f"{RENDEZVOUS_PREFIX} {meet}", flush=True)
    dist.init_process_group(BACKENDS[device], init_method=meet, rank=rank, world_size=world)
    return rank, world, where


STRATEGY_MODULES = {
    "ddp": ("torch.nn.parallel",),
    "fsdp": ("torch.nn.parallel", "torch.distributed.optim", "torch.distributed.fsdp"),
    "pipeline": ("torch.distributed.pipelining",),
    "tensor": ("torch.distributed.device_mesh", "torch.distributed.tensor.parallel"),
    "hybrid": ("torch.distributed.device_mesh", "torch.distributed.tensor.parallel"),
}


def import_strategy(strategy: str) -> None:
    """The strategy's modules, loaded before the memory baseline: their code is not training's."""
    import importlib

    for name in STRATEGY_MODULES[strategy]:
        importlib.import_module(name)


def peak_memory_bytes(device: torch.device) -> int:
    """CUDA max allocated on GPU; the process's max RSS on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KIB  # ru_maxrss: KiB on Linux


class Trainer:
    """The model wrapped by its strategy, and one optimizer step / one evaluation of a batch."""

    def __init__(self, args: argparse.Namespace, rank: int, world: int, device: torch.device) -> None:
        self.args, self.rank, self.world, self.device = args, rank, world, device
        self.task = models.task_of(args.model)
        self.replicas, self.replica = world, rank  # data-parallel replicas; this rank's
        self.pipeline_last = True
        self.dp_group = None
        # The parts of a step (data, compute, optimizer) as profiler regions: nothing unless the
        # breakdown's profiled steps set it (breakdown.profiled_parts).
        self.region = no_region
        self.tracker: TensorPeak | None = None
        torch.manual_seed(args.seed)
        strategy = args.strategy
        # The model is described on the meta device; sharded strategies give each rank memory for
        # its own share only (as large-model training does), the others build it whole. Either
        # way each block starts from the same values (initial_state: seeded per block), so every
        # strategy trains the same model.
        self.on_meta = strategy in ("pipeline", "tensor", "hybrid") or (strategy == "fsdp" and args.zero_stage >= 2)
        self.dtype = dtype = torch.bfloat16 if args.precision == "bf16-true" else torch.float32
        with torch.device("meta"):
            self.templates = [
                b.to(dtype=dtype)
                for b in models.blocks(args.model, args.width, args.depth, args.vocab, args.seq_len, args.heads)
            ]
        self.parameters = sum(p.numel() for b in self.templates for p in b.parameters())
        if self.on_meta:
            blocks = [copy.deepcopy(t) for t in self.templates]
        else:
            blocks = [
                self.initialised(i, copy.deepcopy(t).to_empty(device=device)) for i, t in enumerate(self.templates)
            ]
        if strategy == "ddp" or (strategy == "fsdp" and args.zero_stage == 1):
            from torch.nn.parallel import DistributedDataParallel

            self.model = DistributedDataParallel(nn.Sequential(*blocks), device_ids=self.device_ids())
            if strategy == "fsdp":
                from torch.distributed.optim import ZeroRedundancyOptimizer

                self.optimizer = ZeroRedundancyOptimizer(
                    self.model.parameters(), optimizer_class=torch.optim.AdamW, lr=args.lr
                )
        elif strategy == "fsdp":
            from torch.distributed.fsdp import fully_shard

            model = nn.Sequential(*blocks)
            for block in blocks:
                if any(True for _ in block.parameters()):
                    fully_shard(block, reshard_after_forward=args.zero_stage == 3)
            self.model = fully_shard(model, reshard_after_forward=args.zero_stage == 3).to_empty(device=device)
            for i, block in enumerate(blocks):
                self.initialised(i, block)
        elif strategy == "pipeline":
            self.setup_pipeline(blocks)
        elif strategy in ("tensor", "hybrid"):
            self.setup_tensor(blocks, args.group_size if strategy == "hybrid" else world)
        else:
            raise ValueError(f"unknown strategy {strategy!r}")
        if not hasattr(self, "optimizer"):
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, foreach=False)
        # 16-mixed: float16's narrow range needs the loss scaled (torch's GradScaler, on CPU as on
        # CUDA); FSDP2's sharded gradients need the sharded scaler's check of every rank's shard.
        self.scaler = None
        if args.precision == "16-mixed":
            if strategy == "fsdp" and args.zero_stage >= 2:
                from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

                self.scaler = ShardedGradScaler(device.type)
            else:
                self.scaler = torch.amp.GradScaler(device.type)

    def initialised(self, index: int, block: nn.Module) -> nn.Module:
        """`block` (given memory, maybe sharded) holding block `index`'s initial values."""
        state = initial_state(self.templates[index], self.args.seed, index)
        with torch.no_grad():
            for name, tensor in [*block.named_parameters(), *block.named_buffers()]:
                value = state[name]
                if hasattr(tensor, "device_mesh"):  # a DTensor (FSDP2, tensor parallel): this rank's part
                    from torch.distributed.tensor import distribute_tensor

                    value = distribute_tensor(
                        value.to(tensor.device_mesh.device_type),
                        tensor.device_mesh,
                        tensor.placements,
                        src_data_rank=None,
                    ).to_local()
                    tensor = tensor.to_local()
                tensor.copy_(value)
        return block

    def tracking(self):
        """The tensor-bytes tracker on (CPU ranks), or nothing."""
        return self.tracker if self.tracker is not None else contextlib.nullcontext()

    def device_ids(self) -> list[int] | None:
        return [self.device.index] if self.device.type == "cuda" else None

    def setup_pipeline(self, blocks: list[nn.Module]) -> None:
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

        cuts = split_points([sum(p.numel() for p in b.parameters()) for b in blocks], self.world)
        first, last = cuts[self.rank], cuts[self.rank + 1]
        self.model = Stage(blocks[first:last]).to_empty(device=self.device)
        for i in range(first, last):
            self.initialised(i, blocks[i])
        self.replicas, self.replica = 1, 0
        self.pipeline_last = self.rank == self.world - 1
        stage = PipelineStage(self.model, self.rank, self.world, self.device)
        self.schedule = ScheduleGPipe(stage, self.args.micro_batches, loss_fn=self.loss)

    def setup_tensor(self, blocks: list[nn.Module], group_size: int) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        replicas = self.world // group_size
        mesh = init_device_mesh(self.device.type, (replicas, group_size), mesh_dim_names=("dp", "tp"))
        for block in blocks:
            plan = models.tensor_plan(block)
            if plan:
                parallelize_module(block, mesh["tp"], plan)
        self.model = nn.Sequential(*blocks).to_empty(device=self.device)
        for i, block in enumerate(blocks):
            self.initialised(i, block)
        self.replicas, self.replica = replicas, mesh.get_local_rank("dp")
        if replicas > 1:
            self.dp_group = mesh["dp"].get_group()
            # Every replica starts from the same weights (the seed is the same; say so anyway).
            for p in self.model.parameters():
                dist.broadcast(local(p), group=self.dp_group, group_src=0)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        """A batch on the rank's device, images in the weights' precision (tokens stay integers)."""
        return x.to(self.device, dtype=self.dtype) if x.is_floating_point() else x.to(self.device)

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return models.loss_of(self.task, output, target)

    def autocast(self):
        if self.args.precision in AUTOCAST:
            return torch.autocast(self.device.type, dtype=AUTOCAST[self.args.precision])
        return contextlib.nullcontext()

    def step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, int]:
        """One optimizer step on this replica's batch: (loss, right predictions, predictions);
        on pipeline ranks other than the last, zeros (the last stage has the loss)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with self.region("data"):
            x, y = self.inputs(x), y.to(self.device)
        if self.args.strategy == "pipeline":
            losses: list[torch.Tensor] = []
            with self.region("compute"), self.autocast():
                if self.rank == 0:
                    output = self.schedule.step(x, target=y if self.pipeline_last else None, losses=losses)
                else:
                    output = self.schedule.step(target=y if self.pipeline_last else None, losses=losses)
            with self.region("optimizer"):
                self.optimizer.step()
            if not self.pipeline_last:
                return 0.0, 0.0, 0
            right, count = models.correct_of(self.task, output.detach(), y)
            return float(torch.stack([loss.detach() for loss in losses]).mean()), right, count
        with self.region("compute"):
            with self.autocast():
                output = self.model(x)
                loss = self.loss(output, y)
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            if self.dp_group is not None:
                for p in self.model.parameters():
                    if p.grad is not None:
                        grad = local(p.grad)
                        dist.all_reduce(grad, group=self.dp_group)
                        grad /= self.replicas
        with self.region("optimizer"):
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        right, count = models.correct_of(self.task, output.detach(), y)
        return float(loss.detach()), right, count

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, int]:
        self.model.eval()
        x, y = self.inputs(x), y.to(self.device)
        if self.args.strategy == "pipeline":
            losses: list[torch.Tensor] = []
            target = y if self.pipeline_last else None
            with self.autocast():
                output = self.schedule.eval(*((x,) if self.rank == 0 else ()), target=target, losses=losses)
            if not self.pipeline_last:
                return 0.0, 0.0, 0
            right, count = models.correct_of(self.task, output, y)
            return float(torch.stack([loss.detach() for loss in losses]).mean()), right, count
        with self.autocast():
            output = self.model(x)
            loss = self.loss(output, y)
        right, count = models.correct_of(self.task, output, y)
        return float(loss), right, count


def initial_state(template: nn.Module, seed: int, index: int) -> dict[str, torch.Tensor]:
    """The initial values of block `index` (its parameters and buffers by name): the block
    built whole on the CPU (one block at a time, never the model) and initialised as its modules
    initialise themselves, from a generator seeded by the seed and the block's index."""
    block = copy.deepcopy(template).to_empty(device="cpu")
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed * 1_000_003 + index)
        for part in block.modules():
            if hasattr(part, "reset_parameters"):
                part.reset_parameters()
    return dict([*block.named_parameters(), *block.named_buffers()])


class ContiguousGrad(torch.autograd.Function):
    """Identity forward; the gradient made contiguous (what a pipeline stage sends back must be)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


class Stage(nn.Module):
    """A pipeline stage: its blocks, with contiguous outputs and input gradients (the
    seq2seq encoder's context is an expanded view)."""

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_floating_point() and x.requires_grad:
            x = ContiguousGrad.apply(x)
        return self.blocks(x).contiguous()


def local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (tensor parallelism), or the tensor itself."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def reduced(values: list[float], device: torch.device) -> list[float]:
    """Sums over all ranks (float64 on the backend's device)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def gathered(value: float, device: torch.device, world: int) -> list[float]:
    mine = torch.tensor([value], dtype=torch.float64, device=device)
    out = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(out, mine)
    return [float(t) for t in out]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def batches(x: torch.Tensor, y: torch.Tensor, batch: int, replica: int, replicas: int, epoch: int, seed: int):
    """This replica's batches of one epoch: the same shuffle on every rank (seed + epoch),
    each replica a contiguous share of every global batch; the last partial batch dropped."""
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
    global_batch = batch * replicas
    for start in range(0, len(x) - global_batch + 1, global_batch):
        mine = order[start + replica * batch : start + (replica + 1) * batch]
        yield x[mine], y[mine]


def run_converge(trainer: Trainer, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    validation = max(args.batch_size * trainer.replicas, args.samples // 4)
    x, y = models.make_data(args.model, args.samples + validation, args.vocab, args.seq_len, args.seed)
    train_x, train_y, val_x, val_y = x[: args.samples], y[: args.samples], x[args.samples :], y[args.samples :]
    epochs, step_times = [], []
    for epoch in range(1, args.epochs + 1):
        synchronize(device)
        dist.barrier()
        started = time.perf_counter()
        sums = [0.0, 0.0, 0.0, 0.0]  # loss x steps, steps, right, predictions
        for bx, by in batches(train_x, train_y, args.batch_size, trainer.replica, trainer.replicas, epoch, args.seed):
            step_started = time.perf_counter()
            # CPU memory: tracked over the first step (it allocates the optimizer's state).
            with trainer.tracking() if not step_times else contextlib.nullcontext():
                loss, right, count = trainer.step(bx, by)
            synchronize(device)
            step_times.append(time.perf_counter() - step_started)
            holds_loss = trainer.pipeline_last
            sums = [sums[0] + loss * holds_loss, sums[1] + holds_loss, sums[2] + right, sums[3] + count]
        synchronize(device)
        dist.barrier()
        epoch_time = time.perf_counter() - started
        val = [0.0, 0.0, 0.0, 0.0]
        for bx, by in batches(val_x, val_y, args.batch_size, trainer.replica, trainer.replicas, 0, args.seed):
            loss, right, count = trainer.evaluate(bx, by)
            holds_loss = trainer.pipeline_last
            val = [val[0] + loss * holds_loss, val[1] + holds_loss, val[2] + right, val[3] + count]
        total = reduced(sums + val, device)
        record = {
            "epoch": epoch,
            "train_loss": total[0] / max(total[1], 1),
            "train_accuracy": total[2] / total[3] if total[3] else None,
            "val_loss": total[4] / max(total[5], 1),
            "val_accuracy": total[6] / total[7] if total[7] else None,
            "epoch_time_s": max(gathered(epoch_time, device, trainer.world)),
        }
        epochs.append(record)
        if trainer.rank == 0:
            print(f"{EPOCH_PREFIX} {json.dumps(record, sort_keys=True)}", flush=True)
    steps_per_epoch = len(step_times) // max(args.epochs, 1)
    return {
        "epochs": epochs,
        "step_times": step_times[min(steps_per_epoch, len(step_times) - 1) :] or step_times,
        "steps": len(step_times),
    }


def run_throughput(trainer: Trainer, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Horovod's synthetic benchmark protocol (torch_parallel.spec.PROTOCOL): one fixed synthetic
    batch, `warmup_steps` untimed steps, then `steps` timed iterations of `batches_per_iter`
    steps each (one: each step timed alone, as before the protocol had iterations). CPU memory
    is tracked over the warm-up steps (over the build only where there are none)."""
    x, y = models.make_data(args.model, args.batch_size, args.vocab, args.seq_len, args.seed + 1 + trainer.replica)
    last = None
    with trainer.tracking():
        for _ in range(args.warmup_steps):
            last = trainer.step(x, y)
    synchronize(device)
    dist.barrier()
    iteration_times = []
    for _ in range(args.steps):
        started = time.perf_counter()
        for _ in range(args.batches_per_iter):
            last = trainer.step(x, y)
        synchronize(device)
        iteration_times.append(time.perf_counter() - started)
    loss = reduced([last[0] * trainer.pipeline_last, float(trainer.pipeline_last)], device)
    return {
        # A step's time: its iteration's share.
        "step_times": [t / args.batches_per_iter for t in iteration_times],
        "iteration_times": iteration_times,
        "steps": args.steps * args.batches_per_iter,
        "last_loss": loss[0] / max(loss[1], 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalestudy.apps.torch_parallel.rank")
    parser.add_argument(
        "--model", required=True, type=model_list, help="a model, or several (a,b,c): one after another, one launch"
    )
    parser.add_argument(
        "--strategy",
        required=True,
        type=strategy_list,
        help="a strategy, or several (ddp,fsdp:2,hybrid:2: the number is fsdp's ZeRO stage, hybrid's group size)",
    )
    parser.add_argument("--zero-stage", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--group-size", type=int, default=1)
    parser.add_argument("--mode", default="throughput", choices=("throughput", "converge"))
    parser.add_argument("--batch-size", type=int, required=True, help="samples per data-parallel replica per step")
    parser.add_argument("--micro-batches", type=int, default=1)
    parser.add_argument("--precision", default="32-true", choices=TRAINING_PRECISIONS)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument(
        "--batches-per-iter", type=int, default=1, help="throughput: steps per timed iteration (Horovod's 10)"
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--width", type=int)
    parser.add_argument("--depth", type=int)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument(
        "--breakdown-steps", type=int, default=0, help="steps profiled after the timed ones for the time breakdown"
    )
    args = parser.parse_args(argv)
    width, depth, names, strategies = args.width, args.depth, args.model, args.strategy
    rank, world, device = join_process_group(args.device)
    for strategy, _number in strategies:
        import_strategy(strategy)
        if strategy in ("ddp", "fsdp"):
            import torch._dynamo.utils  # noqa: F401 - DDP loads it on first use (seconds of code, no data)
    # Several strategies and models in one launch (the tests' way to train every pair cheaply);
    # the app passes one of each.
    for strategy, number in strategies:
        args.strategy = strategy
        if number is not None:
            args.zero_stage, args.group_size = (
                (number, args.group_size) if strategy == "fsdp" else (args.zero_stage, number)
            )
        for model in names:
            if strategy in ("tensor", "hybrid") and not MODELS[model].tensor:
                continue
            args.model = model
            args.width, args.depth = width or model_setting(model, "width"), depth or model_setting(model, "depth")
            train(args, rank, world, device)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def strategy_list(text: str) -> list[tuple[str, int | None]]:
    out = []
    for item in text.split(","):
        name, _, number = item.partition(":")
        if name not in IMPLEMENTATIONS or (number and not number.isdigit()):
            raise argparse.ArgumentTypeError(f"unknown strategy {item!r}; allowed: {', '.join(IMPLEMENTATIONS)}")
        out.append((name, int(number) if number else None))
    return out


def model_list(text: str) -> list[str]:
    names = text.split(",")
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown model {', '.join(unknown)}; allowed: {', '.join(MODELS)}")
    return names


def train(args: argparse.Namespace, rank: int, world: int, device: torch.device) -> None:
    """Train one model and print its result line (rank 0)."""
    baseline = peak_memory_bytes(device)
    held = malloc_held() if device.type == "cpu" else None
    tracker = TensorPeak(held) if held else None
    with tracker if tracker is not None else contextlib.nullcontext():
        trainer = Trainer(args, rank, world, device)
    trainer.tracker = tracker
    run = (run_converge if args.mode == "converge" else run_throughput)(trainer, args, device)
    times = run["step_times"]
    # The median: on a shared machine a few steps wait for another job's process, and a mean
    # of millisecond steps follows them.
    step_time = statistics.median(times)
    global_batch = args.batch_size * trainer.replicas
    step_times = gathered(step_time, device, world)
    peaks = gathered(float(peak_memory_bytes(device)), device, world)
    # CPU: the tensor bytes' peak over the build and the tracked steps; GPU: max allocated's growth.
    grown = tracker.peak if tracker is not None else peak_memory_bytes(device) - baseline
    growth = gathered(float(grown), device, world)
    breakdown = step_breakdown(trainer, args, device, world)
    if rank == 0:
        result = {
            "model": args.model,
            "strategy": args.strategy,
            "group_size": args.group_size if args.strategy == "hybrid" else None,
            "implementation": IMPLEMENTATIONS[args.strategy]
            if args.strategy != "fsdp"
            else IMPLEMENTATIONS["fsdp"][args.zero_stage],
            "zero_stage": args.zero_stage if args.strategy == "fsdp" else None,
            "mode": args.mode,
            "world": world,
            "replicas": trainer.replicas,
            "batch_size_per_replica": args.batch_size,
            "global_batch": global_batch,
            "parameters": trainer.parameters,
            "activation_values_per_sample": models.activation_values(
                args.model, args.width, args.depth, args.vocab, args.seq_len, args.heads, batch=1
            ),
            "precision": args.precision,
            "device": device.type,
            "backend": dist.get_backend(),
            "timed_steps": len(times),
            # Every rank works on every global batch: its share of the samples is global / world.
            "step_time_s_per_rank": step_times,
            # Throughput's timed iterations (PROTOCOL), rank 0's as Horovod reports them.
            "batches_per_iter": args.batches_per_iter if args.mode == "throughput" else None,
            "iteration_time_s_rank0": run.get("iteration_times"),
            "samples_per_s_per_rank": [global_batch / world / t for t in step_times],
            "peak_memory_bytes_per_rank": peaks,
            "memory_growth_bytes_per_rank": growth,
            "epochs": run.get("epochs", []),
            "last_loss": run.get("last_loss"),
            "breakdown": breakdown,
        }
        print(f"{RESULT_PREFIX} {json.dumps(result, sort_keys=True)}", flush=True)


def step_breakdown(trainer: Trainer, args: argparse.Namespace, device: torch.device, world: int) -> dict | None:
    """Every rank's parts of a profiled step (after the timed steps and the memory peaks, so
    neither sees the profiler), on a batch made as the throughput loop makes it."""
    if args.breakdown_steps <= 0:
        return None
    seed = args.seed + 1 + trainer.replica
    x, y = models.make_data(args.model, args.batch_size, args.vocab, args.seq_len, seed)
    parts = profiled_parts(trainer, x, y, args.breakdown_steps, synchronize)
    return {"steps": args.breakdown_steps, **{f"{name}_s_per_rank": gathered(value, device, world)
                                              for name, value in parts.items()}}  # fmt: skip


if __name__ == "__main__":
    end_rank(main(sys.argv[1:]))  # without the interpreter's teardown (rank_probe.end_rank)
