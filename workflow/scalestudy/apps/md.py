"""What the molecular-dynamics apps share: the WCA fluid benchmark of hoomd-benchmarks'
md_pair_wca (N particles at number density 1.0, LJ with r_cut = 2^(1/6) and no shift,
dt 0.005, neighbour-list buffer 0.4 checked every step, Nose-Hoover NVT at kT 1.2 with
tau 0.5), its parameters, strong and weak scaling, and its figure: time steps per second
of the timed runs (warm-up excluded), averaged over `repeat` timed runs in one job.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from ..model.metrics import Metric, declare
from ..model.point import Point
from .base import App, Param, ParseError


class WcaBenchmark(App):
    """Base of the HOOMD-blue and LAMMPS twins: same physics, same parameters, same figure."""

    metrics: ClassVar[tuple[Metric, ...]] = (
        # A per-step rate: N grows with p under weak scaling, so it is compared as is.
        declare("steps_per_s", "time steps per second (mean of the timed runs)", "steps/s", "rate", extensive=False),
        # Weak scaling: T(p0)/T(p) on the time per step is its efficiency (N grows with p).
        declare("time_per_step_ms", "wall time per time step (1000 / steps per second)", "ms", "time"),
        declare("particle_steps_per_s", "particle time steps per second (N x steps/s)", "particle-steps/s", "rate"),
    )
    primary_metric: ClassVar[str] = "steps_per_s"
    common_params: ClassVar[Mapping[str, Param]] = {
        "N": Param(int, minimum=1, help="number of particles (strong scaling)"),
        "particles_per_rank": Param(int, minimum=1, help="weak scaling: N = particles_per_rank x ranks"),
        "density": Param((int, float), minimum=0.01, help="number density", default=1.0),
        "warmup_steps": Param(int, minimum=0, help="steps run before timing (as the reference)", default=40000),
        "benchmark_steps": Param(int, minimum=1, help="steps per timed run", default=80000),
        "repeat": Param(int, minimum=1, help="timed runs in one job, after one warm-up", default=1),
    }

    def study_problems(self, study: Mapping[str, Any]) -> list[str]:
        """Strong scaling fixes N; weak scaling fixes N per rank. Exactly one of them."""
        params = study["params"]
        if study["scaling"] == "weak":
            if "particles_per_rank" not in params or "N" in params:
                return ["params: weak scaling needs params.particles_per_rank (N = particles_per_rank x ranks), not N"]
        elif "N" not in params or "particles_per_rank" in params:
            return ["params: strong scaling needs params.N (weak scaling: scaling: weak and particles_per_rank)"]
        return []

    def particles(self, point: Point) -> int:
        if point.scaling == "weak":
            return int(point.params["particles_per_rank"]) * point.ranks
        return int(point.params["N"])

    def inputs_key(self, point: Point) -> Hashable:
        # Weak scaling: the points of one params combination differ in N, hence in initial state.
        return (point.combination, self.particles(point))


def md_figures(
    per_run: list[float], particles: int | None, log_text: str, decomposition: re.Pattern[str]
) -> dict[str, Any]:
    """The figures of one job from the steps/s of its timed runs. `decomposition`: the app's
    line naming its domain decomposition (n_x, n_y, n_z as its groups), recorded as "n_x x n_y x n_z"."""
    if not per_run or any(value <= 0 for value in per_run):
        raise ParseError(f"no positive time steps per second among the timed runs: {per_run}")
    mean = statistics.fmean(per_run)
    figures: dict[str, Any] = {
        "steps_per_s": mean,
        "time_per_step_ms": 1000.0 / mean,
        "timed_runs": len(per_run),
        "steps_per_s_runs": per_run,
    }
    if particles:
        figures["particles"] = particles
        figures["particle_steps_per_s"] = particles * mean
    found = decomposition.search(log_text)
    if found:
        figures["domain_decomposition"] = "x".join(found.groups())
    return figures
