"""The memory a training rank holds at its peak, before anything runs, and whether it fits.

Terms (bytes per rank; p parameters held, t of them trained (LoRA: the adapters; else t = p),
f = p - t frozen, d data-parallel ranks a ZeRO stage z shards over, n ranks that split the
model (pipeline stages, tensor-parallel groups)):

    weights      w t / (d if z = 3)  +  w f x (1 if unsharded; 1/d if z = 3; 1 + 1/d where the
                                          frozen weights stay gathered, see Sharding)
    gradients    g t        (z < 2)      g t / d   (z >= 2; none with an optimizer gradient partition)
                 and DDP's buckets, a second g t
    optimizer    (2 m + M) t / (d if z >= 1)  +  G t / d (z >= 1)
    activations  what autograd saves for the backward, counted by the app on a meta-device
                 forward of the model it runs (its precision, attention kernel, LoRA branches,
                 logits and loss; per checkpointed block only the block's inputs and one block
                 recomputed); with model parallelism the busiest rank's share
    transient    the larger of the backward's working set (the largest op's gradients) and
                 the optimizer step's temporaries; plus stage 3's gathered units and their
                 gradients (a DeepSpeed stage 2 holds every 16-bit gradient until reduced)
    overhead     what a process holds besides its tensors (a GPU's CUDA context)
    buffers      a communication benchmark's message buffers at its largest size (buffers_need)

FSDP full fine-tuning as Lightning wraps LitGPT (each block a unit, the root unit gathered
through the backward, micro batches accumulated under no_sync) is counted part by part instead
(fsdp_parts, fsdp_units), each part measured on CPU ranks (docs/MEMORY.md section 6).

w, g bytes of a weight and a gradient, m of an AdamW moment, M of a master copy, G of the
optimizer's gradient partition (DeepSpeed's fp32 one), each from the Precision the app
really uses. The prediction is the bytes the hardware holds at the peak; the published and
measured figures it is held to are tensor bytes (CUDA max allocated, the CPU allocator's
peak), i.e. the total less `overhead`.

Three answers (`verdict`): each term has a stated uncertainty (UNCERTAINTY, from the
validation against published measurements in docs/MEMORY.md, benchmarks/memory_anchors.py);
a point fits when even the high end fits, does not fit when even the low end does not,
and may not fit in between (a warning; it runs).

Apps supply the Shape (what they count) and the sharding; the configuration layer supplies
the capacity (a GPU's memory, a rank's share of a node's), both in GB = 10^9 bytes
(model.units).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .units import GB


@dataclass(frozen=True)
class Precision:
    """Bytes per value of what training keeps, as a precision setting keeps them: a weight,
    a gradient, an AdamW moment (two), an optimizer master copy, an optimizer-side gradient
    partition (stages >= 1), and autocast's low-precision copy of each trained weight (held
    from the forward to the backward)."""

    weight: int
    grad: int
    moment: int
    master: int = 0
    grad_partition: int = 0
    cast_copy: int = 0
    # The dtype activations are counted in (the app's counter reads it).
    compute: str = "float32"


# How torch and Lightning keep a model at each precision setting the apps take: "-true" keeps
# everything (AdamW's moments included) in one dtype; "-mixed" (autocast) keeps fp32 weights,
# gradients and moments and casts the weights to 16 bits for each forward.
PRECISIONS = {
    "32-true": Precision(4, 4, 4, compute="float32"),
    "bf16-true": Precision(2, 2, 2, compute="bfloat16"),
    "16-true": Precision(2, 2, 2, compute="float16"),
    "bf16-mixed": Precision(4, 4, 4, cast_copy=2, compute="bfloat16"),
    "16-mixed": Precision(4, 4, 4, cast_copy=2, compute="float16"),
}
# DeepSpeed's mixed precision (the ZeRO paper's): fp16 weights and gradients, an fp32 master
# copy and moments (K = 12), and from stage 1 an fp32 partition of the gradients.
DEEPSPEED_MIXED = Precision(2, 2, 4, master=4, grad_partition=4, compute="float16")
PRECISIONS_BY_NAME = {**PRECISIONS, "deepspeed-mixed": DEEPSPEED_MIXED}
# Precisions a GPU without bfloat16 (V100 and older: compute capability < 8.0) cannot run.
BF16_PRECISIONS = tuple(name for name in PRECISIONS if name.startswith("bf16"))

# Relative uncertainty of each term, (below, above) the prediction: what the validation
# against published measurements showed (docs/MEMORY.md; benchmarks/memory_anchors.py
# prints each cell). Counted terms (weights, gradients, optimizer) are exact. Activations:
# on one GPU LitGPT's published peaks exceed the counted activations by 0-11% (phi-1.5 and
# stablelm-3b; Llama-2 0-1%: the allocator's block rounding and what the count does not
# see), never fall below. Gathered frozen weights (FSDP LoRA, published runs): 7-15% above
# (1 + 1/d). Transient and overhead: not measured here (no GPU was lent): +-50%.
UNCERTAINTY = {
    "weights": (0.0, 0.0),
    "gathered": (0.0, 0.16),
    "gradients": (0.0, 0.0),
    "optimizer": (0.0, 0.0),
    "activations": (0.0, 0.12),
    "transient": (0.5, 0.5),
    "overhead": (0.5, 0.5),
    # A communication benchmark's message buffers are allocated by its rank program (exact);
    # what the library stages besides (a reduction's scratch copy, up to one more message) is
    # not counted: up to +50% (not measured here).
    "buffers": (0.0, 0.5),
    # A molecular-dynamics rank's atoms, its own and its ghosts (apps.lammps.memory): bytes per
    # atom and the constant were fitted on two single-rank cells of the real LAMMPS and checked
    # on seven others (benchmarks/lammps_memory.py); the range is set before the check, not from it.
    "atoms": (0.15, 0.15),
}
# What a process holds on a GPU besides its tensors: the CUDA context with PyTorch's kernels
# and cuBLAS/cuDNN handles (about 0.3-0.6 GB on A100/V100 with CUDA 12 as NVIDIA's and
# PyTorch's notes put it; not measured here: no GPU was lent).
CUDA_CONTEXT_BYTES = 0.5 * GB


# What a CPU rank's process holds besides its tensors (Python, torch's libraries, gloo): the
# max RSS of a torch-parallel CPU rank training a model of 0.04 GB of tensors was 0.35 GB on
# the development machine (torch 2.13, 2 ranks, mlp width 256).
TORCH_CPU_RUNTIME_BYTES = 0.3 * GB


def process_overhead(on_gpu: bool) -> float:
    """What a rank's process holds besides its tensors, in the memory it shares with them: a
    GPU's CUDA context, or a CPU rank's runtime in the node's memory."""
    return CUDA_CONTEXT_BYTES if on_gpu else TORCH_CPU_RUNTIME_BYTES


