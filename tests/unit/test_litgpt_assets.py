"""The offline stand-ins are deterministic and loadable by LitGPT."""

import hashlib

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("litgpt")

from scalestudy.apps.litgpt.assets import TinyModelShape, make_tiny_assets  # noqa: E402

SHAPE = TinyModelShape(n_layer=1, n_head=2, n_embd=32, intermediate_size=86, vocab_size=300, block_size=64)


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_assets(tmp_path):
    for run in ("a", "b"):
        make_tiny_assets(tmp_path / run / "ckpt", tmp_path / run / "data.json", samples=60, seed=3, shape=SHAPE)
    for name in ("data.json", "ckpt/tokenizer.json", "ckpt/tokenizer_config.json", "ckpt/model_config.yaml"):
        assert digest(tmp_path / "a" / name) == digest(tmp_path / "b" / name), name
    first, second = (torch.load(tmp_path / run / "ckpt/lit_model.pth") for run in ("a", "b"))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_litgpt_loads_the_checkpoint_and_tokenizer(tmp_path):
    from litgpt.config import Config
    from litgpt.model import GPT
    from litgpt.tokenizer import Tokenizer
    from litgpt.utils import check_valid_checkpoint_dir

    make_tiny_assets(tmp_path / "ckpt", tmp_path / "data.json", samples=60, seed=0, shape=SHAPE)
    check_valid_checkpoint_dir(tmp_path / "ckpt", raise_error=True)
    config = Config.from_file(tmp_path / "ckpt/model_config.yaml")
    assert (config.n_layer, config.n_embd, config.mlp_class_name, config.norm_class_name) == (
        1, 32, "LLaMAMLP", "RMSNorm"
    )  # fmt: skip
    model = GPT(config)
    model.load_state_dict(torch.load(tmp_path / "ckpt/lit_model.pth"))
    tokens = Tokenizer(tmp_path / "ckpt").encode("Add the two numbers. 12 7", bos=True)
    assert 2 < len(tokens) < 40 and int(tokens[0]) == Tokenizer(tmp_path / "ckpt").bos_id
