"""What every command line of the package shares: bad input is one line and exit status 2,
never a usage block or a traceback (argparse's own errors included)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

# The exit status of a command refused for its input (argparse's own).
BAD_INPUT = 2


# argparse's own wording, which its error for missing arguments starts with.
REQUIRED = "the following arguments are required"


class OneLineParser(argparse.ArgumentParser):
    """argparse, whose errors are one line naming the command ('prog: error'), exit status 2.
    Subcommands made with add_subparsers are of the same class.

    argparse checks the required arguments before it says which it did not know, so
    `--bogus` alone would be refused as 'required: command' without naming `--bogus`: where
    arguments are missing, the ones this command does not know are named first, with what it
    knows."""

    _given: Sequence[str] = ()

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        unknown = self.unknown_options(self._given) if message.startswith(REQUIRED) else []
        if unknown:
            message = f"unrecognized arguments: {' '.join(unknown)} (allowed: {self.allowed()}); {message}"
        self.exit(BAD_INPUT, f"{self.prog}: {message}; see {self.prog} --help\n")

    def unknown_options(self, given: Sequence[str]) -> list[str]:
        """The words of `given` that look like an option (as argparse tells them from values)
        and that no option of this command takes, even abbreviated."""
        unknown = []
        for word in given:
            if word == "--":
                break
            if not word or word[0] not in self.prefix_chars or word in self.prefix_chars:
                continue
            if self._negative_number_matcher.match(word) and not self._has_negative_number_optionals:
                continue
            name = word.split("=", 1)[0]
            known = self._option_string_actions
            if name in known or (self.allow_abbrev and any(option.startswith(name) for option in known)):
                continue
            unknown.append(word)
        return unknown

    def allowed(self) -> str:
        """What this command takes, in words: its options, its commands."""
        words = []
        for action in self._actions:
            if action.option_strings:
                words.append("/".join(action.option_strings))
            elif action.choices is not None and isinstance(action, argparse._SubParsersAction):
                words.append(f"a command ({', '.join(action.choices)})")
        return ", ".join(words)


def refuse(prog: str, problems: list[str]) -> int:
    """Each problem as one line on stderr, named by the command; returns BAD_INPUT."""
    for problem in problems:
        print(f"{prog}: {problem}", file=sys.stderr)
    return BAD_INPUT