TERMS = ("weights", "gradients", "optimizer", "activations", "transient", "overhead", "buffers", "atoms")
# The terms every training prediction reports (a record's predicted_<term>_gb), buffers and
# atoms only where a program holds some.
TRAINING_TERMS = TERMS[:-2]
FITS, MAY_NOT_FIT, DOES_NOT_FIT = "fits", "may not fit", "does not fit"


@dataclass(frozen=True)
class Shape:
    """What a point's memory depends on, from its app: parameters held and trained, the bytes
    autograd saves for one micro batch (counted at the point's micro batch and precision),
    the backward's working set on top, and the parameters of the largest unit a sharded
    strategy gathers at once."""

    parameters: int
    trainable: int | None = None  # None: all of them
    activations: float = 0.0
    transient: float = 0.0
    largest_unit: int = 0
    # The optimizer step's temporaries: AdamW per tensor (foreach off: two tensors the size of
    # the largest parameter tensor) or for all trained tensors at once (foreach on, torch's
    # default on a GPU).
    largest_tensor: int = 0
    foreach: bool = False
    # FSDP's units where they are known apart (LitGPT: each Block a unit, the root the
    # embedding, head and final norm): parameters of one block unit and of the root unit.
    block_unit: int = 0
    root_unit: int = 0
    # Whether `activations` already holds autocast's 16-bit weight copies, counted per use under
    # autocast (LitGPT: apps.litgpt.count_litgpt); else a mixed precision adds one copy of each
    # trained weight (Precision.cast_copy).
    casts_counted: bool = False

    @property
    def trained(self) -> int:
        return self.parameters if self.trainable is None else self.trainable

    @property
    def frozen(self) -> int:
        return self.parameters - self.trained


