"""What a judge says: an estimate with its interval, the settings of the inference, and the typed judgements.

:class:`Interval` is an estimate with its interval, the confidence and method that made it and, where
known, its standard error; NaN bounds mean "no interval" (one seed), an infinite bound an open end.
Every "[95 % CI]" a report prints comes from :meth:`Interval.label`, every z from :meth:`Interval.z`.
Over seeds: :func:`t_interval` (Student's t); between two groups of runs :func:`difference_interval`:
paired by seed where the two groups have the same seeds (the runs share their initialisation and
data order), else Welch's (:func:`welch_interval`); a share of blocks :func:`share_interval`.
:class:`Inference` carries a report's confidence, multiplicity method and bootstrap resamples from
a study's ``[study]`` table or ``verify --trained``'s flags to every interval and test.

Both judges return typed records: :class:`Judgement` (``verify --trained``, and a study's level per
cell) and :class:`TrendJudgement` (a study's trend along an axis); their words are the enums of
:mod:`theory.verdicts`.

>>> Interval(1.25, 0.5, 2.0, 0.95).format(), Interval(0.02).format(".3f")
('1.25 [0.5, 2]', '0.020')
>>> Interval(1.5, 0.0, math.inf, 0.95).format(".2f")
'1.50 [0.00, inf]'
>>> t = t_interval([1.0, 2.0, 3.0])
>>> t.format(".4f"), t.label, round(t.z(target=0.0), 6)
('2.0000 [-0.4841, 4.4841]', '95 % t over seeds', 3.464102)
>>> round(t_interval([1.0, 2.0, 3.0], confidence=0.9).z(), 6)  # the same standard error at any level
3.464102
>>> difference = difference_interval({0: 1.0, 1: 1.2, 2: 1.1}, {0: 0.0, 1: 0.1, 2: 0.2})
>>> difference.estimate.format(".3f"), difference.n, difference.estimate.method
('1.000 [0.752, 1.248]', 3, 'paired by seed')
>>> p = [0.01, 0.04, 0.03]
>>> Inference().adjust(p).round(3).tolist(), Inference(multiplicity="holm").adjust(p).round(3).tolist()
([0.03, 0.12, 0.09], [0.03, 0.06, 0.06])
>>> Inference(bootstrap=50)
Traceback (most recent call last):
...
theory.constraints.ConstraintError: bootstrap=50 is not allowed: an integer >= 100
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import integrate, optimize, stats

from simulate.claims.definitions import Claim, Reference
from simulate.engine import CONFIDENCE
from theory.constraints import Choice, Integer, Real, check_fields
from theory.verdicts import BlindTest, GrowthClass, RateLine, Size, Stability, Verdict

__all__ = ["POWER", "Interval", "NO_INTERVAL", "Difference", "t_interval", "welch_interval", "difference_interval",
           "share_interval", "level_label", "normal_quantile", "detectable_slope", "unless_unresolvable",
           "claimed_sign_verdict", "size_verdict", "describe_size", "stability_verdict", "describe_stability",
           "MULTIPLICITY_METHODS", "INFERENCE_FIELDS", "Inference", "Judgement", "TrendDesign",
           "TrendJudgement", "BlindTestJudgement", "blind_test_verdict"]


POWER = 0.8  # the power at which the smallest detectable effect is stated


def level_label(confidence: float) -> str:
    """``95 %``: a confidence level as every report prints it.

    >>> level_label(0.9), level_label(1 - 0.05 / 18)
    ('90 %', '99.7 %')
    """
    return f"{round(100 * confidence, 1):g} %"


def normal_quantile(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.959964 at 0.95)."""
    return float(stats.norm.ppf(0.5 + confidence / 2))


