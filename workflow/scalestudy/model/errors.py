"""The one error of bad input: every problem found, one line each, naming its key."""

from __future__ import annotations


class SweepError(ValueError):
    """Raised with every problem found, one line each (e.g.
    ``studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch'; defined: default, no-ucx``)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))
