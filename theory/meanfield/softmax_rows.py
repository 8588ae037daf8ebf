"""Softmax attention rows at random init: the moments of the rows and of their Jacobians.

Derived here (docs/derivations.md#softmax-square-sum);
used by :mod:`theory.meanfield.tables` (the mean-field attention table) and
:mod:`theory.meanfield.covariance` (the T x T token covariance recursion). Softmax rows of
``n`` visible keys with i.i.d. ``N(0, tau^2)`` scores have ``S = E sum_j a_j^2``
(:func:`softmax_square_sum`) and ``E tr J^2`` for ``J = diag(a) - a a^T``
(:func:`softmax_jacobian_square`), both from one quadrature (:func:`softmax_laplace_grid`).
``Abar`` is the uniform row matrix (causal ``1/t`` on ``j <= t``, or ``1/T``);
:func:`score_path` is the attention tangent through the scores, and :func:`rope_cos` /
:func:`rope_spread` what RoPE does to key correlations.

Scores ``q_t.k_j/sqrt(hd)`` are, given ``q_t``, i.i.d. over ``j`` with variance
``tau^2 X/hd``, ``X ~ chi^2_hd`` (the common part of correlated keys cancels in the softmax;
with RoPE it does not cancel exactly: :func:`rope_spread`). For independent rows with mean
``1/n`` the pair overlap ``E[sum_j a_tj a_t'j]`` is the uniform value: ``1/T`` (non-causal),
``2 (T - H_T)/(T (T-1))`` averaged over pairs (causal, :func:`causal_pair_overlap`).

>>> uniform_rows(3, True).round(3).tolist()
[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.333, 0.333, 0.333]]
>>> round(float(softmax_square_sum(4, 0.0)[0, 0]), 12)
0.25
>>> round(causal_pair_overlap(3), 6)  # pairs (1,2),(1,3),(2,3): (1/2 + 1/3 + 1/3)/3
0.388889
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["softmax_laplace_grid", "softmax_square_sum", "softmax_jacobian_square", "causal_pair_overlap",
           "position_averaged_square_sum", "gauss_laguerre", "key_norm_nodes", "uniform_rows", "RowTable", "row_table",
           "rope_cos", "rope_rotate", "rope_spread", "score_key_traces", "score_path", "visible_trace_diagonal",
           "leading_block_sums"]


_GRID_BUDGET = 1 << 27  # bytes of one (w, tau, z) block: large score spreads are done in column chunks


def softmax_laplace_grid(tau: np.ndarray, powers) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """The quadrature behind the softmax moments: ``E prod_j e^(k_j s_j)/Z^m`` as an integral over ``u``.

    For scores ``s ~ N(0, tau^2)``, returns the log-spaced outer grid ``w = log u``, ``u``,
    ``phi(u) = E exp(-u e^s)`` and ``psi_k(u) = E e^(k s) exp(-u e^s)`` for each ``k`` in
    ``powers``, each ``(w, tau)``. Inner expectations: trapezoid in ``z`` on ``[-9, 9]``
    (121 nodes). Source: derived here (:func:`softmax_square_sum`, docs/derivations.md#softmax-square-sum).

    >>> w, u, phi, psi = softmax_laplace_grid(np.array([0.0, 1.0]), (2,))
    >>> w.shape, u.shape, phi.shape, [p.shape for p in psi]  # (w,), (w,), (w, tau), [(w, tau)]
    ((950,), (950,), (950, 2), [(950, 2)])
    >>> round(float(phi[0, 0]), 9), float(phi[-1, 0])  # phi(u) = E exp(-u e^s): 1 at u -> 0, 0 at u -> inf
    (1.0, 0.0)
    """
    z = np.linspace(-9.0, 9.0, 121)
    wz = np.exp(-0.5 * z * z)
    wz /= wz.sum()
    t_max = float(tau.max())
    w = np.linspace(-9.0 * t_max - 20.0, 9.0 * t_max + 4.0, int(800 + 150 * t_max))
    u = np.exp(w)
    growth = np.exp(tau[:, None] * z)  # (tau, z)
    phi = np.empty((len(w), len(tau)))
    psi = [np.empty((len(w), len(tau))) for _ in powers]
    chunk = max(1, _GRID_BUDGET // (len(w) * len(z) * 8))  # tau columns per (w, chunk, z) block
    for start in range(0, len(tau), chunk):
        part = slice(start, start + chunk)
        decay = np.exp(-u[:, None, None] * growth[None, part])  # (w, chunk, z)
        phi[:, part] = decay @ wz  # (w, chunk)
        for out, k in zip(psi, powers):
            out[:, part] = (decay * growth[None, part] ** k) @ wz  # (w, chunk)
    return w, u, phi, psi


def softmax_square_sum(n, tau2) -> np.ndarray:
    """``E[sum_j a_j^2]`` for ``a = softmax(s)``, ``s_1..s_n`` i.i.d. ``N(0, tau2)``.

    Source: derived here (docs/derivations.md#softmax-square-sum). With ``1/S^2 = int_0^inf u exp(-u S) du``
    and independence,
    ``E[a_1^2] = int_0^inf u psi(u) phi(u)^(n-1) du``, ``phi(u) = E exp(-u e^s)``,
    ``psi(u) = E e^(2s) exp(-u e^s)``. Inner expectations: trapezoid in ``z`` on
    ``[-9, 9]`` (121 nodes); outer: trapezoid in ``log u``. Error vs. a fixed-seed
    Monte-Carlo with 2e5 draws: within 2 standard errors (< 1e-3) for ``tau2 <= 9``,
    ``n <= 64``; ``tau2 = 0`` gives ``1/n`` to 1e-12. Large-``n`` limit ``e^tau2/n``.

    Returns an array of shape ``(len(tau2), len(n))``.

    >>> np.round(softmax_square_sum([1, 2, 10], [0.0, 1.0]), 4)
    array([[1.    , 0.5   , 0.1   ],
           [1.    , 0.6368, 0.1947]])
    """
    n = np.atleast_1d(np.asarray(n, dtype=float))
    tau = np.sqrt(np.atleast_1d(np.asarray(tau2, dtype=float)))
    w, u, phi, (psi,) = softmax_laplace_grid(tau, (2,))
    log_phi = np.log(np.maximum(phi, 1e-300))
    integrand = (u * u)[:, None, None] * psi[:, :, None] * np.exp((n - 1) * log_phi[:, :, None])  # (w, tau, n)
    return n * np.trapezoid(integrand, w, axis=0)  # (tau, n)


def causal_pair_overlap(tokens: int) -> float:
    """Mean over ordered pairs ``t != t'`` of ``1/max(t, t')``: ``2 (T - H_T)/(T (T - 1))``.

    Source: derived here (docs/derivations.md#causal-attention;
    uniform causal rows ``a_tj = 1/t``). ``T = 1``: 0 (no pairs).

    >>> causal_pair_overlap(2)
    0.5
    """
    if tokens < 2:
        return 0.0
    harmonic = float(np.sum(1.0 / np.arange(1, tokens + 1)))
    return 2.0 * (tokens - harmonic) / (tokens * (tokens - 1))


def position_averaged_square_sum(tokens: int, causal: bool, tau2: np.ndarray) -> np.ndarray:
    """``E_t E[sum_j a_tj^2]`` over query positions for each ``tau2`` (causal: row ``t`` sees ``n = t`` keys).

    Returns shape ``(len(tau2),)``. Causal rows: ``n S_n`` interpolated in ``log n`` beyond 32.

    >>> position_averaged_square_sum(4, True, np.array([0.0])).round(6).tolist()  # (1 + 1/2 + 1/3 + 1/4)/4
    [0.520833]
    >>> position_averaged_square_sum(4, False, np.array([0.0])).round(12).tolist()  # 1/4
    [0.25]
    """
    if not causal:
        return softmax_square_sum([tokens], tau2)[:, 0]
    exact = np.arange(1, min(tokens, 32) + 1, dtype=float)
    tail = np.unique(np.geomspace(33, tokens, 40).round()) if tokens > 32 else np.empty(0)
    n = np.concatenate([exact, tail])
    n_times_s = n * softmax_square_sum(n, tau2)  # (tau, n): smooth in log n
    t = np.arange(1, tokens + 1, dtype=float)
    rows = np.stack([np.interp(np.log(t), np.log(n), row) for row in n_times_s])  # (tau, T)
    return (rows / t).mean(axis=1)


def uniform_rows(tokens: int, causal: bool) -> np.ndarray:
    """``Abar``: causal ``1/t`` on ``j <= t`` or full ``1/T`` (T x T).

    >>> uniform_rows(2, False).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    if causal:
        return np.tril(np.ones((tokens, tokens))) / np.arange(1, tokens + 1)[:, None]
    return np.full((tokens, tokens), 1.0 / tokens)


@dataclass(frozen=True)
class RowTable:
    """``S_t(tau2) = E sum_j a_tj^2`` per query row ``t`` (key norm ``chi^2_hd`` averaged), log-linear in ``tau2``."""

    tau2_grid: np.ndarray  # (G,) uniform
    log_s: np.ndarray  # (G, T)
    visible: np.ndarray  # (T,) keys per row
    jac: np.ndarray | None = None  # (2, G, T) ``E tr J_t^2`` (softmax Jacobian of row t); [1]: weighted by |q|^2/hd

    def at(self, tau2: np.ndarray, table: str = "s") -> np.ndarray:
        """``S_t`` (``table="j"``: ``E tr J_t^2``, (2, T)) at per-row ``tau2`` (T,), clipped to the grid.

        >>> row_table(4, True, 16, 0.0).at(np.zeros(4), "j").round(6).tolist()  # (n - 1)/n^2 per row
        [[0.0, 0.25, 0.222222, 0.1875], [0.0, 0.25, 0.222222, 0.1875]]
        """
        step = self.tau2_grid[1] - self.tau2_grid[0]
        f = np.clip(np.asarray(tau2, float) / step, 0, len(self.tau2_grid) - 1.000001)
        i = f.astype(np.int64)
        f -= i
        cols = np.arange(self.log_s.shape[1])
        if table == "j":
            return self.jac[:, i, cols] * (1 - f) + self.jac[:, i + 1, cols] * f
        return np.exp(self.log_s[i, cols] * (1 - f) + self.log_s[i + 1, cols] * f)



def gauss_laguerre(order: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and normalised weights (summing to 1) of the ``order``-node Gauss rule for the weight ``x^alpha e^-x`` on
    ``(0, inf)``, ``alpha > -1``: the Golub-Welsch eigenproblem of the generalised Laguerre polynomials' Jacobi matrix
    (diagonal ``2k + alpha + 1``, off-diagonal ``sqrt(k (k + alpha))``); the weights are the squared first components
    of its eigenvectors (Golub and Welsch, Math. Comp. 23, 1969). numpy only (``scipy.special.roots_genlaguerre``
    gives the same rule, unnormalised, to rounding; importing it costs a third of a second).

    >>> nodes, weights = gauss_laguerre(3, 0.0)  # Laguerre: exact for polynomials of degree 5
    >>> [round(float(weights @ nodes**k), 10) for k in range(1, 6)]  # E[x^k] = k! under e^-x
    [1.0, 2.0, 6.0, 24.0, 120.0]
    """
    k = np.arange(order, dtype=float)  # (order,)
    off = np.sqrt(k[1:] * (k[1:] + alpha))  # (order - 1,)
    nodes, vectors = np.linalg.eigh(np.diag(2 * k + alpha + 1) + np.diag(off, 1) + np.diag(off, -1))
    weights = vectors[0] ** 2  # (order,)
    return nodes, weights / weights.sum()


def key_norm_nodes(head_dim: int, order: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``X/hd`` and weights (summing to 1) of an ``order``-node rule for ``X ~ chi^2_hd``, the squared key norm.

    Generalised Gauss-Laguerre (``X = 2x``, weight ``x^(hd/2 - 1) e^-x``; :func:`gauss_laguerre`); above
    ``hd = 200`` ``chi^2_hd/hd ~ N(1, 2/hd)`` is integrated by Gauss-Hermite instead (error O(1/hd)). Returns
    ``(scale, weights)``, each (order,).

    >>> scale, weights = key_norm_nodes(16)
    >>> round(float(weights @ scale), 12), round(float(weights @ scale**2), 12)  # E[X/hd], E[(X/hd)^2] = 1 + 2/hd
    (1.0, 1.125)
    """
    if head_dim <= 200:
        nodes, weights = gauss_laguerre(order, head_dim / 2 - 1)
        scale = 2 * nodes / head_dim
    else:
        nodes, weights = np.polynomial.hermite_e.hermegauss(order)
        scale = np.maximum(1 + math.sqrt(2 / head_dim) * nodes, 0.0)
    return scale, weights / weights.sum()


@lru_cache(maxsize=32)
def row_table(tokens: int, causal: bool, head_dim: int, tau2_max: float) -> RowTable:
    """Tabulate :class:`RowTable` on ``tau2 in [0, tau2_max]`` (cached; as :func:`theory.meanfield.tables.attention_table`).

    >>> tab = row_table(4, True, 16, 0.0)
    >>> tab.at(np.zeros(4)).round(6).tolist()
    [1.0, 0.5, 0.333333, 0.25]
    """
    visible = np.arange(1, tokens + 1, dtype=float) if causal else np.full(tokens, float(tokens))
    grid = np.linspace(0.0, max(tau2_max, 1e-12), 41)
    scale, weights = key_norm_nodes(head_dim)  # (8,) each
    base_grid = np.linspace(0.0, grid[-1] * scale.max(), 25)
    n_unique = np.unique(visible)
    if len(n_unique) > 72:  # n S_n is smooth in log n: exact up to 32, then 40 log-spaced nodes
        nodes_n = np.unique(np.concatenate([n_unique[n_unique <= 32], np.geomspace(33, n_unique[-1], 40).round()]))
    else:
        nodes_n = n_unique
    ns = nodes_n * softmax_square_sum(nodes_n, base_grid)  # (25, n)
    rows = np.stack([np.interp(np.log(visible), np.log(nodes_n), r) for r in ns]) / visible  # (25, T)
    log_base = np.log(rows)
    smoothed = np.stack([np.exp(np.interp(grid[:, None] * scale, base_grid, log_base[:, t])) @ weights
                         for t in range(tokens)], axis=1)  # (41, T)
    jn = softmax_jacobian_square(nodes_n, base_grid)  # (25, n): O(1/n) like S, interpolated as n E tr J^2
    jrows = np.stack([np.interp(np.log(visible), np.log(nodes_n), r * nodes_n) for r in jn]) / visible
    # the q.dk part of the score tangent scales with the query norm like the scores: weight X/hd
    jac = np.stack([np.stack([(np.interp(grid[:, None] * scale, base_grid, jrows[:, t]) * scale**p) @ weights
                              for t in range(tokens)], axis=1) for p in (0, 1)])  # (2, 41, T)
    return RowTable(grid, np.log(smoothed), visible, jac)


def softmax_jacobian_square(n, tau2) -> np.ndarray:
    """``E tr J^2`` for ``J = diag(a) - a a^T``, ``a = softmax`` of ``n`` i.i.d. ``N(0, tau2)`` scores.

    Derived here (docs/derivations.md#softmax-jacobian-square), as :func:`softmax_square_sum`:
    ``tr J^2 = sum a^2 - 2 sum a^3 + (sum a^2)^2``
    and ``E prod_j e^(k_j s_j)/Z^m = int u^(m-1)/(m-1)! prod_j psi_kj(u) phi(u)^(n - #j) du`` with
    ``psi_k(u) = E e^(k s) exp(-u e^s)``. ``tau2 = 0``: ``(n - 1)/n^2``.

    >>> np.round(softmax_jacobian_square([1, 2, 4], [0.0]), 6).tolist()
    [[0.0, 0.25, 0.1875]]
    """
    n = np.atleast_1d(np.asarray(n, dtype=float))
    tau = np.sqrt(np.minimum(np.atleast_1d(np.asarray(tau2, dtype=float)), 150.0))
    w, u, phi, psi = softmax_laplace_grid(tau, (2, 3, 4))
    log_phi = np.log(np.maximum(phi, 1e-300))[:, :, None]
    u_ = u[:, None, None]
    ph1, ph2 = np.exp((n - 1) * log_phi), np.exp(np.maximum(n - 2, 0) * log_phi)
    s2 = n * np.trapezoid(u_**2 * psi[0][:, :, None] * ph1, w, axis=0)
    s3 = n * np.trapezoid(u_**3 / 2 * psi[1][:, :, None] * ph1, w, axis=0)
    s4 = n * np.trapezoid(u_**4 / 6 * psi[2][:, :, None] * ph1, w, axis=0)
    s22 = n * (n - 1) * np.trapezoid(u_**4 / 6 * psi[0][:, :, None] ** 2 * ph2, w, axis=0)
    return np.maximum(s2 - 2 * s3 + s4 + s22, 0.0) * (n > 1)  # (tau, n)


@lru_cache(maxsize=32)
def rope_cos(tokens: int, head_dim: int, base: float = 10000.0) -> np.ndarray:
    """``mean_i cos(omega_i (j - j'))`` (T x T, read-only: cached, each attention average reads it per chunk of
    draws): ``E[(Rot_j x) . (Rot_j' y)] / E[x . y]`` for isotropic ``x, y``.

    >>> rope_cos(2, 2).round(4).tolist()
    [[1.0, 0.5403], [0.5403, 1.0]]
    """
    omega = base ** (-2.0 * np.arange(head_dim // 2) / head_dim)  # (hd/2,)
    lag = np.arange(tokens)[:, None] - np.arange(tokens)[None, :]  # (T, T)
    mean = np.cos(lag[:, :, None] * omega).mean(axis=2)  # (T, T, hd/2) -> (T, T)
    mean.flags.writeable = False
    return mean


def rope_rotate(x: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Rotary embedding of ``x`` (..., T, hd), LLaMA's rotate-half convention (as the simulator's engine).

    Position ``t`` rotates the pair ``(x_i, x_(i + hd/2))`` by ``t omega_i``, ``omega_i = base^(-2i/hd)``:
    the rotation whose mean cosine :func:`rope_cos` gives.

    >>> rope_rotate(np.array([[1.0, 0.0], [1.0, 0.0]])).round(4).tolist()  # positions 0 and 1, omega_0 = 1
    [[1.0, 0.0], [0.5403, 0.8415]]
    """
    tokens, half = x.shape[-2], x.shape[-1] // 2
    angle = np.arange(tokens)[:, None] * base ** (-2.0 * np.arange(half) / x.shape[-1])  # (T, hd/2)
    cos, sin = np.cos(angle), np.sin(angle)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def rope_spread(tokens: int, causal: bool, head_dim: int, base: float = 10000.0) -> np.ndarray:
    """Per query row: the fraction of the keys' common score part that RoPE spreads over positions.

    Derived here (docs/derivations.md#rope-spread).
    A key part ``kbar`` shared by all positions gives scores ``q^T Rot(omega_i (t - j)) kbar``
    per frequency pair ``i`` (``omega_i = base^(-2i/hd)``); for isotropic ``q, kbar`` the expected variance
    over the ``n`` visible keys, relative to the total, is ``mean_i (1 - |(1/n) sum_j exp(i omega_i j)|^2)``
    (0: cancels in the softmax as without RoPE; 1: acts as independent noise).

    >>> float(rope_spread(1, True, 8)[0])
    0.0
    """
    omega = base ** (-2.0 * np.arange(head_dim // 2) / head_dim)  # (hd/2,)
    phase = np.exp(1j * np.outer(np.arange(tokens), omega))  # (T, hd/2)
    if causal:
        mean = np.cumsum(phase, axis=0) / np.arange(1, tokens + 1)[:, None]
    else:
        mean = np.broadcast_to(phase.mean(axis=0), phase.shape)
    return (1 - np.abs(mean) ** 2).mean(axis=1)


def _visible_traces(A: np.ndarray, B: np.ndarray, causal: bool) -> np.ndarray:
    """``W[t, t'] = tr(P_t A P_t' B)`` (T x T; of each matrix of a stack (..., T, T)) in ``O(T^2)``; ``P_t`` centres
    on the keys row ``t`` sees.

    ``P_t = I_t - 1_t 1_t^T/n_t`` (``I_t``, ``1_t``: the visible keys); with 2-D prefix sums,
    ``tr(I_t A I_t' B) - (1_t'^T B I_t A 1_t')/n_t' - (1_t^T A I_t' B 1_t)/n_t + (1_t^T A 1_t')(1_t'^T B 1_t)/(n_t n_t')``.
    """
    T = A.shape[-1]
    n = np.arange(1.0, T + 1) if causal else np.full(T, float(T))
    rows = np.cumsum(np.stack([A, B]), axis=-1)  # (2, ..., T, T): [., j, m] = (A 1_m)_j, (B 1_m)_j
    prefix = np.cumsum(np.stack([A * B, A, B, rows[0] * rows[1]]), axis=-2)  # (4, ..., T, T): sums over rows j <= l
    prefix[:3] = np.cumsum(prefix[:3], axis=-1)  # 2-D prefix sums of A * B, A, B
    if not causal:  # every row sees every key: the sums over all of them
        prefix = np.broadcast_to(prefix[..., -1:, -1:], prefix.shape)
    both, pa, pb, x = prefix  # x[l, m] = sum_{j<=l} (A 1_m)_j (B 1_m)_j
    return (both - x / n - np.swapaxes(x, -1, -2) / n[:, None]
            + pa * np.swapaxes(pb, -1, -2) / np.outer(n, n))


def visible_trace_diagonal(A: np.ndarray, B: np.ndarray, causal: bool) -> np.ndarray:
    """``tr(P_t A P_t B)`` for each query row ``t`` (``P_t`` centres on the ``n_t`` keys it sees), for symmetric ``A``,
    ``B`` or stacks of them: (..., T, T) -> (..., T). The diagonal of :func:`_visible_traces` in ``O(T^2)`` with one
    prefix sum: ``sum_{j,l<=t} A_jl B_jl - (2/n_t) sum_{l<=t} (A 1_t)_l (B 1_t)_l + (1_t^T A 1_t)(1_t^T B 1_t)/n_t^2``.

    >>> visible_trace_diagonal(np.eye(3), np.eye(3), True).tolist()  # tr(P_t) = n_t - 1
    [0.0, 1.0, 2.0]
    """
    T = A.shape[-1]
    if not causal:
        n = float(T)
        both, a, b = (A * B).sum(axis=(-2, -1)), A.sum(axis=(-2, -1)), B.sum(axis=(-2, -1))
        x = (A.sum(axis=-1) * B.sum(axis=-1)).sum(axis=-1)
        return np.repeat((both - 2 * x / n + a * b / n**2)[..., None], T, axis=-1)
    n = np.arange(1.0, T + 1)
    upper = ~_strict_upper(T).T  # [l, t]: l <= t
    rows_a, rows_b = np.cumsum(A, axis=-1), np.cumsum(B, axis=-1)  # [..., l, t] = (A 1_t)_l, (B 1_t)_l
    x = np.where(upper, rows_a * rows_b, 0.0).sum(axis=-2)  # sum_{l<=t} (A 1_t)_l (B 1_t)_l
    return leading_block_sums(A * B) - 2 * x / n + leading_block_sums(A) * leading_block_sums(B) / n**2


@lru_cache(maxsize=8)
def _strict_upper(tokens: int) -> np.ndarray:
    """``[j, t]``: ``j < t`` (T x T bool, read-only)."""
    mask = np.triu(np.ones((tokens, tokens), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def leading_block_sums(M: np.ndarray) -> np.ndarray:
    """``sum_{j, l <= t} M_jl`` for each ``t``: the diagonal of the 2-D prefix sums of ``M`` (T, T) or of each matrix
    of a stack (..., T, T) -> (..., T), with one prefix sum over ``t`` of ``M_tt + sum_{j < t} (M_jt + M_tj)``.

    >>> leading_block_sums(np.arange(9.0).reshape(3, 3)).tolist()  # 0, 0+1+3+4, all
    [0.0, 8.0, 36.0]
    """
    cross = np.where(_strict_upper(M.shape[-1]), M + np.swapaxes(M, -1, -2), 0.0).sum(axis=-2)  # sum_{j<t} M_jt + M_tj
    return np.cumsum(cross + np.diagonal(M, axis1=-2, axis2=-1), axis=-1)


def score_key_traces(Q: np.ndarray, causal: bool, rope_cos: np.ndarray | None = None) -> np.ndarray:
    """The traces of the ``dq . k`` part of :func:`score_path`, ``tr(P_t Q P_t' Q~)`` (T x T): they depend on the
    forward state only, so one sublayer's tangents share them."""
    return _visible_traces(Q, Q if rope_cos is None else Q * rope_cos, causal)


def score_path(Q: np.ndarray, Cn: np.ndarray, s: np.ndarray, jac: np.ndarray, causal: bool,
               rope_cos: np.ndarray | None = None, key_traces: np.ndarray | None = None) -> np.ndarray:
    """Tangent covariance of the score path ``dA V`` per unit ``alpha_v alpha_o alpha_q alpha_k`` (T x T).

    Derived here (docs/derivations.md#attention-score-path).
    Row ``t`` of the softmax has tangent ``da_t = J_t ds_t``, ``J_t = diag(a_t) - a_t a_t^T``
    (zero outside the visible keys, ``J_t 1 = 0``), ``ds_tj = (dq_t . k_j + q_t . dk_j)/sqrt(hd)``,
    ``dq = dh W_q``, ``dk = dh W_k``. Assumptions (mean field): ``h . dh/d -> 0`` (the tangent is odd in
    ``v``, and orthogonal to ``h`` behind a norm), so ``dq, dk`` are independent of ``q, k``; given ``q, k``
    the score tangents are Gaussian with ``E[ds_tj ds_t'j' | q, k] = alpha_q Cn_tt' k_j.k_j'/hd + alpha_k Cn_jj'
    q_t.q_t'/hd`` (the two products share no weight matrix) ``-> alpha_qk (Cn_tt' Q_jj' + Q_tt' Cn_jj')``;
    the query norm of the second part moves with the scores (weighted average over ``chi^2_hd``, as
    :class:`RowTable`), the key norms are set to their mean; RoPE multiplies by ``mean_i cos(omega_i (j - j'))`` for
    ``t = t'`` (off the diagonal the shift ``t - t'`` is ignored). ``W_v`` is independent of ``a, da``, so
    ``Cov(dA V)_tt' = E[da_t Q da_t'^T] = alpha_qk E tr(J_t Q J_t' (Cn_tt' Q~ + Q_tt' Cn~))`` (``~``: RoPE
    factor), and the cross term with the value path ``A dV`` is ``alpha_v E[a_tj da_t'j' dh_j . h_j'/d] -> 0``
    (checked by Monte-Carlo: tests/theory/test_covariance_jacobian.py). Rows (approximation, as the value path):
    exchangeable, so ``E J_t = e_t P_t``, ``e_t = (1 - S_t)/(n_t - 1)``, ``P_t`` centring on the ``n_t``
    visible keys; ``t != t'``: rows independent, ``e_t e_t' tr(P_t A P_t' B)``; ``t = t'``:
    ``E tr(J A J B) = E tr J_t^2 tr(P_t A P_t B)/(n_t - 1)``, exact for ``A, B`` of the form
    ``alpha I + beta 1 1^T`` on the visible keys (``E tr J^2``: :func:`softmax_jacobian_square` at
    ``tau_t^2``). ``J 1 = 0``: the common part of ``Q`` and ``Cn`` drops out. MC (one sublayer, d = 64,
    T <= 8, alpha = 1): diagonal within 4 standard errors; off the diagonal within 10% of it for correlated
    queries (rows not independent), exact at ``rho = 0``.

    ``Q``, ``Cn``: input and input-tangent covariances; ``s``: ``S_t``; ``jac`` (2, T): ``E tr J_t^2``
    plain and weighted by the query norm; ``rope_cos``: :func:`rope_cos` or None; ``key_traces``:
    :func:`score_key_traces` of ``Q`` when the caller has them.
    Shapes: ``Q, Cn`` (T, T), ``s`` (T,), ``jac`` (2, T); returns (T, T).

    >>> score_path(np.ones((2, 2)), np.eye(2), np.array([1.0, 0.5]), np.zeros((2, 2)), True).tolist()
    [[0.0, 0.0], [0.0, 0.0]]

    (identical keys: the scores move together and the softmax does not.)
    """
    T = len(Q)
    n = np.arange(1.0, T + 1) if causal else np.full(T, float(T))
    w_k = score_key_traces(Q, causal, rope_cos) if key_traces is None else key_traces  # the dq.k part
    w_q = _visible_traces(Q, Cn if rope_cos is None else Cn * rope_cos, causal)  # the q.dk part
    with np.errstate(invalid="ignore", divide="ignore"):
        e = np.where(n > 1, (1 - s) / (n - 1), 0.0)  # E J_t = e_t P_t (exchangeable rows)
        out = np.outer(e, e) * (Cn * w_k + Q * w_q)  # t != t': rows independent
        diag = np.where(n > 1, (np.diag(Cn) * jac[0] * np.diag(w_k) + np.diag(Q) * jac[1] * np.diag(w_q))
                        / np.maximum(n - 1, 1), 0.0)
    np.fill_diagonal(out, diag)
    return out
