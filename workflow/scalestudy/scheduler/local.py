"""No scheduler (`scheduler: none`): points run in the workflow's own process, one machine
(profiles/local). Nothing is submitted, packed as a batch job or priced before it runs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .interface import Scheduler


class NoScheduler(Scheduler):
    """A cluster file without a batch system: every operation is the interface's nothing."""

    scheduler = "none"
    batch = False

    def pack_problems(self, packs: Iterable[Any]) -> list[str]:
        """None: a pack's points run one after another here, in no batch job a site could refuse."""
        return []
