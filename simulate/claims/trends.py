"""Trends along an axis at the level of the design: the cell means' line, its direction verdict, what the design
can detect, the cells' shape and a crossing located between them.

A study varies an axis (depth, width, steps) over a few values and trains a few seeds at each:
the seeds are replicates of a *cell*, not of a line through every model, and cells differ from
any smooth curve by more than their seeds (tuning chose their rates, a shared seed effect,
curvature). So a trend is the line through the cell means (one point per axis value),
``mean_x = a + b log x``, by ordinary least squares, judged under a random cell effect: a cell's
mean is the line plus an effect of its own plus its seeds' mean noise, all normal. The slope's
interval is Student's t with ``k - 2`` degrees of freedom for ``k`` axis values, its error the
scatter of the cell means about the line, which holds both (Snedecor and Cochran 1989, Sec. 17;
docs/studies.md#verdicts). For a share of blocks each cell mean's variance is at least the
binomial variance of its blocks (:func:`_share_floor`), so the interval is never of zero width.

The direction verdict reads that slope, always: ``holds`` when its (family-adjusted) p is below
``1 - confidence`` and it has the claimed sign, ``violated`` with the other sign; else
``inconclusive``, or ``design cannot resolve`` where the smallest slope its test detects at 80 %
power (:func:`~simulate.claims.judgement.detectable_slope`) exceeds the effect the papers report
(the claim's ``reference``). A line that fits the cells badly changes nothing: the cells' departures are the
cell effect, already the slope's error, and seeds never become the replicates of the trend
(the old switch to the last-minus-first cell, by seeds, gave false direction verdicts in 37 % of
null studies at a cell-to-seed spread of 2, which this rule holds at the nominal rate:
tests/simulate/test_claims_trends.py). The lack-of-fit F test on the models (Draper and Smith
1998, Sec. 2.1) is reported as a description. Where the cell means are not monotone the trend
names where they turn (:class:`CellShape`, worded by :func:`describe_shape`). With two axis values no direction is
judged.

Where the cell means change sign, :func:`cell_crossing` interpolates them linearly in ``log x``
and gives the set of axis values where the interpolant is not significantly different from 0
(each point's standard error from the two cells it lies between, Welch-Satterthwaite degrees of
freedom). The crossing is significant when that set stays inside the axis range; a sign change
that is not significant gets no point estimate, only the cells it lies between.

>>> x = np.repeat([4.0, 8.0, 16.0, 32.0], 3)
>>> y = 0.3 * np.log(x / 10.0) + np.tile([-0.01, 0.0, 0.01], 4)
>>> trend = fit_trend(x, y)
>>> round(trend.slope.estimate, 6), trend.cells, describe_shape(trend.shape), str(direction_verdict(trend, +1))
(0.3, 4, 'rises monotonically', 'holds')
>>> describe_crossing(cell_crossing(x, y), "depth")
'crossing at depth = 10 [9.45, 10.4]'
"""

from __future__ import annotations

import math
from enum import Enum
from typing import NamedTuple

import numpy as np
from scipy import stats

from simulate.claims.judgement import NO_INTERVAL, Interval, unless_unresolvable
from simulate.engine import CONFIDENCE
from theory.verdicts import Verdict

__all__ = ["Cells", "cells_of", "Trend", "cell_means_slope", "within_var", "lack_of_fit_p", "fit_trend",
           "direction_verdict", "CellShape", "cell_shape", "describe_shape", "SignChange", "Crossing", "cell_crossing",
           "describe_crossing"]


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
    """A trend along an axis (module docstring): the cell-means line's ``slope`` per e-fold with its two-sided
    ``p_value`` and degrees of freedom ``dof``, the ``lack_of_fit`` p (a description), ``cells`` (axis values),
    ``n`` (models), the cells' ``shape`` (:class:`CellShape`), and for ``needs``: the cell means' residual variance
    about the line and the pooled within-cell variance."""

    slope: Interval
    p_value: float
    dof: int
    lack_of_fit: float
    cells: int
    n: int
    shape: CellShape | None
    residual_var: float = math.nan
    within_var: float = math.nan
    x: tuple = ()
    counts: tuple = ()
    floor: tuple = ()
    rates: tuple = ()  # each cell's rate label where the cells ran at more than one rate; else empty


