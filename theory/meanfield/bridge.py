"""The bridge to trained models (docs/trained.md): aligned strengths, their recursion, growth fits.

Derived here (``docs/trained.md``). Block ``l`` maps the stream ``x = x_{l-1}`` to
``x_l = x + f``; ``f = x_l - x_{l-1}`` is the block's whole increment (the sum of its
sublayers' branches in a residual block; for Post-LN and DeepNorm blocks, which normalise
the sum, simply the difference). Pool the second moments of a batch over its tokens
(``E`` = mean over sequences and tokens, ``d`` = width):

    m_{l-1} = E ||x||^2 / d = sigma_{l-1}^2      (the stream's mean square)
    p_l     = E <f, x> / d                        (cross moment)
    q_l     = E ||f||^2 / d                       (branch mean square)

and define ``a_l = p_l / sigma_{l-1}`` and ``b_l = sqrt(q_l - a_l^2)`` (``>= 0`` by
Cauchy-Schwarz on the pooled sums). This is the split ``f = a_l x/sigma_{l-1} + b_l xi``
with ``E <xi, x> = 0`` and ``E ||xi||^2/d = 1``, and by linearity of the mean

    m_l = E ||x + f||^2 / d = (sigma_{l-1} + a_l)^2 + b_l^2

holds exactly (:func:`bridge_profile` runs it from ``m_0``). At random init ``a_l ~ 0``
(additive, linear growth); exponential growth in depth needs ``a_l`` to grow like
``sigma_{l-1}`` (docs/trained.md). The per-layer metric ``var`` is the unbiased feature
variance, ``var_l = d/(d-1) (m_l - E xbar^2)`` with ``xbar`` a token's feature mean, so
:func:`bridge_variance` (``d/(d-1) m_l``) misses ``var_l`` by exactly
``-d/(d-1) E xbar^2``: that is the bridge's error term (zero for LayerNorm-centred
increments at init, the DC part of the stream after training).

Growth over depth: :func:`loglog_slope` is the least-squares slope of ``log var`` on
``log l`` with a t interval over layers; :func:`fit_growth` fits ``c0 + c1 l^p`` or
``c0 + c1 e^(r l)`` (the offset absorbs the input's variance) and :func:`var_growth`
names the better of the two (over the blocks, layer 0 left out).

>>> a, b = aligned_strengths(np.array([1.0]), np.array([0.5]), np.array([0.5]))
>>> float(a[0]), float(b[0])
(0.5, 0.5)
>>> bridge_profile(1.0, a, b).tolist()  # (1 + 0.5)^2 + 0.5^2 = 2.5 = 1 + 2*0.5 + 0.5
[1.0, 2.5]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, stats

from theory.verdicts import GrowthClass

__all__ = ["aligned_strengths", "aligned_pseudo_values", "bridge_profile", "bridge_variance", "GrowthFit",
           "loglog_slope", "fit_growth", "var_growth"]

_TINY = 1e-300


def aligned_strengths(stream_ms, cross, branch_ms) -> tuple[np.ndarray, np.ndarray]:
    """``(a_l, b_l)`` from pooled moments ``m_{l-1}``, ``p_l``, ``q_l`` (arrays of one shape).

    ``a = p / sqrt(m)``, ``b = sqrt(max(q - a^2, 0))`` (derived here, module docstring).

    >>> aligned_strengths(np.array([4.0]), np.array([-1.0]), np.array([1.0]))
    (array([-0.5]), array([0.8660254]))
    """
    stream_ms, cross, branch_ms = (np.asarray(v, dtype=float) for v in (stream_ms, cross, branch_ms))
    a = cross / np.sqrt(np.maximum(stream_ms, _TINY))
    return a, np.sqrt(np.maximum(branch_ms - a * a, 0.0))


def aligned_pseudo_values(stream_ms, cross, branch_ms) -> tuple[np.ndarray, np.ndarray]:
    """Per-sequence pseudo-values of ``a`` and ``b`` (delta method): their mean is the pooled estimate.

    Inputs are per-sequence token means ``m_s``, ``p_s``, ``q_s`` of shape ``(..., S)``
    (sequences of equal length, so the pooled moment is the mean over ``S``). With
    ``A, B`` from :func:`aligned_strengths` of the means, the pseudo-values are the
    linearisation ``a_s = A + (p_s - P)/sigma - A (m_s - M)/(2M)`` and
    ``b_s = B + ((q_s - Q) - 2A (a_s - A))/(2B)`` (``B`` where ``B = 0``): their mean is
    exactly ``A`` (``B``) and their standard error over ``S`` is the delta-method one.

    >>> m, p, q = np.array([1.0, 3.0]), np.array([0.2, 0.6]), np.array([0.5, 0.9])
    >>> a_s, b_s = aligned_pseudo_values(m, p, q)
    >>> A, B = aligned_strengths(m.mean(), p.mean(), q.mean())
    >>> bool(np.isclose(a_s.mean(), A)), bool(np.isclose(b_s.mean(), B))
    (True, True)
    """
    m_s, p_s, q_s = (np.asarray(v, dtype=float) for v in (stream_ms, cross, branch_ms))
    big_m, big_p, big_q = (v.mean(-1, keepdims=True) for v in (m_s, p_s, q_s))  # (..., 1) each
    big_a, big_b = aligned_strengths(big_m, big_p, big_q)  # (..., 1) each
    sigma = np.sqrt(np.maximum(big_m, _TINY))
    a_s = big_a + (p_s - big_p) / sigma - big_a * (m_s - big_m) / (2 * np.maximum(big_m, _TINY))  # (..., S)
    safe_b = np.where(big_b > 0, big_b, 1.0)
    b_s = np.where(big_b > 0, big_b + ((q_s - big_q) - 2 * big_a * (a_s - big_a)) / (2 * safe_b), big_b)  # (..., S)
    return a_s, b_s


def bridge_profile(sigma0_sq, a, b) -> np.ndarray:
    """Mean squares ``sigma_l^2``, ``l = 0..L``, of ``sigma_{l+1}^2 = (sigma_l + a_{l+1})^2 + b_{l+1}^2``.

    ``a``, ``b`` have shape ``(..., L)`` (block 1 first); ``sigma0_sq`` broadcasts against
    ``(...)``. Derived here (docs/trained.md); exact for the measured ``a``, ``b`` of :func:`aligned_strengths`.

    >>> bridge_profile(1.0, np.zeros(3), np.ones(3)).tolist()  # a = 0: additive, linear growth
    [1.0, 2.0, 3.0, 4.0]
    >>> bridge_profile(1.0, np.array([1.0, 2.0]), np.zeros(2)).tolist()  # a = sigma: sigma doubles
    [1.0, 4.0, 16.0]
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    square = np.broadcast_to(np.asarray(sigma0_sq, dtype=float), a.shape[:-1]).copy()  # (...)
    profile = [square]
    for layer in range(a.shape[-1]):  # (sigma + a)^2 + b^2, expanded so that a = 0 adds b^2 exactly
        square = square + 2 * a[..., layer] * np.sqrt(square) + a[..., layer] ** 2 + b[..., layer] ** 2
        profile.append(square)
    return np.stack(profile, -1)  # (..., L+1)


