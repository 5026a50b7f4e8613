"""Every figure scalestudy reports is declared once, here or by the app that measures it
(`declare`), and looked up by name everywhere else (`metric`): analysis, plots, the
report and the published-record pages all read the same name, label, unit, kind and
extensiveness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["rate", "time", "size"]
# The direction of each kind: a rate is better higher, a time lower; a size has none.
HIGHER_IS_BETTER: dict[str, bool] = {"rate": True, "time": False}


@dataclass(frozen=True)
class Metric:
    """A figure. `kind` fixes the direction of speedup: rate (higher is better,
    S = R(p)/R(p0)), time (lower is better, S = T(p0)/T(p)) or size (not scaled)."""

    name: str
    label: str
    unit: str
    kind: Kind
    # A rate that grows with the problem size (tokens/s, particle-steps/s): weak-scaling
    # efficiency divides it by p/p0. One that does not (time steps/s) is compared as is.
    extensive: bool = True
    # A part of a run's time (a time-kind figure): its short name in the breakdown ('Comm',
    # 'compute'), and what the parts of one breakdown add up to, said with how it is measured.
    # The figures of one app with one `whole` are one breakdown (scalestudy.analysis.breakdown). `beside`:
    # a time per the same whole that overlaps the parts (communication hidden behind compute),
    # shown beside them, not stacked with them.
    part: str = ""
    whole: str = ""
    beside: bool = False

    @property
    def higher_is_better(self) -> bool | None:
        """The figure's direction, from its kind: a rate is better higher, a time lower; a
        size has none. Speed ratios (variants, study against study) read it from here."""
        return HIGHER_IS_BETTER.get(self.kind)

    @property
    def direction(self) -> str:
        """The direction in words, as tables name it."""
        return direction(self.kind)

    @property
    def scaled(self) -> bool:
        """Rates and times get speedup and efficiency; sizes (memory) are only reported."""
        return self.kind in ("rate", "time")


def direction(kind: str) -> str:
    """A kind's direction in words: 'higher is better', 'lower is better' or 'no direction'."""
    return {True: "higher is better", False: "lower is better"}.get(HIGHER_IS_BETTER.get(kind), "no direction")


# A figure that is a curve over message size: the figures' key holding a run's whole size
# table (one object per size: SIZE_COLUMN and the app's `size_figures`, each declared here).
SIZE_TABLE = "size_table"
SIZE_COLUMN = "size_bytes"

DECLARED: dict[str, Metric] = {}


def declare(
    name: str,
    label: str,
    unit: str,
    kind: Kind,
    *,
    extensive: bool = True,
    part: str = "",
    whole: str = "",
    beside: bool = False,
) -> Metric:
    """Declare a figure once. Two apps measuring the same figure (HOOMD-blue and LAMMPS
    steps/s) share one declaration; a second, different one is a bug and raises. `part` and
    `whole`: the figure is one part of a time breakdown (a time per `whole`)."""
    if bool(part) != bool(whole) or (part and kind != "time"):
        raise ValueError(f"metric {name!r}: a part of a breakdown is a time with both a part name and its whole")
    metric = Metric(name, label, unit, kind, extensive, part, whole, beside)
    known = DECLARED.setdefault(name, metric)
    if known != metric:
        raise ValueError(f"metric {name!r} declared twice, differently: {known} and {metric}")
    return known


def metric(name: str) -> Metric:
    """The declaration of a figure (its app's module must have been imported)."""
    try:
        return DECLARED[name]
    except KeyError:
        raise KeyError(f"no metric {name!r} is declared; declared: {', '.join(sorted(DECLARED))}") from None


# The whole job's wall time is a figure of every app: published tables often scale by it.
WALLTIME_USED = declare("walltime_used_s", "walltime used (whole job)", "s", "time")
