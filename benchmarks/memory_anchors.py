"""The memory model (scalestudy.model.memory) held to references nobody here wrote, and to
measured CPU ranks:

1. LitGPT's resource table (Lightning-AI/litgpt tutorials/resource-tables.md, 10/2023, A100
   40GB, bf16-true, LoRA r=8 on query and value, Alpaca at its longest example): every cell,
   its out-of-memory cells included (each must be refused, no fitting cell refused).
2. The ZeRO paper's example (Rajbhandari et al., SC'20: 7.5B parameters, 64 GPUs, mixed
   precision Adam): model states per GPU at stages 0-3.
3. DeepSpeed's own estimators (estimate_zero2_model_states_mem_needs and
   estimate_zero3_model_states_mem_needs, no offload) on three Llama-shaped cases.
4. The torch-parallel rank program under real mpirun on CPU: ddp, fsdp stages 1-3, pipeline,
   tensor at a size where model state dominates; measured: the rank's peak of tensor bytes.
   And LitGPT (apps/litgpt/rank.py, the local study's tiny Llama-shaped stand-in, config/local.yaml),
   full and LoRA on 1 and `--ranks` CPU ranks: its rank's peak of tensor bytes.
1b. A held-out LitGPT table (config_hub/finetune/README.md, A10G): nothing of the model fitted
   on it; predicted / published, wrong refusals and wrong admissions.
5. The load-time check's speed on 10,000 LitGPT points.
6. Stock LitGPT finetune_full under FSDP on 2 CPU ranks (benchmarks/fsdp_cpu_rank.py) at six
   reduced sizes (depth, width, vocabulary, sequence doubled; accumulation): every part of
   model.memory.fsdp_parts measured, and the peak.

    python benchmarks/memory_anchors.py [--cpu-width 1024 --cpu-depth 3 --cpu-strategies ...]
        [--litgpt-methods full,lora] [--litgpt-precision bf16-mixed] [--no-cpu] [--no-fsdp]
        [--fsdp-sizes base,...] [--fsdp-precision bf16-mixed] [--speed-points N]

    section 6 alone (with the published sections, which take seconds):
    python benchmarks/memory_anchors.py --speed-points 0 --cpu-strategies "" --litgpt-methods ""

Each line: the figure, its definition, the ratio predicted / reference; a summary line per
section with how many are within 0.8-1.2 (n).

(One file past 500 lines on purpose: each reference's cells are written out as published, beside
the readers and the one printed table they share; `python benchmarks/memory_anchors.py` runs all.)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "benchmarks"))

from scalestudy.apps.litgpt.app import litgpt_config, litgpt_need  # noqa: E402
from scalestudy.apps.registry import APPS  # noqa: E402
from scalestudy.apps.torch_parallel.spec import RESULT_PREFIX  # noqa: E402
from scalestudy.model.memory import (  # noqa: E402
    DEEPSPEED_MIXED,
    DOES_NOT_FIT,
    FITS,
    MAY_NOT_FIT,
    PRECISIONS,
    Shape,
    Sharding,
    predict,
    verdict,
)
from scalestudy.model.point import Point  # noqa: E402
from scalestudy.model.units import GB, GIB  # noqa: E402

LOW, HIGH = 0.8, 1.2
A100_40GB = 40 * GIB  # "A100-SXM4-40GB": 40 GiB of memory
# (model, LitGPT config name, longest Alpaca example in tokens, micro batch, GPUs, Max GPU RAM GB or None: OOM)
LITGPT_TABLE = [
    ("phi-1.5", "phi-1_5", 1044, 1, 1, 4.82),
    ("phi-1.5", "phi-1_5", 1044, 2, 1, 6.76),
    ("phi-1.5", "phi-1_5", 1044, 4, 1, 10.68),
    ("stablelm-base-alpha-3b", "stablelm-base-alpha-3b", 1034, 1, 1, 9.69),
    ("stablelm-base-alpha-3b", "stablelm-base-alpha-3b", 1034, 2, 1, 12.10),
    ("stablelm-base-alpha-3b", "stablelm-base-alpha-3b", 1034, 4, 1, 16.92),
    ("Llama-2-7b", "Llama-2-7b-hf", 1304, 1, 1, 21.30),
    ("Llama-2-7b", "Llama-2-7b-hf", 1304, 2, 1, 29.07),
    ("Llama-2-7b", "Llama-2-7b-hf", 1304, 4, 1, None),
    ("Llama-2-13b", "Llama-2-13b-hf", 1304, 1, 1, 38.12),
    ("Llama-2-13b", "Llama-2-13b-hf", 1304, 2, 1, None),
    ("Llama-2-13b", "Llama-2-13b-hf", 1304, 4, 1, None),
    ("falcon-40b", "falcon-40b", 1304, 1, 1, None),
    ("phi-1.5", "phi-1_5", 1044, 1, 2, 4.86),
    ("phi-1.5", "phi-1_5", 1044, 2, 2, 5.05),
    ("phi-1.5", "phi-1_5", 1044, 4, 2, 5.88),
    ("stablelm-base-alpha-3b", "stablelm-base-alpha-3b", 1034, 1, 2, 12.75),
    ("stablelm-base-alpha-3b", "stablelm-base-alpha-3b", 1034, 2, 2, 12.94),
    ("stablelm-base-alpha-3b", "stablelm-base-alpha-3b", 1034, 4, 2, 13.45),
    ("Llama-2-7b", "Llama-2-7b-hf", 1304, 1, 2, 22.18),
    ("Llama-2-7b", "Llama-2-7b-hf", 1304, 2, 2, 22.47),
    ("Llama-2-7b", "Llama-2-7b-hf", 1304, 4, 2, 23.39),
    ("Llama-2-13b", "Llama-2-13b-hf", 1304, 1, 2, None),
    ("Llama-2-13b", "Llama-2-13b-hf", 1304, 1, 4, 35.57),
    ("falcon-40b", "falcon-40b", 1304, 1, 4, None),
]
# The held-out table: Lightning-AI/litgpt config_hub/finetune/README.md (commits 43c44323 and
# 5895df10, 04/2024, rows added up to 00af8b0d, 09/2024): each config file run by LitGPT on
# Lightning AI Studios, bf16-true, Alpaca2k at max_seq_length 512; "Peak memory" is
# torch.cuda.max_memory_allocated() / 1e9 (litgpt/finetune/*.py print it), on A10G GPUs. The
# GPUs a run used are its config's `devices` (the same file at that commit): the "4xA10G" rows of
# LoRA configs (devices: 1) and of tiny-llama/full.yaml (devices: 1) repeat the 1xA10G rows to the
# hundredth of a GB and of a minute, i.e. one GPU of a 4-GPU machine, and are left out; where a
# config's devices exceed the machine's GPUs (llama-3.1-8b/full.yaml: devices 4 on 1xA10G) the
# machine's count is taken. QLoRA rows are left out (4-bit weights are not modelled).
# (config, LitGPT config name, method, GPUs, micro batch, global batch, LoRA settings, Peak memory GB or None: OOM)
QV32 = {"lora_r": 32, "lora_alpha": 16, "lora_dropout": 0.05, "lora_query": True, "lora_value": True}
ALL_LINEAR = {"lora_query": True, "lora_key": True, "lora_value": True, "lora_projection": True, "lora_mlp": True,
              "lora_head": True, "lora_alpha": 16}  # fmt: skip
HELD_OUT_TABLE = [
    ("gemma-2b/full.yaml", "gemma-2b", "full", 4, 1, 16, None, 17.43),
    ("phi-2/full.yaml", "phi-2", "full", 2, 4, 8, None, 14.44),
    ("stablelm-base-alpha-3b/full.yaml", "stablelm-base-alpha-3b", "full", 2, 1, 8, None, 21.23),
    ("tiny-llama/full.yaml", "tiny-llama-1.1b", "full", 1, 4, 32, None, 14.10),
    ("llama-2-7b/full.yaml", "Llama-2-7b-hf", "full", 4, 4, 64, None, None),
    ("llama-3-8b/full.yaml", "Llama-3-8B", "full", 4, 4, 64, None, None),
    ("llama-3.1-8b/full.yaml", "Llama-3.1-8B", "full", 1, 4, 64, None, None),
    ("llama-3.2-1b/full.yaml", "Llama-3.2-1B", "full", 1, 4, 64, None, 8.70),
    ("llama-3.2-3b/full.yaml", "Llama-3.2-3B", "full", 1, 4, 64, None, 16.51),
    ("phi-3/full.yaml", "Phi-3-mini-4k-instruct", "full", 1, 4, 8, None, 17.01),
    ("falcon-7b/lora.yaml", "falcon-7b", "lora", 1, 1, 8, QV32, 16.69),
    ("gemma-2b/lora.yaml", "gemma-2b", "lora", 1, 2, 6, {**ALL_LINEAR, "lora_r": 8, "lora_dropout": 0.1}, 12.62),
    ("gemma-7b/lora.yaml", "gemma-7b", "lora", 1, 1, 6, {**ALL_LINEAR, "lora_r": 16, "lora_dropout": 0.1}, None),
    ("gemma2-2b/lora.yaml", "gemma-2-2b", "lora", 1, 2, 6, {**ALL_LINEAR, "lora_r": 8, "lora_dropout": 0.1}, 14.31),
    ("gemma2-9b/lora.yaml", "gemma-2-9b", "lora", 1, 1, 6, {**ALL_LINEAR, "lora_r": 16, "lora_dropout": 0.1}, None),
    ("llama-2-7b/lora.yaml", "Llama-2-7b-hf", "lora", 1, 2, 8, QV32, 19.77),
    ("llama-3-8b/lora.yaml", "Llama-3-8B", "lora", 1, 1, 8, QV32, 19.73),
    ("llama-3.1-8b/lora.yaml", "Llama-3.1-8B", "lora", 1, 1, 8, QV32, 19.73),
    ("llama-3.2-1b/lora.yaml", "Llama-3.2-1B", "lora", 1, 1, 8, QV32, 4.49),
    ("llama-3.2-3b/lora.yaml", "Llama-3.2-3B", "lora", 1, 1, 8, QV32, 9.67),
    ("mistral-7b-v0.2/lora.yaml", "Mistral-7B-v0.2", "lora", 1, 2, 8, QV32, 20.66),
    ("mistral-7b/lora.yaml", "Mistral-7B-v0.1", "lora", 1, 2, 8, QV32, 20.66),
    ("phi-2/lora.yaml", "phi-2", "lora", 1, 4, 8, {**ALL_LINEAR, "lora_r": 8, "lora_dropout": 0.05}, 13.98),
    (
        "phi-3/lora.yaml",
        "Phi-3-mini-4k-instruct",
        "lora",
        1,
        4,
        8,
        {**ALL_LINEAR, "lora_r": 8, "lora_dropout": 0.05},
        19.75,
    ),
    ("stablelm-base-alpha-3b/lora.yaml", "stablelm-base-alpha-3b", "lora", 1, 1, 8, QV32, 8.58),
    (
        "tiny-llama/lora.yaml",
        "tiny-llama-1.1b",
        "lora",
        1,
        8,
        8,
        {**ALL_LINEAR, "lora_r": 32, "lora_dropout": 0.05},
        13.50,
    ),
]
HELD_OUT_SEQ_LEN = 512
# An A10G as nvidia-smi reports it: 23,028 MiB (24 GiB of GDDR6 less what the driver keeps); not
# measured here.
A10G = 23_028 * 2**20

# The ZeRO paper's Figure 1: GB per GPU of model states at stages 0-3 (7.5B parameters, 64 GPUs).
ZERO_PAPER = {"psi": 7.5e9, "gpus": 64, "stages": {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.88}}
# DeepSpeed's estimators' cases: (LitGPT config name, GPUs).
DEEPSPEED_CASES = [("tiny-llama-1.1b", 8), ("Llama-2-7b-hf", 8), ("Llama-2-13b-hf", 64)]


def within(ratio: float) -> bool:
    return LOW <= ratio <= HIGH


def litgpt_section() -> list[str]:
    print("# 1. LitGPT resource table (LoRA, bf16-true, A100 40GB)")
    print(
        "# published: Max GPU RAM = torch.cuda.max_memory_allocated() / 1e9 (GB), at the longest Alpaca example; "
        "predicted: the model's tensor bytes (total less the CUDA context), GB; verdict against 40 GiB = 42.95 GB"
    )
    misses, ratios, answers = [], [], []
    for row in LITGPT_TABLE:
        label, name, seq_len, micro_batch, gpus, published = row
        need = litgpt_need(litgpt_config(name), "lora", "bf16-true", micro_batch, seq_len, gpus, on_gpu=True)
        prediction = need.prediction
        answer = verdict(prediction, A100_40GB)
        answers.append((row, answer))
        where = f"litgpt-lora {label} micro_batch={micro_batch} gpus={gpus} s={seq_len}"
        terms = " + ".join(f"{k} {v:.2f}" for k, v in prediction.terms_gb().items() if v >= 0.005)
        if published is None:
            refused = answer == DOES_NOT_FIT
            print(f"{where}: predicted {prediction.tensors / GB:.2f} GB ({terms}); published OOM; verdict {answer}: "
                  f"{'refused' if refused else 'NOT refused'}")  # fmt: skip
            if not refused:
                misses.append(f"{where}: published OOM, verdict {answer}")
            continue
        ratio = prediction.tensors / GB / published
        ratios.append(ratio)
        inside = (
            prediction.bound(0) - prediction.overhead <= published * GB <= prediction.bound(1) - prediction.overhead
        )
        print(f"{where}: predicted {prediction.tensors / GB:.2f} GB ({terms}); published {published:.2f} GB; "
              f"ratio {ratio:.3f}; verdict {answer}; "
              f"published within the stated range: {'yes' if inside else 'no'}")  # fmt: skip
        if not within(ratio) or answer == DOES_NOT_FIT:
            misses.append(f"{where}: ratio {ratio:.3f}, verdict {answer}")
    refusals = sum(1 for miss in misses if "verdict does not fit" in miss)
    admissions = sum(1 for row, answer in answers if row[-1] is None and answer == FITS)
    warned = sum(1 for row, answer in answers if row[-1] is None and answer == MAY_NOT_FIT)
    print(f"litgpt table: wrong refusals {refusals}, wrong admissions {admissions}, OOM warned {warned}")
    print(f"litgpt table: {sum(map(within, ratios))}/{len(ratios)} measured cells within {LOW}-{HIGH} "
          f"(ratio min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"{sum(1 for row in LITGPT_TABLE if row[-1] is None)} OOM cells; misses: {len(misses)}")  # fmt: skip
    return misses


def held_out_section() -> list[str]:
    """The held-out table (HELD_OUT_TABLE), nothing of the model fitted on it: predicted / published
    per cell, the verdict against an A10G, wrong refusals (a cell that ran refused) and wrong
    admissions (a cell that ran out of memory said to fit)."""
    print("# 1b. Held-out LitGPT table: config_hub/finetune/README.md (04-09/2024, A10G, bf16-true, Alpaca2k, "
          f"max_seq_length {HELD_OUT_SEQ_LEN}), each config's GPUs, micro batch, accumulation and LoRA "
          "settings")  # fmt: skip
    print("# published: Peak memory = torch.cuda.max_memory_allocated() / 1e9 (GB); predicted: the model's tensor "
          f"bytes (GB); verdict against an A10G, {A10G / GB:.2f} GB; model states: weights + gradients + optimizer "
          "counted exactly, a floor no run can go below")  # fmt: skip
    misses, ratios = [], {"full": [], "lora": []}
    counts = dict.fromkeys(
        ("wrong refusals", "wrong admissions", "OOM refused", "OOM warned", "inconsistent", "outside the stated range"),
        0,
    )
    for config, name, method, gpus, micro, global_batch, lora, published in HELD_OUT_TABLE:
        need = litgpt_need(litgpt_config(name), method, "bf16-true", micro, HELD_OUT_SEQ_LEN, gpus, on_gpu=True,
                           accumulating=global_batch // gpus // micro > 1, lora=lora)  # fmt: skip
        p = need.prediction
        answer = verdict(p, A10G)
        states = p.weights - p.gathered + p.gradients + p.optimizer
        low, high = (p.bound(0) - p.overhead) / GB, (p.bound(1) - p.overhead) / GB
        where = f"{config} ({name}, {method}, {gpus} GPU{'s' if gpus > 1 else ''}, micro batch {micro})"
        head = f"{where}: predicted {p.tensors / GB:.2f} GB (range {low:.2f}-{high:.2f})"
        if published is None:
            refused = answer == DOES_NOT_FIT
            counts["OOM refused" if refused else "OOM warned" if answer == MAY_NOT_FIT else "wrong admissions"] += 1
            print(f"{head}; published OOM; verdict {answer}")
            if answer == FITS:
                misses.append(f"held out {config}: published OOM, verdict fits")
            continue
        if published * GB < states:
            counts["inconsistent"] += 1
            print(f"{head}; published {published:.2f} GB, below the model states alone ({states / GB:.2f} GB): "
                  "not the stated setup (left out of the counts)")  # fmt: skip
            continue
        ratio = p.tensors / GB / published
        ratios[method].append(ratio)
        inside = low <= published <= high
        counts["outside the stated range"] += not inside
        print(f"{head}; published {published:.2f} GB; ratio {ratio:.3f}; verdict {answer}; "
              f"published within the stated range: {'yes' if inside else 'no'}")  # fmt: skip
        if answer == DOES_NOT_FIT:
            counts["wrong refusals"] += 1
            misses.append(f"held out {config}: ran at {published} GB, refused")
    for method, values in ratios.items():
        print(f"held out {method}: {len(values)} measured cells, ratio min {min(values):.3f}, max {max(values):.3f}, "
              f"{sum(map(within, values))}/{len(values)} within {LOW}-{HIGH}")  # fmt: skip
    print("held out: " + ", ".join(f"{key} {value}" for key, value in counts.items()))
    return misses


def zero_section() -> list[str]:
    print("# 2. ZeRO paper (SC'20, Figure 1): model states per GPU, GB, 7.5B parameters on 64 GPUs")
    print("# predicted: weights + gradients + optimizer of model.memory with DeepSpeed's mixed precision")
    misses = []
    psi, gpus = ZERO_PAPER["psi"], ZERO_PAPER["gpus"]
    for stage, published in ZERO_PAPER["stages"].items():
        p = predict(Shape(parameters=int(psi)), DEEPSPEED_MIXED, Sharding(data=gpus, zero_stage=stage))
        states = (p.weights + p.gradients + p.optimizer) / GB
        ratio = states / published
        print(f"zero stage {stage}: predicted {states:.3g} GB, published {published} GB, ratio {ratio:.3f}")
        if not within(ratio):
            misses.append(f"zero stage {stage}: ratio {ratio:.3f}")
    return misses


def largest_layer(name: str) -> tuple[int, int]:
    """(parameters, the most parameters one module holds directly) of a LitGPT model."""
    import torch
    from litgpt import GPT, Config

    with torch.device("meta"):
        model = GPT(Config.from_name(name))
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return sum(p.numel() for p in model.parameters()), largest


def deepspeed_section() -> list[str]:
    print("# 3. DeepSpeed's estimators (no offload), GiB as DeepSpeed prints them (2^30 bytes)")
    print("# zero2: 4 P + 16 P / gpus; zero3: 4 L + 18 P / gpus (L: the largest layer's parameters); "
          "predicted: weights + gradients + optimizer + transient of model.memory, "
          "DeepSpeed's mixed precision")  # fmt: skip
    misses = []
    for name, gpus in DEEPSPEED_CASES:
        total, largest = largest_layer(name)
        for stage in (2, 3):
            reference = 4 * total + int(16 * total / gpus) if stage == 2 else 4 * largest + int(18 * total / gpus)
            p = predict(
                Shape(parameters=total, largest_unit=largest),
                DEEPSPEED_MIXED,
                Sharding(data=gpus, zero_stage=stage, unit_gradients=False),
            )
            predicted = p.weights + p.gradients + p.optimizer + p.transient
            ratio = predicted / reference
            print(f"deepspeed zero{stage} {name} ({total / 1e9:.2f}B, largest layer {largest / 1e6:.0f}M) on {gpus} "
                  f"GPUs: predicted {predicted / GIB:.2f} GiB, estimator {reference / GIB:.2f} GiB, "
                  f"ratio {ratio:.3f}")  # fmt: skip
            if not within(ratio):
                misses.append(f"deepspeed zero{stage} {name} {gpus} GPUs: ratio {ratio:.3f}")
    return misses


def cpu_case(strategy: str, ranks: int, width: int, depth: int, batch: int) -> tuple[dict, object]:
    name, _, number = strategy.partition(":")
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    command = [mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1",
               "-x", f"PYTHONPATH={REPO / 'workflow'}", sys.executable, "-m", "scalestudy.apps.torch_parallel.rank",
               "--model", "mlp", "--strategy", strategy, "--mode", "throughput", "--steps", "1",
               "--warmup-steps", "2", "--batch-size", str(batch), "--width", str(width),
               "--depth", str(depth)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX + " ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"mlp {strategy}: mpirun exited {done.returncode}\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1].split(" ", 1)[1])
    params = {"model": "mlp", "strategy": name, "batch_size": batch, "width": width, "depth": depth, "device": "cpu"}
    if number:
        params["zero_stage"] = int(number)
    point = Point(study="memory", app="torch-parallel", scaling="strong", nodes=1, ranks_per_node=ranks,
                  gpus_per_node=0, threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default", repeat=1,
                  walltime="00:10:00", params=params)  # fmt: skip
    return result, APPS["torch-parallel"].memory(point).prediction


def cpu_section(strategies: list[str], ranks: int, width: int, depth: int, batch: int) -> list[str]:
    print(f"# 4. torch-parallel on CPU: mlp width={width} depth={depth}, batch {batch} per replica, {ranks} ranks "
          "(one mpirun each)")  # fmt: skip
    print("# measured: the largest rank's peak of bytes malloc holds for tensors over the model build and 2 warm-up "
          "steps (TensorPeak, not RSS); predicted: the model's tensor bytes of that rank")  # fmt: skip
    misses, ratios = [], []
    for strategy in strategies:
        result, prediction = cpu_case(strategy, ranks, width, depth, batch)
        measured = max(result["memory_growth_bytes_per_rank"])
        cpu_row(f"cpu {strategy} ranks={ranks} parameters={result['parameters']}", prediction, measured, ratios, misses)
    return cpu_summary("cpu", ratios, misses)


def cpu_row(name: str, prediction, measured: float, ratios: list[float], misses: list[str]) -> None:
    """One CPU case: predicted (with its terms) against measured tensor bytes; a ratio outside
    LOW-HIGH is a miss."""
    ratio = prediction.tensors / measured
    ratios.append(ratio)
    terms = " + ".join(f"{k} {v * 1000:.1f}" for k, v in prediction.terms_gb().items() if v)
    print(f"{name}: predicted {prediction.tensors / 1e6:.1f} MB ({terms}), measured {measured / 1e6:.1f} MB, "
          f"ratio {ratio:.3f}", flush=True)  # fmt: skip
    if not within(ratio):
        misses.append(f"{name}: ratio {ratio:.3f}")


def cpu_summary(name: str, ratios: list[float], misses: list[str]) -> list[str]:
    print(f"{name}: {sum(map(within, ratios))}/{len(ratios)} within {LOW}-{HIGH} "
          f"(ratio min {min(ratios):.3f}, max {max(ratios):.3f})")  # fmt: skip
    return misses


def litgpt_cpu_section(methods: list[str], ranks_list: list[int], precision: str = "") -> list[str]:
    """LitGPT under real mpirun on CPU ranks, the local study's stand-in model and settings
    (config/local.yaml: its assets and the litgpt-full study's params; `precision` in place of
    its own where given: bf16-mixed runs CPU autocast), 5 optimizer steps; measured: the largest
    rank's tensor_memory_peak_gb (apps/litgpt/rank.py)."""
    import tempfile

    import yaml
    from scalestudy.apps.litgpt.app import parse_litgpt
    from scalestudy.apps.litgpt.assets import TinyModelShape, make_tiny_assets

    local = yaml.safe_load((REPO / "config" / "local.yaml").read_text())
    settings = dict(local["assets"]["litgpt_tiny"])
    samples, seed = settings.pop("samples"), settings.pop("seed")
    study = {**local["studies"]["litgpt-full"]["params"], **({"precision": precision} if precision else {})}
    print(f"# 4b. LitGPT on CPU: the local stand-in ({settings}), micro batch {study['micro_batch_size']}, "
          f"{study['max_seq_length']} tokens, {study['precision']}, 5 steps (one mpirun each)")  # fmt: skip
    print("# measured: the largest rank's peak of tensor bytes from the model's build through 2 optimizer steps "
          "(tensor_memory_peak_gb); predicted: the model's tensor bytes of that rank")  # fmt: skip
    misses, ratios = [], []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        make_tiny_assets(root / "checkpoint", root / "alpaca.json", samples, seed, TinyModelShape(**settings))
        mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
        for method in methods:
            for ranks in ranks_list:
                params = {**study, "method": method, "checkpoint_dir": str(root / "checkpoint"),
                          "data_path": str(root / "alpaca.json"), "max_steps": 5}  # fmt: skip
                point = Point(study="memory", app="litgpt", scaling="strong", nodes=1, ranks_per_node=ranks,
                              gpus_per_node=0, threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default",
                              repeat=1, walltime="00:10:00", params=params)  # fmt: skip
                app = APPS["litgpt"]
                run_dir = root / f"{method}-{ranks}"
                env = [word for name, value in app.rank_env(point).items() for word in ("-x", f"{name}={value}")]
                command = [mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root", "-x",
                           "OMP_NUM_THREADS=1", "-x", f"PYTHONPATH={REPO / 'workflow'}", *env,
                           *app.rank_command(point, run_dir, None)]  # fmt: skip
                done = subprocess.run(command, capture_output=True, text=True, timeout=900)
                if done.returncode != 0:
                    raise SystemExit(f"litgpt {method} {ranks} ranks: mpirun exited {done.returncode}\n"
                                     f"{done.stdout[-2000:]}{done.stderr[-3000:]}")  # fmt: skip
                measured = parse_litgpt(done.stdout)["tensor_memory_peak_gb"] * 1e9
                prediction = app.memory(point).prediction
                cpu_row(f"cpu litgpt-{method} ranks={ranks}", prediction, measured, ratios, misses)
    return cpu_summary("cpu litgpt", ratios, misses)


