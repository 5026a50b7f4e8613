"""One running workflow per results directory.

Snakemake locks its working directory, so a second `snakemake` in the same directory
stops with "Directory cannot be locked". The results directory can live elsewhere
(`results_dir:`), shared by invocations from different working directories, which
Snakemake's lock does not see: this lock covers that case. It is an flock on
`<results>/.scalestudy.lock`, held by the running workflow's main process until it
exits (released by the kernel, also after a crash). On parallel file systems flock may
be local to a node (Lustre `localflock`): it then protects invocations on one login node.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import IO

from ..model.paths import Layout


class ResultsBusy(RuntimeError):
    """Another workflow is running on the same results directory."""


def hold(results_dir: str | Path) -> IO[str]:
    """Take the lock (keep the returned handle open for as long as the workflow runs)."""
    path = Path(Layout(str(results_dir)).lock)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open on purpose
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise ResultsBusy(
            f"results directory {results_dir} is in use by a running workflow ({holder}); "
            "wait for it to finish, or give this study another results_dir"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}, working directory {os.getcwd()}\n")
    handle.flush()
    return handle
