#!/usr/bin/env bash
# Configure and start an installed OpenPBS as a single-host PBS complex (server, scheduler, comm
# and mom on this host) that takes Gadi's and ASPIRE 2A's qsub lines: what the OpenPBS tests
# need (tests/integration/test_openpbs.py on this host; test_pbs_hosts.py with
# tests/support/bed_pbs.py, which makes its own server per test bed from this machine's install).
#
# Usage (as root, Debian 12):  bash tests/support/openpbs/setup.sh [prefix]
#   prefix: where OpenPBS is installed (default /opt/pbs, its INSTALL's prefix). Build and
#   install it first, from its source: docs/profiles.md, "A real OpenPBS for the tests".
#   Tried with OpenPBS 23.06.06 (openpbs/openpbs main cd7ab5ed).
# It sets up: the site resources Gadi's requests name (jobfs, storage) and ngpus for ASPIRE 2A's
# GPU chunks; the queues normal, express, ai and faultq (the walltime fault: a hook cuts its
# jobs' walltime to 30 s); job history; the ordinary user who submits (PBS runs no job as root);
# logging shims for qsub/qstat/qdel in /opt/pbs-shim/bin.
# Stop:  <prefix>/libexec/pbs_init.d stop      Start: <prefix>/libexec/pbs_init.d start
# Each step can be rerun; logs go to $LOGS.
set -euo pipefail
PREFIX=${1:-/opt/pbs}
LOGS=${LOGS:-/var/log/scalestudy-openpbs}
HOOKS=${HOOKS:-/var/spool/scalestudy-openpbs/hooks}
# The unprivileged user that submits (PBS refuses root jobs): tests/support/pbs_site.py's USER.
PBS_USER=${PBS_USER:-scaleuser}
NODE_NCPUS=${NODE_NCPUS:-96}         # faked: a Gadi-sized request fits the one small host
NODE_MEM=${NODE_MEM:-400gb}
NODE_NGPUS=${NODE_NGPUS:-4}
mkdir -p "$LOGS"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # Debian's python3 (not pyenv's) for configure

# 1-2. OpenPBS must already be installed under $PREFIX (docs/profiles.md says how to build it
#    from its source). This script only configures and starts what is installed.
[ -x "$PREFIX/sbin/pbs_server.bin" ] || { echo "openpbs setup: no OpenPBS under $PREFIX (build and install it first: docs/profiles.md, A real OpenPBS for the tests)" >&2; exit 2; }

# 3. The server's host name must resolve to a NON-loopback IPv4 address: OpenPBS skips
#    127.x (Libnet/hnls.c "Could not find any usable IP address for host"). Containers often
#    map the hostname to 127.0.0.1 only; add the first non-loopback address (host.conf has
#    `multi on` on Debian, so both are returned and 127.0.0.1 stays first for everyone else).
#    Fix this BEFORE the first start: a first start that fails here leaves an uninitialised
#    datastore, and the server then exits silently until `pbs_server -t create` is run.
host=$(hostname)
addr=$(ip -4 -o addr show scope global | awk '{sub("/.*", "", $4); print $4; exit}')
if ! getent ahostsv4 "$host" | awk '{print $1}' | grep -qv '^127\.'; then
    echo "$addr $host  # openpbs: the server needs a non-loopback address for its host" >>/etc/hosts
fi

# 4. Post-install: /etc/pbs.conf with server, sched, comm AND mom on this host.
if [ ! -f /etc/pbs.conf ]; then
    "$PREFIX/libexec/pbs_postinstall" >"$LOGS/postinstall.log" 2>&1 || true   # systemd is absent: harmless errors
fi
sed -i 's/^PBS_START_MOM=0/PBS_START_MOM=1/' /etc/pbs.conf
chmod 4755 "$PREFIX/sbin/pbs_iff" "$PREFIX/sbin/pbs_rcp"

# 5. Start (the first start runs pbs_habitat and initialises the PostgreSQL datastore).
"$PREFIX/libexec/pbs_init.d" start >"$LOGS/start.log" 2>&1 || true
sleep 5
if ! "$PREFIX/bin/qstat" -B >/dev/null 2>&1; then
    # An earlier failed first start left no server object: create it (answers the prompt).
    echo y | "$PREFIX/sbin/pbs_server" -t create >"$LOGS/server-create.log" 2>&1 || true
    sleep 5
fi
"$PREFIX/bin/qstat" -B