# Section 6's sizes: (name, layers, width, MLP width, vocabulary, tokens, micro batch, global batch)
# on 2 ranks; the base, each of depth, width, vocabulary and sequence doubled, and the base
# accumulating two micro batches per step.
FSDP_SIZES = [
    ("base", 4, 512, 1376, 8192, 128, 2, 4),
    ("depth x2", 8, 512, 1376, 8192, 128, 2, 4),
    ("width x2", 4, 1024, 2752, 8192, 128, 2, 4),
    ("vocab x2", 4, 512, 1376, 16384, 128, 2, 4),
    ("seq x2", 4, 512, 1376, 8192, 256, 2, 4),
    ("base, accumulating", 4, 512, 1376, 8192, 128, 2, 8),
]
FSDP_RANKS = 2


def fsdp_marks(log_text: str) -> dict[int, list[dict]]:
    """Each rank's phase marks (benchmarks/fsdp_cpu_rank.py's lines)."""
    from fsdp_cpu_rank import PHASES_PREFIX

    found = re.findall(rf"^{re.escape(PHASES_PREFIX)} rank (\d+): (.*)$", log_text, re.M)
    return {int(rank): json.loads(marks) for rank, marks in found}


def fsdp_measured(marks: list[dict], accumulating: bool) -> dict[str, float]:
    """What one rank held, from its marks (bytes): the shard after the model's set-up; the
    forward's growth in the first micro batch (the root gathered and the activations: nothing
    held before it but the shard); with accumulation, what the first micro batch's backward
    leaves (the unsharded gradients under no_sync, and the loop's logits); without, the
    gradients and logits at the first step, and what the step adds (AdamW's moments); the
    second step's optimizer temporaries and its peak (every phase from its first forward)."""
    at = {}
    for index, mark in enumerate(marks):
        at.setdefault(mark["mark"], []).append(index)
    fit, backward = marks[at["fit"][0]], marks[at["backward"][0]]
    first_step, second_step = at["step"][0], at["step"][1]
    measured = {
        "shard": fit["held"],
        "root + activations": backward["held"] - fit["held"],
        "optimizer": marks[at["step_end"][0]]["held"] - marks[first_step]["held"],
        "step_temporaries": marks[at["step_end"][1]]["peak"] - marks[second_step]["held"],
        "peak": max(mark["peak"] for mark in marks[at["zero_grad_end"][0] + 1 :]),
    }
    if accumulating:
        measured["unsharded gradients + logits"] = marks[at["backward_end"][0]]["held"] - fit["held"]
    else:
        measured["sharded gradients + logits"] = marks[first_step]["held"] - fit["held"]
    return measured


