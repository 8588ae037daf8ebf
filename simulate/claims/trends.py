"""Trends along an axis: the slope of a statistic against log(axis), its direction verdict, its zero crossing.

A study's statistic ``y`` (one value per trained model, or per seed-paired difference of two
schemes) is fitted by ordinary least squares as ``y = a + b log x`` over every model of a
group (every seed at every value ``x`` of the axis; derived here, docs/studies.md). The
slope ``b`` is the change of ``y`` per e-fold of the axis; its 95 % interval is Student's t
with ``n - 2`` degrees of freedom, which treats the models as independent draws around the
line (seeds are independent; a curved trend widens the interval rather than biasing its
sign when the curve is monotone).

The verdict on a claimed direction (+1 rising, -1 falling) is ``holds`` when the slope's
interval lies on the claimed side of 0, ``violated`` when it lies on the other side and
``inconclusive`` when it contains 0, as for every signed claim of the workbench.

Where the line crosses ``y = 0`` the claim changes sign along the axis. The crossing
``x* = exp(-a/b)`` gets Fieller's interval (the set of ``theta = log x`` where
``a + b theta = 0`` is not rejected at 95 %, Fieller 1954): bounded when the slope is
significant, otherwise unbounded on one or both sides.

>>> import numpy as np
>>> x = np.repeat([4.0, 8.0, 16.0, 32.0], 3)
>>> y = 0.3 * np.log(x / 10.0) + np.tile([-0.01, 0.0, 0.01], 4)
>>> trend = fit_trend(x, y)
>>> round(trend.slope, 6), trend.n, str(direction_verdict(trend, +1))
(0.3, 12, 'holds')
>>> crossing = zero_crossing(trend, 4.0, 32.0)
>>> round(crossing.estimate, 6), crossing.in_range
(10.0, True)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from simulate.claims.intervals import Interval
from simulate.claims.verdicts import Verdict
from simulate.engine import CONFIDENCE

__all__ = ["Trend", "Crossing", "fit_trend", "direction_verdict", "zero_crossing", "describe_crossing"]


class Trend(NamedTuple):
    """``y = intercept + slope log x`` fitted over ``n`` models; ``cov`` is the (intercept, slope) covariance."""

    slope: float
    low: float
    high: float
    intercept: float
    cov: tuple  # ((var a, cov ab), (cov ab, var b))
    n: int
    quantile: float  # Student's t quantile of the interval (n - 2 degrees of freedom)

    @property
    def interval(self) -> Interval:
        """The slope with its interval (no bounds without a trend)."""
        bounded = math.isfinite(self.low) and math.isfinite(self.high)
        return Interval(self.slope, self.low, self.high) if bounded else Interval(self.slope)


_NO_TREND = Trend(math.nan, math.nan, math.nan, math.nan, ((math.nan,) * 2,) * 2, 0, math.nan)


def fit_trend(x, y, confidence: float = CONFIDENCE) -> Trend:
    """Least-squares ``y = a + b log x`` with a t interval on ``b`` (NaN with < 3 finite pairs or one ``x``)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0)
    log_x, y = np.log(x[keep]), y[keep]  # (n,) each
    n = int(log_x.size)
    if n < 3 or np.unique(log_x).size < 2:
        return _NO_TREND._replace(n=n)
    design = np.stack([np.ones(n), log_x], axis=1)  # (n, 2)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ coef  # (n,)
    sigma2 = float(residual @ residual) / (n - 2)
    cov = sigma2 * np.linalg.inv(design.T @ design)  # (2, 2)
    quantile = float(stats.t.ppf(0.5 + confidence / 2, n - 2))
    half = quantile * math.sqrt(cov[1, 1])
    slope = float(coef[1])
    return Trend(slope, slope - half, slope + half, float(coef[0]), tuple(map(tuple, cov.tolist())), n, quantile)


def direction_verdict(trend: Trend, direction: int | None) -> Verdict:
    """``holds`` / ``violated`` / ``inconclusive`` for a claimed direction (the slope's interval against 0, as
    :meth:`~simulate.claims.intervals.Interval.signed_verdict`); ``no direction claimed`` for None."""
    if direction is None:
        return Verdict.NO_DIRECTION
    return trend.interval.signed_verdict(direction)


