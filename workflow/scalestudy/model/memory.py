"""The memory a training rank needs, before anything runs (the anatomy of the deep-learning
course the issue cites, after ZeRO and Korthikanti et al.):

    M_total       = M_model + M_optimizer + M_gradients + M_activations
    M_model       = k_w p / d   if ZeRO stage z = 3 else k_w p
    M_optimizer   = (2 + m) k_h t / d   if z >= 1 else (2 + m) k_h t
    M_gradients   = k_w t / d   if z >= 2 else k_w t
    M_activations = s b h L ([16 k_l + 2] + [2 k_l + 1] a s / h)       (transformers)
                  = v b k_l                                             (other models)

p parameters held, t of them trained (LoRA: the adapters; else t = p), d data-parallel
ranks the ZeRO stage shards over, k_l / k_h bytes of a low / high precision value, k_w the
bytes a weight is kept in (k_l where weights are low precision, else k_h), m = 1 where an
optimizer keeps a high-precision master copy of low-precision weights (the issue's
3 k_h p: DeepSpeed's mixed precision), else 0 (AdamW's two moments only: torch autocast and
Lightning's "-mixed" keep fp32 weights, "-true" keeps everything in one precision); s
sequence length, b micro batch, h hidden size, L layers, a attention heads; v values autograd
keeps per sample of a non-transformer model (counted by its app). With activation
checkpointing per layer only each layer's input is kept (s b h k_l L) plus one layer's
activations recomputed in the backward. Model parallelism over n ranks (pipeline stages,
tensor-parallel groups) divides every term by n.

Apps supply the Shape; the configuration layer supplies the capacity (GPU memory per GPU,
host memory per rank), both in GB = 10^9 bytes (model.units).
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import GB


@dataclass(frozen=True)
class Precision:
    """Bytes of a low (k_l) and high (k_h) precision value, whether weights are kept low,
    whether the optimizer keeps a high-precision master copy."""

    low: int
    high: int
    weights_low: bool
    master: bool

    @property
    def weight(self) -> int:
        return self.low if self.weights_low else self.high


# How torch and Lightning keep a model at each precision setting the apps take.
PRECISIONS = {
    "32-true": Precision(4, 4, weights_low=False, master=False),
    "bf16-true": Precision(2, 2, weights_low=True, master=False),
    "16-true": Precision(2, 2, weights_low=True, master=False),
    # Autocast: fp32 weights, gradients and moments; activations in 16 bits.
    "bf16-mixed": Precision(2, 4, weights_low=False, master=False),
    "16-mixed": Precision(2, 4, weights_low=False, master=False),
}
# The (DeepSpeed's) mixed precision: 16-bit weights and gradients, fp32 master and moments.
DEEPSPEED_MIXED = Precision(2, 4, weights_low=True, master=True)


@dataclass(frozen=True)
class Shape:
    """What the memory of training a model depends on, from its app."""

    parameters: int
    trainable: int | None = None  # None: all of them
    # Transformers: the formula's shape (sequence length is the point's).
    hidden: int | None = None
    layers: int | None = None
    heads: int | None = None
    seq_len: int | None = None
    # Other models: values autograd keeps per sample (counted by the app).
    activation_values: float | None = None
    checkpointed: bool = False

    @property
    def trained(self) -> int:
        return self.parameters if self.trainable is None else self.trainable


@dataclass(frozen=True)
class Sharding:
    """How a point spreads the model: `data` ranks a ZeRO stage shards over, `zero_stage`
    (0: replicated, as DDP), `model` ranks that split the model (pipeline, tensor)."""

    data: int = 1
    zero_stage: int = 0
    model: int = 1


@dataclass(frozen=True)
class Prediction:
    model: float
    optimizer: float
    gradients: float
    activations: float

    @property
    def total(self) -> float:
        return self.model + self.optimizer + self.gradients + self.activations

    def terms_gb(self) -> dict[str, float]:
        return {
            "model": self.model / GB,
            "optimizer": self.optimizer / GB,
            "gradients": self.gradients / GB,
            "activations": self.activations / GB,
        }

    def summary(self, per: str) -> str:
        """'~T GB per <per> (model a + optimizer b + gradients c + activations d)'."""
        terms = " + ".join(f"{name} {gb:.3g}" for name, gb in self.terms_gb().items())
        return f"~{self.total / GB:.3g} GB per {per} ({terms})"


def transformer_activations(shape: Shape, micro_batch: int, k_low: int) -> float:
    """s b h L ([16 k_l + 2] + [2 k_l + 1] a s / h) bytes; with checkpointing, each layer's
    input (s b h k_l per layer) and one layer whole."""
    s, h, layers, a = shape.seq_len, shape.hidden, shape.layers, shape.heads
    per_layer = s * micro_batch * h * ((16 * k_low + 2) + (2 * k_low + 1) * a * s / h)
    if shape.checkpointed:
        return s * micro_batch * h * k_low * layers + per_layer
    return per_layer * layers


def predict(shape: Shape, precision: Precision, micro_batch: int, sharding: Sharding = Sharding()) -> Prediction:
    """Bytes per rank of each term."""
    z, d, n = sharding.zero_stage, max(sharding.data, 1), max(sharding.model, 1)
    p, t = shape.parameters / n, shape.trained / n
    model = precision.weight * p / (d if z >= 3 else 1)
    optimizer = (2 + precision.master) * precision.high * t / (d if z >= 1 else 1)
    gradients = precision.weight * t / (d if z >= 2 else 1)
    if shape.hidden and shape.layers and shape.heads and shape.seq_len:
        activations = transformer_activations(shape, micro_batch, precision.low) / n
    else:
        activations = (shape.activation_values or 0.0) * micro_batch * precision.low / n
    return Prediction(model, optimizer, gradients, activations)


@dataclass(frozen=True)
class Need:
    """What a point asks of each rank's memory: its app's shape, precision, micro batch and
    sharding; `measured` names the figure its runs measure the same thing by."""

    shape: Shape
    precision: Precision
    micro_batch: int
    sharding: Sharding
    measured: str | None = None
    # The parameter the micro batch is set by (a refusal names it).
    batch_key: str = "batch_size"

    @property
    def prediction(self) -> Prediction:
        return predict(self.shape, self.precision, self.micro_batch, self.sharding)


def memory_figures(need: Need | None, figures: dict) -> dict:
    """The figures a run's record gets from its prediction: each term and the total (GB), and
    the measured figure over the prediction where the run measured it."""
    if need is None:
        return {}
    prediction = need.prediction
    out = {f"predicted_{name}_gb": gb for name, gb in prediction.terms_gb().items()}
    out["predicted_memory_gb"] = prediction.total / GB
    measured = figures.get(need.measured) if need.measured else None
    if isinstance(measured, int | float) and prediction.total > 0:
        out["memory_ratio"] = measured / out["predicted_memory_gb"]
    return out