@dataclass(frozen=True)
class Sharding:
    """How a point spreads the model: `data` ranks a ZeRO stage shards over, `zero_stage`
    (0: replicated, as DDP), `model` ranks that split the model (pipeline, tensor);
    `units_in_flight`: how many units stage 3 holds gathered at once (the one computing and
    the one prefetched); `frozen_gathered`: frozen weights stay gathered through the backward
    besides the rank's shard (what LitGPT's published FSDP LoRA runs hold: about (1 + 1/d) of
    the model at any micro batch); `unit_gradients`: gradients are reduce-scattered unit by
    unit (FSDP); False: all 16-bit gradients are held until reduced (DeepSpeed stage 2)."""

    data: int = 1
    zero_stage: int = 0
    model: int = 1
    # The fraction of the model the busiest of the `model` ranks holds (None: 1 / model).
    model_share: float | None = None
    # DistributedDataParallel's gradient buckets: a second copy of the gradients.
    buckets: bool = False
    units_in_flight: int = 2
    frozen_gathered: bool = False
    unit_gradients: bool = True
    # FSDP (torch's FullyShardedDataParallel, FULL_SHARD) as Lightning wraps a model in units
    # (Shape.block_unit, Shape.root_unit): the root unit is not resharded after the forward
    # (torch/distributed/fsdp/_runtime_utils.py, _post_forward_reshard), so it stays gathered,
    # with its unsharded gradient, through the backward.
    root_gathered: bool = False
    # Micro batches accumulated before an optimizer step: FSDP's no_sync (what Lightning's
    # no_backward_sync runs) keeps every unit's unsharded gradient between them, a whole
    # model's gradients per rank instead of a shard.
    accumulating: bool = False