def fsdp_predicted(need, counted, logits: float) -> dict[str, float]:
    """The model's parts (model.memory.fsdp_parts) matching fsdp_measured's."""
    from scalestudy.model.memory import fsdp_parts

    parts = fsdp_parts(need.shape, need.precision, need.sharding)
    p = need.prediction
    predicted = {
        "shard": parts["shard"],
        # The forward holds what the count keeps but for the block the backward recomputes.
        "root + activations": parts["root"] + p.activations - counted.recomputed,
        "optimizer": parts["optimizer"],
        "step_temporaries": parts["step_temporaries"],
        "peak": p.tensors,
    }
    if need.sharding.accumulating:
        predicted["unsharded gradients + logits"] = parts["unsharded_gradients"] + logits
    else:
        predicted["sharded gradients + logits"] = parts["sharded_gradients"] + logits
    return predicted


def fsdp_section(names: list[str], precision: str = "32-true") -> list[str]:
    """Stock LitGPT finetune_full under FSDP on 2 CPU ranks (gloo; benchmarks/fsdp_cpu_rank.py),
    32-true (float32 GEMMs run on MKL, whose buffers the tracker leaves out; bfloat16's run on
    oneDNN, whose scratch it cannot tell from tensors), each size once (n = 1): every part the
    model adds up, measured, and the peak, predicted / measured."""
    import tempfile

    import yaml
    from scalestudy.apps.litgpt.app import count_litgpt
    from scalestudy.apps.litgpt.assets import WORDS, TinyModelShape, make_tiny_assets

    print(f"# 6. FSDP full fine-tuning on {FSDP_RANKS} CPU ranks: stock LitGPT finetune_full, Lightning's "
          f"FSDPStrategy (each Block a unit, checkpointed), {precision}, every sequence cut at the tokens given, "
          "2 optimizer steps")  # fmt: skip
    print("# measured: bytes tensors hold (apps/tensor_peak.py) at each phase of training, the larger rank; predicted: "
          "model.memory.fsdp_parts; ratio = predicted / measured")  # fmt: skip
    misses, ratios = [], []
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or "mpirun"
    with tempfile.TemporaryDirectory() as folder:
        for name, layers, width, inner, vocab, tokens, micro, global_batch in FSDP_SIZES:
            if names and name not in names and name.replace(",", "") not in names:
                continue
            root = Path(folder) / name.replace(" ", "-").replace(",", "")
            shape = TinyModelShape(n_layer=layers, n_head=4, n_embd=width, intermediate_size=inner, vocab_size=vocab,
                                   block_size=2 * tokens)  # fmt: skip
            make_tiny_assets(root / "checkpoint", root / "alpaca.json", 64, 0, shape)
            # Records longer than `tokens`: every micro batch is cut to exactly that length.
            words = " ".join(WORDS[i % len(WORDS)] for i in range(2 * tokens))
            (root / "alpaca.json").write_text(
                json.dumps([{"instruction": "Repeat.", "input": words, "output": "ok"}] * 64)
            )
            command = [mpirun, "-np", str(FSDP_RANKS), "--oversubscribe", "--allow-run-as-root",
                       "-x", "OMP_NUM_THREADS=1", "-x", f"PYTHONPATH={REPO / 'workflow'}", "-x", "HF_HUB_OFFLINE=1",
                       "-x", "TOKENIZERS_PARALLELISM=false", sys.executable,
                       str(REPO / "benchmarks" / "fsdp_cpu_rank.py"), "finetune_full", str(root / "checkpoint"),
                       "--devices", str(FSDP_RANKS), "--out_dir", str(root / "out"), "--data", "JSON",
                       "--data.json_path", str(root / "alpaca.json"), "--data.val_split_fraction", "0.1",
                       "--train.max_steps", "2", "--train.global_batch_size", str(global_batch),
                       "--train.micro_batch_size", str(micro), "--train.max_seq_length", str(tokens),
                       "--train.lr_warmup_steps", "1", "--train.save_interval", str(10**9),
                       "--eval.interval", str(10**9), "--eval.initial_validation", "false",
                       "--eval.final_validation", "false", "--logger_name", "csv",
                       "--precision", precision]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
            marks = fsdp_marks(done.stdout)
            if done.returncode != 0 or len(marks) != FSDP_RANKS:
                raise SystemExit(
                    f"fsdp {name}: mpirun exited {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
                )
            accumulating = global_batch // FSDP_RANKS // micro > 1
            config = yaml.safe_load((root / "checkpoint" / "model_config.yaml").read_text())
            need = litgpt_need(config, "full", precision, micro, tokens, FSDP_RANKS, on_gpu=False,
                               accumulating=accumulating, fsdp=True)  # fmt: skip
            items = tuple(sorted((k, v) for k, v in config.items() if not isinstance(v, dict | list)))
            # What litgpt_need counted: under a mixed precision FSDP's 16-bit units under autocast.
            chosen = PRECISIONS[precision]
            autocast = chosen.compute if precision.endswith("-mixed") else ""
            counted = count_litgpt(items, "full", chosen.compute, micro, tokens, (), autocast)
            logits = 4 * micro * tokens * config["padded_vocab_size"]  # the loop's float32 logits
            predicted = fsdp_predicted(need, counted, logits)
            per_rank = [fsdp_measured(rank_marks, accumulating) for rank_marks in marks.values()]
            measured = {key: max(m[key] for m in per_rank) for key in predicted}
            cells = []
            for key, value in predicted.items():
                ratio = value / measured[key]
                cells.append(f"{key} {value / 1e6:.1f}/{measured[key] / 1e6:.1f} MB = {ratio:.3f}")
                if key == "peak":
                    ratios.append(ratio)
                    if not within(ratio):
                        misses.append(f"fsdp {name}: peak ratio {ratio:.3f}")
            print(f"fsdp {name} (layers {layers}, width {width}, vocab {vocab}, tokens {tokens}, micro batch {micro}, "
                  f"{need.shape.parameters / 1e6:.1f}M parameters): " + "; ".join(cells), flush=True)  # fmt: skip
    return cpu_summary("fsdp peak", ratios, misses)


