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

>>> Interval(1.25, 0.5, 2.0).format(), Interval(0.02).format(".3f"), Interval(1.5, 0.0, math.inf).format(".2f")
('1.25 [0.5, 2]', '0.020', '1.50 [0.00, inf]')
>>> t = t_interval([1.0, 2.0, 3.0])
>>> t.format(".4f"), t.label, round(t.z(target=0.0), 6)
('2.0000 [-0.4841, 4.4841]', '95 % t over seeds', 3.464102)
>>> round(t_interval([1.0, 2.0, 3.0], confidence=0.9).z(), 6)  # the same standard error at any level
3.464102
>>> difference = difference_interval({0: 1.0, 1: 1.2, 2: 1.1}, {0: 0.0, 1: 0.1, 2: 0.2})
>>> difference.estimate.format(".3f"), difference.n, difference.estimate.method
('1.000 [0.752, 1.248]', 3, 'paired by seed')
>>> Inference().adjust([0.01, 0.04, 0.03]).round(3).tolist()
[0.03, 0.06, 0.06]
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

from simulate.claims.definitions import Claim
from simulate.engine import CONFIDENCE
from theory.constraints import Choice, Integer, Real, check_fields
from theory.verdicts import BlindTest, GrowthClass, Stability, Verdict

__all__ = ["POWER", "Interval", "NO_INTERVAL", "Difference", "t_interval", "welch_interval", "difference_interval",
           "share_interval", "level_label", "normal_quantile", "detectable_slope", "unless_unresolvable",
           "claimed_sign_verdict", "MULTIPLICITY_METHODS", "INFERENCE_FIELDS", "Inference", "Judgement", "TrendDesign",
           "TrendJudgement", "BlindTestJudgement", "blind_test_verdict"]


POWER = 0.8  # the power at which the smallest detectable effect is stated


def level_label(confidence: float) -> str:
    """``95 %``: a confidence level as every report prints it.

    >>> level_label(0.9)
    '90 %'
    """
    return f"{confidence:.0%}".replace("%", " %")


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
    confidence: float = CONFIDENCE
    method: str = ""
    se: float = math.nan
    dof: float = math.nan  # the degrees of freedom of its t (NaN: not a t interval)

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
    exceeds the papers' effect at one cell; ``not measured`` without an estimate) and that detectable effect.
    Both judges use it: one comparison, one verdict."""
    detectable = detectable_slope(estimate.se, estimate.dof, alpha)
    if math.isnan(estimate.estimate):
        return Verdict.NOT_MEASURED, detectable
    reference = claim.reference.level if claim.reference else None
    return unless_unresolvable(estimate.signed_verdict(claim.sign), detectable, reference), detectable


MULTIPLICITY_METHODS = ("holm", "bh")
INFERENCE_FIELDS = {"confidence": Real(0.0, 1.0, low_open=True, high_open=True),
                    "multiplicity": Choice(*MULTIPLICITY_METHODS), "bootstrap": Integer(100)}


@dataclass(frozen=True)
class Inference:
    """The inference settings of a report: the confidence of every interval and test, the multiplicity method
    of its family of direction verdicts and the resamples of a bootstrap, declared once (:data:`INFERENCE_FIELDS`).

    ``holm`` (the default), Holm's step-down method: controls the family-wise error rate under any dependence
    between the verdicts (the trends of one study share models); ``bh``, Benjamini-Hochberg: controls the false
    discovery rate, assuming independent or positively dependent tests (Holm 1979; Benjamini and Hochberg 1995).
    """

    confidence: float = CONFIDENCE
    multiplicity: str = "holm"
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
        """The adjustment in words: ``Holm`` or ``Benjamini-Hochberg``."""
        return {"holm": "Holm", "bh": "Benjamini-Hochberg"}[self.multiplicity]

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
    >>> j = Judgement(CLAIMS["p1-lns-loss"], "val_loss", Interval(-0.02, -0.03, -0.01), Verdict.HOLDS, n=3)
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


class TrendDesign(NamedTuple):
    """What a trend's cells were: axis values ``x``, models per cell ``counts``, the pooled within-cell variance
    (the seeds' noise) and the cell means' residual variance about the line (``simulate.claims.calibration``
    simulates studies of this design)."""

    x: tuple
    counts: tuple
    within_var: float
    residual_var: float


@dataclass(frozen=True)
class TrendJudgement:
    """A claim judged along one axis of a study (:mod:`simulate.claims.trends`): the group of fixed fields, the
    rate line (``tuned``, ``fixed`` or ``trained``), the models, the cell-means slope per e-fold with its raw
    and adjusted p, the claimed direction, the verdict, the cells' shape and crossing, what the design can
    detect, and the stability between the two lengths."""

    claim: Claim
    statistic: str
    axis: str
    group: dict
    line: str
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
    shape: str = ""
    crossing: str = ""
    detectable: float = math.nan
    needs: str = ""
    stability: Stability | None = None
    change: Interval = NO_INTERVAL
    design: TrendDesign | None = None
    in_family: bool = False
    rests_on: frozenset = frozenset()  # the distinct versions (code, corpus, Python, torch) of its models


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


def blind_test_verdict(error: float, half_width: float, informative: float) -> BlindTest:
    """``passes`` when the measured value lies in the law's prediction interval (``|error| <= half_width``) and
    the interval is no wider than ``informative``; ``passes, uninformative`` when it lies in a wider one;
    ``fails`` otherwise.

    >>> [str(blind_test_verdict(e, h, 2.3)) for e, h in ((0.5, 1.0), (0.5, 3.0), (1.5, 1.0))]
    ['passes', 'passes, uninformative', 'fails']
    """
    if not abs(error) <= half_width:
        return BlindTest.FAILS
    return BlindTest.PASSES if half_width <= informative else BlindTest.PASSES_UNINFORMATIVE
