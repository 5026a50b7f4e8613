"""What the torch-parallel planner (scalestudy.apps.torch_parallel) and its rank program
(scalestudy.apps.torch_parallel.rank) agree on, without torch: the model families, the
strategies and what each is in torch, and the lines rank 0 prints. Both import this module;
neither imports the other's top (the planner loads the rank's models inside a function, for
the memory model; the rank program never loads the planner).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EPOCH_PREFIX = "scalestudy-torch-epoch"
# The images the image families train on: channels, height, width.
IMAGE = (3, 32, 32)
# How often a layer that halves the image's side can halve it (32 -> 1: five times).
IMAGE_HALVINGS = IMAGE[1].bit_length() - 1
RESULT_PREFIX = "scalestudy-torch-result"
# Training precisions (model.memory.PRECISIONS names them alike). 16-mixed scales the loss
# (GradScaler), which only the strategies whose step the rank program runs itself have.
TRAINING_PRECISIONS = ("32-true", "bf16-mixed", "bf16-true", "16-mixed")
SCALED_PRECISIONS = ("16-mixed",)
SCALER_STRATEGIES = ("ddp", "fsdp")
# Throughput mode's protocol, Horovod's synthetic benchmark
# (examples/pytorch/pytorch_synthetic_benchmark.py): one fixed synthetic batch on the device,
# untimed warm-up batches, then timed iterations of several batches each; per iteration the
# samples (images) per second of a rank = batch x batches per iteration / the iteration's time,
# reported as the mean over the iterations with 1.96 x their standard deviation (numpy's, over
# n) as its spread, and the total as ranks x that (Horovod's defaults: batch 32, 10 warm-up
# batches, 10 iterations of 10 batches).
PROTOCOL = (
    "Horovod synthetic benchmark protocol: a fixed synthetic batch, warmup_steps untimed batches, then `steps` "
    "timed iterations of batches_per_iter batches; per iteration batch_size x batches_per_iter / its time"
)


class Task:
    """What a family learns: the loss and the accuracy follow from it."""

    CLASSIFY, RECONSTRUCT, TOKENS = "classify", "reconstruct", "tokens"


class Data:
    """What a family trains on (the rank program makes each from the seed)."""

    IMAGES = "images"  # 3x32x32 images of 10 classes (the autoencoder's target is the image)
    FEATURES = "features"  # 32 features, the class of a fixed linear teacher
    BAG = "bag"  # token sequences whose words come mostly from their class's tenth of the vocabulary
    REVERSAL = "reversal"  # a token sequence and the shifted target, its reversal
    RECURRENCE = "recurrence"  # next-token prediction on x[t+1] = (a x[t] + c) mod vocab


@dataclass(frozen=True)
class Family:
    """A model family: its task and data, its default size, whether its blocks have a
    tensor-parallel plan (column-parallel in, row-parallel out: MLP and decoder blocks) and
    attention heads (a transformer), and how many blocks it has at a depth (a pipeline needs
    one per stage): blocks_per_layer x depth + fixed_blocks. `halves_image`: each layer halves
    the image's side (the cnn's pooling, the autoencoder's strided convolutions), so its depth
    is at most IMAGE_HALVINGS."""

    task: str
    data: str
    width: int
    depth: int
    blocks_per_layer: int
    fixed_blocks: int
    tensor: bool = False
    transformer: bool = False
    halves_image: bool = False

    @property
    def max_depth(self) -> int | None:
        return IMAGE_HALVINGS if self.halves_image else None

    def blocks(self, depth: int) -> int:
        return self.blocks_per_layer * depth + self.fixed_blocks


MODELS: dict[str, Family] = {
    # 5 convolution stages, the classifier, the output layer (its depth is VGG11's own).
    "vgg11": Family(Task.CLASSIFY, Data.IMAGES, width=8, depth=8, blocks_per_layer=0, fixed_blocks=7),
    "cnn": Family(Task.CLASSIFY, Data.IMAGES, width=16, depth=2, blocks_per_layer=1, fixed_blocks=1, halves_image=True),
    "autoencoder": Family(
        Task.RECONSTRUCT, Data.IMAGES, width=16, depth=2, blocks_per_layer=2, fixed_blocks=0, halves_image=True
    ),
    "bow": Family(Task.CLASSIFY, Data.BAG, width=64, depth=2, blocks_per_layer=1, fixed_blocks=2, tensor=True),
    # embedding, encoder, decoder, head
    "seq2seq": Family(Task.TOKENS, Data.REVERSAL, width=64, depth=1, blocks_per_layer=0, fixed_blocks=4),
    "seq2seq-lstm": Family(Task.TOKENS, Data.REVERSAL, width=64, depth=1, blocks_per_layer=0, fixed_blocks=4),
    "mlp": Family(Task.CLASSIFY, Data.FEATURES, width=64, depth=2, blocks_per_layer=1, fixed_blocks=2, tensor=True),
    # the stem, 16 bottlenecks, the head (its depth is its name's: 50 layers)
    "resnet50": Family(Task.CLASSIFY, Data.IMAGES, width=8, depth=50, blocks_per_layer=0, fixed_blocks=18),
    "gpt2": Family(
        Task.TOKENS,
        Data.RECURRENCE,
        width=64,
        depth=2,
        blocks_per_layer=1,
        fixed_blocks=2,
        tensor=True,
        transformer=True,
    ),
}
# What each strategy is in torch (the fsdp entry by ZeRO stage).
IMPLEMENTATIONS: dict[str, Any] = {
    "ddp": "DistributedDataParallel",
    "fsdp": {
        1: "DDP + ZeroRedundancyOptimizer (optimizer states sharded)",
        2: "FSDP2 fully_shard(reshard_after_forward=False) (optimizer states and gradients sharded)",
        3: "FSDP2 fully_shard (optimizer states, gradients and parameters sharded)",
    },
    "pipeline": "torch.distributed.pipelining ScheduleGPipe (blocks split across ranks, micro-batched)",
    "tensor": "DTensor tensor parallel (column-parallel in, row-parallel out) across all ranks",
    "hybrid": "DTensor tensor parallel within groups of group_size ranks, gradients averaged across groups",
}
STRATEGIES = tuple(IMPLEMENTATIONS)
TENSOR_MODELS = tuple(name for name, family in MODELS.items() if family.tensor)


def model_setting(model: str, name: str) -> int:
    """A family's default width or depth."""
    return getattr(MODELS[model], name)


