"""The memory model's terms (Llama-2-7B, p = 6.74e9), LitGPT shapes, the load-time refusal
of a point that does not fit, and `python -m scalestudy memory`."""

import pytest
import yaml
from points import point
from scalestudy.__main__ import main
from scalestudy.apps import APPS
from scalestudy.apps.litgpt import LORA_RANK, litgpt_parameters
from scalestudy.model.errors import SweepError
from scalestudy.model.memory import DEEPSPEED_MIXED, PRECISIONS, Shape, Sharding, predict
from scalestudy.model.units import GB
from scalestudy.study import load

P = 6.74e9
# Llama-2-7B as LitGPT's config names it (model_config.yaml of a converted checkpoint).
LLAMA_2_7B = {
    "name": "Llama-2-7b-hf",
    "block_size": 4096,
    "vocab_size": 32000,
    "padded_vocab_size": 32000,
    "n_layer": 32,
    "n_head": 32,
    "n_embd": 4096,
    "n_query_groups": 32,
    "head_size": 128,
    "intermediate_size": 11008,
    "bias": False,
    "mlp_class_name": "LLaMAMLP",
    "norm_class_name": "RMSNorm",
}
LLAMA_SHAPE = Shape(parameters=int(P), hidden=4096, layers=32, heads=32, seq_len=512)


def gb(value: float) -> float:
    return value / GB


def test_llama_2_7b_terms_unsharded_as_the_issue_writes_them():
    # k_l = 2 (bf16 weights and gradients), k_h = 4 (fp32 master copy and two moments).
    prediction = predict(LLAMA_SHAPE, DEEPSPEED_MIXED, micro_batch=2)
    assert gb(prediction.model) == pytest.approx(2 * 6.74)
    assert gb(prediction.optimizer) == pytest.approx(3 * 4 * 6.74)
    assert gb(prediction.gradients) == pytest.approx(2 * 6.74)
    # s b h L (34 + 5 a s / h) with s = 512, b = 2, h = 4096, L = 32, a = 32.
    assert prediction.activations == pytest.approx(512 * 2 * 4096 * 32 * (34 + 5 * 32 * 512 / 4096))
    assert gb(prediction.total) == pytest.approx(13.48 + 80.88 + 13.48 + 7.2478, rel=1e-4)


@pytest.mark.parametrize(
    ("stage", "model", "optimizer", "gradients"),
    [
        (0, 13.48, 80.88, 13.48),
        (1, 13.48, 80.88 / 8, 13.48),
        (2, 13.48, 80.88 / 8, 13.48 / 8),
        (3, 13.48 / 8, 80.88 / 8, 13.48 / 8),
    ],
)
def test_each_zero_stage_shards_its_term_over_d(stage, model, optimizer, gradients):
    prediction = predict(LLAMA_SHAPE, DEEPSPEED_MIXED, 2, Sharding(data=8, zero_stage=stage))
    assert (gb(prediction.model), gb(prediction.optimizer), gb(prediction.gradients)) == pytest.approx(
        (model, optimizer, gradients)
    )


def test_model_parallelism_divides_every_term_and_checkpointing_keeps_layer_inputs():
    whole = predict(LLAMA_SHAPE, PRECISIONS["bf16-true"], 2)
    split = predict(LLAMA_SHAPE, PRECISIONS["bf16-true"], 2, Sharding(model=4))
    assert split.total == pytest.approx(whole.total / 4)
    # bf16-true: no master copy, AdamW's two moments in bf16.
    assert gb(whole.optimizer) == pytest.approx(2 * 2 * 6.74)
    checkpointed = predict(Shape(**{**LLAMA_SHAPE.__dict__, "checkpointed": True}), PRECISIONS["bf16-true"], 2)
    per_layer = whole.activations / 32
    assert checkpointed.activations == pytest.approx(512 * 2 * 4096 * 2 * 32 + per_layer)


