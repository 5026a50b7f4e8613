"""Performance models in Extra-P's performance model normal form (PMNF) for one parameter p:

    f(p) = c + sum_k a_k * p^(i_k) * log2(p)^(j_k)

chosen the way Extra-P's single-parameter modeler chooses them (Calotoiu et al., SC'13;
extrap 4.2 `modelers.single_parameter.basic`): every hypothesis c + a*t(p) over the same
building blocks t (`BLOCKS`, and `NEGATIVE_BLOCKS` for a figure that falls with p, as its
`allow_negative_exponents`), coefficients by least squares on the means per scale, ranked by
the leave-one-out symmetric mean absolute percentage error (SMAPE), a term that contributes
less than `MIN_TERM_CONTRIBUTION` of every measured value dropped, the constant model's own
(in-sample) SMAPE to beat. Where it differs, deliberately: hypotheses of up to `terms` terms
(Extra-P's default is one; a second term must lower the leave-one-out SMAPE by more than
`TERM_GAIN` points, so fewer terms win at equal error), fewer than `MIN_SCALES` scales get no
model but the reason, and every prediction carries an interval (`predict`): the models within
`CHOICE_TOLERANCE` of the best (the choice's uncertainty), each refitted on `BOOTSTRAP`
wild-bootstrap resamples of its residuals, widened per scale to the repeats' standard error
where that is larger (the repeats' noise).

Numpy only; nothing else of scalestudy (in the analysis, where numpy belongs: the report side).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

# Extra-P 4.2.5's default building blocks (create_default_building_blocks, log terms allowed):
# (i numerator, i denominator, j) for p^(i) * log2(p)^j.
BLOCKS = (
    (0, 1, 1), (0, 1, 2), (1, 4, 0), (1, 3, 0), (1, 4, 1), (1, 3, 1), (1, 4, 2), (1, 3, 2), (1, 2, 0), (1, 2, 1),
    (1, 2, 2), (2, 3, 0), (3, 4, 0), (2, 3, 1), (3, 4, 1), (4, 5, 0), (2, 3, 2), (3, 4, 2), (1, 1, 0), (1, 1, 1),
    (1, 1, 2), (5, 4, 0), (5, 4, 1), (4, 3, 0), (4, 3, 1), (3, 2, 0), (3, 2, 1), (3, 2, 2), (5, 3, 0), (7, 4, 0),
    (2, 1, 0), (2, 1, 1), (2, 1, 2), (9, 4, 0), (7, 3, 0), (5, 2, 0), (5, 2, 1), (5, 2, 2), (8, 3, 0), (11, 4, 0),
    (3, 1, 0), (3, 1, 1),
)  # fmt: skip
# Its `allow_negative_exponents` additions (strong scaling: a time that falls as p grows): log terms
NEGATIVE_BLOCKS = (
    (0, 1, -1), (0, 1, -2), (-1, 4, -1), (-1, 3, -1), (-1, 4, -2), (-1, 3, -2), (-1, 2, -1), (-1, 2, -2),
    (-2, 3, -1), (-3, 4, -1), (-2, 3, -2), (-3, 4, -2), (-1, 1, -1), (-1, 1, -2), (-5, 4, -1), (-4, 3, -1),
    (-3, 2, -1), (-3, 2, -2), (-2, 1, -1), (-2, 1, -2), (-5, 2, -1), (-5, 2, -2), (-3, 1, -1),
)  # fmt: skip
# and its pure negative powers (1/p: the compute of a strong-scaling step).
NEGATIVE_POWERS = (
    (-1, 4, 0), (-1, 3, 0), (-1, 2, 0), (-2, 3, 0), (-3, 4, 0), (-4, 5, 0), (-1, 1, 0), (-5, 4, 0), (-4, 3, 0),
    (-3, 2, 0), (-5, 3, 0), (-7, 4, 0), (-2, 1, 0), (-9, 4, 0), (-7, 3, 0), (-5, 2, 0), (-8, 3, 0), (-11, 4, 0),
    (-3, 1, 0),
)  # fmt: skip
# Extra-P: minimum_term_contribution (a term below it at every point is noise) and the
# threshold under which the constant coefficient is taken as 0.
MIN_TERM_CONTRIBUTION = 0.0005
CLEAN_CONSTANT = 0.0005
# Fewer scales than this: no model (a term and a constant from 3 points leave one to
# validate each fit on; p and p log p differ by a few percent over a decade).
MIN_SCALES = 4
# A model of more terms must beat the best of fewer by this many SMAPE points (fewer terms
# preferred at equal error).
TERM_GAIN = 1.0
# Models within this of the best leave-one-out SMAPE (x best, or + points) count as the
# choice's uncertainty in every prediction's interval.
CHOICE_TOLERANCE = (1.5, 1.0)
CHOICE_MAX = 5
BOOTSTRAP = 400
CONFIDENCE = 0.95

WORDS = {
    Fraction(1, 4): "the fourth root of p",
    Fraction(1, 3): "the cube root of p",
    Fraction(1, 2): "the square root of p",
    Fraction(2, 3): "p^(2/3)",
    Fraction(1): "p",
    Fraction(2): "p squared",
    Fraction(3): "p cubed",
    Fraction(-1): "1/p",
    Fraction(-1, 2): "1/√p",
    Fraction(-2): "1/p²",
}


@dataclass(frozen=True, order=True)
class Term:
    """p^i * log2(p)^j."""

    i: Fraction
    j: int

    @classmethod
    def of(cls, block: tuple[int, int, int]) -> Term:
        return cls(Fraction(block[0], block[1]), block[2])

    def __call__(self, p) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = p ** float(self.i)
            if self.j:
                value = value * np.log2(p) ** self.j
        return value

    @property
    def logs(self) -> bool:
        return self.j != 0

    def symbol(self) -> str:
        power = "" if self.i == 0 else ("p" if self.i == 1 else f"p^({self.i})")
        log = "" if self.j == 0 else ("log2 p" if self.j == 1 else f"log2(p)^{self.j}")
        return " ".join(x for x in (power, log) if x) or "1"

    def words(self) -> str:
        power = "" if self.i == 0 else WORDS.get(self.i, f"p^({self.i})")
        log = {0: "", 1: "log p", 2: "log² p", -1: "1/log p", -2: "1/log² p"}.get(self.j, f"log^{self.j} p")
        if power and log:
            return f"{power} times {log}"
        return power or log or "a constant"

    def rises(self) -> bool:
        """Whether the term itself rises with p (p > 1)."""
        return self.i > 0 or (self.i == 0 and self.j > 0)

    def growth(self) -> float:
        """How fast it grows with p, to order terms (the exponent, logs as a small part of it)."""
        return float(self.i) + 0.01 * self.j


@dataclass
class Model:
    """c + sum a_k t_k(p), fitted on (p, y), with its errors."""

    terms: tuple[Term, ...]
    coefficients: np.ndarray  # c, a_1, ..., a_k
    smape_loo: float = math.nan  # leave-one-out SMAPE, % (how it was chosen)
    smape: float = math.nan  # in-sample SMAPE, %
    adj_r2: float = math.nan
    p: np.ndarray = field(default_factory=lambda: np.empty(0))
    y: np.ndarray = field(default_factory=lambda: np.empty(0))

    def __call__(self, p) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        out = np.full(p.shape, float(self.coefficients[0]))
        for a, term in zip(self.coefficients[1:], self.terms, strict=True):
            out = out + a * term(p)
        return out

    @property
    def lead(self) -> Term | None:
        """The term that grows fastest (None for a constant)."""
        return max(self.terms, key=Term.growth) if self.terms else None

    def symbols(self, digits: int = 4) -> str:
        text = f"{self.coefficients[0]:.{digits}g}"
        for a, term in zip(self.coefficients[1:], self.terms, strict=True):
            sign = "−" if a < 0 else "+"
            text += f" {sign} {abs(a):.{digits}g}·{term.symbol()}"
        return text

    def form(self) -> str:
        """The model's shape without its coefficients: 'c + a·p^(1/2)'."""
        return " + ".join(["c", *(f"a{k + 1}·{t.symbol()}" for k, t in enumerate(self.terms))])

    def words(self) -> str:
        if not self.terms:
            return "constant"
        return " plus ".join(
            ("grows" if (a > 0) == t.rises() else "falls") + f" with {t.words()}"
            for a, t in zip(self.coefficients[1:], self.terms, strict=True)
        )


