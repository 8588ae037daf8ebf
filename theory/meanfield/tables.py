"""Interpolation tables of the mean-field recursions: softmax row moments and activation kernels.

- :class:`AttentionTable` (:func:`attention_table`): ``S(tau2)``, the position-averaged
  ``E[sum_j a_tj^2]`` of softmax rows (:mod:`theory.meanfield.softmax_rows`), and the pair
  overlap ``P`` of uniform rows.
- :class:`KernelTable` (:func:`kernel_table`, :func:`derivative_table`): the output
  correlation ``kappa(q, r) = K(q, r)/K(q, 1)`` of an activation (dual kernel,
  :mod:`theory.meanfield.gaussian`) or of its derivative, on a ``(log q, arccos r)`` grid.

Tables are cached (``lru_cache``) and immutable (a kernel table computes each cell when it is first
read). Source: derived here (docs/derivations.md#softmax-square-sum, docs/derivations.md#dual-kernels).

>>> tab = kernel_table("relu", 1.0, 1.0)
>>> round(float(tab.correlation(1.0, 1.0)), 9)
1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np

from theory.meanfield.gaussian import derivative_kernel, derivative_moment, dual_kernel, second_moment
from theory.meanfield.softmax_rows import causal_pair_overlap, key_norm_nodes, position_averaged_square_sum

__all__ = ["AttentionTable", "attention_table", "KernelTable", "kernel_table", "derivative_table"]


@dataclass(frozen=True)
class AttentionTable:
    """``S(tau2)``, position-averaged ``E[sum_j a_tj^2]``, by interpolation, and ``P``.

    ``S`` includes the average over the key norm ``X ~ chi^2_hd`` (8-node generalised
    Gauss-Laguerre). Interpolation: ``log S`` linear in ``tau2`` on a uniform grid;
    beyond ``tau2_max`` the last value is used (documented clip).
    """

    tau2_grid: np.ndarray
    log_s: np.ndarray
    pair_overlap: float

    def square_sum(self, tau2) -> np.ndarray:
        """``S`` at ``tau2`` (clipped to the grid); same shape as ``tau2``.

        >>> attention_table(4, False, 8, 1.0).square_sum(np.array([0.0, 1.0, 5.0])).round(4).tolist()  # 5: clipped
        [0.25, 0.3852, 0.3852]
        """
        return np.exp(np.interp(tau2, self.tau2_grid, self.log_s))


@lru_cache(maxsize=32)
def attention_table(tokens: int, causal: bool, head_dim: int, tau2_max: float) -> AttentionTable:
    """Tabulate :class:`AttentionTable` on ``tau2 in [0, tau2_max]`` (cached).

    >>> tab = attention_table(8, True, 16, 0.0)
    >>> abs(float(tab.square_sum(0.0)) - sum(1 / t for t in range(1, 9)) / 8) < 1e-12
    True
    """
    grid = np.linspace(0.0, max(tau2_max, 1e-12), 41)
    scale, weights = key_norm_nodes(head_dim)  # X/hd at the nodes, X ~ chi^2_hd; (8,) each
    base_grid = np.linspace(0.0, grid[-1] * scale.max(), 25)
    base = np.log(position_averaged_square_sum(tokens, causal, base_grid))  # (25,)
    smoothed = np.exp(np.interp(grid[:, None] * scale, base_grid, base)) @ weights  # (41,)
    overlap = causal_pair_overlap(tokens) if causal else 1.0 / tokens
    return AttentionTable(grid, np.log(smoothed), overlap)


@dataclass(frozen=True)
class KernelTable:
    """Output correlation ``kappa(q, r) = K(q, r)/K(q, 1)`` of an activation.

    Tabulated on a uniform grid in ``(log q, theta = arccos r)`` (the arc-cosine kernels
    are smooth in ``theta``) and interpolated bilinearly with index arithmetic (no search);
    ``q`` is clipped to ``[max(q_min, 1e-4), q_max]`` (below 1e-4 the correlation is at its
    small-``q`` limit up to O(q), < 1e-4). Error for ``r >= 0``: < 3e-4 for ``q <= 2`` (checked in
    the tests); for larger ``q`` (un-normalised streams) up to ~1e-3 (GELU at ``q = 10``).

    A cell is computed when it is first read (:meth:`cells`, by ``cell(i, j)``), so a table over
    a wide ``q`` range costs only the cells a recursion reads: an un-normalised stream's table
    spans ``q`` in ``[1e-4, 1e8]`` (113 x 129 cells of a 64 x 64 quadrature each, seconds), of which
    a stack reads a few hundred. The values are those of the whole grid computed at once.
    """

    log_q: np.ndarray
    theta: np.ndarray
    cell: Callable[[np.ndarray, np.ndarray], np.ndarray]  # kappa at grid indices (i, j), arrays (n,)
    kappa: np.ndarray = field(init=False, repr=False, compare=False)  # (len(log_q), len(theta)), NaN: not read yet

    def __post_init__(self):
        object.__setattr__(self, "kappa", np.full((len(self.log_q), len(self.theta)), np.nan))

    def cells(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """``kappa`` at the grid indices ``(i, j)`` (integer arrays of one shape), computing the cells not read before.

        >>> tab = kernel_table("relu", 1.0, 1.0)
        >>> tab.cells(np.array([0, 0]), np.array([0, 128])).round(6).tolist()  # r = 1 and r = -1
        [1.0, 0.0]
        """
        return self._flat_cells(i * len(self.theta) + j)

    def _flat_cells(self, flat: np.ndarray) -> np.ndarray:
        """``kappa`` at the flat (C-order) grid indices ``flat``, computing the cells not read before."""
        kappa = self.kappa.reshape(-1)  # a view: kappa is C-contiguous
        values = kappa[flat]
        missing = np.isnan(values)
        if missing.any():
            rows, cols = np.divmod(np.unique(flat[missing]), len(self.theta))
            self.kappa[rows, cols] = self.cell(rows, cols)
            values = kappa[flat]
        return values

    def correlation(self, q, r) -> np.ndarray:
        """``kappa`` at ``(q, r)`` (broadcast together; returns their broadcast shape).

        >>> kernel_table("relu", 1.0, 1.0).correlation(np.array([1.0, 1.0]), np.array([0.0, 1.0])).round(6).tolist()
        [0.31831, 1.0]
        """
        lq = np.log(np.asarray(q, dtype=float))
        th = np.arccos(np.clip(np.asarray(r, dtype=float), -1.0, 1.0))
        fq = np.clip((lq - self.log_q[0]) / (self.log_q[1] - self.log_q[0]), 0, len(self.log_q) - 1.000001)
        ft = np.clip(th / (self.theta[1] - self.theta[0]), 0, len(self.theta) - 1.000001)
        i, j = fq.astype(np.int64), ft.astype(np.int64)  # each its own shape: broadcast by the sums below
        fq, ft = fq - i, ft - j
        cols = len(self.theta)
        flat = np.asarray(i * cols + j)  # (shape): the cell (i, j) of each point
        corner = self._flat_cells(flat + np.array([0, 1, cols, cols + 1]).reshape((4,) + (1,) * flat.ndim))
        rest = 1 - ft
        low = corner[0] * rest + corner[1] * ft
        high = corner[2] * rest + corner[3] * ft
        return low * (1 - fq) + high * fq


def _kernel_grid(q_min: float, q_max: float) -> tuple[np.ndarray, np.ndarray]:
    """The :class:`KernelTable` grid: ``log q`` in steps of at most 0.25 over ``[max(q_min, 1e-4), q_max]``,
    and 129 values of ``theta`` on ``[0, pi]``."""
    lo, hi = math.log(max(q_min, 1e-4)), math.log(max(q_max, q_min, 1e-4))
    log_q = np.linspace(lo, hi + 1e-9, max(2, int(np.ceil((hi - lo) / 0.25)) + 2))
    return log_q, np.linspace(0.0, np.pi, 129)


@lru_cache(maxsize=32)
def kernel_table(name: str, q_min: float, q_max: float) -> KernelTable:
    """Tabulate the output correlation of ``name`` for ``q`` in ``[q_min, q_max]``, ``r in [-1, 1]``.

    >>> tab = kernel_table("relu", 1.0, 1.0)
    >>> round(float(tab.correlation(1.0, 0.0)), 6)  # 1/pi
    0.31831
    """
    log_q, theta = _kernel_grid(q_min, q_max)
    q, r = np.exp(log_q), np.cos(theta)
    order, norm = 32 if q_max <= 2 else 64, second_moment(name, q)  # norm (nq,)
    return KernelTable(log_q, theta, lambda i, j: dual_kernel(name, q[i], r[j], order=order) / norm[i])


@lru_cache(maxsize=16)
def derivative_table(name: str, q_min: float, q_max: float):
    """:class:`KernelTable` of ``phi'``: ``E[phi'(z) phi'(z')]/E[phi'(z)^2]`` on ``(log q, arccos r)`` (cached).

    >>> tab = derivative_table("relu", 1.0, 1.0)
    >>> round(float(tab.correlation(1.0, 0.0)), 12), round(float(tab.correlation(1.0, 1.0)), 12)  # (pi - arccos r)/pi
    (0.5, 1.0)
    """
    log_q, theta = _kernel_grid(q_min, q_max)
    q, r = np.exp(log_q), np.cos(theta)
    norm = derivative_moment(name, q)  # (nq,)
    # order 32: the Jacobian metrics are approx anyway
    return KernelTable(log_q, theta, lambda i, j: derivative_kernel(name, q[i], r[j], order=32) / norm[i])