def bridge_variance(sigma0_sq, a, b, width: int) -> np.ndarray:
    """The bridge's prediction of the per-layer ``var``: ``d/(d-1) sigma_l^2`` (token feature means taken as 0).

    Its error against the measured ``var`` is exactly ``-d/(d-1) E xbar^2`` (module docstring).

    >>> bridge_variance(1.0, np.zeros(1), np.ones(1), width=2).tolist()
    [2.0, 4.0]
    """
    return width / (width - 1) * bridge_profile(sigma0_sq, a, b)


class GrowthFit(NamedTuple):
    """A fit of a profile over depth; ``slope`` is the exponent (polynomial, log-log) or the rate (exponential)."""

    model: object  # 'loglog', or the GrowthClass fitted (POLYNOMIAL, EXPONENTIAL)
    slope: float  # exponent p (y ~ l^p) or rate r (y ~ e^(r l))
    ci_low: float
    ci_high: float
    rss: float  # residual sum of squares (relative residuals for the offset models, log y for loglog)
    n: int  # layers used
    # fit_growth only: the best slope lies at an end of the fitted range (the data want one beyond it), so
    # the slope is that end and the interval is NaN; an interval end the data do not bound inside the
    # range is 0 (below) or inf (above), never the range's end shown as if it were measured
    at_bound: bool = False


def loglog_slope(layers, values, confidence: float = 0.95) -> GrowthFit:
    """Least-squares slope of ``log values`` on ``log layers`` with a t interval over layers.

    Entries with ``values <= 0``, ``layers <= 0`` or non-finite values are left out; fewer
    than 3 left gives NaNs. Derived here (ordinary least squares).

    >>> round(loglog_slope(np.arange(1, 9), 3.0 * np.arange(1, 9) ** 2).slope, 6)
    2.0
    """
    layers, values = np.asarray(layers, dtype=float), np.asarray(values, dtype=float)
    keep = np.isfinite(values) & (values > 0) & (layers > 0)
    x, y = np.log(layers[keep]), np.log(values[keep])  # (n,) each
    n = int(keep.sum())
    if n < 3 or np.ptp(x) == 0:
        return GrowthFit("loglog", math.nan, math.nan, math.nan, math.nan, n)
    xc, yc = x - x.mean(), y - y.mean()
    slope = float((xc * yc).sum() / (xc * xc).sum())
    rss = float(((yc - slope * xc) ** 2).sum())
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 2)) * math.sqrt(rss / (n - 2) / float((xc * xc).sum()))
    return GrowthFit("loglog", slope, slope - half, slope + half, rss, n)


