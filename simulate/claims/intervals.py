"""An estimate with its 95 % interval, the one formatter of it, and the intervals the claims use.

:class:`Interval` is ``(estimate, low, high)``; NaN bounds mean "no interval" (one seed, a
fit at its range's end), an infinite bound an open end. Over seeds: :func:`t_interval`
(Student's t); between two groups of runs, :func:`difference_interval`: paired by seed
(a t interval of the seed-by-seed differences) where the two groups have the same seeds,
else Welch's interval. The verdict on a claimed sign is :meth:`Interval.signed_verdict`.

>>> Interval(1.25, 0.5, 2.0).format(), Interval(0.02, math.nan, math.nan).format(".3f")
('1.25 [0.5, 2]', '0.020')
>>> Interval(1.5, 0.0, math.inf).format(".2f"), t_interval([1.0, 2.0, 3.0]).format(".4f")
('1.50 [0.00, inf]', '2.0000 [-0.4841, 4.4841]')
>>> difference = difference_interval({0: 1.0, 1: 1.2, 2: 1.1}, {0: 0.0, 1: 0.1, 2: 0.2})
>>> difference.estimate.format(".3f"), difference.n, difference.method
('1.000 [0.752, 1.248]', 3, 'paired by seed')
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from simulate.claims.verdicts import Verdict
from simulate.engine import CONFIDENCE, interval_z

__all__ = ["Interval", "NO_INTERVAL", "Difference", "t_interval", "welch_interval", "difference_interval",
           "share_interval"]


class Interval(NamedTuple):
    """An estimate and its interval (module docstring)."""

    estimate: float
    low: float = math.nan
    high: float = math.nan

    @property
    def bounded(self) -> bool:
        """Whether both bounds are known (an open end, +-inf, is known)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

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
        """The estimate's distance from ``target`` in standard errors read off the interval."""
        return interval_z(self.estimate, self.low, self.high, target)


NO_INTERVAL = Interval(math.nan)


def _quantile(dof: float, confidence: float) -> float:
    return float(stats.t.ppf(0.5 + confidence / 2, dof))


def t_interval(values, confidence: float = CONFIDENCE) -> Interval:
    """The mean of the finite ``values`` and its t interval (no bounds for one value, NaN for none)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]  # (n,)
    if values.size == 0:
        return NO_INTERVAL
    mean = float(values.mean())
    if values.size == 1:
        return Interval(mean)
    half = _quantile(values.size - 1, confidence) * float(values.std(ddof=1)) / math.sqrt(values.size)
    return Interval(mean, mean - half, mean + half)


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
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    low, high = centre - half, centre + half
    if over_seeds.bounded:
        low, high = min(low, over_seeds.low), max(high, over_seeds.high)
    return Interval(over_seeds.estimate, max(low, 0.0), min(high, 1.0))


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
        return Interval(diff)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(diff, diff, diff)
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = _quantile(dof, confidence) * se
    return Interval(diff, diff - half, diff + half)


class Difference(NamedTuple):
    """A difference between two groups: its interval, how many seeds (pairs, or both groups' seeds) and how."""

    estimate: Interval
    n: int
    method: str  # "paired by seed" or "Welch"


def difference_interval(first: dict, second: dict, confidence: float = CONFIDENCE) -> Difference:
    """``first - second`` of two groups' values by seed (``{seed: value}``): paired by seed when both groups
    have the same seeds (the runs share their initialisation and data order), Welch's interval otherwise.
    Both judges of the claims compare two groups through this function, so one comparison has one interval."""
    if set(first) == set(second):
        values = [first[seed] - second[seed] for seed in sorted(first)]
        return Difference(t_interval(values, confidence), int(np.isfinite(values).sum()), "paired by seed")
    return Difference(welch_interval(list(first.values()), list(second.values()), confidence),
                      int(np.isfinite(list(first.values())).sum() + np.isfinite(list(second.values())).sum()),
                      "Welch")