def _design(log_x: np.ndarray, rates) -> np.ndarray:
    """The cell means' regressors ``(k, q)``: intercept, ``log x`` and, where the cells ran at more than one rate,
    an indicator of each rate but the first (the slope is then fitted within runs of one rate)."""
    columns = [np.ones_like(log_x), log_x]
    if rates is not None:
        labels = list(dict.fromkeys(rates))
        columns += [np.array([float(r == label) for r in rates]) for label in labels[1:]]
    return np.stack(columns, axis=1)


def cell_means_slope(log_x: np.ndarray, means: np.ndarray, floor: np.ndarray | None = None, rates=None) -> tuple:
    """The least-squares slope of cell means on ``log_x`` (``(k,)``, k >= 3) and its test: ``(slope, se, p,
    residual variance)``, each of the leading shape of ``means`` (``(..., k)``: one study, or many at once in
    :mod:`simulate.claims.calibration`). The standard error is the cell means' scatter about the line, the test
    Student's t on ``k - q`` degrees of freedom (``q`` regressors: 2, plus one per extra rate); ``floor`` (``(k,)``):
    each cell mean's least variance (a share's binomial variance, :func:`_share_floor`), so the standard error is at
    least that of variance ``sum_i c_i^2 floor_i`` (``c`` the slope's weights on the cell means); ``rates`` (``(k,)``
    labels): the cells' rates, each rate's level in the model (NaN slope where no degree of freedom is left).

    >>> slope, se, p, _ = cell_means_slope(np.log([4.0, 8.0, 16.0]), np.array([1.0, 2.0, 3.5]))
    >>> round(float(slope * math.log(2)), 6), round(float(p), 4)  # per doubling; p as scipy's linregress
    (1.25, 0.0732)
    >>> x = np.log([2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    >>> means = 0.5 * x + np.array([0, 0, 3, 3, 3, 3]) + np.array([0.01, -0.01, 0.02, -0.02, 0.01, -0.01])
    >>> round(float(cell_means_slope(x, means, rates=[1, 1, 2, 2, 2, 2])[0]), 2)  # the rate's step held apart
    0.5
    """
    design = _design(log_x, rates)  # (k, q)
    k, q = design.shape
    if k <= q or np.linalg.matrix_rank(design) < q:
        nan = np.full(means.shape[:-1], math.nan)
        return nan, nan, nan, nan
    solve = np.linalg.pinv(design)  # (q, k)
    weights = solve[1]  # (k,) slope = means @ weights
    slope = means @ weights  # (...,)
    residual = means - means @ (design @ solve).T  # (..., k) the cell means about their fit
    residual_var = (residual**2).sum(axis=-1) / (k - q)  # (...,)
    se = np.sqrt(residual_var * float(weights @ weights))  # (...,)
    if floor is not None:
        se = np.maximum(se, math.sqrt(float(weights**2 @ floor)))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * stats.t.sf(np.abs(slope) / se, k - q)  # (...,)
    p = np.where(se > 0, p, np.where(slope != 0, 0.0, 1.0))
    return slope, se, p, residual_var


def _line(cells: Cells, confidence: float, floor: np.ndarray | None, rates) -> tuple[Interval, float, float, int]:
    """The cell means' line (:func:`cell_means_slope`): (slope with its t interval on its degrees of freedom, its p,
    residual variance, degrees of freedom); two cells give the slope alone, cells whose rates leave no degree of
    freedom no slope."""
    log_x = np.log(cells.x)  # (k,)
    if log_x.size < 3:
        centred = log_x - log_x.mean()
        slope = float(cells.mean @ centred / (centred**2).sum())
        return Interval(slope, confidence=confidence, method="two cells"), math.nan, math.nan, 0
    slope, se, p, residual_var = (float(v) for v in cell_means_slope(log_x, cells.mean, floor, rates))
    dof = log_x.size - _design(log_x, rates).shape[1]
    if not math.isfinite(slope):
        return Interval(math.nan, method="confounded with the rate"), math.nan, math.nan, max(dof, 0)
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
    method = "cell means, t on cells - 2" if rates is None else "cell means within runs of one rate"
    return Interval(slope, slope - half, slope + half, confidence, method, se, dof), p, residual_var, dof