def test_litgpt_parameters_of_llama_2_7b_and_its_lora_adapters():
    assert litgpt_parameters(LLAMA_2_7B) == 6_738_415_616
    # Rank-8 adapters on query and value: 2 r h (A) + r (h + h) (B), per layer.
    assert litgpt_parameters(LLAMA_2_7B, LORA_RANK) == 32 * 8 * (2 * 4096 + 4096 + 4096)


def checkpoint(tmp_path):
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir()
    (folder / "model_config.yaml").write_text(yaml.safe_dump(LLAMA_2_7B))
    return str(folder)


def test_lora_trains_only_the_adapters_and_full_shards_everything_over_the_ranks(tmp_path):
    ckpt = checkpoint(tmp_path)
    params = {"checkpoint_dir": ckpt, "precision": "bf16-true", "max_seq_length": 512}
    full = APPS["litgpt"].memory(point(params={**point().params, **params, "method": "full"}))
    lora = APPS["litgpt"].memory(point(params={**point().params, **params, "method": "lora"}))
    assert full.sharding == Sharding(data=8, zero_stage=3) and full.shape.checkpointed
    assert gb(full.prediction.model) == pytest.approx(2 * 6.738415616 / 8)
    adapters = litgpt_parameters(LLAMA_2_7B, LORA_RANK)
    assert lora.prediction.optimizer == pytest.approx(2 * 2 * adapters / 8)
    assert lora.prediction.total < full.prediction.total
    assert full.measured == "gpu_memory_gb" and full.batch_key == "micro_batch_size"


def sweep(tmp_path, micro_batch: int, gpus: int = 1) -> dict:
    return {
        "cluster": "aspire2a",
        "results_dir": str(tmp_path / "results"),
        "studies": {
            "litgpt-full": {
                "app": "litgpt",
                "nodes": [1],
                "gpus_per_node": [gpus],
                "params": {
                    "method": "full",
                    "checkpoint_dir": checkpoint(tmp_path),
                    "data_path": "data/alpaca.json",
                    "max_steps": 2,
                    "global_batch_size": 64,
                    "micro_batch_size": micro_batch,
                    "precision": "bf16-true",
                    "max_seq_length": 512,
                },
            }
        },
    }


def test_a_litgpt_point_that_does_not_fit_is_refused_at_load_with_its_terms(tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT", "p00")
    with pytest.raises(SweepError) as refused:
        load(sweep(tmp_path, micro_batch=4))
    (line,) = [p for p in refused.value.problems if "needs" in p]
    assert line.startswith("studies.litgpt-full.params.micro_batch_size: 4 needs ~")
    assert "GB per GPU (model 13.5 + optimizer 27 + gradients 13.5 + activations " in line
    assert "> 42.9 GB per GPU on aspire2a" in line  # an A100-40GB: 40 x 2^30 bytes


def test_the_same_model_fits_when_fsdp_shards_it_over_four_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT", "p00")
    assert load(sweep(tmp_path, micro_batch=4, gpus=4)).points


def test_memory_command_prints_every_point_and_exits_1_when_one_does_not_fit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROJECT", "p00")
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep(tmp_path, micro_batch=4)))
    assert main(["memory", "--configfile", str(config)]) == 1
    out, err = capsys.readouterr()
    header, row = out.splitlines()[:2]
    assert header.split("\t") == [
        "study",
        "point",
        "model GB",
        "optimizer GB",
        "gradients GB",
        "activations GB",
        "total GB",
        "capacity GB",
        "fits",
    ]
    cells = row.split("\t")
    assert cells[0] == "litgpt-full" and cells[-2] == "42.9 per GPU" and cells[-1] == "NO"
    assert float(cells[2]) == pytest.approx(13.48, rel=1e-3)
    assert "micro_batch_size: 4 needs" in err


def test_memory_command_on_the_shipped_sweep_fits(capsys, monkeypatch):
    monkeypatch.setenv("PROJECT", "p00")
    # The shipped Llama-2-7B checkpoint is not here: its shape is LitGPT's config of that name.
    assert main(["memory", "--study", "torch-parallel"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert rows and all(r.startswith("torch-parallel\t") and r.endswith("\tyes") for r in rows)
