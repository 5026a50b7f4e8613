"""The torch-parallel models in plain torch (no downloads), each a list of blocks run in
order, so that `nn.Sequential(*blocks)` is the model and a pipeline splits the list, and
the deterministic learnable data each trains on (made from the seed before training).

Sizes: `width` (channels or hidden size) and `depth` (layers); the families' defaults are
tiny so that a CPU step takes well under a second (torch_parallel.spec.MODELS holds them, with
each family's task and data; here each family's builder, in BUILDERS, and each data's maker).

Tasks:
- images (vgg11 with batch norm, cnn, resnet50): 3x32x32 images, 10 classes; each class is a fixed random
  pattern plus noise.
- autoencoder: the same images; the target is the image (mean squared error, no accuracy).
- bow (neural bag of words): token sequences whose words come mostly from their class's
  own tenth of the vocabulary.
- seq2seq (GRU) and seq2seq-lstm: reverse a token sequence (input: source and the shifted
  target, the decoder reads the encoder's context at every step as in Cho et al. 2014).
- mlp: 32 features, the class is the argmax of a fixed random linear teacher.
- gpt2: next-token prediction on sequences x[t+1] = (a x[t] + c) mod vocab, (a, c) one of
  four pairs per sequence, read from the context.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..spec import IMAGE, MODELS, Counted, Data, Task

CLASSES = 10
FEATURES = 32
VGG11 = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


def task_of(name: str) -> str:
    return MODELS[name].task


# ---------------------------------------------------------------- blocks


class MLPBlock(nn.Module):
    """x + fc2(gelu(fc1(norm(x)))): fc1 column-parallel and fc2 row-parallel under tensor parallelism."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Attention(nn.Module):
    """Causal self-attention with separate q, k, v (column-parallel) and out (row-parallel):
    the number of heads a rank holds is read from the shape, so a tensor-parallel rank
    computes its share of the heads."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.head_dim = width // heads
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = (proj(x).view(b, t, -1, self.head_dim).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


class DecoderBlock(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.mlp = MLPBlock(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x + self.attn(self.norm(x)))


class TokenEmbedding(nn.Module):
    def __init__(self, vocab: int, width: int, seq_len: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq_len, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tokens(x) + self.positions(torch.arange(x.shape[1], device=x.device))


class Encoder(nn.Module):
    """Reads the embedded source (first half); returns the decoder's input: the embedded
    shifted target beside the source's context at every step."""

    def __init__(self, width: int, layers: int, cell: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = cell(width, width, num_layers=layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[1] // 2
        encoded, _ = self.rnn(x[:, :half])
        context = encoded[:, -1:].expand(-1, half, -1)
        return torch.cat([x[:, half:], context], dim=2)


class Decoder(nn.Module):
    def __init__(self, width: int, layers: int, cell: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = cell(2 * width, width, num_layers=layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class Bottleneck(nn.Module):
    def __init__(self, inputs: int, mid: int, stride: int) -> None:
        super().__init__()
        out = 4 * mid
        self.body = nn.Sequential(
            nn.Conv2d(inputs, mid, 1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(),
            nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(),
            nn.Conv2d(mid, out, 1, bias=False),
            nn.BatchNorm2d(out),
        )
        self.skip = (
            nn.Identity()
            if stride == 1 and inputs == out
            else nn.Sequential(nn.Conv2d(inputs, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


class EmbeddingBagBlock(nn.Module):
    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, width, mode="mean")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bag(x)


# ---------------------------------------------------------------- models


def conv(inputs: int, out: int, norm: bool = False) -> list[nn.Module]:
    return [nn.Conv2d(inputs, out, 3, padding=1), *([nn.BatchNorm2d(out)] if norm else []), nn.ReLU()]


def vgg11(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    scale, layers, channels, current = width / 64, [], IMAGE[0], []
    for item in VGG11:
        if item == "M":
            layers.append(nn.Sequential(*current, nn.MaxPool2d(2)))
            current = []
        else:
            out = max(1, round(item * scale))
            current += conv(channels, out, norm=True)  # VGG11 with batch norm (VGG11-BN)
            channels = out
    hidden = 8 * width
    return [
        *layers,
        nn.Sequential(nn.Flatten(), nn.Linear(channels, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()),
        nn.Linear(hidden, CLASSES),
    ]


def cnn(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    layers, channels = [], IMAGE[0]
    for i in range(depth):
        out = width * 2**i
        layers.append(nn.Sequential(*conv(channels, out), nn.MaxPool2d(2)))
        channels = out
    side = IMAGE[1] // 2**depth
    return [*layers, nn.Sequential(nn.Flatten(), nn.Linear(channels * side * side, CLASSES))]


def autoencoder(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    encoder, channels = [], IMAGE[0]
    for i in range(depth):
        out = width * 2**i
        encoder.append(nn.Sequential(nn.Conv2d(channels, out, 4, stride=2, padding=1), nn.ReLU()))
        channels = out
    decoder = []
    for i in reversed(range(depth)):
        out = IMAGE[0] if i == 0 else width * 2 ** (i - 1)
        layer = nn.ConvTranspose2d(channels, out, 4, stride=2, padding=1)
        decoder.append(layer if i == 0 else nn.Sequential(layer, nn.ReLU()))
        channels = out
    return encoder + decoder


def bow(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    return [EmbeddingBagBlock(vocab, width), *(MLPBlock(width) for _ in range(depth)), nn.Linear(width, CLASSES)]


def seq2seq(cell: type[nn.Module]):
    """The builder of the encoder-decoder on `cell` (GRU or LSTM)."""

    def build(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
        return [
            nn.Embedding(vocab, width),
            Encoder(width, depth, cell),
            Decoder(width, depth, cell),
            nn.Linear(width, vocab),
        ]

    return build


def mlp(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    return [nn.Linear(FEATURES, width), *(MLPBlock(width) for _ in range(depth)), nn.Linear(width, CLASSES)]


def resnet50(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    stem = nn.Sequential(nn.Conv2d(IMAGE[0], width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
    layers, channels = [stem], width
    for stage, count in enumerate((3, 4, 6, 3)):
        mid = width * 2**stage
        for i in range(count):
            layers.append(Bottleneck(channels, mid, 2 if i == 0 and stage > 0 else 1))
            channels = 4 * mid
    return [*layers, nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, CLASSES))]


def gpt2(width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    return [
        TokenEmbedding(vocab, width, seq_len),
        *(DecoderBlock(width, heads) for _ in range(depth)),
        nn.Sequential(nn.LayerNorm(width), nn.Linear(width, vocab)),
    ]


# Each family's model (torch_parallel.spec.MODELS) as blocks, in order.
BUILDERS = {
    "vgg11": vgg11,
    "cnn": cnn,
    "autoencoder": autoencoder,
    "bow": bow,
    "seq2seq": seq2seq(nn.GRU),
    "seq2seq-lstm": seq2seq(nn.LSTM),
    "mlp": mlp,
    "resnet50": resnet50,
    "gpt2": gpt2,
}


def blocks(name: str, width: int, depth: int, vocab: int, seq_len: int, heads: int) -> list[nn.Module]:
    """The model as blocks, in order."""
    if name not in BUILDERS:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}")
    return BUILDERS[name](width, depth, vocab, seq_len, heads)


def tensor_plan(block: nn.Module) -> dict[str, object] | None:
    """The tensor-parallel plan of a block (column-parallel in, row-parallel out), or None."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    if isinstance(block, MLPBlock):
        return {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    if isinstance(block, DecoderBlock):
        return {
            "attn.q": ColwiseParallel(),
            "attn.k": ColwiseParallel(),
            "attn.v": ColwiseParallel(),
            "attn.out": RowwiseParallel(),
            "mlp.fc1": ColwiseParallel(),
            "mlp.fc2": RowwiseParallel(),
        }
    return None


# ---------------------------------------------------------------- data


def images(samples: int, vocab: int, seq_len: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    # The class patterns come from a fixed seed: training and validation sets share them.
    patterns = torch.randn((CLASSES, *IMAGE), generator=torch.Generator().manual_seed(12345))
    labels = torch.randint(0, CLASSES, (samples,), generator=g)
    return patterns[labels] + 0.5 * torch.randn((samples, *IMAGE), generator=g), labels


def features(samples: int, vocab: int, seq_len: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    teacher = torch.randn((FEATURES, CLASSES), generator=torch.Generator().manual_seed(12345))
    x = torch.randn((samples, FEATURES), generator=g)
    return x, (x @ teacher).argmax(dim=1)


def bag(samples: int, vocab: int, seq_len: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.randint(0, CLASSES, (samples,), generator=g)
    share = max(1, vocab // CLASSES)
    own = labels[:, None] * share + torch.randint(0, share, (samples, seq_len), generator=g)
    noise = torch.randint(0, vocab, (samples, seq_len), generator=g)
    words = torch.where(torch.rand((samples, seq_len), generator=g) < 0.6, own % vocab, noise)
    return words, labels


def reversal(samples: int, vocab: int, seq_len: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    source = torch.randint(1, vocab, (samples, seq_len), generator=g)
    target = source.flip(1)
    shifted = torch.cat([torch.zeros((samples, 1), dtype=torch.long), target[:, :-1]], dim=1)
    return torch.cat([source, shifted], dim=1), target


def recurrence(samples: int, vocab: int, seq_len: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    rules = torch.tensor([[1, 1], [1, 3], [5, 1], [3, 7]])
    rule = rules[torch.randint(0, len(rules), (samples,), generator=g)]
    tokens = torch.empty((samples, seq_len + 1), dtype=torch.long)
    tokens[:, 0] = torch.randint(0, vocab, (samples,), generator=g)
    for t in range(seq_len):
        tokens[:, t + 1] = (rule[:, 0] * tokens[:, t] + rule[:, 1]) % vocab
    return tokens[:, :-1], tokens[:, 1:]


# Each kind of data (a family's Data) made from a generator.
DATA_MAKERS = {
    Data.IMAGES: images,
    Data.FEATURES: features,
    Data.BAG: bag,
    Data.REVERSAL: reversal,
    Data.RECURRENCE: recurrence,
}


def make_data(name: str, samples: int, vocab: int, seq_len: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`samples` (input, target) pairs for model `name`, the same on every rank for a seed."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}")
    family = MODELS[name]
    x, y = DATA_MAKERS[family.data](samples, vocab, seq_len, torch.Generator().manual_seed(seed))
    return (x, x.clone()) if family.task == Task.RECONSTRUCT else (x, y)


def loss_of(task: str, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if task == Task.RECONSTRUCT:
        return F.mse_loss(output.float(), target)
    if task == Task.TOKENS:
        return F.cross_entropy(output.float().flatten(0, 1), target.flatten())
    return F.cross_entropy(output.float(), target)


def correct_of(task: str, output: torch.Tensor, target: torch.Tensor) -> tuple[float, int]:
    """(right predictions, predictions) of a batch; (0, 0) where accuracy means nothing."""
    if task == Task.RECONSTRUCT:
        return 0.0, 0
    right = (output.argmax(dim=-1) == target).sum().item()
    return float(right), target.numel()


def parameter_count(name: str, width: int, depth: int, vocab: int, seq_len: int, heads: int) -> int:
    with torch.device("meta"):
        model = nn.Sequential(*blocks(name, width, depth, vocab, seq_len, heads))
    return sum(p.numel() for p in model.parameters())


def activation_values(name: str, width: int, depth: int, vocab: int, seq_len: int, heads: int, batch: int) -> int:
    """Values autograd keeps for the backward pass of one forward of `batch` samples in
    float32, parameters not included (counted_training's saved bytes / 4)."""
    return counted_training(name, width, depth, vocab, seq_len, heads, batch, "float32").saved // 4


def counted_training(name: str, width: int, depth: int, vocab: int, seq_len: int, heads: int, batch: int, dtype: str):
    """A forward of `batch` samples on the meta device (nothing allocated), its loss as the
    rank computes it: (parameters, bytes autograd saves with what the loop keeps, largest
    saved storage, parameters of the largest block) as saved_bytes.Saved plus counts."""
    from ...saved_bytes import count_saved

    with torch.device("meta"):
        blocks_ = blocks(name, width, depth, vocab, seq_len, heads)
        model = nn.Sequential(*blocks_).to(getattr(torch, dtype))
    inputs, target = sample_batch(name, batch, vocab, seq_len)
    inputs = inputs.to("meta", dtype=getattr(torch, dtype) if inputs.is_floating_point() else inputs.dtype)
    target = target.to("meta")

    def forward():
        output = model(inputs)
        task = MODELS[name].task
        if task == Task.RECONSTRUCT:
            target_ = inputs.float()
        else:
            target_ = (
                target if task == Task.CLASSIFY else torch.zeros(output.shape[:2], dtype=torch.long, device="meta")
            )
        return [output, loss_of(MODELS[name].task, output, target_)]

    saved = count_saved(forward, [*model.parameters(), *model.buffers()])
    return Counted(
        parameters=sum(p.numel() for p in model.parameters()),
        saved=saved.total,
        largest=saved.largest,
        block_parameters=tuple(sum(p.numel() for p in b.parameters()) for b in blocks_),
        largest_tensor=max((p.numel() for p in model.parameters()), default=0),
        tensor_sharded=sum(tensor_sharded(b) for b in blocks_),
    )


def tensor_sharded(block: nn.Module) -> int:
    """Parameters of a block that its tensor-parallel plan splits across the group (all of a
    column-parallel layer; a row-parallel layer's weight, its bias is replicated)."""
    plan = tensor_plan(block)
    if not plan:
        return 0
    from torch.distributed.tensor.parallel import RowwiseParallel

    split = 0
    for name, style in plan.items():
        layer = block.get_submodule(name)
        split += layer.weight.numel()
        if layer.bias is not None and not isinstance(style, RowwiseParallel):
            split += layer.bias.numel()
    return split


def sample_batch(name: str, batch: int, vocab: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the model's input shape (zeros: only shapes matter)."""
    data = MODELS[name].data
    if data == Data.IMAGES:
        return torch.zeros((batch, *IMAGE)), torch.zeros(batch, dtype=torch.long)
    if data == Data.FEATURES:
        return torch.zeros((batch, FEATURES)), torch.zeros(batch, dtype=torch.long)
    if data == Data.REVERSAL:
        return torch.zeros((batch, 2 * seq_len), dtype=torch.long), torch.zeros((batch, seq_len), dtype=torch.long)
    return torch.zeros((batch, seq_len), dtype=torch.long), torch.zeros(batch, dtype=torch.long)
