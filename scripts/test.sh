#!/usr/bin/env bash
# Set up, then run the checks and the tests (the end-to-end test runs the real
# workflow: snakemake, mpirun and LitGPT training on a tiny model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/system-packages.sh
# A site's MPI for tests/integration/test_site_mpi.py: Debian's Open MPI 4.1 and MPICH 4.0 as Lmod
# modules (tests/support/site_modules.py writes .site-modules/), and .venv-site/ built under the
# Open MPI module the way a site's user builds theirs (SCALESTUDY_MPI=site: mpi4py from source),
# .venv-site-mpich/ the same under the MPICH module.
if [ -r /usr/share/lmod/lmod/init/bash ] && command -v ompi_info >/dev/null; then
    site_modules=$(.venv/bin/python tests/support/site_modules.py .site-modules)
    # One site venv per MPI module, as a site's user makes one per MPI they measure.
    for venv_module in ".venv-site openmpi/" ".venv-site-mpich mpich/"; do
        module_name=$(grep "^${venv_module#* }" <<<"$site_modules" || true)
        [ -n "$module_name" ] || continue
        (
            set +u
            source /usr/share/lmod/lmod/init/bash
            module use "$PWD/.site-modules"
            module load "$module_name"
            VENV=${venv_module%% *} SCALESTUDY_MPI=site bash scripts/setup.sh
        )
    done
fi
source .venv/bin/activate
export HF_HUB_OFFLINE=1
ruff check .
ruff format --check .
lint-imports                                   # the import layers (pyproject.toml [tool.importlinter])
snakemake --lint --profile profiles/local
# Some tests spend their minutes waiting, not computing: on a real OpenPBS (its scheduler's cycles, a
# job's start, its moms' polls), on a real Slurm (its polls; one Slurm runs on a machine at a time,
# tests/support/local_slurm.py holds a lock) and on a site's module tree. A whole run takes them
# beside the rest, in a pytest of their own (its own temporary folders), and shows their output
# after it: the suite otherwise keeps one of two cores busy.
beside=(tests/integration/test_openpbs.py tests/integration/test_pbs_hosts.py
        tests/integration/test_scheduler_integration.py tests/integration/test_slurm_hosts.py
        tests/integration/test_slurm_scheduler.py
        tests/integration/test_site_mpi.py)
if [ $# -eq 0 ]; then
    log=$(mktemp)
    python -m pytest -p no:cacheprovider --durations=10 --basetemp "$(mktemp -d)" "${beside[@]}" >"$log" 2>&1 &
    waiting=$!
    status=0
    python -m pytest --durations=25 "${beside[@]/#/--ignore=}" || status=$?
    wait "$waiting" || status=$((status ? status : $?))
    echo "== beside the rest: ${beside[*]}"
    cat "$log"
    exit "$status"
fi
python -m pytest --durations=25 "$@"   # the slowest tests, in CI's log
