"""Trends along an axis at the level of the design: cell means, a line with its lack-of-fit test, a direction
verdict that does not need the line, a crossing located between the cells, Holm's adjustment.

A study varies an axis (depth, width, steps) over a few values and trains a few seeds at each:
the seeds are replicates of a *cell*, not of a line through every model. So a trend is fitted
to the cell means (one point per axis value), ``mean_x = a + b log x``, by ordinary least
squares; the slope's 95 % interval is Student's t with ``k - 2`` degrees of freedom for ``k``
axis values, its error the scatter of the cell means about the line (Snedecor and Cochran
1989, Sec. 17; the within-cell spread enters through the means; unequal spreads between
cells leave the estimate unbiased). For a share of blocks each cell mean's variance is at least the
binomial variance of its blocks (:func:`_share_floor`), so the slope's interval is never of zero width.
Whether a line describes the cells at all is the
pure-error lack-of-fit F test on the models (Draper and Smith 1998, Sec. 2.1):
``F = (SS_lof / (k - 2)) / (SS_pe / (n - k))``.

The direction verdict (docs/studies.md) uses

- ``line``: the slope, when the line is not rejected (lack of fit p >= 0.05);
- ``endpoints``: where the line is rejected, the difference between the cell means at the
  largest and the smallest axis value (Welch's interval: assumes no shape, only that the
  claimed direction means "larger at the end of the axis than at its start");
- ``too few axis values``: with two axis values no direction is judged (the two cells'
  difference is still reported).

Every direction verdict of a report is one family: its two-sided p-values are adjusted by
Holm's step-down method (:func:`holm`; valid under any dependence between the verdicts,
which share models), and the verdict reads the adjusted p: ``holds`` when it is below
``1 - confidence`` and the estimate has the claimed sign, ``violated`` when it has the other
sign, ``inconclusive`` otherwise.

Where the cell means change sign, the claim may change sign along the axis:
:func:`cell_crossing` interpolates the cell means linearly in ``log x`` and gives the set of
axis values where the interpolant is not significantly different from 0 (each point's
standard error from the two cells it lies between, Welch-Satterthwaite degrees of freedom;
Fieller's construction on each segment). The crossing is significant ("crossing in range")
when that set stays inside the axis range, the interpolant being significantly non-zero at
both ends; where the set reaches an end the sign change is "not significant". Where the cell
means keep one sign there is no crossing in range; a zero of an extrapolated line is never
reported.

>>> x = np.repeat([4.0, 8.0, 16.0, 32.0], 3)
>>> y = 0.3 * np.log(x / 10.0) + np.tile([-0.01, 0.0, 0.01], 4)
>>> trend = fit_trend(x, y)
>>> round(trend.slope.estimate, 6), trend.cells, trend.method, str(direction_verdict(trend, +1))
(0.3, 4, 'line', 'holds')
>>> crossing = cell_crossing(x, y)
>>> round(crossing.estimate, 1), crossing.note
(10.0, 'crossing in range')
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from simulate.claims.intervals import NO_INTERVAL, Interval, welch_interval
from simulate.claims.verdicts import Verdict
from simulate.engine import CONFIDENCE

__all__ = ["LACK_OF_FIT_LEVEL", "Cells", "cells_of", "Trend", "fit_trend", "direction_verdict", "holm",
           "Crossing", "cell_crossing", "describe_crossing"]

LACK_OF_FIT_LEVEL = 0.05  # a line whose lack-of-fit p is below this is rejected: the verdict uses the endpoints


class Cells(NamedTuple):
    """The models of a trend grouped by axis value: ``x`` ascending ``(k,)``, ``values`` one array per cell."""

    x: np.ndarray
    values: tuple

    @property
    def mean(self) -> np.ndarray:
        return np.array([v.mean() for v in self.values])  # (k,)

    @property
    def n(self) -> np.ndarray:
        return np.array([v.size for v in self.values])  # (k,)

    @property
    def sem2(self) -> np.ndarray:
        """Squared standard error of each cell mean (NaN for a cell of one model)."""
        return np.array([v.var(ddof=1) / v.size if v.size > 1 else math.nan for v in self.values])  # (k,)


def cells_of(x, y) -> Cells:
    """The finite pairs ``(x > 0, y)`` grouped by ``x``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0)
    x, y = x[keep], y[keep]  # (n,) each
    axis = np.unique(x)  # (k,)
    return Cells(axis, tuple(y[x == value] for value in axis))


