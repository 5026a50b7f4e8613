"""What every command line of the package shares: bad input is one line and exit status 2,
never a usage block or a traceback (argparse's own errors included)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

# The exit status of a command refused for its input (argparse's own).
BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, whose errors are one line naming the command ('prog: error'), exit status 2.
    Subcommands made with add_subparsers are of the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(BAD_INPUT, f"{self.prog}: {message}; see {self.prog} --help\n")


def refuse(prog: str, problems: list[str]) -> int:
    """Each problem as one line on stderr, named by the command; returns BAD_INPUT."""
    for problem in problems:
        print(f"{prog}: {problem}", file=sys.stderr)
    return BAD_INPUT
