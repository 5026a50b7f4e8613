"""The log a rule declares, written by the step itself: one line per thing it did, or the
traceback of why it failed (Snakemake shows that file when a step fails)."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def step_log(path: str | Path | None) -> Iterator[Callable[[str], None]]:
    """Yields `note(line)`. Without a path (a step called from Python, not a rule) notes go nowhere."""
    if path is None:
        yield lambda line: None
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as log:
        try:
            yield lambda line: print(line, file=log, flush=True)
        except BaseException:
            traceback.print_exc(file=log)
            raise