@dataclass(frozen=True)
class Prediction:
    """Bytes per rank of each term (TERMS), and the uncertainty of each (UNCERTAINTY)."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    transient: float = 0.0
    overhead: float = 0.0
    gathered: float = 0.0  # the part of `weights` held gathered beyond the shard
    buffers: float = 0.0  # a communication benchmark's message buffers
    atoms: float = 0.0  # a molecular-dynamics rank's atoms, its own and its ghosts

    @property
    def total(self) -> float:
        return sum(getattr(self, name) for name in TERMS)

    @property
    def tensors(self) -> float:
        """What a tensor-bytes measurement sees (CUDA max allocated, the CPU allocator's peak)."""
        return self.total - self.overhead

    def bound(self, side: int) -> float:
        """The total at the low (side 0) or high (side 1) end of every term's uncertainty."""
        sign = -1 if side == 0 else 1
        total = 0.0
        for name in TERMS:
            value = getattr(self, name)
            if name == "weights":
                total += value + sign * self.gathered * UNCERTAINTY["gathered"][side]
            else:
                total += value * (1 + sign * UNCERTAINTY[name][side])
        return total

    def terms_gb(self) -> dict[str, float]:
        return {name: getattr(self, name) / GB for name in TERMS if name in TRAINING_TERMS or getattr(self, name)}

    def summary(self, per: str) -> str:
        """'~T GB per <per> (weights a + gradients b + ... ; a-b GB within the model's uncertainty)'."""
        terms = " + ".join(f"{name} {gb:.3g}" for name, gb in self.terms_gb().items() if gb)
        return (
            f"~{self.total / GB:.3g} GB per {per} ({terms}; {self.bound(0) / GB:.3g}-{self.bound(1) / GB:.3g} GB "
            "within the model's uncertainty)"
        )


def predict(shape: Shape, precision: Precision, sharding: Sharding = Sharding(), overhead: float = 0.0) -> Prediction:
    """Bytes per rank of each term (see the module's docstring)."""
    z, d = sharding.zero_stage, max(sharding.data, 1)
    share = sharding.model_share if sharding.model_share is not None else 1 / max(sharding.model, 1)
    t, f = shape.trained * share, shape.frozen * share
    w, g = precision.weight, precision.grad
    trained_weights = w * t / (d if z >= 3 else 1)
    if sharding.frozen_gathered and d > 1:
        gathered = w * f
        frozen_weights = w * f / d + gathered
    else:
        gathered = 0.0
        frozen_weights = w * f / (d if z >= 3 else 1)
    if z >= 2:
        gradients = 0.0 if precision.grad_partition else g * t / d
    else:
        gradients = g * t
    if sharding.buckets:
        gradients += g * t
    optimizer = (2 * precision.moment + precision.master) * t / (d if z >= 1 else 1)
    if z >= 1:
        optimizer += precision.grad_partition * t / d
    # Autocast's 16-bit weight copies: of the whole model, or under stage 3 of the rank's shard
    # (FSDP's mixed precision casts the shard and gathers 16-bit units).
    casts = 0.0 if shape.casts_counted else precision.cast_copy * t / (d if z >= 3 else 1)
    activations = shape.activations * share + casts
    # The optimizer step runs after the backward has freed the activations: its temporaries are
    # the transient only where they exceed the backward's working set plus the activations.
    state_shards = d if z >= 1 else 1
    step = precision.moment * (t if shape.foreach else 2 * shape.largest_tensor * share) / state_shards
    transient = max(shape.transient * share, step - activations)
    if z >= 3 and d > 1 and sharding.root_gathered:
        return fsdp_units(shape, precision, sharding, overhead, activations)
    if z >= 3 and d > 1 and not sharding.frozen_gathered:
        # Units gathered for their forward or backward, and one unit's unsharded gradients
        # (where the frozen weights stay gathered, they are in `weights` already).
        gathered_bytes = precision.cast_copy or w
        transient += (sharding.units_in_flight * gathered_bytes + g) * shape.largest_unit
    elif z == 2 and d > 1:
        transient += g * t - gradients if not sharding.unit_gradients else g * shape.largest_unit
    return Prediction(
        weights=trained_weights + frozen_weights,
        gradients=gradients,
        optimizer=optimizer,
        activations=activations,
        transient=transient,
        overhead=overhead,
        gathered=gathered,
    )


def fsdp_parts(shape: Shape, precision: Precision, sharding: Sharding) -> dict[str, float]:
    """What FSDP full fine-tuning holds per rank, part by part (bytes; fsdp_units adds them up;
    benchmarks/memory_anchors.py section 6 measures each). P parameters, R of the root unit,
    B of a block unit, d ranks:

    shard                the rank's shard of the parameters, w P / d
    root                 the root unit gathered, w R: FSDP does not reshard the root after the
                         forward, so it is held from the forward through the backward
    unsharded_gradients  held unsharded through the backward: the root's gradient, g R (its
                         reduce-scatter comes at the backward's end); accumulating micro
                         batches (no_sync), every unit's, g P
    sharded_gradients    g P / d, held from the end of the backward to the step
    optimizer            AdamW's two moments of the shard, 2 m P / d
    in_flight            two blocks gathered, 2 w B: the one computing and the one prefetched
                         (limit_all_gathers lets two all-gathers be in flight)
    working              the backward's largest op: its output's gradient and its input's
    fresh_head           accumulating: the head's new gradient, g x the largest tensor, before
                         autograd adds it to the accumulated one
    fresh_block          a block's new gradient, g B (unsharded until its reduce-scatter, or
                         until added to the accumulated one)
    fresh_tail           not accumulating: the embedding's new gradient at the backward's end,
                         g x the largest tensor, beside every block's sharded gradient and the
                         root's unsharded one before the root's reduce-scatter
    step_temporaries     AdamW's: per tensor, two the size of the rank's largest piece of a
                         parameter (with FSDP's original parameters, Lightning's
                         use_orig_params=True, a rank holds whole parameters where they fall in
                         its shard: at most the largest tensor, at most a shard of the largest
                         unit); foreach, one of the whole shard"""
    d, t = max(sharding.data, 1), shape.trained
    w, g, m = precision.weight, precision.grad, precision.moment
    # A mixed precision's gathered units and their unsharded gradients are 16-bit: Lightning's
    # FSDPPrecision gives FSDP MixedPrecision(param_dtype=16-bit) for bf16-mixed and 16-mixed, so
    # FSDP gathers 16-bit copies of the float32 shard and autograd computes their gradients in
    # 16 bits (kept so under no_sync), cast to float32 for the shard after the reduce-scatter.
    uw, ug = (precision.cast_copy or w), (precision.cast_copy or g)
    piece = min(shape.largest_tensor, -(-max(shape.root_unit, shape.block_unit) // d))
    return {
        "shard": w * t / d,
        "root": uw * shape.root_unit,
        "unsharded_gradients": ug * (t if sharding.accumulating else shape.root_unit),
        "sharded_gradients": g * t / d,
        "optimizer": 2 * m * t / d,
        "in_flight": sharding.units_in_flight * uw * shape.block_unit,
        "working": shape.transient,
        "fresh_head": ug * min(shape.largest_tensor, shape.root_unit) if sharding.accumulating else 0,
        "fresh_block": ug * shape.block_unit,
        "fresh_tail": 0 if sharding.accumulating else ug * min(shape.largest_tensor, shape.root_unit),
        "step_temporaries": m * (t / d if shape.foreach else 2 * piece),
    }


def fsdp_units(
    shape: Shape, precision: Precision, sharding: Sharding, overhead: float, activations: float
) -> Prediction:
    """FSDP full fine-tuning unit by unit (Sharding.root_gathered; parts: fsdp_parts): the peak
    per rank is the larger of the backward's and the optimizer step's (docs/MEMORY.md, "FSDP
    full fine-tuning").

    weights      shard + root
    gradients    unsharded_gradients (what the backward's peak holds)
    optimizer    optimizer
    activations  the checkpointed count (each block's input, one block recomputed, the logits
                 Lightning casts to float32 and the loss)
    transient    the backward's, the larger of its phases: the head's (working + fresh_head:
                 its largest op is the logits' gradient, before a block is gathered for the
                 backward), a block's (in_flight + fresh_block, the logits freed by then) and its
                 end's (sharded_gradients + fresh_tail, the activations freed by then); or,
                 where the step holds more, the
                 step's sharded_gradients + step_temporaries less what only the backward holds
                 (root, activations, unsharded_gradients)"""
    parts = fsdp_parts(shape, precision, sharding)
    backward = max(parts["working"] + parts["fresh_head"], parts["in_flight"] + parts["fresh_block"])
    if parts["fresh_tail"]:
        backward = max(backward, parts["sharded_gradients"] + parts["fresh_tail"] - activations)
    step = parts["sharded_gradients"] + parts["step_temporaries"]
    held_in_backward = parts["root"] + activations + parts["unsharded_gradients"]
    return Prediction(
        weights=parts["shard"] + parts["root"],
        gradients=parts["unsharded_gradients"],
        optimizer=parts["optimizer"],
        activations=activations,
        transient=max(backward, step - held_in_backward),
        overhead=overhead,
    )


def verdict(prediction: Prediction, capacity: float) -> str:
    """FITS when the high end of the prediction fits in `capacity` bytes, DOES_NOT_FIT when
    even the low end does not, MAY_NOT_FIT in between."""
    if prediction.bound(1) <= capacity:
        return FITS
    if prediction.bound(0) > capacity:
        return DOES_NOT_FIT
    return MAY_NOT_FIT


@dataclass(frozen=True)
class Need:
    """What a point asks of each rank's memory: its app's shape, precision, sharding and
    per-process overhead; `measured` names the figure its runs measure the same thing by
    (tensor bytes: the prediction's `tensors`)."""

    shape: Shape
    precision: Precision
    micro_batch: int
    sharding: Sharding = field(default_factory=Sharding)
    overhead: float = 0.0
    measured: str | None = None
    # The parameter the micro batch is set by (a refusal names it).
    batch_key: str = "batch_size"
    # Message buffers a communication benchmark holds at its largest size (bytes), where the
    # point trains nothing (`shape` then has no parameters).
    buffers: float = 0.0
    # What a molecular-dynamics rank's atoms hold (bytes), where the point trains nothing.
    atoms: float = 0.0
    # What a refusal allows instead.
    remedy: str = "a smaller {key}, more ranks or a sharding strategy"
    # Whether a run's record carries the prediction (memory_figures): a load-time check only
    # where the app measures nothing to hold it to (a communication benchmark's buffers), so
    # its records and report stay as they were.
    recorded: bool = True

    @property
    def prediction(self) -> Prediction:
        prediction = predict(self.shape, self.precision, self.sharding, self.overhead)
        return replace(prediction, buffers=self.buffers, atoms=self.atoms) if self.buffers or self.atoms else prediction


def buffers_need(bytes_held: float, key: str, value: int, on_gpu: bool) -> Need:
    """What a rank of a communication benchmark holds: its message buffers at the largest size
    (`bytes_held`, set by parameter `key` = `value`) and its process's runtime."""
    return Need(
        shape=Shape(parameters=0),
        precision=PRECISIONS["32-true"],
        micro_batch=value,
        overhead=process_overhead(on_gpu),
        batch_key=key,
        buffers=bytes_held,
        remedy="a smaller {key}",
        recorded=False,
    )


def atoms_need(bytes_held: float, overhead: float, key: str, value: int) -> Need:
    """What a rank of a molecular-dynamics point holds: its atoms (`bytes_held`, set by
    parameter `key` = `value`) and its process's own (`overhead`)."""
    return Need(
        shape=Shape(parameters=0),
        precision=PRECISIONS["32-true"],
        micro_batch=value,
        overhead=overhead,
        batch_key=key,
        atoms=bytes_held,
        remedy="a smaller {key} or more ranks",
        recorded=False,
    )


class TooLarge(ValueError):
    """A shape whose bytes overflow what torch can count (more than 2^63): no machine holds it.
    `key`: the parameter that makes it so."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def memory_figures(need: Need | None, figures: dict) -> dict:
    """The figures a run's record gets from its prediction: each term and the total (GB), the
    tensor bytes a measurement sees, and the measured figure over those where the run measured it."""
    if need is None or not need.recorded:
        return {}
    prediction = need.prediction
    out = {f"predicted_{name}_gb": gb for name, gb in prediction.terms_gb().items()}
    out["predicted_memory_gb"] = prediction.total / GB
    out["predicted_tensors_gb"] = prediction.tensors / GB
    measured = figures.get(need.measured) if need.measured else None
    if isinstance(measured, int | float) and prediction.tensors > 0:
        out["memory_ratio"] = measured / out["predicted_tensors_gb"]
    return out
