"""The terms the analysis defines, as one glossary: each text is defined once, beside what it
defines (scalestudy.analysis.statistics, scaling, verdicts, records, sizes); the order is the
report's (its definitions at the foot of the page), which pages and plots read it in."""

from __future__ import annotations

from ..analysis import ladder, records, scaling, sizes, statistics, verdicts

# The order a reader meets the terms: a point's figure, its curve, the verdicts and what holds
# them back, a run's conditions, memory and cost, then message sizes.
ORDER = (
    "mean ± CI (n)", "trimmed mean", "outlier", "speedup", "parallel_efficiency", "speedup_per_core",
    "karp_flatt", "amdahl_fit", "weak_efficiency", "scaled_speedup", "speedup and efficiency CI", "ratio CI",
    "variant_ratio", "median", "run_order",
    "not_interleaved", "conditions_differed", "contended", "few_repeats", "repeats_until_clear", "node ladder",
    "intermediate rung",
    "memory_ratio",
    "service_units", "su_per_million", "size_bands", "band_figure", "busbw",
)  # fmt: skip
TERMS = {
    **statistics.DEFINITIONS,
    **scaling.DEFINITIONS,
    **verdicts.DEFINITIONS,
    **records.DEFINITIONS,
    **sizes.DEFINITIONS,
    **ladder.DEFINITIONS,
}
# A term a module adds and ORDER does not name yet comes last, never left out.
DEFINITIONS = {key: TERMS[key] for key in ORDER} | {key: text for key, text in TERMS.items() if key not in ORDER}
