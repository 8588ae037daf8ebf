"""Gaussian expectations of activations by quadrature (numpy only, no sampling).

For ``z ~ N(0, q)`` this module computes, vectorised over an array of variances ``q``:

- :func:`second_moment` ``E[phi(z)^2]`` (ReLU exact ``q/2``; SwiGLU ``E[silu(z1)^2] E[z2^2]``),
- :func:`derivative_moment` ``E[phi'(z)^2]`` (ReLU exact ``1/2``), for Jacobian terms,
- :func:`swiglu_jvp_gain` ``q E[silu'(z)^2] + E[silu(z)^2]`` (the SwiGLU tangent gain),
- :func:`dual_kernel` ``E[phi(z) phi(z')]`` for ``(z, z')`` with variance ``q`` and
  correlation ``r`` (ReLU: the arc-cosine closed form; others by 2-D Gauss-Hermite),
  :func:`derivative_kernel` the same for ``phi'``.

Quadrature (derived here, docs/derivations.md#gaussian-quadrature; errors measured against ``scipy.integrate.quad`` with
``epsrel=1e-13`` and against a rule of twice the order):

- ``q <= 2``: probabilists' Gauss-Hermite with 96 nodes, relative error < 1e-12 for
  GELU and SiLU (the integrands are analytic in a strip that is wide for small ``q``).
- ``q > 2``: Gauss-Hermite degrades (the kink of width ``1/sqrt(q)`` at 0 is not
  resolved: 2e-4 at ``q = 100`` with 160 nodes), so the ReLU part is taken exactly
  (``q/2`` resp. ``1/2``) and the remainder ``phi^2 - relu^2`` (``phi'^2 - 1{z>0}``),
  which decays like ``exp(-|z|)``, is integrated in ``z`` on ``[-64, 64]`` with
  composite 24-node Gauss-Legendre panels of width 2 split at 0; relative error
  < 1e-11 for ``2 < q <= 1e8``.
- :func:`dual_kernel` for GELU/SiLU: a 64 x 64 tensor Gauss-Hermite rule; error vs.
  128 x 128, relative to ``E[phi^2]``: < 1e-12 for ``q <= 2``, 3e-5 at ``q = 10``,
  4e-3 at ``q = 100`` (the kink again, not split off here; ReLU is exact). Large ``q``
  only arises for un-normalised streams (schemes none/post at layer 1).

>>> import numpy as np
>>> second_moment("relu", np.array([0.5, 2.0]))
array([0.25, 1.  ])
>>> round(float(second_moment("silu", 1.0)), 10)
0.3557755198
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.polynomial.hermite_e import hermegauss

__all__ = [
    "ACTIVATION_NAMES", "logistic", "activation", "activation_derivative", "gauss_hermite",
    "gaussian_expectation", "second_moment", "derivative_moment", "swiglu_jvp_gain",
    "dual_kernel", "relu_dual_kernel", "derivative_kernel", "many_moments", "not_a_knot_spline",
]

ACTIVATION_NAMES = ("relu", "gelu", "silu", "swiglu")
_GH_ORDER = 96
_SPLIT_Q = 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def logistic(z):
    """The logistic sigmoid ``1/(1 + e^-z)`` as ``exp(-log(1 + e^-z))`` (``np.logaddexp``): no overflow at any ``z``,
    within a few ulps of ``scipy.special.expit``.

    >>> logistic(np.array([-1000.0, 0.0, 1000.0])).tolist()
    [0.0, 0.5, 1.0]
    """
    return np.exp(-np.logaddexp(0.0, -np.asarray(z, dtype=float)))


def activation(name: str):
    """The element-wise activation ``phi`` (GELU in its exact erf form; SwiGLU's gate is SiLU).

    The function maps an array to an array of the same shape.

    >>> activation("relu")(np.array([-1.0, 2.0])).tolist(), float(activation("silu")(0.0))
    ([0.0, 2.0], 0.0)
    """
    if name == "relu":
        return lambda z: np.maximum(z, 0.0)
    if name == "gelu":
        from scipy.special import erf  # GELU only: scipy.special takes a fifth of a second to import

        return lambda z: 0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))
    if name in ("silu", "swiglu"):
        return lambda z: z * logistic(z)
    raise ValueError(f"activation={name!r} is not one of {', '.join(ACTIVATION_NAMES)}")


def activation_derivative(name: str):
    """``phi'``: ReLU step, GELU ``Phi(z) + z N(z)``, SiLU ``sig(z) (1 + z (1 - sig(z)))`` (shape-preserving).

    >>> activation_derivative("relu")(np.array([-1.0, 2.0])).tolist(), float(activation_derivative("gelu")(0.0))
    ([0.0, 1.0], 0.5)
    """
    if name == "relu":
        return lambda z: (z > 0).astype(float)
    if name == "gelu":
        from scipy.special import erf

        return lambda z: 0.5 * (1.0 + erf(z / math.sqrt(2.0))) + z * np.exp(-0.5 * z * z) / _SQRT_2PI
    if name in ("silu", "swiglu"):
        return lambda z: logistic(z) * (1.0 + z * (1.0 - logistic(z)))
    raise ValueError(f"activation={name!r} is not one of {', '.join(ACTIVATION_NAMES)}")


@lru_cache(maxsize=8)
def gauss_hermite(order: int = _GH_ORDER) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights with ``sum_i w_i f(x_i) ~ E[f(x)]``, ``x ~ N(0, 1)``.

    >>> x, w = gauss_hermite(8)
    >>> round(float(w @ x**4), 12)
    3.0
    """
    nodes, weights = hermegauss(order)
    return nodes, weights / _SQRT_2PI


@lru_cache(maxsize=2)
def _panels(half_width: float = 64.0, panel: float = 2.0, order: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre nodes/weights on ``[-half_width, half_width]``, split at 0."""
    x, w = np.polynomial.legendre.leggauss(order)
    edges = np.arange(0.0, half_width + panel / 2, panel)
    left, right = edges[:-1], edges[1:]
    half = (right - left)[:, None] / 2
    nodes = ((left + right)[:, None] / 2 + half * x).ravel()  # (panels*order,)
    weights = (half * w).ravel()
    return np.concatenate([-nodes[::-1], nodes]), np.concatenate([weights[::-1], weights])


def gaussian_expectation(func, q, order: int = _GH_ORDER) -> np.ndarray:
    """``E[func(z)]`` for ``z ~ N(0, q)`` by Gauss-Hermite, vectorised over ``q``.

    Accurate for integrands analytic in a wide strip (see the module docstring).

    >>> round(float(gaussian_expectation(lambda z: z**2, 3.0)), 12)
    3.0
    """
    q = np.asarray(q, dtype=float)
    x, w = gauss_hermite(order)
    values = func(np.sqrt(q)[..., None] * x)  # (*q.shape, order)
    return values @ w


def _split_expectation(func, relu_part, relu_mean, q) -> np.ndarray:
    """``E[func(z)]`` for large ``q``: exact ReLU part + panels for ``func - relu_part``."""
    y, w = _panels()
    q = np.asarray(q, dtype=float)
    density = np.exp(-0.5 * y**2 / q[..., None]) / np.sqrt(2 * np.pi * q[..., None])  # (*q, nodes)
    return relu_mean(q) + (density * (func(y) - relu_part(y))) @ w


def _by_regime(func, relu_part, relu_mean, q) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    out = np.empty_like(q)
    small = q <= _SPLIT_Q
    if small.any():
        out[small] = gaussian_expectation(func, q[small])
    if not small.all():  # the panels cost their nodes' integrand even for no q
        out[~small] = _split_expectation(func, relu_part, relu_mean, q[~small])
    return out


def second_moment(name: str, q) -> np.ndarray:
    """``E[phi(z)^2]``, ``z ~ N(0, q)``; for ``swiglu`` the product ``E[silu(z1)^2] E[z2^2]``.

    Source: derived here (docs/derivations.md#sublayer-increments: the MLP increment ``d_ff s^2 E[phi(z)^2]``).
    ReLU exact ``q/2``; GELU/SiLU by quadrature (module docstring for the error).

    >>> round(float(second_moment("gelu", 1.0)), 10), float(second_moment("swiglu", 0.0))
    (0.4252214826, 0.0)
    """
    q = np.asarray(q, dtype=float)
    if name == "relu":
        return q / 2
    phi = activation(name)
    moment = _by_regime(lambda z: phi(z) ** 2, lambda z: np.maximum(z, 0.0) ** 2, lambda v: v / 2, q)
    return moment * q if name == "swiglu" else moment


def derivative_moment(name: str, q) -> np.ndarray:
    """``E[phi'(z)^2]``, ``z ~ N(0, q)`` (for ``swiglu`` that of the SiLU gate).

    Source: derived here (docs/derivations.md#gaussian-quadrature).
    ReLU exact ``1/2``; at ``q -> 0`` GELU/SiLU give ``1/4``.

    >>> float(derivative_moment("relu", 3.0)), round(float(derivative_moment("gelu", 1e-12)), 9)
    (0.5, 0.25)
    """
    q = np.asarray(q, dtype=float)
    if name == "relu":
        return np.full_like(q, 0.5)
    dphi = activation_derivative(name)
    return _by_regime(lambda z: dphi(z) ** 2, lambda z: (z > 0).astype(float),
                      lambda v: np.full_like(v, 0.5), q)


def swiglu_jvp_gain(q) -> np.ndarray:
    """``q E[silu'(z1)^2] + E[silu(z1)^2]`` with ``z1 ~ N(0, q)``.

    Source: derived here (docs/derivations.md#jacobian-init). The SwiGLU hidden unit ``silu(z1) z3`` has tangent
    ``silu'(z1) dz1 z3 + silu(z1) dz3``; with ``dz1, dz3`` independent of ``(z1, z3)``
    (the tangent is orthogonal to the normalised input) and ``E z3^2 = q``, its second
    moment per unit tangent variance is this gain.

    >>> round(float(swiglu_jvp_gain(1e-12)), 9)
    0.0
    """
    q = np.asarray(q, dtype=float)
    return q * derivative_moment("silu", q) + second_moment("silu", q)


def relu_dual_kernel(q, r) -> np.ndarray:
    """``E[relu(z) relu(z')] = q (sqrt(1-r^2) + (pi - arccos r) r)/(2 pi)`` (arc-cosine kernel).

    Source: Cho & Saul (2009), degree-1 arc-cosine kernel.

    >>> float(relu_dual_kernel(2.0, 1.0)), round(float(relu_dual_kernel(2.0, 0.0)), 6)
    (1.0, 0.31831)
    """
    r = np.clip(np.asarray(r, dtype=float), -1.0, 1.0)
    return np.asarray(q, dtype=float) * (np.sqrt(1 - r * r) + (np.pi - np.arccos(r)) * r) / (2 * np.pi)


def dual_kernel(name: str, q, r, order: int = 64) -> np.ndarray:
    """``E[phi(z) phi(z')]``, ``(z, z')`` centred Gaussian, variances ``q``, correlation ``r``.

    For ``swiglu`` the hidden unit is ``silu(z1) z3`` with independent pairs, so the
    kernel is ``E[silu(z1) silu(z1')] * q r``. Broadcasts ``q`` against ``r``.
    Source: derived here (docs/derivations.md#dual-kernels; dual activation;
    ReLU closed form by :func:`relu_dual_kernel`).

    >>> abs(float(dual_kernel("gelu", 1.0, 1.0)) - float(second_moment("gelu", 1.0))) < 1e-9  # r = 1: E[phi^2]
    True
    """
    q, r = np.broadcast_arrays(np.asarray(q, dtype=float), np.clip(np.asarray(r, dtype=float), -1, 1))
    if name == "relu":
        return relu_dual_kernel(q, r)
    phi = activation(name)
    x, w = gauss_hermite(order)
    sq = np.sqrt(q)[..., None, None]
    rr = r[..., None, None]
    z1 = sq * x[:, None]  # (*shape, order, 1)
    z2 = sq * (rr * x[:, None] + np.sqrt(1 - rr * rr) * x[None, :])  # (*shape, order, order)
    kernel = np.einsum("...ij,i,j->...", phi(z1) * phi(z2), w, w)
    return kernel * q * r if name == "swiglu" else kernel


def derivative_kernel(name: str, q, r, order: int = 64) -> np.ndarray:
    """``E[phi'(z) phi'(z')]``, ``(z, z')`` centred Gaussian, variances ``q``, correlation ``r``.

    For ``swiglu`` that of the SiLU gate. ReLU: ``(pi - arccos r)/(2 pi)`` (degree-0
    arc-cosine kernel, Cho & Saul 2009); GELU/SiLU: 64 x 64 Gauss-Hermite as
    :func:`dual_kernel` (same error statement). Source: derived here
    (docs/derivations.md#dual-kernels; tangent covariance
    between tokens of an MLP branch, :mod:`theory.meanfield.covariance`).

    >>> round(float(derivative_kernel("relu", 1.0, 0.0)), 12), round(float(derivative_kernel("relu", 2.0, 1.0)), 12)
    (0.25, 0.5)
    """
    q, r = np.broadcast_arrays(np.asarray(q, dtype=float), np.clip(np.asarray(r, dtype=float), -1, 1))
    if name == "relu":
        return (np.pi - np.arccos(r)) / (2 * np.pi) + 0.0 * q
    dphi = activation_derivative(name)
    x, w = gauss_hermite(order)
    sq = np.sqrt(q)[..., None, None]
    rr = r[..., None, None]
    z1 = sq * x[:, None]
    z2 = sq * (rr * x[:, None] + np.sqrt(1 - rr * rr) * x[None, :])
    return np.einsum("...ij,i,j->...", dphi(z1) * dphi(z2), w, w)


def many_moments(func, q, max_direct: int = 4096) -> np.ndarray:
    """``func(q)`` (one of the moments above) for a large array ``q`` of positive variances.

    Evaluates ``func`` on the unique values when ``q`` has at most ``max_direct`` entries;
    otherwise on a log-spaced grid (40 points per decade) and interpolates
    ``log func(q)`` by a not-a-knot cubic spline in ``log q`` (:func:`not_a_knot_spline`; relative error < 5e-9
    for the moments of this module on ``[1e-9, 1e3]``, checked in the tests). For ``q <= 0`` the value is
    ``func(0)``.

    >>> q = np.array([1.0, 1.0, 2.0])
    >>> bool(np.allclose(many_moments(lambda x: second_moment("silu", x), q), second_moment("silu", q)))
    True
    """
    q = np.asarray(q, dtype=float)
    if q.size <= max_direct or q.min() <= 0:
        unique, inverse = np.unique(q, return_inverse=True)
        return func(unique)[inverse].reshape(q.shape)
    lo, hi = math.log10(q.min()), math.log10(q.max())
    if hi - lo < 1e-12:
        return np.full(q.shape, float(func(np.array([q.flat[0]]))[0]))
    grid = np.linspace(lo, hi, max(8, int(math.ceil((hi - lo) * 40)) + 1))
    values = func(10.0**grid)
    return np.exp(not_a_knot_spline(grid, np.log(values), np.log10(q)))


def not_a_knot_spline(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The not-a-knot cubic spline through ``(x, y)`` (n >= 4 increasing knots) at the points ``at`` (any shape),
    extrapolated by the end pieces: ``scipy.interpolate.CubicSpline(x, y)(at)`` to rounding, without importing
    ``scipy.interpolate`` (most of a second; docs/design.md#speed-of-the-theory).

    The knot slopes ``s`` solve scipy's tridiagonal system (interior rows
    ``dx_i s_{i-1} + 2 (dx_{i-1} + dx_i) s_i + dx_{i-1} s_{i+1} = 3 (dx_i m_{i-1} + dx_{i-1} m_i)``, ``m`` the
    secant slopes; the end rows make the third derivative continuous at the second and last-but-one knots),
    here by the Thomas algorithm; each piece is then the cubic Hermite interpolant of its end values and slopes.

    >>> x = np.linspace(0.0, 1.0, 6)
    >>> not_a_knot_spline(x, x**3 - x, np.array([0.25, 1.5])).round(12).tolist()  # a cubic is reproduced
    [-0.234375, 1.875]
    """
    n, dx = len(x), np.diff(x)
    slope = np.diff(y) / dx
    lower, diag, upper, rhs = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    lower[1:-1], diag[1:-1], upper[1:-1] = dx[1:], 2 * (dx[:-1] + dx[1:]), dx[:-1]
    rhs[1:-1] = 3 * (dx[1:] * slope[:-1] + dx[:-1] * slope[1:])
    first, last = x[2] - x[0], x[-1] - x[-3]
    diag[0], upper[0] = dx[1], first
    rhs[0] = ((dx[0] + 2 * first) * dx[1] * slope[0] + dx[0] ** 2 * slope[1]) / first
    lower[-1], diag[-1] = last, dx[-2]
    rhs[-1] = (dx[-1] ** 2 * slope[-2] + (2 * last + dx[-1]) * dx[-2] * slope[-1]) / last
    for i in range(1, n):  # forward elimination
        w = lower[i] / diag[i - 1]
        diag[i] -= w * upper[i - 1]
        rhs[i] -= w * rhs[i - 1]
    s = np.empty(n)
    s[-1] = rhs[-1] / diag[-1]
    for i in range(n - 2, -1, -1):  # back substitution
        s[i] = (rhs[i] - upper[i] * s[i + 1]) / diag[i]
    t = (s[:-1] + s[1:] - 2 * slope) / dx
    cubic, square = t / dx, (slope - s[:-1]) / dx - t  # per piece: y_i + s_i h + square h^2 + cubic h^3
    piece = np.clip(np.searchsorted(x, at, side="right") - 1, 0, n - 2)
    h = at - x[piece]
    return ((cubic[piece] * h + square[piece]) * h + s[:-1][piece]) * h + y[:-1][piece]