class Trend(NamedTuple):
    """A trend along an axis (module docstring): the cell-means line's ``slope`` per e-fold, the ``contrast``
    (last cell minus first), the ``lack_of_fit`` p, the ``method`` the verdict uses with its ``estimate`` and
    two-sided ``p_value``, ``cells`` (axis values) and ``n`` (models)."""

    slope: Interval
    contrast: Interval
    lack_of_fit: float
    method: str
    estimate: float
    p_value: float
    cells: int
    n: int


def _line(cells: Cells, confidence: float, floor: np.ndarray | None = None) -> tuple[Interval, float, np.ndarray]:
    """OLS of the cell means on log x: (slope with its t interval on k - 2 dof, its p, fitted means (k,)).

    ``floor`` (k,): each cell mean's least variance (a share's binomial variance, :func:`_share_floor`): the
    interval is then the wider of the t interval and the normal one of variance ``sum_i c_i^2 floor_i`` (``c``
    the slope's weights on the cell means; known given the shares), the p the larger, so cell means that lie
    on a line by the blocks' chance do not give a zero-width interval.
    """
    log_x, mean = np.log(cells.x), cells.mean  # (k,) each
    k = log_x.size
    design = np.stack([np.ones(k), log_x], axis=1)  # (k, 2)
    coef, *_ = np.linalg.lstsq(design, mean, rcond=None)
    fitted = design @ coef  # (k,)
    slope = float(coef[1])
    if k < 3:
        return Interval(slope), math.nan, fitted
    residual = mean - fitted  # (k,)
    se = math.sqrt(float(residual @ residual) / (k - 2) * np.linalg.inv(design.T @ design)[1, 1])
    bounds = [(stats.t(k - 2), se)]  # (law of the standardised slope, standard error)
    if floor is not None:
        weights = (log_x - log_x.mean()) / ((log_x - log_x.mean()) ** 2).sum()  # (k,) slope = weights @ mean
        bounds.append((stats.norm(), math.sqrt(float(weights**2 @ floor))))  # known given the shares: normal
    if all(se == 0 for _, se in bounds):
        return Interval(slope, slope, slope), 0.0 if slope != 0 else 1.0, fitted
    half = max(float(law.ppf(0.5 + confidence / 2)) * se for law, se in bounds)
    p = max(float(2 * law.sf(abs(slope) / se)) if se > 0 else 0.0 for law, se in bounds)
    return Interval(slope, slope - half, slope + half), p, fitted


def _lack_of_fit(cells: Cells) -> float:
    """p of the pure-error F test of a line through the models (NaN without replicates or with < 3 cells)."""
    k, n = cells.x.size, int(cells.n.sum())
    if k < 3 or n <= k:
        return math.nan
    log_x = np.concatenate([np.full(v.size, math.log(x)) for x, v in zip(cells.x, cells.values)])  # (n,)
    y = np.concatenate(cells.values)  # (n,)
    design = np.stack([np.ones(n), log_x], axis=1)  # (n, 2)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    fitted = design @ coef  # (n,)
    cell_mean = np.concatenate([np.full(v.size, v.mean()) for v in cells.values])  # (n,)
    pure = float(((y - cell_mean) ** 2).sum())
    lack = float(((cell_mean - fitted) ** 2).sum())
    if pure == 0:  # every seed of every cell agrees: any distance from the line is beyond pure error
        return 0.0 if lack > 1e-12 * max(1.0, float((y**2).sum())) else 1.0
    return float(stats.f.sf((lack / (k - 2)) / (pure / (n - k)), k - 2, n - k))


