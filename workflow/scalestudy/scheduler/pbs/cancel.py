"""The cancel command, and the one way both it and the sidecar delete jobs.

Snakemake calls the cancel command (profiles/pbs/qdel) without a shell, with job ids, when
a run is interrupted, and gives each call 2 s. qdel on a busy server (or a wrapper such as
Slurm's torque qdel) can take longer, so the command starts qdel in a session of its own
(the interrupt that stops Snakemake does not reach it) and returns at once. The ids are
noted in `cancelled` first, so that the sidecar does not delete them again; what qdel said
goes to qdel.log. $SCALESTUDY_QDEL replaces qdel (tests, wrappers).

The command runs within Snakemake's 2 s: `os` starts qdel (posix_spawn; subprocess alone
would add a quarter to the command's start-up) and `cache` names the files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from . import cache

QDEL_ENV = "SCALESTUDY_QDEL"
# The sidecar's qdel runs to its end (Snakemake waits for the sidecar), at most this long.
QDEL_TIMEOUT_S = 120


def qdel_command(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get(QDEL_ENV) or "qdel"


def delete(directory: Path, job_ids: list[str], qdel: str = "qdel", *, by: str, wait: bool) -> None:
    """Note the ids in `cancelled`, then ONE qdel for all; its output goes to qdel.log after
    a line saying who asked (`by`). `wait`: until qdel ends; otherwise it is left running
    in a session of its own."""
    if not job_ids:
        return
    cache.note_cancelled(directory, job_ids)
    with open(directory / cache.QDEL_LOG, "a") as log:
        log.write(f"{by}: qdel {' '.join(job_ids)}\n")
        log.flush()
        try:
            if wait:
                run_to_end([qdel, *job_ids], log)
            else:
                start_detached([qdel, *job_ids], log.fileno())
        except OSError as error:
            log.write(f"{by}: {qdel} failed: {error}\n")


def run_to_end(argv: list[str], log) -> None:
    """Run argv, stdout and stderr to `log`; TimeoutError after QDEL_TIMEOUT_S."""
    import subprocess  # the sidecar's path only: the cancel command never pays for it

    try:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=QDEL_TIMEOUT_S)
    except subprocess.TimeoutExpired as expired:
        raise TimeoutError(str(expired)) from expired


def start_detached(argv: list[str], output_fd: int) -> None:
    """Start argv in a new session, stdin from /dev/null, stdout and stderr to output_fd;
    nobody waits for it. Raises OSError when it cannot start (e.g. not found)."""
    os.posix_spawnp(
        argv[0],
        argv,
        os.environ,
        setsid=True,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, output_fd, 1),
            (os.POSIX_SPAWN_DUP2, output_fd, 2),
        ],
    )


def cancel(job_ids: list[str], directory: Path, qdel: str = "qdel") -> None:
    """What the cancel command does: returns as soon as qdel has started."""
    delete(directory, job_ids, qdel, by="cancel", wait=False)
