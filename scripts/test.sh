#!/usr/bin/env bash
# Set up, then run the checks and the tests (the end-to-end test runs the real
# workflow: snakemake, mpirun and LitGPT training on a tiny model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/system-packages.sh
source .venv/bin/activate
export HF_HUB_OFFLINE=1
ruff check .
ruff format --check .
lint-imports                                   # the import layers (pyproject.toml [tool.importlinter])
snakemake --lint --profile profiles/local
python -m pytest --durations=25 "$@"   # the slowest tests, in CI's log