# Profile grids: exponents p of c0 + c1 l^p, rates r*L of c0 + c1 e^(r l) (log-spaced).
_FITTED = (GrowthClass.POLYNOMIAL, GrowthClass.EXPONENTIAL)  # the classes fit_growth fits
_EXPONENTS = np.geomspace(0.02, 8.0, 600)
_RATES_TIMES_DEPTH = np.geomspace(1e-3, 200.0, 600)


class _ProfileRSS:
    """Relative-residual RSS of the best ``c0 + c1 b`` for each basis row ``b`` of ``values``' layers: (K, n) -> (K,).

    Every row's least squares at once, as ``np.linalg.lstsq`` solves one, without a factorisation per row: the
    columns ``w`` (the weights ``1/|values|``) and ``b w`` are made orthonormal (Gram-Schmidt), the second
    dropped where the design's smaller singular value is below lstsq's default cutoff (machine epsilon x
    max(n, 2) x the larger; both from the 2 x 2 Gram matrix). What depends on ``values`` alone is made once:
    the profile is called about 40 times per fit.
    """

    def __init__(self, values: np.ndarray):
        weight = 1.0 / np.abs(values)  # (n,) relative residuals: every layer counts, whatever its scale
        target = values * weight  # (n,)
        self.weight, self.weight2 = weight, float(weight @ weight)
        self.first = weight / math.sqrt(self.weight2)  # (n,)
        self.rest = target - (self.first @ target) * self.first  # (n,) the target's part orthogonal to the offset
        self.cutoff = np.finfo(float).eps * max(values.size, 2)

    def __call__(self, basis: np.ndarray) -> np.ndarray:
        column = basis * self.weight  # (K, n)
        along_first = column @ self.first  # (K,)
        other = column - along_first[:, None] * self.first  # (K, n) orthogonal to the first column
        other2, column2 = np.einsum("kn,kn->k", other, other), np.einsum("kn,kn->k", column, column)  # (K,) each
        half_sum, half_diff = (self.weight2 + column2) / 2, (self.weight2 - column2) / 2
        larger2 = half_sum + np.sqrt(half_diff**2 + self.weight2 * along_first**2)  # (K,) sigma_1^2 (w.bw = a_f |w|)
        kept = np.sqrt(self.weight2 * other2) > self.cutoff * larger2  # (K,) sigma_2 > cutoff sigma_1
        coefficient = np.where(kept, (other @ self.rest) / np.where(kept, other2, 1.0), 0.0)  # (K,)
        residual = self.rest - coefficient[:, None] * other  # (K, n)
        return np.einsum("kn,kn->k", residual, residual)


