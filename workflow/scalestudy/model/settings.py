"""The sweep's settings as typed values: made once by the loader (config.sweep.settings_of,
from the config with the schema's defaults filled in) and read as attributes after it. No
module after loading reads the raw config dict: a setting is one field here, with the type
the schema gives it.

    settings = study.settings                  # Settings: the top-level keys
    settings.studies["hoomd-wca"].repeats       # StudySettings: one study's own keys
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .ladder import Ladder
from .repeats import Repeats, limits


@dataclass(frozen=True)
class StudySettings:
    """One study's settings that planning, the tables and the report read (the axes and
    params are expanded into its points; what only the app reads stays in each point)."""

    name: str
    app: str
    # As written, or the schema's default (every default is the schema's: none here).
    # A number of repeats, or {min, max, ci}.
    repeats: int | Mapping[str, Any]
    # Points sharing one batch job: 1 (none), a number, or "scale" (config.packing).
    pack: int | str
    budget_su: float | None
    estimator: str
    efficiency_threshold: float
    predict_up_to: float
    # A node ladder (`nodes: {from, up_to, ...}`, model.ladder); None: a list of node counts.
    ladder: Ladder | None = None

    @property
    def repeat_limits(self) -> Repeats:
        return limits(self.repeats)

    @property
    def repeats_text(self) -> str:
        """`repeats` as canonical text (a param: a reordered sweep file changes nothing)."""
        return json.dumps(self.repeats, sort_keys=True)


@dataclass(frozen=True)
class Settings:
    """The sweep's top-level settings, each as given or the schema's default."""

    cluster: str
    results_dir: str
    # --config partial=true: build the report from whatever has finished; submit nothing.
    partial: bool
    # --config retry_failed=true: rerun the points that failed, never an ok one.
    retry_failed: bool
    # The most the jobs one invocation submits may cost (None: no limit).
    budget_su_total: float | None
    # The seed of the run order (model.order): round by round, shuffled within.
    order_seed: int
    # --config predict_from=PATH: the larger planned scales, predicted from a measured study.
    predict_from: str | None
    # --config compare_baseline=PATH: the compare target's baseline.
    compare_baseline: str | None
    assets: Mapping[str, Any]
    studies: Mapping[str, StudySettings]
