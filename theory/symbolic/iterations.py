"""P1's variance recursions iterated in float64 (numpy only: ``theory predict`` draws them without sympy).

The statements and their derived growth are in :mod:`theory.symbolic.bounds` (which re-exports these two), the
derivations in docs/derivations.md#p1-recursion-growth and docs/derivations.md#p1-lns-model.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["iterate_p1_lemma_3_2", "iterate_p1_lns"]


def iterate_p1_lemma_3_2(c_value, x0, steps):
    """Iterate ``x_{l+1} = x_l (1 + c/sqrt(x_l))`` in float64; returns ``x_0..x_steps``.

    Parameters
    ----------
    c_value : float
        The constant ``c > 0``.
    x0 : float
        ``sigma_0^2``.
    steps : int
        Number of layers.

    Returns
    -------
    numpy.ndarray
        ``steps + 1`` float64 values.

    Examples
    --------
    >>> iterate_p1_lemma_3_2(2.0, 1.0, 1)
    array([1., 3.])
    """
    return _iterate_sqrt_step(c_value, x0, steps, per_layer=False)


def iterate_p1_lns(c_value, x1, steps):
    """Iterate ``x_{l+1} = x_l (1 + c/(sqrt(x_l) sqrt(l)))`` from ``x_1``; returns ``x_1..x_{steps+1}``.

    Parameters
    ----------
    c_value : float
        The constant ``c > 0``.
    x1 : float
        ``sigma_1^2`` (the index starts at ``l = 1``).
    steps : int
        Number of layers.

    Returns
    -------
    numpy.ndarray
        ``steps + 1`` float64 values.

    Examples
    --------
    >>> iterate_p1_lns(2.0, 1.0, 1)
    array([1., 3.])
    """
    return _iterate_sqrt_step(c_value, x1, steps, per_layer=True)


def _iterate_sqrt_step(c_value, start, steps, per_layer: bool) -> np.ndarray:
    """``x <- x + c sqrt(x / l)`` at ``l = 1..steps`` (``per_layer``; else ``l`` stays 1), from ``start``.

    A scalar float loop (faster than numpy on one value); dividing by 1 is exact, so both
    recursions above run here unchanged.
    """
    value, c_value, sqrt = float(start), float(c_value), math.sqrt
    out = np.empty(steps + 1)
    out[0] = value
    if per_layer:
        for index in range(1, steps + 1):
            value += c_value * sqrt(value / index)
            out[index] = value
    else:
        for index in range(1, steps + 1):
            value += c_value * sqrt(value)
            out[index] = value
    return out
