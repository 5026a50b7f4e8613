"""LitGPT output parsing on recorded logs."""

import pytest
from scalestudy.apps.litgpt.app import parse_litgpt, step_times_s
from scalestudy.apps.registry import ParseError


def test_litgpt_0_5_end_block_and_iterations(data_dir):
    # Recorded: litgpt 0.5.13 finetune_full, 2 MPI ranks on CPU, 20 steps, GBS 16, MBS 4.
    figures = parse_litgpt((data_dir / "litgpt-0.5.13-finetune_full-2ranks.log").read_text())
    assert figures["output_format"] == "litgpt-0.5"
    assert figures["training_time_s"] == pytest.approx(16.60)
    assert figures["tokens_per_s"] == pytest.approx(2420.35)
    assert figures["optimizer_steps"] == 20
    # The recorded line says "0.562 GB", which the LitGPT rank program then wrote for KiB / 1024**2 (2^30 bytes).
    assert figures["host_memory_peak_gb"] == pytest.approx(0.562 * 2**30 / 1e9)
    assert "gpu_memory_gb" not in figures  # LitGPT prints it only on CUDA
    assert 0 < figures["step_time_s"] < figures["training_time_s"]


def test_legacy_lines_printed_once_per_node(data_dir):
    figures = parse_litgpt((data_dir / "litgpt-legacy-2nodes.log").read_text())
    assert figures["output_format"] == "litgpt-legacy"
    assert figures["training_time_s"] == pytest.approx(28.31)  # the slower node ends the job
    assert figures["training_time_reports"] == 2
    assert figures["gpu_memory_gb"] == pytest.approx(17.80)
    assert figures["optimizer_steps"] == 3
    assert figures["final_loss"] == pytest.approx(1.187)


def test_cuda_memory_line_of_the_0_5_block():
    text = "| - Training Time             :  3.34 s\n| - Tok/sec                   :  925.76 tok/s\n"
    text += "| - Memory Used               :  12.34 GB                                        \n"
    figures = parse_litgpt(text)
    assert (figures["training_time_s"], figures["tokens_per_s"], figures["gpu_memory_gb"]) == (3.34, 925.76, 12.34)


def test_step_time_sums_accumulation_iterations():
    text = "\n".join(
        [
            "Epoch 1 | iter 1 step 0 | loss train: 2.0, val: n/a | iter time: 100.00 ms",
            "Epoch 1 | iter 2 step 1 | loss train: 1.9, val: n/a | iter time: 150.00 ms (step)",
            "Epoch 1 | iter 3 step 1 | loss train: 1.8, val: n/a | iter time: 60.00 ms",
            "Epoch 1 | iter 4 step 2 | loss train: 1.7, val: n/a | iter time: 40.00 ms (step)",
        ]
    )
    steps, loss = step_times_s(text)
    assert steps == pytest.approx([0.25, 0.10]) and loss == 1.7


def test_truncated_log_is_a_parse_error(data_dir):
    text = (data_dir / "litgpt-0.5.13-finetune_full-2ranks.log").read_text()
    cut = text[: text.index("| Performance")]
    with pytest.raises(ParseError, match="Training Time"):
        parse_litgpt(cut)


def test_the_tensor_peak_line_of_every_rank_gives_the_largest_in_gb():
    from scalestudy.apps.litgpt.rank import TENSOR_PEAK_PREFIX, TENSOR_PEAK_UNIT

    text = "| - Training Time             :  3.69 s\n"
    text += f"{TENSOR_PEAK_PREFIX} rank 1: 120000000 {TENSOR_PEAK_UNIT}\n"
    text += f"{TENSOR_PEAK_PREFIX} rank 0: 129061088 {TENSOR_PEAK_UNIT}\n"
    figures = parse_litgpt(text)
    assert figures["tensor_memory_peak_gb"] == pytest.approx(0.129061088)  # GB = 10^9 bytes
    assert "tensor_memory_peak_gb" not in parse_litgpt("| - Training Time             :  3.69 s\n")


def test_on_cpu_the_memory_model_is_held_to_the_tensor_peak_not_rss():
    from scalestudy.apps.litgpt.app import litgpt_need

    config = {
        "n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 64, "vocab_size": 256, "padded_vocab_size": 256,
        "intermediate_size": 172, "mlp_class_name": "LLaMAMLP", "norm_class_name": "RMSNorm", "bias": False,
    }  # fmt: skip
    assert litgpt_need(config, "full", "32-true", 1, 16, 1, on_gpu=False).measured == "tensor_memory_peak_gb"
    assert litgpt_need(config, "full", "32-true", 1, 16, 1, on_gpu=True).measured == "gpu_memory_gb"