def within_var(cells: Cells) -> float:
    """The pooled variance of the models about their cell means (NaN without a replicate)."""
    dof = int(cells.n.sum()) - cells.x.size
    return float(sum(((v - v.mean()) ** 2).sum() for v in cells.values)) / dof if dof > 0 else math.nan


def lack_of_fit_p(cells: Cells, fitted: np.ndarray, parameters: int = 2) -> float:
    """p of the pure-error F test of a law of ``parameters`` coefficients whose value at each cell is ``fitted``
    ``(k,)``: the cell means' weighted distance from it against the models' spread about their cell means (NaN
    without a replicate or with no cell beyond the coefficients)."""
    k, n = cells.x.size, int(cells.n.sum())
    if k <= parameters or n <= k:
        return math.nan
    lack = float(cells.n @ (cells.mean - fitted) ** 2) / (k - parameters)  # sum over the models of (mean - law)^2
    pure = within_var(cells)
    if pure == 0:  # every seed of every cell agrees: any distance from the law is beyond pure error
        return 0.0 if lack > 1e-12 * max(1.0, float(cells.n @ cells.mean**2)) else 1.0
    return float(stats.f.sf(lack / pure, k - parameters, n - k))


def _lack_of_fit(cells: Cells) -> float:
    """:func:`lack_of_fit_p` of the least-squares line through the models."""
    log_x = np.log(cells.x)  # (k,)
    mean_x = float(cells.n @ log_x) / cells.n.sum()
    slope = float(cells.n @ ((log_x - mean_x) * cells.mean)) / float(cells.n @ (log_x - mean_x) ** 2) \
        if cells.x.size > 1 else 0.0
    intercept = float(cells.n @ cells.mean) / cells.n.sum() - slope * mean_x
    return lack_of_fit_p(cells, intercept + slope * log_x)


def _share_floor(cells: Cells, blocks: Cells) -> np.ndarray:
    """Each cell mean's binomial variance (k,) of a share of blocks, its blocks pooled over the cell's models
    (Agresti and Coull 1998's share ``(m + 2) / (B + 4)``, never 0): seeds that all count the same blocks
    still leave the blocks' uncertainty."""
    total = np.array([v.sum() for v in blocks.values], dtype=float)  # (k,) blocks per cell
    share = (cells.mean * total + 2) / (total + 4)  # (k,)
    return share * (1 - share) / total


class CellShape(NamedTuple):
    """The cell means' shape along the axis: the axis values ``x`` (``(k,)``) and the sign of each step between
    neighbouring cells (``steps``, ``(k-1,)``: +1 rises, -1 falls, 0 flat); a trend of fewer than two cells has none
    (None). :func:`describe_shape` words it."""

    x: tuple
    steps: tuple


def cell_shape(x, means) -> CellShape:
    """The shape of the cell ``means`` at the axis values ``x`` (both ``(k,)``, in axis order)."""
    steps = np.sign(np.diff(np.asarray(means, dtype=float)))  # (k-1,)
    return CellShape(tuple(float(v) for v in x), tuple(int(s) for s in steps))