# 6. Site resources, node, queues. Gadi: jobfs (size, host-level), storage (string);
#    ngpus for ASPIRE 2A's GPU chunks. Queues as at the sites: normal, express (Gadi),
#    ai (ASPIRE 2A). Job history on, so `qstat -x` reports finished jobs (F, Exit_status).
# A rerun meets what it made before: qmgr then says "already exists" / "Duplicate entry" and its
# "qmgr: Error (...)" line; both are quiet, any other answer is printed.
q() {
    local said
    said=$("$PREFIX/bin/qmgr" -c "$1" 2>&1) || true
    grep -q -e 'Duplicate entry' -e 'already exists' <<<"$said" || { [ -z "$said" ] || echo "$said"; }
}
q "create resource jobfs type=size, flag=h"
q "create resource storage type=string"
q "create resource ngpus type=long, flag=nh"
q "create node $host" 
q "set node $host resources_available.ncpus = $NODE_NCPUS"
q "set node $host resources_available.mem = $NODE_MEM"
q "set node $host resources_available.ngpus = $NODE_NGPUS"
q "set node $host resources_available.jobfs = 400gb"
for queue in normal express ai; do
    q "create queue $queue queue_type=execution, enabled=true, started=true"
done
q "set server default_queue = normal"
q "set server job_history_enable = true"
q "set server scheduler_iteration = 10"
q "set server flatuid = true"
# Gadi writes PBS_NODEFILE with each node once per CPU; stock PBS lists it once per chunk
# (mpiprocs defaults to 1), so Open MPI 5 (ras pbs) sees 1 slot and `--map-by ppr:2:node`
# fails. Queue `express` emulates Gadi for 2-rank points (default_chunk.mpiprocs = 2);
# `normal` stays stock, so the project's own request (no mpiprocs) is tested as it is.
q "set queue express default_chunk.mpiprocs = 2"
# Walltime fault: a queuejob hook cuts the walltime of jobs sent to `faultq` to 30 s, so PBS
# kills them (Exit_status -29) before the point's own timer (walltime + margin) fires.
q "create queue faultq queue_type=execution, enabled=true, started=true"
q "set queue faultq default_chunk.mpiprocs = 2"
mkdir -p "$HOOKS"
cat >"$HOOKS/faultq_walltime.py" <<'HOOK'
import pbs
e = pbs.event()
j = e.job
# j.queue is a pbs.queue with `qsub -q`, but a str ("") when qsub names no queue:
# `.name` on it raised and the server refused every job without -q.
qname = getattr(j.queue, "name", j.queue)
if qname == "faultq":
    j.Resource_List["walltime"] = pbs.duration("00:00:30")
e.accept()
HOOK
q "create hook faultq_walltime event=queuejob,enabled=true"
q "import hook faultq_walltime application/x-python default $HOOKS/faultq_walltime.py"
# The mom polls its jobs (walltime and other limits) every min..max_check_poll s (defaults
# 10..120): 5..10 s makes the walltime-kill fault test quick. ($check_poll_time is not a
# mom directive here; an unknown directive makes the mom exit on SIGHUP.)
if ! grep -q max_check_poll /var/spool/pbs/mom_priv/config; then
    printf '$min_check_poll 5\n$max_check_poll 10\n' >>/var/spool/pbs/mom_priv/config
    kill -HUP "$(cat /var/spool/pbs/mom_priv/mom.lock)"
fi

# 7. Logging shims for qsub/qstat/qdel (test_openpbs.py puts /opt/pbs-shim/bin first on PATH):
#    one line per call in /var/log/pbs-shim/*.log, to count qstat calls per polling round.
#    qstat modes: touch /var/log/pbs-shim/down (outage), /var/log/pbs-shim/merge-json (one
#    real qstat per id, merged: a qstat without openpbs/openpbs#2672).
mkdir -p /opt/pbs-shim/bin /var/log/pbs-shim
chmod 1777 /var/log/pbs-shim
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sed "s|/opt/pbs/bin/|$PREFIX/bin/|g" "$here/shim-qstat" >/opt/pbs-shim/bin/qstat   # the real qstat under $PREFIX
chmod 755 /opt/pbs-shim/bin/qstat
for cmd in qsub qdel; do
    printf '#!/bin/bash\nprintf "%%s %%s\\n" "$(date +%%s.%%N)" "$*" >> /var/log/pbs-shim/%s.log\nexec %s/bin/%s "$@"\n' \
        "$cmd" "$PREFIX" "$cmd" >/opt/pbs-shim/bin/$cmd
    chmod 755 /opt/pbs-shim/bin/$cmd
done
touch /var/log/pbs-shim/qstat.log /var/log/pbs-shim/qsub.log /var/log/pbs-shim/qdel.log
chmod 666 /var/log/pbs-shim/*.log

# 8. The unprivileged submitting user (PBS runs no job as root unless acl_roots allows it).
id "$PBS_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$PBS_USER"

for _ in $(seq 30); do
    "$PREFIX/bin/pbsnodes" "$host" | grep -q 'state = free' && break
    sleep 2
done
"$PREFIX/bin/pbsnodes" "$host" | grep -E 'state|resources_available'
echo "OpenPBS is up. Submit as $PBS_USER, e.g.: su $PBS_USER -c 'echo hostname | $PREFIX/bin/qsub'"
