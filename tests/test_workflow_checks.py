"""What Snakemake itself says about a bad sweep, before any job: real snakemake invocations."""

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def snakemake(workdir: Path, overlay: dict, *args: str) -> subprocess.CompletedProcess:
    (workdir / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--cores", "1", *args, "--configfile", str(REPO / "config/sweep.yaml"),
               str(REPO / "config/local.yaml"), str(workdir / "overlay.yaml")]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def sweep_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("sweep ")]


def test_unknown_flag_set_stops_everything_with_one_line(tmp_path):
    result = snakemake(tmp_path, {"studies": {"litgpt-full": {"mpi_flags": ["nosuch"]}}}, "-n")
    assert result.returncode != 0
    assert sweep_lines(result) == [
        "sweep error: studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch';"
        " defined: default, mpich-nolocal, no-ucx-hcoll"
    ]
    assert not (tmp_path / "results").exists()


def test_missing_data_warns_in_a_dry_run_and_stops_a_real_run(tmp_path):
    overlay = {"studies": {"litgpt-lora": {"params": {"data_path": str(tmp_path / "no-such.json")}}}}
    dry = snakemake(tmp_path, overlay, "-n")
    assert dry.returncode == 0, dry.stderr[-2000:]
    expected = f"studies.litgpt-lora.params.data_path: {tmp_path / 'no-such.json'} does not exist"
    assert sweep_lines(dry) == [f"sweep warning: {expected} (a real run stops here)"]
    assert "run_litgpt" in dry.stdout
    real = snakemake(tmp_path, overlay)
    assert real.returncode != 0
    assert f"sweep error: {expected}" in sweep_lines(real)
    assert not list(tmp_path.glob("results/*/runs"))  # no point ran, not even the other study's