@dataclass
class Fit:
    """The chosen model, the others within tolerance, and why there is none."""

    best: Model | None
    near: list[Model]  # the best first, then the others within CHOICE_TOLERANCE
    reason: str = ""
    candidates: int = 0


def smape(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Mean of 2|f − y|/(|f| + |y|), in % (Extra-P's; 0 where both are 0)."""
    actual, predicted = np.asarray(actual, float), np.asarray(predicted, float)
    total = np.abs(actual) + np.abs(predicted)
    ok = total != 0
    if not ok.any():
        return 0.0
    return float(np.mean(2 * np.abs(predicted[ok] - actual[ok]) / total[ok]) * 100)


def too_few(scales: int) -> str:
    return f"{scales} scale{'s' if scales != 1 else ''}: too few to tell p from p log p (a model needs {MIN_SCALES})"


def candidate_terms(p: np.ndarray, negative: bool) -> list[Term]:
    """The building blocks that can describe these scales (Extra-P drops every log term where
    a scale is below 1, or at or below 1 with negative exponents: log2 1 = 0)."""
    blocks = [*BLOCKS, *((*NEGATIVE_BLOCKS, *NEGATIVE_POWERS) if negative else ())]
    terms = [Term.of(b) for b in blocks]
    if (p < 1).any() or (negative and (p <= 1).any()):
        terms = [t for t in terms if not t.logs]
    return terms


def least_squares(terms: Sequence[Term], p: np.ndarray, y: np.ndarray) -> np.ndarray:
    design = np.column_stack([np.ones_like(p), *(t(p) for t in terms)])
    coefficients, *_ = np.linalg.lstsq(design, y, rcond=None)
    return coefficients


def clean_constant(coefficients: np.ndarray, y: np.ndarray) -> np.ndarray:
    low = float(np.min(y))
    tiny = abs(coefficients[0] - low) < CLEAN_CONSTANT if low == 0 else abs(coefficients[0] / low) < CLEAN_CONSTANT
    if tiny:
        coefficients = coefficients.copy()
        coefficients[0] = 0.0
    return coefficients


def loo_smape(terms: Sequence[Term], p: np.ndarray, y: np.ndarray) -> float:
    errors = []
    for k in range(len(p)):
        keep = np.arange(len(p)) != k
        coefficients = clean_constant(least_squares(terms, p[keep], y[keep]), y[keep])
        predicted = Model(tuple(terms), coefficients)(p[k : k + 1])[0]
        errors.append(smape(y[k : k + 1], np.array([predicted])))
    return float(np.mean(errors))


def adjusted_r2(model: Model, p: np.ndarray, y: np.ndarray) -> float:
    rss = float(np.sum((model(p) - y) ** 2))
    tss = float(np.sum((y - y.mean()) ** 2))
    dof = len(p) - len(model.terms) - 1
    if tss == 0 or dof <= 0:
        return math.nan
    return 1 - (rss / tss) * (len(p) - 1) / dof


def hypothesis(terms: Sequence[Term], p: np.ndarray, y: np.ndarray) -> Model | None:
    """One hypothesis fitted on all scales with its errors; None where it is not finite or a
    term contributes less than MIN_TERM_CONTRIBUTION of every value (Extra-P's rule)."""
    coefficients = least_squares(terms, p, y)
    if not np.isfinite(coefficients).all():
        return None
    model = Model(tuple(terms), coefficients, p=p, y=y)
    with np.errstate(divide="ignore", invalid="ignore"):
        for a, term in zip(coefficients[1:], terms, strict=True):
            share = np.abs(a * term(p) / y)
            if a == 0 or not np.nanmax(share) >= MIN_TERM_CONTRIBUTION:
                return None
    model.smape_loo = loo_smape(terms, p, y)
    model.smape = smape(y, model(p))
    model.adj_r2 = adjusted_r2(model, p, y)
    return model if math.isfinite(model.smape_loo) else None


def fit(p: Sequence[float], y: Sequence[float], terms: int = 1, negative: bool | None = None) -> Fit:
    """The PMNF model of y(p) (one value per scale: the mean of its repeats), chosen by
    leave-one-out SMAPE. `negative`: allow Extra-P's negative exponents (default: where y
    falls from the smallest to the largest scale). Cached: the report, its plot and the
    scaling table ask for the same curve's model several times."""
    key = tuple(float(v) for v in p), tuple(float(v) for v in y)
    return cached_fit(*key, terms, negative)


@functools.lru_cache(maxsize=4096)
def cached_fit(p: tuple, y: tuple, terms: int, negative: bool | None) -> Fit:
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(p) & np.isfinite(y) & (p > 0)
    p, y = p[keep], y[keep]
    order = np.argsort(p)
    p, y = p[order], y[order]
    scales = len(np.unique(p))
    if scales < MIN_SCALES:
        return Fit(None, [], too_few(scales))
    if negative is None:
        negative = bool(y[-1] < y[0])
    constant = Model((), np.array([y.mean()]), p=p, y=y)
    constant.smape = constant.smape_loo = smape(y, constant(p))
    constant.adj_r2 = 0.0
    if constant.smape == 0:
        return Fit(constant, [constant], candidates=1)
    blocks = candidate_terms(p, negative)
    models = [constant]
    best_of_size: list[Model] = [constant]
    for size in range(1, terms + 1):
        if size + 1 >= scales:  # a fit must leave a point out and still be determined
            break
        sized = []
        for chosen in itertools.combinations(blocks, size):
            if size > 1 and len({t.i for t in chosen}) < size:
                continue  # two terms of one power differ only in their log: not separable from few scales
            model = hypothesis(chosen, p, y)
            if model is not None:
                sized.append(model)
        if not sized:
            break
        top = min(sized, key=lambda m: m.smape_loo)
        models += sized
        best_of_size.append(top)
    best = best_of_size[0]
    for model in best_of_size[1:]:
        margin = 0.0 if len(best.terms) == 0 else TERM_GAIN
        if model.smape_loo < best.smape_loo - margin:
            best = model
    near = [best] + sorted(
        (m for m in models if m is not best and within_tolerance(m, best) and len(m.terms) <= len(best.terms)),
        key=lambda m: m.smape_loo,
    )[: CHOICE_MAX - 1]
    return Fit(best, near, candidates=len(models))


def within_tolerance(model: Model, best: Model) -> bool:
    factor, points = CHOICE_TOLERANCE
    return model.smape_loo <= max(best.smape_loo * factor, best.smape_loo + points)


def draws(found: Fit, at: Sequence[float], standard_error: Sequence[float] | None = None, seed: int = 0) -> np.ndarray:
    """Bootstrap predictions at `at` (rows: draws; columns: scales), BOOTSTRAP per model
    within tolerance: each model refitted on its fit plus its residuals times a standard normal
    (a wild bootstrap, scaled by sqrt(n/(n − k − 1)) for the fitted coefficients), each
    residual at least the repeats' standard error of that scale's mean where known."""
    at = np.asarray(at, dtype=float)
    rng = np.random.default_rng(seed)
    out = []
    for model in found.near:
        p, y = model.p, model.y
        fitted = model(p)
        free = max(len(p) - len(model.terms) - 1, 1)
        residual = np.abs(y - fitted) * math.sqrt(len(p) / free)
        if standard_error is not None:
            se = np.asarray(standard_error, dtype=float)
            residual = np.fmax(residual, np.nan_to_num(se, nan=0.0))
        noise = rng.standard_normal((BOOTSTRAP, len(p)))
        samples = fitted + noise * residual  # BOOTSTRAP x n
        # Least squares is linear in y: every resample's coefficients at once.
        design = np.column_stack([np.ones_like(p), *(t(p) for t in model.terms)])
        coefficients = np.linalg.pinv(design) @ samples.T  # (k + 1) x BOOTSTRAP
        target = np.column_stack([np.ones_like(at), *(t(at) for t in model.terms)])
        out.append((target @ coefficients).T)
    return np.concatenate(out) if out else np.empty((0, len(at)))


@dataclass
class Prediction:
    at: np.ndarray
    value: np.ndarray  # the best model's
    low: np.ndarray
    high: np.ndarray


def predict(found: Fit, at: Sequence[float], standard_error: Sequence[float] | None = None) -> Prediction:
    """The best model at `at`, with the CONFIDENCE interval of the bootstrap draws over the
    models within tolerance (`draws`)."""
    at = np.asarray(at, dtype=float)
    if found.best is None:
        nothing = np.full(at.shape, np.nan)
        return Prediction(at, nothing, nothing, nothing)
    sample = draws(found, at, standard_error)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(sample, [tail, 100 - tail], axis=0)
    value = found.best(at)
    return Prediction(at, value, np.fmin(low, value), np.fmax(high, value))