class Crossing(NamedTuple):
    """Where the fitted line crosses 0: ``estimate`` (axis units), Fieller bounds (``inf`` when unbounded).

    ``range_low``, ``range_high``: the axis values the trend was fitted on; beyond them the line is
    an extrapolation, and :func:`describe_crossing` does not print a bound there as a number.
    """

    estimate: float
    low: float
    high: float
    in_range: bool
    note: str
    range_low: float = 0.0
    range_high: float = math.inf


def _fieller(trend: Trend) -> tuple[float, float, str]:
    """Fieller's interval for ``theta = -a/b`` (log axis units): (low, high, shape)."""
    (var_a, cov_ab), (_, var_b) = trend.cov
    t2 = trend.quantile**2
    a, b = trend.intercept, trend.slope
    qa = b * b - t2 * var_b
    qb = 2.0 * (a * b - t2 * cov_ab)
    qc = a * a - t2 * var_a
    disc = qb * qb - 4.0 * qa * qc
    if qa > 0 and disc >= 0:  # a bounded interval: the slope is significant
        root = math.sqrt(disc)
        return (-qb - root) / (2 * qa), (-qb + root) / (2 * qa), "bounded"
    return -math.inf, math.inf, "unbounded"


def zero_crossing(trend: Trend, x_min: float, x_max: float) -> Crossing:
    """The axis value where the trend line is 0, with Fieller's interval; ``in_range`` if within [x_min, x_max]."""
    if not math.isfinite(trend.slope) or trend.slope == 0:
        return Crossing(math.nan, math.nan, math.nan, False, "no trend")
    theta = -trend.intercept / trend.slope
    low, high, shape = _fieller(trend)
    estimate = math.exp(theta) if theta < 700 else math.inf
    bounds = (math.exp(low) if math.isfinite(low) else 0.0, math.exp(high) if high < 700 else math.inf)
    inside = x_min <= estimate <= x_max
    note = ("crossing in range" if inside else "none in range") + ("" if shape == "bounded" else " (unbounded)")
    return Crossing(estimate, bounds[0], bounds[1], inside, note, x_min, x_max)


def describe_crossing(crossing: Crossing, axis: str) -> str:
    """One line: where the claim's statistic changes sign along ``axis``, or that it does not in range.

    An interval end beyond the fitted axis values reads "> x_max" or "< x_min" (beyond the range);
    a zero of the line outside them is an extrapolation, not a crossing, and gets no interval.

    >>> describe_crossing(Crossing(11.3, 8.1, 17.2, True, "crossing in range", 4.0, 64.0), "depth")
    'crossing at depth = 11.3 [8.1, 17.2]'
    >>> describe_crossing(Crossing(11.3, 3.43, 1.69e25, True, "crossing in range", 4.0, 64.0), "depth")
    'crossing at depth = 11.3 [< 4, > 64 (beyond the range)]'
    >>> describe_crossing(Crossing(210.0, 0.0, math.inf, False, "none in range (unbounded)", 4.0, 64.0), "depth")
    'none in range (the line, extrapolated, crosses 0 at depth = 210)'
    """
    if not math.isfinite(crossing.estimate):
        return crossing.note
    if not crossing.in_range:
        return f"none in range (the line, extrapolated, crosses 0 at {axis} = {crossing.estimate:.3g})"
    if not (math.isfinite(crossing.high) and crossing.low > 0):
        return f"crossing at {axis} = {crossing.estimate:.3g}, interval unbounded: slope not significant"
    low = f"{crossing.low:.3g}" if crossing.low >= crossing.range_low else f"< {crossing.range_low:.3g}"
    high = f"{crossing.high:.3g}" if crossing.high <= crossing.range_high else f"> {crossing.range_high:.3g}"
    beyond = crossing.low < crossing.range_low or crossing.high > crossing.range_high
    return f"crossing at {axis} = {crossing.estimate:.3g} [{low}, {high}{' (beyond the range)' if beyond else ''}]"