def fit_growth(layers, values, model: GrowthClass = GrowthClass.POLYNOMIAL, confidence: float = 0.95,
               interval: bool = True) -> GrowthFit:
    """Fit ``values ~ c0 + c1 l^p`` (polynomial) or ``c0 + c1 e^(r l)`` (exponential) over ``layers``.

    The offset ``c0`` absorbs the input's variance, so ``p`` is the log-log slope of the
    excess ``values - c0`` (``p = 1``: linear, the random-init regime of Pre-LN). Weighted
    least squares on relative residuals; ``p`` (or ``r``) by profiling over a log grid (``p`` in
    [0.02, 8], ``r L`` in [1e-3, 200]), its interval by the profile F test
    (``RSS <= RSS_min (1 + F_{1,n-3}/(n-3))``). Where the profile does not cross the threshold
    inside the grid, that end is open: 0 below, ``inf`` above. Where the best value is at an end
    of the grid, ``at_bound`` is set and the interval is NaN: the range, not the data, stopped the
    fit. ``interval=False`` leaves the interval NaN (the estimate and the RSS alone, as a growth class needs: the
    crossings are about half of a fit's time). Derived here.

    >>> l = np.arange(0, 17)
    >>> exponential = GrowthClass.EXPONENTIAL
    >>> round(fit_growth(l, 1.0 + 0.1 * l).slope, 2), round(fit_growth(l, 2.0 * 1.1**l, exponential).slope, 2)
    (1.0, 0.1)
    >>> fit_growth(l, 1.0 + np.log1p(l) ** 0.01).at_bound  # flatter than any l^p with p >= 0.02
    True
    """
    if model not in _FITTED:
        raise ValueError(f"model={model!r} is not allowed: {' or '.join(map(str, _FITTED))}")
    layers, values = np.asarray(layers, dtype=float), np.asarray(values, dtype=float)
    keep = np.isfinite(values) & (values != 0)
    layers, values = layers[keep], values[keep]  # (n,) each
    n = int(keep.sum())
    if n < 4 or np.ptp(layers) == 0:
        return GrowthFit(model, math.nan, math.nan, math.nan, math.nan, n)
    span = float(layers.max())
    grid = _EXPONENTS if model is GrowthClass.POLYNOMIAL else _RATES_TIMES_DEPTH / span

    def basis(params: np.ndarray) -> np.ndarray:  # (K,) -> (K, n), entries <= 1
        if model is GrowthClass.POLYNOMIAL:
            return (layers[None, :] / span) ** params[:, None]
        return np.exp(params[:, None] * (layers[None, :] - span))

    profile_rss = _ProfileRSS(values)
    rss = profile_rss(basis(grid))  # (K,)
    profile = lambda t: profile_rss(basis(np.array([math.exp(t)])))[0]  # noqa: E731
    best = int(np.argmin(rss))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    refined = optimize.minimize_scalar(profile, bounds=(math.log(low), math.log(high)), method="bounded",
                                       options={"xatol": 1e-10})
    slope, rss_min = (math.exp(refined.x), float(refined.fun)) if refined.fun < rss[best] else (grid[best], rss[best])
    if best in (0, grid.size - 1):
        return GrowthFit(model, float(slope), math.nan, math.nan, float(rss_min), n, at_bound=True)
    if not interval:
        return GrowthFit(model, float(slope), math.nan, math.nan, float(rss_min), n)
    threshold = rss_min * (1.0 + float(stats.f.ppf(confidence, 1, n - 3)) / (n - 3))
    ends = [_crossing(profile, grid, rss, threshold, slope, side) for side in (-1, 1)]
    return GrowthFit(model, float(slope), ends[0], ends[1], float(rss_min), n)


def _crossing(profile, grid: np.ndarray, rss: np.ndarray, threshold: float, slope: float, side: int) -> float:
    """Where the profile RSS crosses ``threshold`` beside ``slope`` (side -1: below, +1: above).

    No crossing inside the grid: the data do not bound that side, 0 below and ``inf`` above.
    """
    outside = np.nonzero((rss > threshold) & ((grid < slope) if side < 0 else (grid > slope)))[0]
    if outside.size == 0:
        return 0.0 if side < 0 else math.inf
    edge = int(outside.max() if side < 0 else outside.min())
    inner = math.log(slope)
    try:
        return math.exp(optimize.brentq(lambda t: profile(t) - threshold, *sorted((math.log(grid[edge]), inner)),
                                        xtol=1e-12))
    except ValueError:  # no sign change (a flat profile at rounding level)
        return float(grid[edge])


def var_growth(var, confidence: float = 0.95, intervals: bool = True) -> dict:
    """Growth of a variance profile ``var`` (``(L+1,)``, layer 0 first) over the blocks ``l = 1..L``, three ways.

    ``loglog``: :func:`loglog_slope` of ``var_l``; :data:`~theory.verdicts.GrowthClass.POLYNOMIAL` and
    ``EXPONENTIAL``: :func:`fit_growth`; ``class`` is exponential where the exponential offset model has
    the smaller residual sum of squares (both have three parameters) and its rate grows the
    profile by at least a factor e over the depth (``r L >= 1``; a smaller rate is linear
    growth plus curvature, which the polynomial model also describes), else polynomial.
    Layer 0 (the embedding) is left out: a first block that rescales the embedding (common
    after training) would otherwise decide the fit. ``intervals=False``: the fits without their intervals
    (:func:`fit_growth`'s ``interval``), enough for the class.

    >>> l = np.arange(0, 17)
    >>> str(var_growth(1.0 + 0.1 * l)["class"]), str(var_growth(0.5 + 1.2 ** l)["class"])
    ('polynomial', 'exponential')
    """
    var = np.asarray(var, dtype=float)
    layers, blocks = np.arange(1, var.shape[0]), var[1:]
    power = fit_growth(layers, blocks, GrowthClass.POLYNOMIAL, confidence, intervals)
    expo = fit_growth(layers, blocks, GrowthClass.EXPONENTIAL, confidence, intervals)
    if not (np.isfinite(power.rss) and np.isfinite(expo.rss)):
        label = GrowthClass.UNDETERMINED
    elif expo.rss < power.rss and expo.slope * layers.max() >= 1.0:
        label = GrowthClass.EXPONENTIAL
    else:
        label = GrowthClass.POLYNOMIAL
    return {"loglog": loglog_slope(layers, blocks, confidence), GrowthClass.POLYNOMIAL: power,
            GrowthClass.EXPONENTIAL: expo, "class": label}
