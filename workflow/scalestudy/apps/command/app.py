"""Any program as an app, declared in the sweep instead of written in Python (`app: command`),
the way ReFrame, Ramble and JUBE let a user add one: a command template and, per figure, a
regular expression with its unit, its direction and how several matches reduce to one value.

    studies:
      mylj:
        app: command
        command: "{executable} -in in.lj -var n {n}"
        params: {executable: lmp, n: [1000, 8000]}
        figures:
          loop_time: {regex: 'Loop time of ([0-9.eE+-]+)', unit: s, better: lower, reduce: last}

The study's keys (model.point.PROGRAM_KEYS) reach every point as its `program`; the app
configured by it (`Command.configured`, looked up by apps.base.app_of) is what runs the point
and reads its figures, in the run job and in the analysis alike.

The command is split into words as a shell would (shlex: quotes keep spaces), then each
word's {name} is replaced by the point's param of that name, or by {run_dir} / {results_dir}.
Every word stays one argument of the rank's argv: the run job never starts a shell (the rank
probe exec()s the argv; launch.sh quotes each word), so a value with spaces, `;` or `$(...)`
reaches the program exactly as the sweep writes it.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import statistics
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...model.errors import did_you_mean
from ...model.metrics import SIZE_COLUMN, SIZE_TABLE, WALLTIME_USED, Metric
from ...model.paths import Layout
from ...model.point import PROGRAM, Point
from ..base import App, ParseError

# Placeholders every point fills besides its params: its run directory (outputs of its own)
# and the results directory.
BUILT_IN = ("run_dir", "results_dir")
# How several matches of a figure's regex become the run's value (the schema's `reduce` enum).
REDUCERS: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": statistics.fmean,
    "last": lambda values: values[-1],
    "max": max,
    "min": min,
}
# Names a figure cannot take: runs.csv columns the point and the record fill already (a figure
# of that name would overwrite them in its row).
RESERVED = frozenset(
    {f.name for f in dataclasses.fields(Point)}
    | {"point", "variant", "ranks", "status", "reason", "category", "batch_job", "started", "finished"}
    | {"exit_code", "provenance", PROGRAM, SIZE_TABLE, SIZE_COLUMN, WALLTIME_USED.name}
)


@dataclass(frozen=True)
class Figure:
    """One figure a command study declares (`figures.<name>` in the sweep, defaults filled)."""

    name: str
    regex: re.Pattern[str]
    unit: str
    better: str
    reduce: str = "mean"
    per_size: bool = False
    label: str = ""
    extensive: bool = False

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Figure:
        return cls(
            name=spec["name"],
            regex=re.compile(spec["regex"], re.MULTILINE),
            unit=spec["unit"],
            better=spec["better"],
            reduce=spec.get("reduce", "mean"),
            per_size=bool(spec.get("per_size", False)),
            label=spec.get("label") or spec["name"],
            extensive=bool(spec.get("extensive", False)),
        )

    @property
    def metric(self) -> Metric:
        """Its declaration: higher is better makes it a rate, lower a time (model.metrics)."""
        return Metric(self.name, self.label, self.unit, "rate" if self.better == "higher" else "time", self.extensive)

    def values(self, log_text: str) -> list[str]:
        return [m.group(1) for m in self.regex.finditer(log_text)]

    def where(self) -> str:
        return f"figure {self.name!r} (regex {self.regex.pattern!r})"


def number(text: str, figure: Figure) -> float:
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"{figure.where()} matched {text!r}, which is not a number") from None


def scalar(log_text: str, figure: Figure) -> float:
    """The run's value of a scalar figure: its matches reduced (`reduce`)."""
    values = [number(text, figure) for text in figure.values(log_text)]
    if not values:
        raise ParseError(f"{figure.where()} matched nothing in the output")
    return REDUCERS[figure.reduce](values)