@dataclass(frozen=True)
class Interval:
    """An estimate, its interval at ``confidence`` made by ``method``, and its standard error ``se`` where the
    method has one (module docstring)."""

    estimate: float
    low: float = math.nan
    high: float = math.nan
    confidence: float = math.nan  # required wherever there are bounds (no default level: the study's is passed)
    method: str = ""
    se: float = math.nan
    dof: float = math.nan  # the degrees of freedom of its t (NaN: not a t interval)

    def __post_init__(self) -> None:
        if self.bounded and not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence={self.confidence!r} is not allowed for an interval with bounds: a level "
                             "in (0, 1), the report's (an interval carries the confidence it was made at)")

    @property
    def bounded(self) -> bool:
        """Whether both bounds are known (an open end, +-inf, is known)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def label(self) -> str:
        """``95 % t over seeds``: the level and the method, as every report prints them."""
        return level_label(self.confidence) + (f" {self.method}" if self.method else "")

    def format(self, spec: str = ".3g") -> str:
        """``estimate [low, high]``; the estimate alone without bounds; '' without an estimate."""
        if math.isnan(self.estimate):
            return ""
        if not self.bounded:
            return f"{self.estimate:{spec}}"
        return f"{self.estimate:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def at(self, confidence: float, method: str | None = None) -> "Interval":
        """The same t interval at another ``confidence`` (from its ``se`` and ``dof``; itself without them).

        >>> Interval(1.0, 0.0, 2.0, 0.95, "t", 0.5, 4.0).at(0.9).format(".4f")
        '1.0000 [-0.0659, 2.0659]'
        """
        if not (math.isfinite(self.se) and math.isfinite(self.dof)) or confidence == self.confidence:
            return self
        return Interval.from_t(self.estimate, self.se, self.dof, confidence, self.method if method is None else method)

    @staticmethod
    def from_t(estimate: float, se: float, dof: float, confidence: float, method: str = "") -> "Interval":
        """``estimate`` with its Student's t interval of standard error ``se`` on ``dof`` degrees of freedom."""
        half = _t_quantile(dof, confidence) * se
        return Interval(estimate, estimate - half, estimate + half, confidence, method, se, dof)

    def signed_verdict(self, sign: int) -> Verdict:
        """``holds`` when the interval lies on the claimed side of 0 (``sign`` +1 or -1), ``violated`` when it
        lies on the other side, ``inconclusive`` when it contains 0 or has no bounds."""
        if not self.bounded:
            return Verdict.INCONCLUSIVE
        if (sign > 0 and self.low > 0) or (sign < 0 and self.high < 0):
            return Verdict.HOLDS
        if (sign > 0 and self.high < 0) or (sign < 0 and self.low > 0):
            return Verdict.VIOLATED
        return Verdict.INCONCLUSIVE

    def z(self, target: float = 0.0) -> float:
        """The estimate's distance from ``target`` in standard errors: its own ``se``, else the half-width read
        as a normal interval at its own confidence (NaN without bounds)."""
        se = self.se
        if not math.isfinite(se):
            if not (self.bounded and math.isfinite(self.high - self.low)) or self.high == self.low:
                return math.nan
            se = (self.high - self.low) / (2 * normal_quantile(self.confidence))
        return float((self.estimate - target) / se) if se > 0 else math.nan


NO_INTERVAL = Interval(math.nan)


def _t_quantile(dof: float, confidence: float) -> float:
    return float(stats.t.ppf(0.5 + confidence / 2, dof))


