"""LitGPT fine-tuning (full and LoRA) through the stock `litgpt` CLI under mpirun."""

from __future__ import annotations

import contextlib
import csv
import functools
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...model.memory import PRECISIONS, Need, Shape, Sharding, process_overhead
from ...model.metrics import declare
from ...model.paths import Layout
from ...model.point import Point
from ...model.units import GIB, KIB, MEMORY_UNIT, gb
from ..base import App, Param, ParseError
from ..saved_bytes import kept_on_disk
from . import rank as litgpt_rank
from .assets import settings_problems, tiny_asset_files, tiny_folder
from .checkpoint import CHECKPOINT_CONFIG, CHECKPOINT_WEIGHTS
from .rank import PEAK_RSS_PREFIX, PEAK_RSS_UNIT, TENSOR_PEAK_PREFIX, TENSOR_PEAK_UNIT, TRACKED_STEPS

# LitGPT 0.5 end-of-training block.
TRAINING_TIME = re.compile(r"^\|\s*-\s*Training Time\s*:\s*([0-9.]+)\s*s\b", re.M)
TOKENS_PER_S = re.compile(r"^\|\s*-\s*Tok/sec\s*:\s*([0-9.]+)\s*tok/s", re.M)
# LitGPT prints torch.cuda.max_memory_allocated() / 1e9 (both forms): GB as ours (model.units).
MEMORY_USED = re.compile(r"^\|\s*-\s*Memory Used\s*:\s*([0-9.]+)\s*GB", re.M)
# Older LitGPT: one line per node.
OLD_TRAINING_TIME = re.compile(r"^Training time:\s*([0-9.]+)\s*s\b", re.M)
OLD_MEMORY_USED = re.compile(r"^Memory used:\s*([0-9.]+)\s*GB", re.M)
ITERATION = re.compile(r"iter (\d+) step (\d+) \| loss train: ([0-9.naninf]+).*?\| iter time: ([0-9.]+) ms( \(step\))?")
# The rank program's peak RSS line, in KiB; logs written before said "<x> GB" for KiB / 1024**2,
# i.e. 2^30 bytes.
PEAK_RSS = re.compile(rf"^{re.escape(PEAK_RSS_PREFIX)} rank (\d+): ([0-9.]+) ({PEAK_RSS_UNIT}|GB)", re.M)
PEAK_RSS_BYTES = {PEAK_RSS_UNIT: KIB, "GB": GIB}
# The rank program's peak tensor bytes line (CPU ranks), in bytes.
TENSOR_PEAK = re.compile(rf"^{re.escape(TENSOR_PEAK_PREFIX)} rank (\d+): (\d+) {TENSOR_PEAK_UNIT}\b", re.M)


def floats(pattern: re.Pattern[str], text: str) -> list[float]:
    return [float(m) for m in pattern.findall(text)]


def step_times_s(log_text: str) -> tuple[list[float], float | None]:
    """Optimizer-step times from the per-iteration lines, and the last training loss.

    An optimizer step is the run of iterations up to and including the one marked
    `(step)` (gradient accumulation); its time is the sum of their iteration times.
    """
    steps, current, loss = [], 0.0, None
    for match in ITERATION.finditer(log_text):
        current += float(match.group(4)) / 1000
        loss = float(match.group(3))
        if match.group(5):
            steps.append(current)
            current = 0.0
    return steps, loss


def metrics_csv_summary(run_dir: Path) -> dict[str, Any]:
    files = sorted((run_dir / "litgpt-out" / "logs" / "csv").glob("version_*/metrics.csv"))
    if not files:
        return {}
    with open(files[-1], newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("iter")]
    if not rows:
        return {}
    last = rows[-1]
    summary: dict[str, Any] = {"csv_iterations": len(rows)}
    if last.get("total_tokens"):
        summary["csv_total_tokens"] = int(float(last["total_tokens"]))
    if last.get("loss"):
        summary["csv_final_loss"] = float(last["loss"])
    return summary