# ---------------------------------------------------------------- the time breakdown of a step
# The rank program profiles `breakdown_steps` steps after the timed ones (torch.profiler), so the
# timed figure is measured without it; these are the parts it splits each profiled step into,
# disjoint and adding up to the step. Their definitions are what the app declares.
REGION_PREFIX = "scalestudy."
STEP_REGION = "step"
PARTS: dict[str, str] = {
    "data": "moving the step's batch to the rank's device (the batch is made once, in memory)",
    "compute": "forward, loss and backward (pipeline: the schedule's whole step; hybrid: with the gradient "
    "averaging across groups), less the exposed communication in it",
    "communication": "exposed communication: a collective or point-to-point operation in flight (gloo, NCCL, c10d "
    "events on any thread) while the rank runs no compute operator",
    "optimizer": "the optimizer step (ZeRO-1: with its parameter broadcast), less the exposed communication in it",
    "other": "the rest of the step: zero_grad, device synchronisation, Python between the parts",
}
# The parts that are regions of Trainer.step (the rest are found in the profile).
REGIONS = ("data", "compute", "optimizer")
# Profiler event names of communication: the process-group ops (c10d), their backends' own events
# (gloo:all_reduce, nccl:all_reduce), functional collectives (tensor parallelism) and NCCL's kernels.
COMMUNICATION_PREFIXES = ("c10d::", "gloo:", "nccl:", "_c10d_functional::", "c10d_functional::", "record_param_comms",
                          "mpi:", "ncclKernel", "ncclDevKernel")  # fmt: skip
# Events that are compute: ATen operators and autograd's backward functions (on any thread), and
# device kernels that are not communication. Containers (a module's forward, DDP's reducer
# callbacks, the optimizer's step) are not: a wait inside them is not compute.
COMPUTE_PREFIXES = ("aten::", "autograd::engine::evaluate_function")


@dataclass(frozen=True)
class Span:
    """One profiler event: its name, thread, start and end (any one clock), whether it ran on a
    device (a kernel), and whether it is nested inside a communication event."""

    name: str
    thread: int
    start: float
    end: float
    device: bool = False
    in_communication: bool = False