def speed_section(points: int) -> None:
    """How long the load-time check takes on a sweep of 7B-70B LitGPT points (LitGPT's configs
    by name, nothing allocated): study.memory_lines over `points` points, first call (each
    shape counted once) and again (cached)."""
    import time

    from scalestudy.config import clusters
    from scalestudy.config.study import memory_lines

    names = ("Llama-2-7b-hf", "Llama-2-13b-hf", "Llama-2-70b-hf")
    shapes = [(name, mb, gpus) for name in names for mb in (1, 2, 4, 8) for gpus in (1, 2, 4, 8)]
    sweep = []
    for i in range(points):
        name, mb, gpus = shapes[i % len(shapes)]
        params = {"method": "lora" if i % 2 else "full", "checkpoint_dir": f"/nowhere/{name}", "data_path": "/d.json",
                  "max_steps": 2, "global_batch_size": 64, "micro_batch_size": mb, "max_seq_length": 2048,
                  "seed": i}  # fmt: skip
        sweep.append(Point(study="speed", app="litgpt", scaling="strong", nodes=1 + i % 4, ranks_per_node=gpus,
                           gpus_per_node=gpus, threads_per_rank=1, mpi_flag_set="default", nccl_env_set="default",
                           repeat=1, walltime="01:00:00", params=params))  # fmt: skip
    cluster = clusters.load("aspire2a")
    started = time.perf_counter()
    refused, warned = memory_lines(sweep, cluster)
    first = time.perf_counter() - started
    started = time.perf_counter()
    memory_lines(sweep, cluster)
    again = time.perf_counter() - started
    print(f"# 5. load-time check of {points} LitGPT points (Llama-2 7B/13B/70B, full and LoRA, micro batch 1-8, "
          f"1-8 GPUs x 1-4 nodes, s=2048) on aspire2a")  # fmt: skip
    counted = len({(name, mb) for name, mb, _ in shapes}) * 2
    print(f"speed: {first:.1f} s wall the first time ({counted} (model, method, micro batch) shapes counted; torch and "
          f"LitGPT already imported by section 1), {again:.1f} s again (cached); {len(refused)} refusal lines, "
          f"{len(warned)} warning lines")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-width", type=int, default=1024, help="the CPU cases' MLP width (1024: >= 200 MB a rank)")
    parser.add_argument("--cpu-depth", type=int, default=3)
    parser.add_argument("--cpu-batch", type=int, default=8)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--cpu-strategies", default="ddp,fsdp:1,fsdp:2,fsdp:3,pipeline,tensor", help="'' for none")
    parser.add_argument("--litgpt-methods", default="full,lora", help="LitGPT on CPU: methods ('' for none)")
    parser.add_argument("--litgpt-precision", default="", help="LitGPT on CPU: precision ('': the local study's)")
    parser.add_argument("--no-cpu", action="store_true", help="the published references only")
    parser.add_argument("--no-fsdp", action="store_true", help="leave out section 6 (LitGPT FSDP on CPU ranks)")
    parser.add_argument(
        "--fsdp-sizes",
        default="",
        help="section 6's sizes by name, comma-separated, a name's own comma left out ('base accumulating'; '': all)",
    )
    parser.add_argument("--fsdp-precision", default="32-true", help="section 6's precision (bf16-mixed: FSDP's "
                        "16-bit units beside a float32 shard; autocast is CUDA's there, off on CPU ranks)")  # fmt: skip
    parser.add_argument(
        "--speed-points", type=int, default=10_000, help="points of the load-time speed check (0: none)"
    )
    args = parser.parse_args(argv)
    misses = litgpt_section() + held_out_section() + zero_section() + deepspeed_section()
    if args.speed_points:
        speed_section(args.speed_points)
    strategies = [name for name in args.cpu_strategies.split(",") if name]
    if not args.no_cpu:
        if strategies:
            misses += cpu_section(strategies, args.ranks, args.cpu_width, args.cpu_depth, args.cpu_batch)
        if args.litgpt_methods:
            misses += litgpt_cpu_section(args.litgpt_methods.split(","), sorted({1, args.ranks}), args.litgpt_precision)
        if not args.no_fsdp:
            misses += fsdp_section([name for name in args.fsdp_sizes.split(",") if name], args.fsdp_precision)
    print(f"misses: {len(misses)}")
    for miss in misses:
        print(f"  miss: {miss}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