def parse_litgpt(log_text: str, run_dir: Path | None = None) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    times = floats(TRAINING_TIME, log_text)
    if times:
        figures["output_format"] = "litgpt-0.5"
    else:
        times = floats(OLD_TRAINING_TIME, log_text)
        figures["output_format"] = "litgpt-legacy"
    if not times:
        raise ParseError("no 'Training Time' (or legacy 'Training time:') line in the output")
    # Multi-node runs of older LitGPT print one line per node: the job lasts as long as the slowest.
    figures["training_time_s"] = max(times)
    figures["training_time_reports"] = len(times)
    rates = floats(TOKENS_PER_S, log_text)
    if rates:
        figures["tokens_per_s"] = rates[-1]
    memory = floats(MEMORY_USED, log_text) or floats(OLD_MEMORY_USED, log_text)
    if memory:
        figures["gpu_memory_gb"] = max(memory)
    rss = [gb(float(value) * PEAK_RSS_BYTES[unit]) for _rank, value, unit in PEAK_RSS.findall(log_text)]
    if rss:
        figures["host_memory_peak_gb"] = max(rss)
    tensors = [gb(int(value)) for _rank, value in TENSOR_PEAK.findall(log_text)]
    if tensors:
        figures["tensor_memory_peak_gb"] = max(tensors)
    steps, loss = step_times_s(log_text)
    if steps:
        figures["optimizer_steps"] = len(steps)
        # The first step pays for allocation and warm-up; on CPU the first TRACKED_STEPS also pay
        # for the tensor-peak tracker (each op sampled): leave them out when there are others.
        skipped = TRACKED_STEPS if tensors else 1
        timed = steps[skipped:] if len(steps) > skipped else steps
        figures["step_time_s"] = sum(timed) / len(timed)
    if loss is not None:
        figures["final_loss"] = loss
    if run_dir is not None:
        figures.update(metrics_csv_summary(run_dir))
    return figures


# LitGPT 0.5's finetune_lora defaults: rank 8 adapters (alpha 16, dropout 0.05) on the query
# and value projections.
LORA_RANK = 8
LORA_SETTINGS = {"lora_r": LORA_RANK, "lora_alpha": 16, "lora_dropout": 0.05, "lora_query": True, "lora_value": True}
# LitGPT's default precision for training where none is given (utils.get_default_supported_precision):
# bf16-mixed, or 16-mixed on a GPU without bfloat16 (the same bytes).
DEFAULT_PRECISION = "bf16-mixed"
# finetune_lora's forward splits the head's output in chunks of this many positions.
LM_HEAD_CHUNK = 128
# LitGPT 0.5's fine-tuning methods (finetune_<method>) and the ones the memory model counts.
METHODS = ("full", "lora", "adapter", "adapter_v2")
COUNTED_METHODS = ("full", "lora")
# LitGPT 0.5's --quantize choices (bitsandbytes): the frozen base in 4 or 8 bits, not counted.
QUANTIZE = ("bnb.nf4", "bnb.nf4-dq", "bnb.fp4", "bnb.fp4-dq", "bnb.int8-training")


@functools.lru_cache(maxsize=256)
def read_model_config(checkpoint_dir: str) -> dict[str, Any]:
    """The checkpoint's model config (CHECKPOINT_CONFIG); where the checkpoint is not on this
    machine, LitGPT's own config of the same name (e.g. Llama-2-7b-hf)."""
    path = Path(checkpoint_dir) / CHECKPOINT_CONFIG
    if path.is_file():
        import yaml

        return yaml.safe_load(path.read_text())
    return litgpt_config(Path(checkpoint_dir).name)


