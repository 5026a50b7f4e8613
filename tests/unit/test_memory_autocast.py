"""The memory model under autocast (bf16-mixed, 16-mixed) held to what was measured: LitGPT's
GPT on CPU through Lightning's precision plugins (tests/data/memory_autocast_cpu.json, recorded
by benchmarks/autocast_cpu.py), and LitGPT's published mixed-precision cells
(benchmarks/memory_autocast.py); and the points the model does not count, said so at load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from points import point
from scalestudy.apps.registry import APPS
from scalestudy.model.memory import DOES_NOT_FIT, FITS, PRECISIONS, Shape, Sharding, fsdp_parts, verdict
from scalestudy.model.units import GB, GIB

RECORDED = Path(__file__).resolve().parents[1] / "data" / "memory_autocast_cpu.json"
A100_40GB = 40 * GIB


def recorded_cases(*precisions: str) -> list[dict]:
    cases = json.loads(RECORDED.read_text())["cases"]
    return [case for case in cases if case["precision"] in precisions]


def case_id(case: dict) -> str:
    return f"{case['shape']}-{case['method']}-{case['precision']}-{case['micro_batch']}x{case['tokens']}"


def predicted(case: dict):
    from scalestudy.apps.litgpt.app import LORA_SETTINGS, count_litgpt, litgpt_need

    shapes = json.loads(RECORDED.read_text())["shapes"]
    config = shapes[case["shape"]]
    precision = PRECISIONS[case["precision"]]
    autocast = precision.compute if case["precision"].endswith("-mixed") else ""
    lora = tuple(sorted(LORA_SETTINGS.items())) if case["method"] == "lora" else ()
    weights = "float32" if autocast else precision.compute
    items = tuple(sorted(config.items()))
    counted = count_litgpt(items, case["method"], weights, case["micro_batch"], case["tokens"], lora, autocast)
    need = litgpt_need(config, case["method"], case["precision"], case["micro_batch"], case["tokens"], 1, False)
    return counted, need


# The larger size of each shape and method under bfloat16 autocast, and float16's once: what
# autograd saved, measured on CPU, is what the model counts (on fake tensors under CPU autocast).
COUNTED = [
    case
    for case in recorded_cases("bf16-mixed", "16-mixed")
    if case["micro_batch"] == 2 and (case["precision"] == "bf16-mixed" or case["shape"] == "llama")
]


@pytest.mark.parametrize("case", COUNTED, ids=case_id)
def test_the_count_is_what_autograd_saved_under_autocast_on_cpu(case):
    pytest.importorskip("litgpt")
    counted, _ = predicted(case)
    assert counted.saved == pytest.approx(case["saved_bytes"], rel=0.01)


@pytest.mark.parametrize("case", recorded_cases("bf16-mixed", "16-mixed"), ids=case_id)
def test_the_predicted_peak_is_within_0_8_to_1_2_of_the_cpu_allocators_under_autocast(case):
    pytest.importorskip("litgpt")
    _, need = predicted(case)
    assert 0.8 <= need.prediction.tensors / case["peak_bytes"] <= 1.2


@pytest.mark.parametrize(
    "case", [c for c in recorded_cases("bf16-mixed", "16-mixed") if c["method"] == "lora"], ids=case_id
)
def test_lora_under_autocast_is_within_5_percent_of_the_cpu_allocators_peak(case):
    # LoRA's peak is mostly the frozen base and its 16-bit copies: the model without the copies
    # (a862590) read 0.84-0.87 of these peaks; with them 0.970-1.003.
    pytest.importorskip("litgpt")
    _, need = predicted(case)
    assert 0.95 <= need.prediction.tensors / case["peak_bytes"] <= 1.05


def test_autocast_keeps_a_16_bit_copy_of_each_frozen_weight_per_use():
    # Measured on CPU (LoRA, Llama shape): from one head chunk (128 tokens) to three (384), the
    # bytes saved under bf16-mixed grow by more than under bf16-true, by two more copies of the
    # frozen head (one per chunk: autocast caches casts only of weights that need a gradient).
    pytest.importorskip("litgpt")
    cases = {(c["precision"], c["tokens"]): c for c in recorded_cases("bf16-mixed", "bf16-true")
             if c["shape"] == "llama" and c["method"] == "lora"}  # fmt: skip
    shapes = json.loads(RECORDED.read_text())["shapes"]
    head = 2 * shapes["llama"]["padded_vocab_size"] * shapes["llama"]["n_embd"]
    growth = {p: cases[(p, 384)]["saved_bytes"] - cases[(p, 128)]["saved_bytes"] for p in ("bf16-mixed", "bf16-true")}
    assert growth["bf16-mixed"] - growth["bf16-true"] > 2 * head
    for precision in ("bf16-mixed", "bf16-true"):
        counted = [predicted(cases[(precision, tokens)])[0].saved for tokens in (128, 384)]
        assert counted[1] - counted[0] == pytest.approx(growth[precision], rel=0.01)


# LitGPT's published LoRA cells in bf16-mixed (Lightning-AI/litgpt tutorials/finetune_lora.md at
# 7a7aee24 and bfccb6f4, A100 40GB, Alpaca's longest example): the model was not designed on them.
@pytest.mark.parametrize(
    ("name", "tokens", "micro_batch", "published"),
    [("stablelm-base-alpha-3b", 1034, 1, 26.92), ("stablelm-base-alpha-3b", 1034, 4, 34.57)],
)
def test_litgpts_published_bf16_mixed_lora_cells_within_0_8_to_1_2_and_admitted(name, tokens, micro_batch, published):
    pytest.importorskip("litgpt")
    from scalestudy.apps.litgpt.app import litgpt_config, litgpt_need

    need = litgpt_need(litgpt_config(name), "lora", "bf16-mixed", micro_batch, tokens, 1, on_gpu=True)
    assert 0.8 <= need.prediction.tensors / GB / published <= 1.2
    assert verdict(need.prediction, A100_40GB) == FITS


@pytest.mark.parametrize("micro_batch", [1, 4])
def test_litgpts_published_bf16_mixed_out_of_memory_cells_are_refused(micro_batch):
    # Llama-2-7B LoRA in bf16-mixed ran out of memory on an A100 40GB at micro batch 1 and 4.
    pytest.importorskip("litgpt")
    from scalestudy.apps.litgpt.app import litgpt_config, litgpt_need

    need = litgpt_need(litgpt_config("Llama-2-7b-hf"), "lora", "bf16-mixed", micro_batch, 1304, 1, on_gpu=True)
    assert verdict(need.prediction, A100_40GB) == DOES_NOT_FIT


def test_fsdps_mixed_policy_gathers_16_bit_units_beside_a_float32_shard():
    # Lightning's FSDPPrecision gives FSDP param_dtype=bfloat16 under bf16-mixed: the shard and
    # its gradient stay float32, what is gathered (the root, blocks in flight) and its unsharded
    # gradient are 16-bit.
    shape = Shape(parameters=8_000, block_unit=900, root_unit=1_000, largest_tensor=500)
    sharding = Sharding(data=4, zero_stage=3, root_gathered=True)
    mixed, true32 = (
        fsdp_parts(shape, PRECISIONS["bf16-mixed"], sharding),
        fsdp_parts(shape, PRECISIONS["32-true"], sharding),
    )
    assert mixed["shard"] == true32["shard"] == 4 * 8_000 / 4
    assert mixed["sharded_gradients"] == true32["sharded_gradients"]
    assert mixed["root"] == 2 * 1_000 and true32["root"] == 4 * 1_000
    assert mixed["in_flight"] == 2 * 2 * 900 and mixed["unsharded_gradients"] == 2 * 1_000


def test_a_mixed_precision_that_counted_its_casts_does_not_add_them_again():
    from scalestudy.model.memory import predict

    counted = Shape(parameters=1_000, activations=500.0, casts_counted=True)
    assumed = Shape(parameters=1_000, activations=500.0)
    assert predict(counted, PRECISIONS["bf16-mixed"]).activations == 500.0
    assert predict(assumed, PRECISIONS["bf16-mixed"]).activations == 500.0 + 2 * 1_000


def litgpt_point(ranks: int = 1, **params):
    base = {"method": "lora", "checkpoint_dir": "/nowhere/Llama-2-7b-hf", "data_path": "/d.json", "max_steps": 2,
            "global_batch_size": 8, "micro_batch_size": 1}  # fmt: skip
    return point(nodes=1, ranks_per_node=ranks, gpus_per_node=ranks, params={**base, **params})


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"method": "adapter"}, "method adapter: LitGPT's adapter fine-tuning is not counted"),
        ({"method": "adapter_v2"}, "method adapter_v2: LitGPT's adapter fine-tuning is not counted"),
        ({"quantize": "bnb.nf4", "precision": "bf16-true"}, "quantize bnb.nf4: bitsandbytes' quantized base weights"),
    ],
)
def test_a_point_the_model_does_not_count_says_so_at_load_and_is_never_guessed(params, said):
    from scalestudy.config import clusters
    from scalestudy.config.study import memory_lines, memory_rows

    unmodelled = litgpt_point(**params)
    assert APPS["litgpt"].memory(unmodelled) is None
    refused, warned = memory_lines([unmodelled], clusters.load("aspire2a"))
    assert refused == [] and len(warned) == 1
    assert warned[0].startswith(f"studies.{unmodelled.study}: memory per rank not predicted ({said}")
    (row,) = memory_rows([unmodelled], clusters.load("aspire2a"))
    assert row.prediction is None and row.verdict is None and row.note.startswith(f"not predicted: {said}")


@pytest.mark.parametrize(
    ("ranks", "params", "refusal"),
    [
        (1, {"quantize": "bnb.nf4"}, "params.quantize: bnb.nf4 with precision bf16-mixed (the default): LitGPT "
         "refuses quantization with a mixed precision; allowed: precision bf16-true, 16-true or 32-true"),
        (1, {"quantize": "bnb.nf4", "method": "full", "precision": "bf16-true"},
         "params.quantize: bnb.nf4: LitGPT's finetune_full takes no --quantize"),
        (2, {"quantize": "bnb.nf4-dq", "precision": "bf16-true"},
         "params.quantize: bnb.nf4-dq on 2 devices at nodes=1, gpus_per_node=2: LitGPT quantizes on one device"),
        (2, {"precision": "16-mixed"}, "params.precision: 16-mixed with method lora on 2 devices at nodes=1, "
         "gpus_per_node=2: LitGPT shards LoRA with Lightning's ModelParallelStrategy, which refuses 16-mixed"),
    ],
)  # fmt: skip
def test_what_litgpt_and_lightning_refuse_at_start_is_refused_at_load(ranks, params, refusal):
    problems = APPS["litgpt"].preflight(litgpt_point(ranks, global_batch_size=8, **params))
    assert any(problem.startswith(refusal) for problem in problems), problems


def test_16_mixed_lora_on_one_gpu_and_full_on_several_are_not_refused():
    assert APPS["litgpt"].preflight(litgpt_point(1, precision="16-mixed")) == []
    assert APPS["litgpt"].preflight(litgpt_point(4, precision="16-mixed", method="full")) == []


def test_a_quantized_point_passes_quantize_to_litgpt():
    command = APPS["litgpt"].rank_command(
        litgpt_point(quantize="bnb.nf4", precision="bf16-true"), Path("/tmp/run"), None
    )
    assert command[command.index("--quantize") + 1] == "bnb.nf4"
