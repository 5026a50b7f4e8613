"""Runs in front of every rank's command: reports the rank, then becomes the command.

    mpirun ... python rank_probe.py [--also NAME,...] -- <the app's rank command ...>

prints one line per rank before the app starts,

    scalestudy-rank {"rank": 0, "size": 2, "host": "n1", "pid": 123, "env": {...}}

with the host the rank runs on (SLURMD_NODENAME if set, else the host name) and the
OMPI_*/NCCL_*/... variables it was given: the record of which hosts ran and the proof
that a flag set's variables reached every rank. Then it exec()s the command, so the
app keeps this process (same pid, same environment) and nothing else changes.
A stand-alone script (standard library only) run by path: it needs nothing on
PYTHONPATH on the compute nodes. `rank_lines` reads the lines back (provenance, apps).
"""

from __future__ import annotations

import json
import os
import socket
import sys

RANK_PREFIX = "scalestudy-rank"
# Variables that show which MPI/NCCL settings reached the rank and where it ran.
ENV_PREFIXES = (
    "OMPI_MCA_",
    "OMPI_COMM_WORLD_",
    "NCCL_",
    "MPIR_CVAR_",
    "FI_",
    "UCX_",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "SLURM_JOB_ID",
    "SLURM_PROCID",
    "PBS_JOBID",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
)
# Open MPI bookkeeping that says nothing about the user's settings.
ENV_NOISE = ("OMPI_MCA_PREFIXES",)
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def first_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def host_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def seen_environment(also: tuple[str, ...] = ()) -> dict[str, str]:
    return {
        name: value
        for name, value in sorted(os.environ.items())
        if (name.startswith(ENV_PREFIXES) or name in also) and name not in ENV_NOISE
    }


def report(also: tuple[str, ...] = ()) -> dict:
    return {
        "rank": first_int(RANK_VARIABLES),
        "size": first_int(SIZE_VARIABLES),
        "host": host_name(),
        "pid": os.getpid(),
        "env": seen_environment(also),
    }


def rank_lines(log_text: str) -> list[dict]:
    """Every rank's `scalestudy-rank {...}` line (rank, host, pid, the environment it saw)."""
    found = []
    prefix = RANK_PREFIX + " "
    for line in log_text.splitlines():
        if line.startswith(prefix):
            try:
                found.append(json.loads(line[len(prefix) :]))
            except json.JSONDecodeError:
                continue  # a line cut off (the log was truncated) is not evidence
    return sorted(found, key=lambda r: (r.get("rank") is None, r.get("rank") or 0))


def main(argv: list[str]) -> int:
    # --also A,B: variables the point set (e.g. an MPICH flag set's) to report besides the prefixes.
    also: tuple[str, ...] = ()
    if argv[:1] == ["--also"] and len(argv) > 1:
        also, argv = tuple(filter(None, argv[1].split(","))), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(f"usage: python {sys.argv[0]} [--also NAME,...] [--] COMMAND [ARGS...]", file=sys.stderr)
        return 2
    # One write, so that lines of ranks sharing the launcher's output do not interleave.
    sys.stdout.write(f"{RANK_PREFIX} {json.dumps(report(also), sort_keys=True)}\n")
    sys.stdout.flush()
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        print(f"{RANK_PREFIX}: cannot run {argv[0]}: {error}", flush=True)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
