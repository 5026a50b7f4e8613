"""What the torch-parallel planner (scalestudy.apps.torch_parallel) and its rank program
(scalestudy.apps.torch_parallel_rank) agree on, without torch: the model families, the
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
