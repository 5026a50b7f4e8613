"""Offline, deterministic stand-ins for Llama-2-7b and its fine-tuning data.

The local study must rehearse the cluster study without downloading anything,
so this module makes, from a seed alone:

- an Alpaca-style JSON dataset (instruction / input / output records),
- a byte-level BPE tokenizer trained on that dataset,
- a Llama-2-shaped LitGPT checkpoint (same block structure as Llama-2-7b:
  RMSNorm, SwiGLU MLP, rotary embeddings) with random weights, small enough
  to train on a CPU in seconds.

Running it twice with the same arguments gives byte-identical dataset and
tokenizer files and identical weights.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ...model.errors import did_you_mean, divisors
from ...model.paths import Layout
from .checkpoint import CHECKPOINT_CONFIG, CHECKPOINT_WEIGHTS, TOKENIZER_FILES

WORDS = (
    "node rank core socket cache memory network switch packet queue job batch "
    "step token layer weight gradient tensor kernel thread process message "
    "barrier reduce gather scatter broadcast latency bandwidth throughput"
).split()

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]
# A byte-level BPE vocabulary holds every byte (its initial alphabet) and the special tokens
# whatever vocab_size asks: a smaller vocab_size gives token ids past the model's embedding.
BYTE_ALPHABET = 256
MIN_VOCAB = BYTE_ALPHABET + len(SPECIAL_TOKENS)


@dataclass(frozen=True)
class TinyModelShape:
    """The knobs of the stand-in model; defaults follow FACTS.md (2 layers, 4 heads, 64 wide)."""

    # In the order config/local.yaml lists them (see settings_param).
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    intermediate_size: int = 172
    vocab_size: int = 1024
    block_size: int = 256


def settings_param(settings: dict) -> dict:
    """The asset rule's settings as a rerun-trigger param: Snakemake compares params as text,
    so the keys come in a fixed order whatever the YAML's (a sorted rewrite of local.yaml
    reran the assets and every LitGPT point). The order is the one config/local.yaml has
    always had, so that the params Snakemake recorded before still match; other keys follow,
    sorted."""
    known = [key for key in SETTINGS if key in settings]
    return {key: settings[key] for key in [*known, *sorted(set(settings) - set(known))]}


def alpaca_records(samples: int, seed: int) -> list[dict[str, str]]:
    """Small instruction-following tasks whose answers are computable (so loss can fall)."""
    rng = random.Random(seed)
    records = []
    for i in range(samples):
        kind = i % 3
        if kind == 0:
            a, b = rng.randint(0, 999), rng.randint(0, 999)
            records.append({"instruction": "Add the two numbers.", "input": f"{a} {b}", "output": str(a + b)})
        elif kind == 1:
            words = rng.sample(WORDS, k=rng.randint(3, 7))
            records.append(
                {
                    "instruction": "Reverse the order of the words.",
                    "input": " ".join(words),
                    "output": " ".join(reversed(words)),
                }
            )
        else:
            word = rng.choice(WORDS)
            records.append(
                {"instruction": f"Spell the word {word} with dashes.", "input": "", "output": "-".join(word)}
            )
    return records


def write_dataset(path: Path, samples: int, seed: int) -> list[dict[str, str]]:
    records = alpaca_records(samples, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return records


def train_tokenizer(records: list[dict[str, str]], vocab_size: int, checkpoint_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Include the Alpaca prompt template's words so prompts tokenize compactly.
    template = (
        "Below is an instruction that describes a task. Write a response that appropriately completes the request."
    )
    texts = [template] + [" ".join(r.values()) for r in records]
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer_file, tokenizer_config_file = TOKENIZER_FILES
    tokenizer.save(str(checkpoint_dir / tokenizer_file))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "add_bos_token": True,
    }
    (checkpoint_dir / tokenizer_config_file).write_text(json.dumps(tokenizer_config, indent=1) + "\n")


def write_checkpoint(checkpoint_dir: Path, shape: TinyModelShape, seed: int) -> None:
    import torch
    from litgpt.config import Config
    from litgpt.model import GPT
    from litgpt.utils import save_config

    # Start from the real Llama-2-7b config so every architectural choice but size matches.
    config = Config.from_name(
        "Llama-2-7b-hf",
        n_layer=shape.n_layer,
        n_head=shape.n_head,
        n_query_groups=shape.n_head,
        n_embd=shape.n_embd,
        vocab_size=shape.vocab_size,
        padded_vocab_size=shape.vocab_size,
        intermediate_size=shape.intermediate_size,
        block_size=shape.block_size,
    )
    torch.manual_seed(seed)
    model = GPT(config)
    torch.save(model.state_dict(), checkpoint_dir / CHECKPOINT_WEIGHTS)
    save_config(config, checkpoint_dir)  # CHECKPOINT_CONFIG


# The dataset's size and the seed of data and weights where `assets: litgpt_tiny:` does not say.
SAMPLES, SEED = 600, 0


def make_tiny_assets(
    checkpoint_dir: Path,
    data_path: Path,
    samples: int = SAMPLES,
    seed: int = SEED,
    shape: TinyModelShape = TinyModelShape(),
) -> None:
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    records = write_dataset(data_path, samples, seed)
    train_tokenizer(records, shape.vocab_size, checkpoint_dir)
    write_checkpoint(checkpoint_dir, shape, seed)


# The keys of the sweep's `assets: litgpt_tiny:` (whole numbers, at least 1; seed: at least 0),
# in the fixed order of the asset rule's param (settings_param).
SETTINGS = (*(f.name for f in fields(TinyModelShape)), "samples", "seed")


def settings_problems(settings: Mapping[str, Any]) -> list[str]:
    """What is wrong with `assets: litgpt_tiny:`, each '.<key>: ...' (checked when the study loads)."""
    problems = []
    for key, value in settings.items():
        if key not in SETTINGS:
            problems.append(f".{key}: unknown key{did_you_mean(key, SETTINGS) or ';'} allowed: {', '.join(SETTINGS)}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "seed" else 1):
            problems.append(
                f".{key}: {value!r} is not allowed; use a whole number, at least {0 if key == 'seed' else 1}"
            )
    if problems:
        return problems
    # What LitGPT's model and the tokenizer need of the shape together.
    shape = TinyModelShape(**{k: v for k, v in settings.items() if k in TinyModelShape.__dataclass_fields__})
    if shape.n_embd % shape.n_head:
        problems.append(
            f".n_head: {shape.n_head} does not divide n_embd {shape.n_embd} (LitGPT splits the embedding "
            f"into heads); allowed: a divisor of n_embd ({divisors(shape.n_embd)})"
        )
    if shape.vocab_size < MIN_VOCAB:
        problems.append(
            f".vocab_size: {shape.vocab_size} is less than the byte-level tokenizer's {BYTE_ALPHABET} bytes and "
            f"{len(SPECIAL_TOKENS)} special tokens; allowed: at least {MIN_VOCAB}"
        )
    return problems


# The stand-in's folder under the results' assets (config/local.yaml's checkpoint_dir and
# data_path name it: {results_dir}/assets/litgpt-tiny), and under it its checkpoint directory
# and its dataset.
TINY_FOLDER = "litgpt-tiny"
CHECKPOINT_FOLDER = "checkpoint"
DATA_FILE = "alpaca.json"


def tiny_folder(layout: Layout) -> str:
    """The offline stand-in for Llama-2-7b and its data (local study), under the results' assets."""
    return f"{layout.assets}/{TINY_FOLDER}"