@functools.lru_cache(maxsize=32)
def litgpt_config(name: str) -> dict[str, Any]:
    """LitGPT's config of a model name, as a dict. litgpt/config.py is loaded by its path
    (it needs only yaml, by design): importing the litgpt package would load torch and
    Lightning, seconds of every planning."""
    import dataclasses
    import importlib.util
    import sys

    spec = importlib.util.find_spec("litgpt")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"no {CHECKPOINT_CONFIG} there, and LitGPT is not installed to look up {name!r}")
    source = Path(next(iter(spec.submodule_search_locations))) / "config.py"
    module_spec = importlib.util.spec_from_file_location("scalestudy_litgpt_config", source)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # dataclasses resolve the module of their annotations
    module_spec.loader.exec_module(module)
    try:
        config = module.Config.from_name(name)
    except ValueError:
        raise ValueError(f"no {CHECKPOINT_CONFIG} there, and LitGPT has no config named {name!r}") from None
    return dataclasses.asdict(config)


def litgpt_parameters(config: dict[str, Any], lora_rank: int | None = None) -> int:
    """Parameters of a LitGPT GPT (lora_rank: of its LoRA adapters on query and value)."""
    h, layers = config["n_embd"], config["n_layer"]
    heads = config["n_head"]
    head_size = config.get("head_size") or h // heads
    groups = config.get("n_query_groups") or heads
    if lora_rank:
        return layers * lora_rank * (2 * h + heads * head_size + groups * head_size)
    vocab = config.get("padded_vocab_size") or config["vocab_size"]
    inner = config.get("intermediate_size") or 4 * h
    bias = bool(config.get("bias"))
    qkv = h * (heads + 2 * groups) * head_size + bias * (heads + 2 * groups) * head_size
    proj = heads * head_size * h + bias * h
    gated = config.get("mlp_class_name", "GptNeoxMLP") in ("LLaMAMLP", "GemmaMLP")
    mlp = (3 if gated else 2) * h * inner + bias * ((2 if gated else 1) * inner + h)
    norm = h * (1 if config.get("norm_class_name") == "RMSNorm" else 2)
    head = vocab * h + bool(config.get("lm_head_bias")) * vocab
    return vocab * h + layers * (qkv + proj + mlp + 2 * norm) + norm + head


@dataclass(frozen=True)
class Counted:
    """A LitGPT training step as model.memory needs it: parameters held and trained, bytes
    autograd keeps (whole, and with every block checkpointed), the backward's largest
    working set, and the parameters of the largest FSDP unit (a block, or the root's
    embedding, head and final norm)."""

    parameters: int
    trainable: int
    saved: int
    checkpointed: int
    transient: int
    largest_unit: int
    largest_trained_tensor: int
    block_unit: int
    root_unit: int
    recomputed: int  # what one checkpointed block keeps while its backward recomputes it