def t_interval(values, confidence: float = CONFIDENCE) -> Interval:
    """The mean of the finite ``values`` and its t interval (no bounds for one value, NaN for none)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]  # (n,)
    if values.size == 0:
        return NO_INTERVAL
    mean = float(values.mean())
    if values.size == 1:
        return Interval(mean, confidence=confidence, method="one model")
    se = float(values.std(ddof=1)) / math.sqrt(values.size)
    half = _t_quantile(values.size - 1, confidence) * se
    return Interval(mean, mean - half, mean + half, confidence, "t over seeds", se, values.size - 1)


def share_interval(shares, totals, confidence: float = CONFIDENCE) -> Interval:
    """The mean share of blocks over models, with the wider of two intervals: Student's t over the models'
    shares (the seed-to-seed spread, the design's error) and Wilson's score interval of the blocks pooled over
    the models (each block one trial; Wilson 1927). Never of zero width: seeds that all count 10 of 16 blocks
    still leave the binomial uncertainty of 48 blocks. ``totals``: each model's number of blocks.

    >>> share_interval([0.625, 0.625, 0.625], [16, 16, 16]).format(".3f")
    '0.625 [0.484, 0.748]'
    """
    shares, totals = np.asarray(shares, dtype=float), np.asarray(totals, dtype=float)
    keep = np.isfinite(shares) & np.isfinite(totals) & (totals > 0)
    shares, totals = shares[keep], totals[keep]  # (m,) each
    if shares.size == 0:
        return NO_INTERVAL
    over_seeds = t_interval(shares, confidence)
    trials = float(totals.sum())
    share = float((shares * totals).sum()) / trials
    z = normal_quantile(confidence)
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    low, high = centre - half, centre + half
    if over_seeds.bounded:
        low, high = min(low, over_seeds.low), max(high, over_seeds.high)
    return Interval(over_seeds.estimate, max(low, 0.0), min(high, 1.0), confidence,
                    "wider of t over seeds and Wilson over blocks")


def welch_interval(a, b, confidence: float = CONFIDENCE) -> Interval:
    """``mean(a) - mean(b)`` with Welch's t interval (no bounds when a side has fewer than 2 finite values).

    >>> round(welch_interval([1.0, 1.2, 1.1], [0.0, 0.1, -0.1]).estimate, 12)
    1.1
    """
    a, b = (np.asarray(v, dtype=float) for v in (a, b))
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]  # (n_a,), (n_b,)
    if a.size == 0 or b.size == 0:
        return NO_INTERVAL
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Interval(diff, confidence=confidence, method="Welch")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(diff, diff, diff, confidence, "Welch", 0.0)
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = _t_quantile(dof, confidence) * se
    return Interval(diff, diff - half, diff + half, confidence, "Welch", se, float(dof))


class Difference(NamedTuple):
    """A difference between two groups: its interval (whose method says paired by seed or Welch) and how many
    seeds (pairs, or both groups' seeds)."""

    estimate: Interval
    n: int


def difference_interval(first: dict, second: dict, confidence: float = CONFIDENCE) -> Difference:
    """``first - second`` of two groups' values by seed (``{seed: value}``): paired by seed when both groups
    have the same seeds (the runs share their initialisation and data order), Welch's interval otherwise.
    Both judges of the claims compare two groups through this function, so one comparison has one interval."""
    if set(first) == set(second):
        values = [first[seed] - second[seed] for seed in sorted(first)]
        paired = t_interval(values, confidence)
        method = "paired by seed" if paired.bounded else paired.method
        return Difference(replace(paired, method=method), int(np.isfinite(values).sum()))
    return Difference(welch_interval(list(first.values()), list(second.values()), confidence),
                      int(np.isfinite(list(first.values())).sum() + np.isfinite(list(second.values())).sum()))


def detectable_slope(se: float, dof: float, alpha: float, power: float = POWER) -> float:
    """The smallest true slope a two-sided t test of level ``alpha`` on ``dof`` degrees of freedom detects with
    probability ``power``, for a slope of standard error ``se``: ``se`` times :func:`_detectable_multiple` (NaN
    without a test).

    >>> round(detectable_slope(1.0, 2, 0.05), 3)  # two residual degrees of freedom: 5.7 standard errors
    5.653
    """
    if not (math.isfinite(se) and se > 0 and dof >= 1):
        return math.nan
    return se * _detectable_multiple(int(dof), float(alpha), float(power))  # Welch's dof rounded down


@lru_cache(maxsize=256)
def _detectable_multiple(dof: int, alpha: float, power: float) -> float:
    """The noncentrality at which ``P(|T| > t_(1 - alpha/2))`` reaches ``power``, ``T`` noncentral t on ``dof``:
    scipy's ``nct``, or where it returns NaN (large noncentralities at one or two degrees of freedom) the power
    integrated over the chi-square of the standard error."""
    critical = float(stats.t.ppf(1 - alpha / 2, dof))
    chi2 = stats.chi2(dof)

    def integrated(effect: float) -> float:
        def rejected(v: float) -> float:
            scale = critical * math.sqrt(v / dof)
            return float(stats.norm.cdf(effect - scale) + stats.norm.cdf(-effect - scale)) * float(chi2.pdf(v))

        return float(integrate.quad(rejected, 0.0, math.inf)[0])

    def shortfall(effect: float) -> float:
        law = stats.nct(dof, effect)
        rejected = float(law.sf(critical) + law.cdf(-critical))
        return (rejected if math.isfinite(rejected) else integrated(effect)) - power

    high = critical + 1.0
    for _ in range(60):  # widen the bracket until the power is reached (it is, well before 2^60)
        if shortfall(high) >= 0:
            break
        high *= 2
    return float(optimize.brentq(shortfall, 0.0, high))


def unless_unresolvable(verdict: Verdict, detectable: float, reference: float | None) -> Verdict:
    """``verdict``, or ``design cannot resolve`` where it is ``inconclusive`` and the smallest effect the design
    detects (``detectable``; NaN: none) exceeds the papers' ``reference`` effect (None: no reference). The one
    rule of both judges, for a level and for a trend (docs/studies.md#what-the-design-can-resolve)."""
    if verdict is Verdict.INCONCLUSIVE and reference is not None and not detectable <= abs(reference):
        return Verdict.UNRESOLVABLE
    return verdict


def claimed_sign_verdict(claim: Claim, estimate: Interval, alpha: float) -> tuple[Verdict, float]:
    """The verdict on a claimed sign (``holds``, ``violated``, ``inconclusive``; ``design cannot resolve`` where
    the smallest effect the interval's t test detects at 80 % power, on the interval's own degrees of freedom,
    exceeds the papers' effect at one cell and the interval cannot tell the papers' size either; ``not measured``
    without an estimate) and that detectable effect.
    Both judges use it: one comparison, one verdict."""
    detectable = detectable_slope(estimate.se, estimate.dof, alpha)
    if math.isnan(estimate.estimate):
        return Verdict.NOT_MEASURED, detectable
    reference = claim.reference.level if claim.reference else None
    if reference is not None and size_verdict(estimate, reference, claim.reference.at_least) is not Size.CANNOT_TELL:
        reference = None  # the papers' size is answered (smaller, larger...): the design resolved that much
    return unless_unresolvable(estimate.signed_verdict(claim.sign), detectable, reference), detectable


def size_verdict(estimate: Interval, reference: float | None, at_least: bool = False) -> Size:
    """The second question of a claim with a size: is the effect compatible with the papers' ``reference`` (same
    units as ``estimate``; its sign is the papers' direction)? Read from the interval the direction verdict reads,
    so the two answers never disagree (docs/studies.md#against-the-papers-size):

    ``opposite to the papers``: the interval lies on the other side of 0; ``as large as the papers say``: it holds
    the papers' value and excludes 0 (for a bound, ``at_least``: it lies wholly at or beyond the bound); ``larger``
    / ``in the papers' direction, smaller than they say``: it excludes the papers' value on that side (smaller and
    not excluding 0: ``smaller than the papers say, direction not resolved``); ``cannot tell`` otherwise.

    >>> [str(size_verdict(Interval(e, lo, hi, 0.95), -0.031)) for e, lo, hi in
    ...  ((0.005, -0.007, 0.017), (-0.01, -0.02, -0.001), (-0.03, -0.05, -0.01), (0.01, 0.002, 0.02))]
    ['smaller than the papers say, direction not resolved', "in the papers' direction, smaller than they say", \
'as large as the papers say', 'opposite to the papers']
    """
    if reference is None or reference == 0:
        return Size.NO_SIZE
    if math.isnan(estimate.estimate):
        return Size.NOT_MEASURED
    if not estimate.bounded:
        return Size.CANNOT_TELL
    sign = 1.0 if reference > 0 else -1.0
    low, high = sorted((sign * estimate.low, sign * estimate.high))  # in the papers' direction
    size = abs(reference)
    if high < 0:
        return Size.OPPOSITE
    if low > size or (at_least and low >= size):
        return Size.LARGER if not at_least else Size.AS_LARGE
    if high < size:
        return Size.SMALLER if low > 0 else Size.SMALLER_UNSIGNED
    return Size.AS_LARGE if low > 0 and not at_least else Size.CANNOT_TELL


def describe_size(size: Size, estimate: Interval, reference: Reference, reference_value: float, unit: str = "",
                  trend: bool = False) -> str:
    """The size answer in words: the verdict, how far the data reach in the papers' direction, and the papers'
    value (for a ``trend``, with the axes that moved together in their comparison); '' for a claim without a size.

    >>> from simulate.claims.definitions import CLAIMS
    >>> claim = CLAIMS["p1-lns-loss"]
    >>> describe_size(Size.SMALLER_UNSIGNED, Interval(0.005, -0.007, 0.017, 0.95), claim.reference,
    ...               claim.reference_trend("depth"), " per e-fold of depth", trend=True)
    'smaller than the papers say, direction not resolved: at most 0.007 per e-fold of depth in their direction, \
against their -0.0312 (depth and width moved together)'
    """
    if size in (Size.NO_SIZE, Size.NOT_MEASURED) or not estimate.bounded:
        return str(size) if size is not Size.NO_SIZE else ""
    sign = 1.0 if reference_value > 0 else -1.0
    low, high = sorted((sign * estimate.low, sign * estimate.high))  # in the papers' direction
    theirs = f"their {'bound ' if reference.at_least else ''}{reference_value:.3g}" + (
        f" ({reference.confounded})" if trend and reference.confounded else "")
    return {Size.SMALLER: f"{size}: at most {high:.3g}{unit}, against {theirs}",
            Size.SMALLER_UNSIGNED: f"{size}: at most {high:.3g}{unit} in their direction, against {theirs}",
            Size.LARGER: f"{size}: at least {low:.3g}{unit}, against {theirs}",
            Size.AS_LARGE: f"{size} ({theirs} inside the interval)" if not reference.at_least
            else f"{size}: at least {low:.3g}{unit}, reaching {theirs}",
            Size.CANNOT_TELL: f"{size}: the interval holds 0 and {theirs}",
            Size.OPPOSITE: f"{size} ({theirs})"}[size]


def stability_verdict(change: Interval, margin: float) -> Stability | None:
    """Two one-sided tests of a change between two training lengths against a ``margin`` declared before the data
    (Schuirmann 1987): ``stable`` where the change's interval (at ``1 - 2 alpha``: both one-sided tests at ``alpha``)
    lies inside ``(-margin, margin)``, ``moves`` where it lies wholly beyond the margin, ``cannot tell`` otherwise;
    None without a change to judge.

    >>> [str(stability_verdict(Interval(c, lo, hi, 0.9), 0.25)) for c, lo, hi in ((0.0, 0.0, 0.0), (-0.11, -0.22, 0.0),
    ...                                                                    (-0.37, -0.63, -0.11), (0.5, 0.3, 0.7))]
    ['stable', 'stable', 'cannot tell', 'moves']
    """
    if not change.bounded or math.isnan(change.estimate):
        return None
    if -margin < change.low and change.high < margin:
        return Stability.STABLE
    if change.low > margin or change.high < -margin:
        return Stability.MOVES
    return Stability.CANNOT_TELL


def describe_stability(stability: Stability | None, change: Interval, margin: float) -> str:
    """``stable (change -0.11 [90 % -0.22, 0.00], margin ±0.25)``, with ``on 1 degree of freedom`` where the
    change's interval rests on one; '' without a change."""
    if stability is None:
        return ""
    dof = " on 1 degree of freedom" if change.dof == 1 else ""
    return (f"{stability} (change {change.estimate:.3g} [{level_label(change.confidence)} {change.low:.3g}, "
            f"{change.high:.3g}]{dof}, margin ±{margin:.3g})")


MULTIPLICITY_METHODS = ("bonferroni", "holm", "bh")
INFERENCE_FIELDS = {"confidence": Real(0.0, 1.0, low_open=True, high_open=True),
                    "multiplicity": Choice(*MULTIPLICITY_METHODS), "bootstrap": Integer(100)}


@dataclass(frozen=True)
class Inference:
    """The inference settings of a report: the confidence of every interval and test, the multiplicity method
    of its family of direction verdicts and the resamples of a bootstrap, declared once (:data:`INFERENCE_FIELDS`).

    ``bonferroni`` (the default): each of the family's ``m`` verdicts reads its interval at ``1 - alpha / m``, so the
    intervals are simultaneous (all of them hold their true values with probability at least ``1 - alpha``, under any
    dependence between the verdicts, which share models): the direction and the size verdict read the one interval
    printed beside them (docs/studies.md#verdicts). ``holm``, Holm's step-down method, controls the same family-wise
    error with more power but has no simultaneous intervals: each verdict then prints its interval at the level
    Holm tested it at (:meth:`family_level`); ``bh``, Benjamini-Hochberg, controls the false discovery rate, assuming
    independent or positively dependent tests (Bonferroni 1936; Holm 1979; Benjamini and Hochberg 1995).

    >>> Inference().adjust([0.01, 0.02, float("nan")]).tolist()
    [0.02, 0.04, nan]
    >>> round(Inference().family_level(0.01, 0.02, 2), 6)  # the interval at 1 - 0.05 / 2
    0.975
    """

    confidence: float = CONFIDENCE
    multiplicity: str = "bonferroni"
    bootstrap: int = 200

    def __post_init__(self) -> None:
        check_fields({f.name: getattr(self, f.name) for f in fields(self)}, INFERENCE_FIELDS)

    @property
    def z(self) -> float:
        """The two-sided normal quantile of :attr:`confidence`."""
        return normal_quantile(self.confidence)

    @property
    def alpha(self) -> float:
        """The two-sided error rate of one test, ``1 - confidence``."""
        return 1.0 - self.confidence

    @property
    def method_name(self) -> str:
        """The adjustment in words: ``Bonferroni``, ``Holm`` or ``Benjamini-Hochberg``."""
        return {"bonferroni": "Bonferroni", "holm": "Holm", "bh": "Benjamini-Hochberg"}[self.multiplicity]

    def family_level(self, p_value: float, p_adjusted: float, members: int) -> float:
        """The confidence of the interval a verdict of a family of ``members`` reads, so that it excludes 0 exactly
        where the adjusted p is below ``alpha``: ``1 - alpha / members`` for Bonferroni (simultaneous), else
        ``1 - alpha p / p_adjusted``, the level the adjustment tested it at (the plain confidence without a test)."""
        if self.multiplicity == "bonferroni":
            return 1.0 - self.alpha / max(members, 1)
        if not (math.isfinite(p_value) and math.isfinite(p_adjusted)) or p_value <= 0 or p_adjusted <= 0:
            return self.confidence
        return 1.0 - self.alpha * p_value / p_adjusted

    def family_interval(self, slope: Interval, p_value: float, p_adjusted: float, members: int) -> Interval:
        """The interval a family member's verdict reads: ``slope`` at :meth:`family_level`, named."""
        level = self.family_level(p_value, p_adjusted, members)
        method = (f"simultaneous over {members} (Bonferroni)" if self.multiplicity == "bonferroni"
                  else f"at the level {self.method_name} tested it at")
        return slope.at(level, method)

    def adjust(self, p_values) -> np.ndarray:
        """The family's adjusted p-values (NaN entries stay NaN and are not counted); equal to statsmodels'
        ``multipletests`` (tests/simulate/test_inference_reference.py), which is too slow for the calibration's
        loop (it collects garbage on every call)."""
        p = np.asarray(p_values, dtype=float)
        out = np.full(p.shape, math.nan)
        finite = np.flatnonzero(np.isfinite(p))
        if finite.size == 0:
            return out
        if self.multiplicity == "bh":
            out[finite] = stats.false_discovery_control(p[finite], method="bh")
            return out
        if self.multiplicity == "bonferroni":
            out[finite] = np.minimum(finite.size * p[finite], 1.0)
            return out
        order = finite[np.argsort(p[finite], kind="stable")]  # (m,) Holm's step-down
        m = order.size
        out[order] = np.minimum(np.maximum.accumulate((m - np.arange(m)) * p[order]), 1.0)
        return out


@dataclass(frozen=True)
class Judgement:
    """What a judge says about one claim on one set of models: the statistic with its interval, the verdict,
    the value the verdict compares with (``target``), a sentence (``comment``), how many models (``n``), the
    growth class of a growth claim, and, in a study, the cell (``{field: value}``), the smallest effect its test
    detects at 80 % power (``detectable``), the change from the shorter training (``stability``, ``change``)
    and what its models rest on (``rests_on``: their distinct versions; more than one is a mixed verdict).

    >>> from simulate.claims.definitions import CLAIMS
    >>> j = Judgement(CLAIMS["p1-lns-loss"], "val_loss", Interval(-0.02, -0.03, -0.01, 0.95), Verdict.HOLDS, n=3)
    >>> j.claim.id, j.estimate.format(), str(j.verdict)
    ('p1-lns-loss', '-0.02 [-0.03, -0.01]', 'holds')
    """

    claim: Claim
    statistic: str
    estimate: Interval
    verdict: Verdict
    n: int
    target: float = 0.0
    comment: str = ""
    growth_class: GrowthClass | None = None
    cell: dict = field(default_factory=dict)
    detectable: float = math.nan
    stability: Stability | None = None
    change: Interval = NO_INTERVAL
    rests_on: frozenset = frozenset()  # the distinct versions (code, corpus, Python, torch) of its models
    size: Size = Size.NO_SIZE  # the effect against the papers' size at one cell (:func:`size_verdict`)
    margin: float = math.nan  # the stability margin the change was judged against (claim.margin.level)


class TrendDesign(NamedTuple):
    """What a trend's cells were: axis values ``x``, models per cell ``counts``, the pooled within-cell variance
    (the seeds' noise), the cell means' residual variance about the line, each cell mean's least variance (a
    share's binomial floor; empty for none) and each cell's rate label (empty where the line has one rate)
    (``simulate.claims.calibration`` simulates studies of this design)."""

    x: tuple
    counts: tuple
    within_var: float
    residual_var: float
    floor: tuple = ()
    rates: tuple = ()


@dataclass(frozen=True)
class TrendJudgement:
    """A claim judged along one axis of a study (:mod:`simulate.claims.trends`): the group of fixed fields, the
    rate line (:class:`~theory.verdicts.RateLine`), the models, the cell-means slope per e-fold with its raw
    and adjusted p, the interval the verdicts read (``family``: at the family's level for a member of the family,
    else the slope's own), the claimed direction, the verdict, the size verdict against the papers' slope, the
    number of rates along the cells (more than one: the slope is fitted within runs of one rate), the cells' shape
    and crossing, what the design can detect, and the stability between the two lengths against its margin."""

    claim: Claim
    statistic: str
    axis: str
    group: dict
    line: RateLine
    n: int
    failed: int
    pending: int
    cells: int
    slope: Interval
    lack_of_fit: float
    p_value: float
    p_adjusted: float
    direction: int | None
    verdict: Verdict
    shape: tuple | None = None  # a simulate.claims.trends.CellShape: the cell means' steps along the axis
    crossing: tuple | None = None  # a simulate.claims.trends.Crossing: where a signed claim's cell means change sign
    detectable: float = math.nan
    needs: tuple | None = None  # a simulate.claims.along_axes.DesignNeeds where the design cannot resolve the claim
    growth_laws: tuple = ()  # a growth trend's power and exponential DepthLaw fits (simulate.claims.along_axes)
    stability: Stability | None = None
    change: Interval = NO_INTERVAL
    design: TrendDesign | None = None
    in_family: bool = False
    rests_on: frozenset = frozenset()  # the distinct versions (code, corpus, Python, torch) of its models
    family: Interval = NO_INTERVAL
    size: Size = Size.NO_SIZE
    rates: int = 1
    margin: float = math.nan


@dataclass(frozen=True)
class BlindTestJudgement:
    """A law's prediction of models it was not fitted on: which law (``law``), where (``where``: the held-out
    slice, one training length), on how many models, the error (``error.estimate``: predicted minus measured,
    mean over the held-out models; ``low``, ``high``: the law's prediction interval about it), the verdict
    (:func:`blind_test_verdict`; None where untested) and why it is untested."""

    law: str
    where: str
    models: int
    error: Interval
    verdict: BlindTest | None
    reason: str = ""
    resamples: int = 0  # the refits of the law its interval rests on (a bootstrap's), 0 for none

    @property
    def half_width(self) -> float:
        """The half-width of the law's prediction interval about the error."""
        return self.error.high - self.error.estimate

    @property
    def passed(self) -> bool:
        """Whether the measured value lies in the law's prediction interval (informative or not)."""
        return self.verdict is BlindTest.PASSES or self.verdict is BlindTest.PASSES_UNINFORMATIVE


def blind_test_verdict(error: float, half_width: float, informative: bool) -> BlindTest:
    """The one rule of every blind test (a law's extrapolation test, a pre-registered row): ``passes`` when the
    measured value lies in the law's prediction interval (``|error| <= half_width``, ``error`` predicted minus
    measured) and the test was ``informative`` (the caller's reason: an interval narrow enough to say something, or
    one that excludes the alternatives it must be told from); ``passes, uninformative`` when it lies in an interval
    that could not have failed; ``fails`` otherwise.

    >>> [str(blind_test_verdict(e, h, h <= 2.3)) for e, h in ((0.5, 1.0), (0.5, 3.0), (1.5, 1.0))]
    ['passes', 'passes, uninformative', 'fails']
    """
    if not abs(error) <= half_width:
        return BlindTest.FAILS
    return BlindTest.PASSES if informative else BlindTest.PASSES_UNINFORMATIVE