def _welch_p(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or b.size < 2:
        return math.nan
    if a.var(ddof=1) == 0 and b.var(ddof=1) == 0:
        return 0.0 if a.mean() != b.mean() else 1.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def _share_floor(cells: Cells, blocks: Cells) -> np.ndarray:
    """Each cell mean's binomial variance (k,) of a share of blocks, its blocks pooled over the cell's models
    (Agresti and Coull 1998's share ``(m + 2) / (B + 4)``, never 0): seeds that all count the same blocks
    still leave the blocks' uncertainty."""
    total = np.array([v.sum() for v in blocks.values], dtype=float)  # (k,) blocks per cell
    share = (cells.mean * total + 2) / (total + 4)  # (k,)
    return share * (1 - share) / total


def _floored_contrast(last: np.ndarray, first: np.ndarray, floor_last: float, floor_first: float,
                      confidence: float) -> tuple[Interval, float]:
    """The last minus the first cell, Welch's interval and p with each cell's variance at least its floor."""
    variances, dofs = [], []
    for values, floor in ((last, floor_last), (first, floor_first)):
        over_seeds = values.var(ddof=1) / values.size if values.size > 1 else 0.0
        variances.append(max(over_seeds, floor))
        dofs.append(max(values.size - 1, 1))
    diff = float(last.mean() - first.mean())
    se = math.sqrt(sum(variances))
    dof = se**4 / sum(v * v / d for v, d in zip(variances, dofs))
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
    return Interval(diff, diff - half, diff + half), float(2 * stats.t.sf(abs(diff) / se, dof))


def fit_trend(x, y, confidence: float = CONFIDENCE, blocks=None) -> Trend:
    """The trend of ``y`` along ``x`` (module docstring); ``method`` "no data" with fewer than two axis values.

    ``blocks`` (one per value of ``y``): ``y`` is a share of that many blocks, and both the line and the
    last-minus-first contrast floor each cell mean's variance at the binomial variance of its blocks
    (:func:`_share_floor`).
    """
    cells = cells_of(x, y)
    n = int(cells.n.sum())
    if cells.x.size < 2:
        return Trend(NO_INTERVAL, NO_INTERVAL, math.nan, "no data", math.nan, math.nan, int(cells.x.size), n)
    floor = None if blocks is None else _share_floor(
        cells, cells_of(x, np.where(np.isfinite(np.asarray(y, dtype=float)), blocks, np.nan)))  # (k,)
    slope, slope_p, _ = _line(cells, confidence, floor)
    first, last = cells.values[0], cells.values[-1]
    if floor is None:
        contrast, contrast_p = welch_interval(last, first, confidence), _welch_p(last, first)
    else:
        contrast, contrast_p = _floored_contrast(last, first, floor[-1], floor[0], confidence)
    if cells.x.size < 3:
        return Trend(slope, contrast, math.nan, "too few axis values", contrast.estimate, math.nan, 2, n)
    lack = _lack_of_fit(cells)
    if lack < LACK_OF_FIT_LEVEL:
        return Trend(slope, contrast, lack, "endpoints", contrast.estimate, contrast_p, int(cells.x.size), n)
    return Trend(slope, contrast, lack, "line", slope.estimate, slope_p, int(cells.x.size), n)


def direction_verdict(trend: Trend, direction: int | None, p_adjusted: float | None = None,
                      confidence: float = CONFIDENCE) -> Verdict:
    """The verdict on a claimed direction (+1 rising, -1 falling, None: ``no direction claimed``) from the
    trend's p-value, or ``p_adjusted`` when given (module docstring)."""
    if direction is None:
        return Verdict.NO_DIRECTION
    if trend.method == "too few axis values":
        return Verdict.TOO_FEW_AXIS_VALUES
    p = trend.p_value if p_adjusted is None else p_adjusted
    if not (math.isfinite(p) and p < 1 - confidence) or trend.estimate == 0:
        return Verdict.INCONCLUSIVE
    return Verdict.HOLDS if np.sign(trend.estimate) == direction else Verdict.VIOLATED


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values of a family (NaN entries stay NaN and are not counted).

    >>> holm([0.01, 0.04, 0.03, math.nan]).round(3).tolist()
    [0.03, 0.06, 0.06, nan]
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, math.nan)
    finite = np.flatnonzero(np.isfinite(p))
    order = finite[np.argsort(p[finite], kind="stable")]  # (m,)
    m = order.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])  # (m,)
    out[order] = np.minimum(adjusted, 1.0)
    return out


class Crossing(NamedTuple):
    """Where the cell means change sign along the axis: ``estimate`` (axis units, NaN for none) and the
    interval of axis values where the interpolated mean is not significantly different from 0; an end at
    the range's end is open (``low_open``/``high_open``)."""

    estimate: float
    low: float
    high: float
    note: str
    low_open: bool = False
    high_open: bool = False