@kept_on_disk(Counted, Path(__file__), Path(__file__).parent.parent / "saved_bytes.py")
def count_litgpt(
    config_items: tuple,
    method: str,
    dtype: str,
    micro_batch: int,
    seq_len: int,
    lora_items: tuple = (),
    autocast: str = "",
) -> Counted:
    """One training forward of LitGPT's own model (litgpt.lora.GPT for LoRA, with
    finetune_lora's adapters (`lora_items`: LoRA settings, LORA_SETTINGS where none) and head
    chunks; litgpt.GPT for full) with its weights in `dtype`, as its finetune script runs it:
    the logits cast to float32 as Lightning's Fabric casts every floating output of a module
    it set up (its precision plugins' convert_output: to torch's default dtype), kept until the
    backward, chunked cross-entropy on them.
    `autocast`: the dtype a mixed precision's autocast computes in ('' for none). Autocast
    casts a weight each time an op of its lower-precision list uses it, and the copy is what
    the op saves for its backward: once per use for a frozen weight (its cache keeps only
    leaves that need a gradient), so LoRA's chunked head keeps one copy of the head per chunk
    (benchmarks/autocast_cpu.py measured it). Meta tensors have no autocast, so such a forward
    runs on torch's fake tensors of the CPU device under CPU autocast (nothing allocated
    either); CPU's autocast lists differ from CUDA's in ops LitGPT runs on float32 inputs
    anyway (layer_norm on the float32 residual), docs/MEMORY.md.
    LitGPT's blocks are alike: two are counted and the second's count stands for every later
    one (the first sees an input that needs no gradient where the embedding is frozen)."""
    import torch

    from ..saved_bytes import count_saved

    config_dict = dict(config_items)
    layers = config_dict["n_layer"]
    config_dict["n_layer"] = min(layers, 2)
    if method == "lora":
        from litgpt.lora import GPT, Config, mark_only_lora_as_trainable

        config = Config(**{**config_dict, **(dict(lora_items) or LORA_SETTINGS)})
    else:
        from litgpt import GPT, Config

        config = Config(**config_dict)
    from litgpt.utils import chunked_cross_entropy

    if autocast:
        from torch._subclasses.fake_tensor import FakeTensorMode

        tensors, device = FakeTensorMode(), "cpu"
        # Fabric's forward context: the model's forward only; its output's cast and the loss after.
        casting = functools.partial(torch.autocast, "cpu", dtype=getattr(torch, autocast))
    else:
        tensors, device, casting = contextlib.nullcontext(), "meta", contextlib.nullcontext
    with tensors, torch.device(device):
        if autocast:
            # Built in its dtype, as Fabric's module_init_context builds it (a fake tensor's
            # parameters cannot be swapped for converted ones afterwards).
            default = torch.get_default_dtype()
            torch.set_default_dtype(getattr(torch, dtype))
            try:
                model = GPT(config)
            finally:
                torch.set_default_dtype(default)
        else:
            model = GPT(config).to(getattr(torch, dtype))
        if method == "lora":
            mark_only_lora_as_trainable(model)
        model.max_seq_length = seq_len
        tokens = torch.zeros((micro_batch, seq_len), dtype=torch.long)

    def forward():
        with tensors:
            if method == "lora":
                with casting():
                    chunks = model(tokens, lm_head_chunk_size=LM_HEAD_CHUNK)
                logits = [chunk.float() for chunk in chunks]
                logits[-1] = logits[-1][..., :-1, :]
                loss = chunked_cross_entropy(logits, tokens[..., 1:])
                return [*logits, loss]
            with casting():
                out = model(tokens)
            logits = out.float()
            return [logits, chunked_cross_entropy(logits[..., :-1, :], tokens[..., 1:])]

    blocks = list(model.transformer.h)
    saved = count_saved(forward, [*model.parameters(), *model.buffers()], blocks)
    in_block, block_input = saved.blocks[-1], saved.block_inputs[-1]
    outside = saved.total - sum(saved.blocks)
    first = len(blocks) - 1  # 1, or 0 for a one-layer model
    block_params = list(blocks[-1].parameters())
    root_params = [p for name, p in model.named_parameters() if not name.startswith("transformer.h.")]

    def count(params, trainable=False):
        return sum(p.numel() for p in params if p.requires_grad or not trainable)

    return Counted(
        parameters=count(root_params) + layers * count(block_params),
        trainable=count(root_params, True) + layers * count(block_params, True),
        saved=outside + first * saved.blocks[0] + (layers - first) * in_block,
        checkpointed=outside + first * saved.block_inputs[0] + (layers - first) * block_input + in_block,
        # The backward of the op holding the largest saved tensor: its output's gradient and its input's.
        transient=2 * saved.largest,
        largest_unit=max(count(root_params), count(block_params)),
        largest_trained_tensor=max(p.numel() for p in model.parameters() if p.requires_grad),
        block_unit=count(block_params),
        root_unit=count(root_params),
        recomputed=in_block,
    )