def is_communication(name: str) -> bool:
    return name.startswith(COMMUNICATION_PREFIXES)


def is_compute(span: Span) -> bool:
    if is_communication(span.name) or span.in_communication or span.name.startswith(REGION_PREFIX):
        return False
    return span.device or span.name.startswith(COMPUTE_PREFIXES)


Intervals = list[tuple[float, float]]


def union(intervals: Any) -> Intervals:
    """Sorted, disjoint intervals covering the same time as `intervals`."""
    merged: Intervals = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def intersection(a: Intervals, b: Intervals) -> Intervals:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if end > start:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def difference(a: Intervals, b: Intervals) -> Intervals:
    """The time of `a` outside `b` (both disjoint and sorted)."""
    out = []
    for start, end in a:
        for cut_start, cut_end in b:
            if cut_end <= start or cut_start >= end:
                continue
            if cut_start > start:
                out.append((start, cut_start))
            start = max(start, cut_end)
        if end > start:
            out.append((start, end))
    return out


def length(intervals: Intervals) -> float:
    return sum(end - start for start, end in intervals)


def step_parts(spans: list[Span]) -> list[dict[str, float]]:
    """Each profiled step (a `scalestudy.step` span) split into PARTS (in the spans' time unit),
    with `step` (its wall time), `in_flight` (communication in flight, hidden or not) and
    `hidden` (communication in flight while a compute operator runs: the overlap)."""
    steps = sorted((s for s in spans if s.name == REGION_PREFIX + STEP_REGION), key=lambda s: s.start)
    communication = union((s.start, s.end) for s in spans if is_communication(s.name) and not s.in_communication)
    compute = union((s.start, s.end) for s in spans if is_compute(s))
    out = []
    for step in steps:
        window = [(step.start, step.end)]
        in_flight = intersection(communication, window)
        hidden = intersection(in_flight, compute)
        exposed = difference(in_flight, hidden)
        parts = {"communication": length(exposed)}
        for region in REGIONS:
            # The regions are on the step's own thread (a pipeline's are one per step as well).
            inside = union((s.start, s.end) for s in spans if s.name == REGION_PREFIX + region
                           and s.thread == step.thread)  # fmt: skip
            parts[region] = length(difference(intersection(inside, window), exposed))
        parts["other"] = max(0.0, (step.end - step.start) - sum(parts.values()))
        out.append({**parts, "step": step.end - step.start, "in_flight": length(in_flight), "hidden": length(hidden)})
    return out


# The model as the memory model counts it (apps.torch_parallel.counted, kept on disk so that a run
# job reads it without torch) and the pipeline's cut, which the rank program uses too.
@dataclass(frozen=True)
class Counted:
    """The rank program's model as the memory model needs it: parameters, bytes autograd saves
    at the batch counted, the largest saved storage, each block's parameters, the largest
    parameter tensor, and the parameters a tensor-parallel plan splits."""

    parameters: int
    saved: int
    largest: int
    block_parameters: tuple[int, ...]
    largest_tensor: int
    tensor_sharded: int

    def share(self, strategy: str, ranks: int) -> float:
        """The fraction of the parameters the busiest of `ranks` holds: pipeline, the largest
        stage (split_points); tensor, the replicated parameters and its part of the split ones."""
        if strategy == "pipeline":
            cuts = split_points(list(self.block_parameters), ranks)
            stages = [sum(self.block_parameters[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
            return max(stages) / max(self.parameters, 1)
        if strategy in ("tensor", "hybrid"):
            return (self.parameters - self.tensor_sharded * (1 - 1 / ranks)) / max(self.parameters, 1)
        return 1.0


def split_points(sizes: list[int], stages: int) -> list[int]:
    """Where to cut blocks of `sizes` parameters into `stages` contiguous runs of about equal
    size, each at least one block (needs len(sizes) >= stages): each stage's first block,
    then len(sizes)."""
    total, cuts, running = sum(sizes) or 1, [0], 0
    for i, size in enumerate(sizes[:-1]):
        needed = stages - len(cuts)
        if needed == 0:
            break
        running += size
        if running >= total * len(cuts) / stages or len(sizes) - (i + 1) == needed:
            cuts.append(i + 1)
    return [*cuts, len(sizes)]