_GRID = 2001  # points in log x over the axis range where the interpolant is tested against 0


def cell_crossing(x, y, confidence: float = CONFIDENCE) -> Crossing:
    """The crossing of ``y``'s cell means along ``x`` (module docstring)."""
    cells = cells_of(x, y)
    if cells.x.size < 2:
        return Crossing(math.nan, math.nan, math.nan, "no trend")
    log_x, mean, sem2 = np.log(cells.x), cells.mean, cells.sem2  # (k,) each
    signs = np.sign(mean)
    change = np.flatnonzero(signs[:-1] * signs[1:] <= 0)  # segments whose ends differ in sign (or touch 0)
    if change.size == 0:
        return Crossing(math.nan, math.nan, math.nan, f"none in range (the cell means keep one sign from "
                                                      f"{cells.x[0]:.3g} to {cells.x[-1]:.3g})")
    i = int(change[0])
    w = mean[i] / (mean[i] - mean[i + 1]) if mean[i] != mean[i + 1] else 0.0
    estimate = math.exp(log_x[i] + w * (log_x[i + 1] - log_x[i]))
    theta = np.linspace(log_x[0], log_x[-1], _GRID)  # (G,)
    segment = np.clip(np.searchsorted(log_x, theta, side="right") - 1, 0, log_x.size - 2)  # (G,)
    weight = (theta - log_x[segment]) / (log_x[segment + 1] - log_x[segment])  # (G,)
    centre = (1 - weight) * mean[segment] + weight * mean[segment + 1]  # (G,)
    parts = np.stack([(1 - weight) ** 2 * sem2[segment], weight**2 * sem2[segment + 1]])  # (2, G)
    dof_parts = np.stack([cells.n[segment] - 1, cells.n[segment + 1] - 1]).astype(float)  # (2, G)
    variance = parts.sum(axis=0)  # (G,)
    with np.errstate(invalid="ignore", divide="ignore"):
        dof = variance**2 / np.where(parts > 0, parts**2 / dof_parts, 0.0).sum(axis=0)  # (G,) Welch-Satterthwaite
        quantile = stats.t.ppf(0.5 + confidence / 2, np.where(np.isfinite(dof) & (dof > 0), dof, np.nan))  # (G,)
        accepted = np.abs(centre) <= quantile * np.sqrt(variance)  # (G,) NaN compares False
    accepted |= np.isclose(centre, 0.0)
    if not accepted.any():  # no standard errors (one seed per cell): the interpolated point alone
        return Crossing(estimate, math.nan, math.nan, "sign change, untested (one model per cell)")
    low_open, high_open = bool(accepted[0]), bool(accepted[-1])
    note = ("sign change not significant" if low_open or high_open else "crossing in range") + (
        f"; the cell means change sign {change.size} times" if change.size > 1 else "")
    return Crossing(estimate, math.exp(theta[accepted].min()), math.exp(theta[accepted].max()), note, low_open,
                    high_open)


def describe_crossing(crossing: Crossing, axis: str) -> str:
    """One line: where the claim's statistic changes sign along ``axis``, or that it does not in range.

    >>> describe_crossing(Crossing(11.3, 8.1, 17.2, "crossing in range"), "depth")
    'crossing at depth = 11.3 [8.1, 17.2]'
    >>> describe_crossing(Crossing(11.3, 4.0, 64.0, "sign change not significant", True, True), "depth")
    'sign change not significant: crossing at depth = 11.3 [<= 4, >= 64]'
    """
    if not math.isfinite(crossing.estimate):
        return crossing.note
    if not math.isfinite(crossing.low):
        return f"{crossing.note}: crossing at {axis} = {crossing.estimate:.3g}"
    low = f"<= {crossing.low:.3g}" if crossing.low_open else f"{crossing.low:.3g}"
    high = f">= {crossing.high:.3g}" if crossing.high_open else f"{crossing.high:.3g}"
    head, _, rest = crossing.note.partition(";")
    where = f"crossing at {axis} = {crossing.estimate:.3g} [{low}, {high}]"
    return (where if head == "crossing in range" else f"{head}: {where}") + (f";{rest}" if rest else "")