def litgpt_need(
    config: Mapping[str, Any],
    method: str,
    precision: str,
    micro_batch: int,
    seq_len: int,
    ranks: int,
    on_gpu: bool,
    accumulating: bool = False,
    lora: Mapping[str, Any] | None = None,
    fsdp: bool | None = None,
) -> Need:
    """What a rank of LitGPT's finetune_<method> holds, as LitGPT 0.5 sets it up: on one rank
    the whole model; on several, full fine-tuning is FSDP (model.memory.fsdp_units: each
    block a unit, checkpointed, the root unit gathered through the backward; `accumulating`:
    micro batches accumulated under no_sync; DDP on CPU ranks: the rank program (rank.py), unless `fsdp`),
    LoRA shards over FSDP with checkpointed blocks while its frozen base stays gathered through
    the backward, as LitGPT's published multi-GPU runs hold it (docs/MEMORY.md). `lora`: the
    LoRA settings (LORA_SETTINGS where None)."""
    chosen = PRECISIONS[precision]
    full_fsdp = ranks > 1 and method == "full" and (on_gpu if fsdp is None else fsdp)
    sharded = full_fsdp or (ranks > 1 and method == "lora")
    items = tuple(sorted((k, v) for k, v in config.items() if not isinstance(v, dict | list)))
    lora_items = tuple(sorted({**LORA_SETTINGS, **(lora or {})}.items())) if method == "lora" else ()
    # A mixed precision (autocast) keeps float32 weights and casts them per use, but for FSDP's
    # full fine-tuning, whose units Lightning's FSDPPrecision gathers in 16 bits (fsdp_parts).
    autocast = chosen.compute if precision.endswith("-mixed") else ""
    weights = "float32" if autocast and not full_fsdp else chosen.compute
    counted = count_litgpt(items, method, weights, micro_batch, seq_len, lora_items, autocast)
    shape = Shape(
        parameters=counted.parameters,
        trainable=counted.trainable,
        activations=counted.checkpointed if sharded else counted.saved,
        transient=counted.transient,
        largest_unit=counted.largest_unit,
        largest_tensor=counted.largest_trained_tensor,
        foreach=on_gpu,  # torch's AdamW default: foreach on a GPU
        block_unit=counted.block_unit,
        root_unit=counted.root_unit,
        casts_counted=bool(autocast),
    )
    if full_fsdp:
        sharding = Sharding(data=ranks, zero_stage=3, root_gathered=True, accumulating=accumulating)
    elif sharded:
        sharding = Sharding(data=ranks, zero_stage=3, frozen_gathered=True)
    else:
        sharding = Sharding(data=ranks, buckets=ranks > 1)  # DDP on CPU ranks
    return Need(
        shape=shape,
        precision=chosen,
        micro_batch=micro_batch,
        sharding=sharding,
        overhead=process_overhead(on_gpu),
        measured="gpu_memory_gb" if on_gpu else "tensor_memory_peak_gb",
        batch_key="micro_batch_size",
    )