def describe_shape(shape: CellShape | None) -> str:
    """A shape in words: ``rises monotonically``, ``falls monotonically``, ``flat``, or where a non-monotone
    sequence turns; '' for no shape (None).

    >>> describe_shape(cell_shape([4, 8, 16, 32], [6.0, 7.7, 7.4, 7.3]))
    'not monotone: rises 4..8, falls 8..32'
    """
    if shape is None:
        return ""
    steps = np.asarray(shape.steps)  # (k-1,)
    if steps.size == 0 or not steps.any():
        return "flat"
    if (steps >= 0).all() or (steps <= 0).all():
        return "rises monotonically" if steps.sum() > 0 else "falls monotonically"
    x = [f"{v:g}" for v in shape.x]
    runs, start = [], 0
    for i in range(1, steps.size + 1):
        if i == steps.size or steps[i] != steps[start]:
            word = {1: "rises", -1: "falls", 0: "flat"}[int(steps[start])]
            runs.append(f"{word} {x[start]}..{x[i]}")
            start = i
    return "not monotone: " + ", ".join(runs)


def _cell_rates(cells: Cells, x: np.ndarray, rates) -> tuple:
    """Each cell's rate label ``(k,)`` where the cells ran at more than one rate, else ``()`` (one rate, or none
    given); ValueError where one cell mixes rates."""
    if rates is None:
        return ()
    x, rates = np.asarray(x, dtype=float), list(rates)
    labels = []
    for value in cells.x:
        here = {rates[i] for i in np.flatnonzero(x == value)}
        if len(here) > 1:
            raise ValueError(f"the cell at {value:g} mixes rates {sorted(here)}: a cell has one rate")
        labels.append(here.pop())
    return tuple(labels) if len(set(labels)) > 1 else ()


def fit_trend(x, y, confidence: float = CONFIDENCE, blocks=None, rates=None) -> Trend:
    """The trend of ``y`` along ``x`` (module docstring); fewer than two axis values give no slope.

    ``blocks`` (one per value of ``y``): ``y`` is a share of that many blocks, and the line floors each cell
    mean's variance at the binomial variance of its blocks (:func:`_share_floor`). ``rates`` (one label per
    value of ``y``, one per cell): where the cells ran at more than one rate, each rate's level is in the model
    and the slope is fitted within runs of one rate (a tuned line whose rate changes along the axis: depth and
    rate are otherwise confounded); with too few cells left for that, the slope is NaN.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0)
    cells = cells_of(x, y)
    n = int(cells.n.sum())
    if cells.x.size < 2:
        return Trend(NO_INTERVAL, math.nan, 0, math.nan, int(cells.x.size), n, None)
    floor = None if blocks is None else _share_floor(
        cells, cells_of(x, np.where(np.isfinite(y), blocks, np.nan)))  # (k,)
    labels = _cell_rates(cells, x[keep], None if rates is None else [r for r, kept in zip(rates, keep) if kept])
    slope, p, residual_var, dof = _line(cells, confidence, floor, labels or None)
    return Trend(slope, p, dof, _lack_of_fit(cells), int(cells.x.size), n,
                 cell_shape(cells.x, cells.mean), residual_var, within_var(cells), tuple(cells.x),
                 tuple(int(c) for c in cells.n), () if floor is None else tuple(float(v) for v in floor), labels)


def direction_verdict(trend: Trend, direction: int | None, p_adjusted: float | None = None,
                      confidence: float = CONFIDENCE, detectable: float = math.nan,
                      reference: float | None = None) -> Verdict:
    """The verdict on a claimed direction (+1 rising, -1 falling, None: ``no direction claimed``) from the
    trend's p, or ``p_adjusted`` when given; ``confounded with the rate`` where the cells' rates leave the slope no
    degree of freedom; a verdict not reached where the design's ``detectable`` slope exceeds the papers'
    ``reference`` effect is ``design cannot resolve`` (module docstring)."""
    if direction is None:
        return Verdict.NO_DIRECTION
    if trend.cells < 3:
        return Verdict.TOO_FEW_AXIS_VALUES
    if math.isnan(trend.slope.estimate):
        return Verdict.CONFOUNDED
    p = trend.p_value if p_adjusted is None else p_adjusted
    if math.isfinite(p) and p < 1 - confidence and trend.slope.estimate != 0:
        return Verdict.HOLDS if np.sign(trend.slope.estimate) == direction else Verdict.VIOLATED
    return unless_unresolvable(Verdict.INCONCLUSIVE, detectable, reference)


class SignChange(Enum):
    """What the cell means do about 0 along the axis (:func:`cell_crossing`); :func:`describe_crossing` words it."""

    NO_TREND = "no trend"  # fewer than two cells
    NONE_IN_RANGE = "none in range"  # one sign over every cell
    UNTESTED = "sign change, untested (one model per cell)"  # no standard error where the sign changes
    NOT_SIGNIFICANT = "sign change not significant"  # the interpolant is not different from 0 at an end
    CROSSING = "crossing in range"  # a significant crossing, with its interval


class Crossing(NamedTuple):
    """Where the cell means change sign along the axis: ``state``; ``estimate`` (axis units; NaN unless
    ``state`` is :attr:`SignChange.CROSSING`), ``low`` and ``high`` (a crossing's interval of axis values where the
    interpolated mean is not significantly different from 0; for an untested or not significant change, the two
    cells it lies between; for none in range, the first and last cells); ``changes``, how many times the cell
    means change sign."""

    state: SignChange
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    changes: int = 0


_GRID = 2001  # points in log x over the axis range where the interpolant is tested against 0


def cell_crossing(x, y, confidence: float = CONFIDENCE) -> Crossing:
    """The crossing of ``y``'s cell means along ``x`` (module docstring)."""
    cells = cells_of(x, y)
    if cells.x.size < 2:
        return Crossing(SignChange.NO_TREND)
    log_x, mean, sem2 = np.log(cells.x), cells.mean, cells.sem2  # (k,) each
    signs = np.sign(mean)
    change = np.flatnonzero(signs[:-1] * signs[1:] <= 0)  # segments whose ends differ in sign (or touch 0)
    if change.size == 0:
        return Crossing(SignChange.NONE_IN_RANGE, math.nan, float(cells.x[0]), float(cells.x[-1]))
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
    between = (float(cells.x[i]), float(cells.x[i + 1]))
    accepted |= (centre == 0) & np.isfinite(variance)  # a cell mean of exactly 0, where its error is known
    if not accepted.any():  # no standard error where the sign changes (one model per cell there): untested
        return Crossing(SignChange.UNTESTED, math.nan, *between, change.size)
    if accepted[0] or accepted[-1]:
        return Crossing(SignChange.NOT_SIGNIFICANT, math.nan, *between, change.size)
    return Crossing(SignChange.CROSSING, estimate, math.exp(theta[accepted].min()), math.exp(theta[accepted].max()),
                    change.size)


