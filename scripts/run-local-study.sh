#!/usr/bin/env bash
# Set up, then run the local scaling study (config/sweep.yaml shrunk by config/local.yaml)
# and build results/report/index.html. Extra arguments go to snakemake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source .venv/bin/activate
export HF_HUB_OFFLINE=1
snakemake --profile profiles/local "$@"
echo "scalestudy: report at $(pwd)/results/report/index.html"