class LitGPT(App):
    name = "litgpt"
    breakdown_note = (
        "LitGPT prints one time per iteration (data, forward, backward and, on a step's iteration, gradient "
        "synchronisation and the optimizer together), no split of it; none is measured here"
    )
    packages = ("torch", "litgpt", "lightning", "mpi4py")
    primary_metric = "training_time_s"
    metrics = (
        declare("training_time_s", "training time", "s", "time"),
        declare("tokens_per_s", "throughput", "tok/s", "rate"),
        declare(
            "step_time_s",
            f"mean optimizer-step time (first step excluded; on CPU the first {TRACKED_STEPS}, tracked for memory)",
            "s",
            "time",
        ),
        declare("gpu_memory_gb", "peak GPU memory (CUDA max allocated)", MEMORY_UNIT, "size"),
        declare("host_memory_peak_gb", "peak host memory per rank (max RSS), largest rank", MEMORY_UNIT, "size"),
        declare(
            "tensor_memory_peak_gb",
            "CPU: peak of tensor bytes per rank from just before the model is built through the first "
            f"{TRACKED_STEPS} optimizer steps (malloc's held bytes after every op, above what it held before the "
            "build, less MKL's own GEMM buffers; not RSS), largest rank",
            MEMORY_UNIT,
            "size",
        ),
    )
    params = {
        "method": Param(str, required=True, choices=METHODS, help="finetune_<method>: full, lora, adapter, adapter_v2"),
        "checkpoint_dir": Param(str, required=True, help="LitGPT checkpoint directory (e.g. Llama-2-7b-hf)"),
        "data_path": Param(str, required=True, help="Alpaca-style JSON file"),
        "max_steps": Param(int, required=True, minimum=1, help="optimizer steps per run"),
        "global_batch_size": Param(int, required=True, minimum=1, help="samples per optimizer step, all ranks"),
        "micro_batch_size": Param(int, required=True, minimum=1, help="samples per rank per iteration"),
        "precision": Param(str, choices=("32-true", "bf16-true", "bf16-mixed", "16-true", "16-mixed")),
        "quantize": Param(str, choices=QUANTIZE, help="the frozen base quantized (QLoRA): lora, adapter, adapter_v2"),
        "lr_warmup_steps": Param(int, minimum=0),
        "max_seq_length": Param(int, minimum=1),
        "val_split_fraction": Param((int, float), minimum=0.0, default=0.05),
        "data_workers": Param(int, minimum=0, help="DataLoader worker processes per rank", default=0),
        "seed": Param(int),
        "keep_checkpoint": Param(
            bool, help="keep the fine-tuned weights (a 7B model is ~13 GB per run)", default=False
        ),
    }

    # config/local.yaml's stand-in model and data (apps.litgpt.assets, made by this folder's rules.smk).
    assets_key = "litgpt_tiny"
    assets_description = "the stand-in LitGPT model and data (apps.litgpt.assets checks and defaults its keys)"

    def assets_problems(self, settings: Mapping[str, Any]) -> list[str]:
        return settings_problems(settings)

    def preflight(self, point: Point) -> list[str]:
        p = point.params
        gbs, mbs = p["global_batch_size"], p["micro_batch_size"]
        scale = f"at nodes={point.nodes}, {'gpus' if point.gpus_per_node else 'ranks'}_per_node={point.ranks_per_node}"
        if gbs < point.ranks * mbs:
            return [
                f"params.global_batch_size: {gbs} is less than ranks x micro_batch_size = "
                f"{point.ranks} x {mbs} = {point.ranks * mbs} {scale}; LitGPT stops before training"
            ]
        problems = []
        precision, quantize = p.get("precision") or DEFAULT_PRECISION, p.get("quantize")
        # What LitGPT 0.5.13 and Lightning 2.6 refuse when they start (litgpt/finetune/*.py setup,
        # Fabric's connector), said before a job waits in a queue for it.
        if quantize and p["method"] == "full":
            problems.append(
                f"params.quantize: {quantize}: LitGPT's finetune_full takes no --quantize; allowed with method "
                "lora, adapter or adapter_v2"
            )
        elif quantize and precision.endswith("-mixed"):
            problems.append(
                f"params.quantize: {quantize} with precision {precision}"
                f"{'' if p.get('precision') else ' (the default)'}: LitGPT refuses quantization with a mixed "
                "precision; allowed: precision bf16-true, 16-true or 32-true"
            )
        elif quantize and point.ranks > 1:
            problems.append(
                f"params.quantize: {quantize} on {point.ranks} devices {scale}: LitGPT quantizes on one device only; "
                "allowed: one GPU (nodes=1, gpus_per_node=1)"
            )
        if p["method"] == "lora" and point.ranks > 1 and precision == "16-mixed":
            problems.append(
                f"params.precision: 16-mixed with method lora on {point.ranks} devices {scale}: LitGPT shards LoRA "
                "with Lightning's ModelParallelStrategy, which refuses 16-mixed; allowed: 16-true, 32-true (or "
                "bf16-mixed, bf16-true where the GPU computes in bfloat16)"
            )
        return problems

    def memory_unpredicted(self, point: Point) -> str | None:
        """What the memory model does not count (apps.litgpt.litgpt_need: full and LoRA, in
        16 or 32 bits): said at load rather than guessed."""
        p = point.params
        if p["method"] not in COUNTED_METHODS:
            return (
                f"method {p['method']}: LitGPT's adapter fine-tuning is not counted by the memory model, which "
                f"counts {' and '.join(COUNTED_METHODS)}"
            )
        if p.get("quantize"):
            return (
                f"quantize {p['quantize']}: bitsandbytes' quantized base weights are not counted by the memory "
                "model, which counts 16- and 32-bit weights"
            )
        return None

    def memory(self, point: Point, figures: Mapping[str, Any] | None = None) -> Need:
        """Counted on LitGPT's own model (litgpt_need); the sequence length is the point's
        max_seq_length, else the model's context (LitGPT trains at the longest example, at
        most that); micro batches are accumulated where the global batch needs more than one
        per rank (LitGPT's gradient_accumulation_iters)."""
        p = point.params
        if self.memory_unpredicted(point):
            return None
        config = read_model_config(p["checkpoint_dir"])
        return litgpt_need(
            config,
            p["method"],
            p.get("precision") or DEFAULT_PRECISION,
            p["micro_batch_size"],
            p.get("max_seq_length") or config["block_size"],
            point.ranks,
            bool(point.gpus_per_node),
            accumulating=p["global_batch_size"] // point.ranks // p["micro_batch_size"] > 1,
        )

    def made_files(self, point: Point, layout: Layout) -> Iterable[str]:
        return tiny_asset_files(tiny_folder(layout)).values()

    def inputs(self, point: Point, layout: Layout) -> dict[str, str]:
        return {
            "checkpoint_dir": str(Path(point.params["checkpoint_dir"]) / CHECKPOINT_WEIGHTS),
            "data_path": str(point.params["data_path"]),
        }

    def loads_mpi4py(self, point: Point) -> bool:
        return True  # Lightning's MPIEnvironment starts MPI through mpi4py wherever it imports

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        p = point.params
        command = [
            sys.executable,
            "-m",
            litgpt_rank.__name__,
            f"finetune_{p['method']}",
            # Absolute: a relative path that fails LitGPT's check is taken for a hub id and downloaded.
            str(Path(p["checkpoint_dir"]).resolve()),
            "--devices",
            str(point.ranks_per_node),
            "--num_nodes",
            str(point.nodes),
            "--out_dir",
            str((run_dir / "litgpt-out").resolve()),
            "--data",
            "JSON",
            "--data.json_path",
            str(Path(p["data_path"]).resolve()),
            "--data.val_split_fraction",
            str(self.setting(point, "val_split_fraction")),
            "--data.num_workers",
            str(self.setting(point, "data_workers")),
            "--train.max_steps",
            str(p["max_steps"]),
            "--train.global_batch_size",
            str(p["global_batch_size"]),
            "--train.micro_batch_size",
            str(p["micro_batch_size"]),
            "--train.log_interval",
            "1",
            # Only training is timed: no checkpoints mid-run, no validation passes.
            "--train.save_interval",
            str(10**9),
            "--eval.interval",
            str(10**9),
            "--eval.initial_validation",
            "false",
            "--eval.final_validation",
            "false",
            "--logger_name",
            "csv",
        ]
        optional = {
            "precision": "--precision",
            "lr_warmup_steps": "--train.lr_warmup_steps",
            "max_seq_length": "--train.max_seq_length",
            "seed": "--seed",
            "quantize": "--quantize",
        }
        for key, flag in optional.items():
            if key in p:
                command += [flag, str(p[key])]
        return command

    def rank_env(self, point: Point) -> dict[str, str]:
        return {**super().rank_env(point), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        return parse_litgpt(log_text, run_dir)

    def cleanup(self, point: Point, run_dir: Path) -> None:
        if not self.setting(point, "keep_checkpoint"):
            shutil.rmtree(run_dir / "litgpt-out" / "final", ignore_errors=True)