def describe_crossing(crossing: Crossing, axis: str) -> str:
    """One line: where the claim's statistic changes sign along ``axis``, or that it does not in range.

    >>> describe_crossing(Crossing(SignChange.CROSSING, 11.3, 8.1, 17.2, 1), "depth")
    'crossing at depth = 11.3 [8.1, 17.2]'
    >>> describe_crossing(Crossing(SignChange.NOT_SIGNIFICANT, math.nan, 4.0, 8.0, 3), "depth")
    'sign change not significant (the cell means change sign between depth = 4 and 8); the cell means change sign 3 times'
    >>> describe_crossing(Crossing(SignChange.NONE_IN_RANGE, math.nan, 2.0, 64.0), "depth")
    'none in range (the cell means keep one sign from 2 to 64)'
    """
    more = f"; the cell means change sign {crossing.changes} times" if crossing.changes > 1 else ""
    if crossing.state is SignChange.CROSSING:
        return f"crossing at {axis} = {crossing.estimate:.3g} [{crossing.low:.3g}, {crossing.high:.3g}]{more}"
    if crossing.state is SignChange.NONE_IN_RANGE:
        return f"none in range (the cell means keep one sign from {crossing.low:.3g} to {crossing.high:.3g})"
    if crossing.state is SignChange.NO_TREND:
        return crossing.state.value
    return (f"{crossing.state.value} (the cell means change sign between {axis} = {crossing.low:g} and "
            f"{crossing.high:g}){more}")