def tiny_asset_files(folder: str) -> dict[str, str]:
    """The asset rule's outputs by name: the checkpoint's weights, config and tokenizer files,
    and the dataset."""
    checkpoint = f"{folder}/{CHECKPOINT_FOLDER}"
    tokenizer, tokenizer_config = TOKENIZER_FILES
    return {
        "weights": f"{checkpoint}/{CHECKPOINT_WEIGHTS}",
        "config": f"{checkpoint}/{CHECKPOINT_CONFIG}",
        "tokenizer": f"{checkpoint}/{tokenizer}",
        "tokenizer_config": f"{checkpoint}/{tokenizer_config}",
        "data": f"{folder}/{DATA_FILE}",
    }


def make_tiny_assets_from_config(output, settings: dict, log_path: str) -> None:
    """The asset rule's entry: `output` has .weights and .data; `settings` comes from the sweep's
    `assets:` entry of the app (LitGPT.assets_key)."""
    settings = dict(settings)
    samples = int(settings.pop("samples", SAMPLES))
    seed = int(settings.pop("seed", SEED))
    shape = TinyModelShape(**{k: int(v) for k, v in settings.items()})
    make_tiny_assets(Path(output.weights).parent, Path(output.data), samples=samples, seed=seed, shape=shape)
    Path(log_path).write_text(f"tiny Llama-2-shaped assets: {shape}, samples={samples}, seed={seed}\n")
