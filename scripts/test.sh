#!/usr/bin/env bash
# Set up, then run the checks and the tests (the real workflow too: snakemake, mpirun, LitGPT and
# torch training, a real Slurm, real hosts, a site's MPIs under Lmod).
#
#   bash scripts/test.sh                  everything (what CI runs): setup, lints, the whole suite
#   bash scripts/test.sh unit             the fast tier: setup of .venv, ruff, the unit tests
#   bash scripts/test.sh tests/integration/test_runner.py -k walltime    pytest's own arguments
#
# The suite runs in SCALESTUDY_TEST_WORKERS pytest-xdist workers (default 3 on 2 cores: most
# integration tests wait on a launcher, a scheduler's poll or a real Slurm, so a third worker
# keeps both cores busier; a fourth starves the tests that judge a host's CPU share, such as
# test_many_nodes.py's contended host); tests/conftest.py says which tests share a worker and in what order.
# The end of the output is one line per phase with its seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

phases=()
# phase NAME COMMAND...: run COMMAND, and keep NAME's seconds (and a non-zero exit) for the summary.
phase() {
    local name=$1 start=${EPOCHREALTIME/./} status=0 tenths
    shift
    "$@" || status=$?
    tenths=$(((${EPOCHREALTIME/./} - start) / 100000))
    phases+=("$(printf '%-44s %5d.%d s' "$name" $((tenths / 10)) $((tenths % 10)))")
    [ "$status" = 0 ] || phases[-1]+="  (exit $status)"
    return "$status"
}
summary() {
    local status=$?
    echo "== phases (seconds) =="
    printf '%s\n' "${phases[@]}"
    printf '%-44s %5d   s\n' "whole run" "$SECONDS"
    return "$status"
}
trap summary EXIT

# A site's MPI for tests/integration/test_site_mpi.py: Debian's Open MPI 4.1 and MPICH 4.0 as Lmod
# modules (tests/support/site_modules.py writes .site-modules/), and .venv-site/ made under the
# Open MPI module the way a site's user makes theirs (SCALESTUDY_MPI=site: mpi4py from source),
# .venv-site-mpich/ the same under the MPICH module; each layered on .venv (scripts/setup.sh).
# In a subshell of its own: the module stays loaded there only, not in the tests' environment.
site_venv() (
    set +u
    source /usr/share/lmod/lmod/init/bash
    module use "$PWD/.site-modules"
    module load "$2"
    set -u
    VENV=$1 SCALESTUDY_MPI=site bash scripts/setup.sh
)

phase "setup: .venv and .venv-lammps" bash scripts/setup.sh
source .venv/bin/activate
export HF_HUB_OFFLINE=1
workers=${SCALESTUDY_TEST_WORKERS:-3}
if [ "${1:-}" = unit ]; then
    shift
    phase "ruff check" ruff check .
    phase "pytest tests/unit" python -m pytest -n 2 -q tests/unit "$@"
    exit
fi
phase "setup: system packages" bash scripts/system-packages.sh
if [ -r /usr/share/lmod/lmod/init/bash ] && command -v ompi_info >/dev/null; then
    site_modules=$(python tests/support/site_modules.py .site-modules)
    for venv_module in ".venv-site openmpi/" ".venv-site-mpich mpich/"; do
        module_name=$(grep "^${venv_module#* }" <<<"$site_modules" || true)
        [ -n "$module_name" ] || continue
        phase "setup: ${venv_module%% *} ($module_name)" site_venv "${venv_module%% *}" "$module_name"
    done
fi
phase "ruff check" ruff check .
phase "ruff format --check" ruff format --check .
phase "lint-imports" lint-imports                     # the import layers (pyproject.toml [tool.importlinter])
phase "snakemake --lint" snakemake --lint --profile profiles/local
# --durations: the slowest tests, in CI's log.
if [ $# -gt 0 ]; then
    phase "pytest (all tiers, $workers workers)" python -m pytest -n "$workers" --durations=25 "$@"
else
    # The tests marked `quiet` judge what the CPUs did beside a run: they run after the rest, alone,
    # since the suite's own workers beside them would be the load they measure.
    phase "pytest (all tiers, $workers workers)" python -m pytest -n "$workers" --durations=25 -m "not quiet"
    phase "pytest (quiet: CPU-share tests, alone)" python -m pytest -p no:xdist -m quiet
fi