def curve(log_text: str, figure: Figure) -> dict[int, float]:
    """A curve over message size: one match per size row (size in bytes, value), the matches
    of one size reduced (`reduce`: several ranks or repeats printing the same row)."""
    by_size: dict[int, list[float]] = {}
    for match in figure.regex.finditer(log_text):
        size = number(match.group(1), figure)
        if size != int(size) or size < 0:
            raise ParseError(f"{figure.where()} matched size {match.group(1)!r}, not a whole number of bytes")
        by_size.setdefault(int(size), []).append(number(match.group(2), figure))
    if not by_size:
        raise ParseError(f"{figure.where()} matched no size row in the output")
    return {size: REDUCERS[figure.reduce](values) for size, values in sorted(by_size.items())}


def parse_figures(log_text: str, figures: Sequence[Figure]) -> dict[str, Any]:
    """Every declared figure from a run's output; ParseError naming the first that is missing.
    A curve's figure of the run is its value at the smallest size where lower is better
    (latency), at the largest where higher is better (bandwidth), as the ping-pong app's;
    its whole table goes to figures[SIZE_TABLE], one row per size."""
    out: dict[str, Any] = {}
    rows: dict[int, dict[str, Any]] = {}
    for figure in figures:
        if not figure.per_size:
            out[figure.name] = scalar(log_text, figure)
            continue
        values = curve(log_text, figure)
        out[figure.name] = values[min(values) if figure.better == "lower" else max(values)]
        for size, value in values.items():
            rows.setdefault(size, {SIZE_COLUMN: size})[figure.name] = value
    if rows:
        out[SIZE_TABLE] = [rows[size] for size in sorted(rows)]
    return out


def placeholders(word: str) -> list[str]:
    """The {name}s of one word of the command; ValueError for a lone brace or a placeholder
    that is not a plain name ({a.b}, {a[0]}, {a!r})."""
    names = []
    for _, name, spec, conversion in string.Formatter().parse(word):
        if name is None:
            continue
        if not name.isidentifier() or conversion:
            raise ValueError(f"placeholder {{{name}{'!' + conversion if conversion else ''}}} is not a {{name}}")
        names.append(name)
        if spec and "{" in spec:
            raise ValueError(f"placeholder {{{name}:{spec}}} nests another placeholder")
    return names


def word_text(value: Any) -> Any:
    """A param's value as a word: true/false as the sweep spells them; numbers kept (a format
    spec such as {n:06d} applies to them)."""
    return str(value).lower() if isinstance(value, bool) else value


def command_words(template: str, values: Mapping[str, Any]) -> list[str]:
    """The argv: the template split as a shell would, then each word formatted on its own
    (a value never splits a word, and is never read by a shell)."""
    spelt = {k: word_text(v) for k, v in values.items()}
    return [word.format_map(spelt) for word in shlex.split(template)]


