#!/usr/bin/env bash
# Debian packages the tests need beyond Python: a real Slurm (two virtual nodes on
# localhost, with the torque qsub/qstat/qdel wrappers) for the scheduler tests,
# Chromium for the report's browser test, what the multi-host test bed makes its
# hosts of (tests/support/hosts.py: iproute2's `ip netns`, an sshd per host, ssh), and a site's
# MPIs under Lmod (tests/support/site_modules.py). Installed only when missing, and only
# where we are root with apt-get; elsewhere those tests skip and say why.
set -euo pipefail
# A site's MPIs and module system for the site-MPI tests: Open MPI 4.1, MPICH 4.0 and Lmod.
PACKAGES=(slurm-wlm munge slurm-wlm-torque chromium iproute2 openssh-server openssh-client
    openmpi-bin libopenmpi-dev mpich libmpich-dev lmod)
missing=()
for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "scalestudy: not root or no apt-get; missing ${missing[*]} (their tests will skip)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
