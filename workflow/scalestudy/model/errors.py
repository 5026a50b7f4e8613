"""The one error of bad input: every problem found, one line each, naming its key."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SweepError(ValueError):
    """Raised with every problem found, one line each (e.g.
    ``studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch'; defined: default, no-ucx``)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """'; did you mean 'cluster'?' when one of `choices` is close to `word` (a typo), else ''."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def divisors(number: int) -> str:
    """'1, 2, 4, 8': what a message allows where a value must divide `number`."""
    return ", ".join(str(d) for d in range(1, number + 1) if number % d == 0)