class Command(App):
    name = "command"
    declared_in_sweep = True
    breakdown_note = "a program declared in the sweep gives only the figures its regular expressions read"
    # The configured app's own (its study's figures); the registered app has none.
    metrics: tuple[Metric, ...] = ()
    primary_metric = ""
    size_figures: tuple[str, ...] = ()
    params: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, program: Mapping[str, Any] | None = None) -> None:
        self.program = dict(program or {})
        self.figures = tuple(Figure.of(spec) for spec in self.program.get("figures", ()))
        self.metrics = tuple(f.metric for f in self.figures)
        self.size_figures = tuple(f.name for f in self.figures if f.per_size)
        self.primary_metric = self.program.get("primary") or ""
        self.mpi_flavour = self.program.get("mpi") or App.mpi_flavour

    def configured(self, program: Mapping[str, Any]) -> App:
        return Command(program)

    def memory_unpredicted(self, point: Point) -> str | None:
        return "app: command runs a program of the user's own, whose memory the model cannot see"

    def param_problems(self, params: Mapping[str, Any]) -> list[str]:
        """A command study's params are its own (the schema checks their shape); whether each
        is a placeholder of the command is `study_problems`' question."""
        return []

    def study_problems(self, study: Mapping[str, Any]) -> list[str]:
        """The program, before anything runs: the command splits and each placeholder has a
        param, each param is used, each figure's regex compiles with the groups it needs, the
        primary figure exists. One line each, naming the key."""
        problems = []
        params = study.get("params") or {}
        if "command" not in study:
            problems.append(
                "command: missing; app 'command' runs the program the study names, "
                'e.g. command: "{executable} -in in.lj" with params: {executable: lmp}'
            )
        else:
            problems += command_problems(study["command"], params)
        figures = study.get("figures")
        if not figures:
            problems.append(
                "figures: missing; declare what the output gives, e.g. figures: {loop_time: "
                "{regex: 'Loop time of ([0-9.]+)', unit: s, better: lower}}"
            )
            return problems
        for name, spec in figures.items():
            problems += [f"figures.{name}{p}" for p in figure_problems(name, spec)]
        primary = study.get("primary")
        if primary is not None and primary not in figures:
            problems.append(
                f"primary: {primary!r} is not a figure of the study{did_you_mean(primary, figures) or ';'} "
                f"allowed: {', '.join(figures)}"
            )
        return problems

    def missing_software(self, point: Point) -> str | None:
        """The program (the command's first word) where this job runs, before launching."""
        words = command_words(self.program.get("command", ""), self.values(point, Path("."), Layout()))
        program = words[0] if words else ""
        if program and shutil.which(program) is None:
            return f"the command's program {program!r} is not an executable file or on PATH where the job runs"
        return None

    def how_to_fix(self, reason: str) -> str | None:
        if "matched" in reason and "regex" in reason:
            return "check each figure's regex against a run's stdout.log (in its run directory)"
        return None

    def values(self, point: Point, run_dir: Path, layout: Layout) -> dict[str, Any]:
        return {**point.params, "run_dir": str(run_dir), "results_dir": layout.results}

    def loads_mpi4py(self, point: Point) -> bool:
        return "mpi4py" in self.program["command"]  # a program the study runs through mpi4py

    def rank_command(self, point: Point, run_dir: Path, layout: Layout) -> list[str]:
        return command_words(self.program["command"], self.values(point, run_dir, layout))

    def parse(self, log_text: str, run_dir: Path) -> dict[str, Any]:
        return parse_figures(log_text, self.figures)


def command_problems(template: str, params: Mapping[str, Any]) -> list[str]:
    try:
        words = shlex.split(template)
    except ValueError as error:
        return [f"command: {template!r} cannot be split into words ({error}); close every quote"]
    if not words:
        return [f"command: {template!r} has no words; allowed: a program and its arguments"]
    used: list[str] = []
    problems = []
    for word in words:
        try:
            used += placeholders(word)
        except ValueError as error:
            problems.append(
                f"command: {word!r}: {error}; allowed: {{name}} of a param (write {{{{ and }}}} for a brace)"
            )
    allowed = [*params, *BUILT_IN]
    for name in dict.fromkeys(used):
        if name not in allowed:
            problems.append(
                f"command: placeholder {{{name}}} has no param{did_you_mean(name, allowed) or ';'} "
                f"allowed: {', '.join(allowed)}"
            )
    if problems:  # a mistyped placeholder leaves its param unused: one line says it
        return problems
    for name in params:
        if name not in used:
            problems.append(
                f"params.{name}: not used by the command; allowed: its placeholders "
                f"({', '.join(dict.fromkeys(used)) or 'none'}), or write {{{name}}} in the command"
            )
    return problems


def figure_problems(name: str, spec: Mapping[str, Any]) -> list[str]:
    """'<.key>: what is wrong; allowed: ...' for one figure (the schema checked its shape)."""
    if name in RESERVED:
        return [f": the name is a column every run's record fills already; allowed: another name, e.g. {name}_value"]
    try:
        groups = re.compile(spec["regex"], re.MULTILINE).groups
    except re.error as error:
        return [f".regex: {spec['regex']!r} does not compile ({error}); allowed: a Python regular expression"]
    wanted = 2 if spec.get("per_size") else 1
    if groups != wanted:
        what = (
            "exactly two with per_size: true (the message size in bytes, then the value)"
            if wanted == 2
            else "exactly one (the value; (?:...) groups without capturing)"
        )
        return [f".regex: {spec['regex']!r} has {groups} capture group(s); allowed: {what}"]
    return []
