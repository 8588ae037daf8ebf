"""Token correlation at random init: the (variance, inter-token covariance) recursion.

Superseded for predictions by the per-position T x T recursion of :mod:`theory.covariance`
(which uses the tables and moments of this module); :func:`token_recursion` remains the
fast path for non-additive tails (post, deepnorm, mix, none) after the step-by-step blocks.

Derived here (THEORY.md B, "token correlation"). Per coordinate of the stream track
``v`` (second moment, = the ``var`` metric for zero-mean uncorrelated coordinates) and
``c`` (mean covariance between distinct tokens); ``rho = c/v`` is the mean inter-token
cosine (the ``token_cos`` metric in the mean-field reading E[x.y]/E|x|^2). Assumptions:
i.i.d. zero-mean Gaussian weights, independent across sublayers; every pair of distinct
tokens has the same cosine ``rho`` (mean field: exact for non-causal uniform attention,
an approximation for causal attention, whose pair covariances depend on positions).

A normalised input ``h`` has per-token second moment ``q_in`` (``g^2`` for a norm scaled
by ``g``) and inter-token cosine ``rho``. Branch moments (before mask and scale):

- linear ``h W``: ``var = alpha q_in``, ``cov = alpha q_in rho`` (exact).
- MLP ``phi(h W1) W2``: ``var = (d_ff/d) alpha2 E[phi(z)^2]``, ``z ~ N(0, alpha1 q_in)``,
  ``cov = (d_ff/d) alpha2 K_phi(alpha1 q_in, rho)`` (dual kernel, :mod:`theory.gaussian`).
- attention (value path, rows ``a`` independent of ``W_V``, ``sum_j a_tj = 1``):
  ``var = alpha_v alpha_o q_in ((1-rho) S + rho)``, ``cov = alpha_v alpha_o q_in ((1-rho) P + rho)``
  with ``S = E_t E[sum_j a_tj^2]`` (:func:`softmax_square_sum`, averaged over query
  positions) and ``P`` the mean over pairs ``t != t'`` of ``E[sum_j a_tj a_t'j]``, which for
  independent rows with mean ``1/n`` is the uniform value: ``1/T`` (non-causal),
  ``2 (T - H_T)/(T (T-1))`` (causal, from ``sum_j a_tj a_t'j = 1/max(t, t')``).

Scores ``q_t.k_j/sqrt(hd)`` are, given ``q_t``, i.i.d. over ``j`` with variance
``tau^2 X/hd``, ``tau^2 = alpha_q alpha_k q_in^2 (1 - rho)``, ``X ~ chi^2_hd`` (the common
part of correlated keys cancels in the softmax; with RoPE it does not cancel exactly,
and the factor ``(1 - rho)`` is dropped, i.e. RoPE is treated as decorrelating the keys).

>>> import numpy as np
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
from scipy.special import roots_genlaguerre

from theory.gaussian import dual_kernel, second_moment

__all__ = [
    "softmax_laplace_grid", "softmax_square_sum", "causal_pair_overlap", "AttentionTable", "attention_table",
    "KernelTable", "kernel_table", "attention_moments", "mlp_moments", "linear_moments",
]


def softmax_laplace_grid(tau: np.ndarray, powers) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """The quadrature behind the softmax moments: ``E prod_j e^(k_j s_j)/Z^m`` as an integral over ``u``.

    For scores ``s ~ N(0, tau^2)``, returns the log-spaced outer grid ``w = log u``, ``u``,
    ``phi(u) = E exp(-u e^s)`` and ``psi_k(u) = E e^(k s) exp(-u e^s)`` for each ``k`` in
    ``powers``, each ``(w, tau)``. Inner expectations: trapezoid in ``z`` on ``[-9, 9]``
    (121 nodes). Source: derived here (:func:`softmax_square_sum`).
    """
    z = np.linspace(-9.0, 9.0, 121)
    wz = np.exp(-0.5 * z * z)
    wz /= wz.sum()
    t_max = float(tau.max())
    w = np.linspace(-9.0 * t_max - 20.0, 9.0 * t_max + 4.0, int(800 + 150 * t_max))
    u = np.exp(w)
    growth = np.exp(tau[:, None] * z)  # (tau, z)
    decay = np.exp(-u[:, None, None] * growth[None])  # (w, tau, z)
    phi = decay @ wz  # (w, tau)
    psi = [(decay * growth[None] ** k) @ wz for k in powers]  # (w, tau) each
    return w, u, phi, psi


def softmax_square_sum(n, tau2) -> np.ndarray:
    """``E[sum_j a_j^2]`` for ``a = softmax(s)``, ``s_1..s_n`` i.i.d. ``N(0, tau2)``.

    Source: derived here. With ``1/S^2 = int_0^inf u exp(-u S) du`` and independence,
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

    Source: derived here (uniform causal rows ``a_tj = 1/t``). ``T = 1``: 0 (no pairs).

    >>> causal_pair_overlap(2)
    0.5
    """
    if tokens < 2:
        return 0.0
    harmonic = float(np.sum(1.0 / np.arange(1, tokens + 1)))
    return 2.0 * (tokens - harmonic) / (tokens * (tokens - 1))


def _position_average(tokens: int, causal: bool, tau2: np.ndarray) -> np.ndarray:
    """``E_t E[sum_j a_tj^2]`` over query positions for each ``tau2``: rows over ``n = t``."""
    if not causal:
        return softmax_square_sum([tokens], tau2)[:, 0]
    exact = np.arange(1, min(tokens, 32) + 1, dtype=float)
    tail = np.unique(np.geomspace(33, tokens, 40).round()) if tokens > 32 else np.empty(0)
    n = np.concatenate([exact, tail])
    n_times_s = n * softmax_square_sum(n, tau2)  # (tau, n): smooth in log n
    t = np.arange(1, tokens + 1, dtype=float)
    rows = np.stack([np.interp(np.log(t), np.log(n), row) for row in n_times_s])  # (tau, T)
    return (rows / t).mean(axis=1)


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
        """``S`` at ``tau2`` (clipped to the grid)."""
        return np.exp(np.interp(tau2, self.tau2_grid, self.log_s))


@lru_cache(maxsize=32)
def attention_table(tokens: int, causal: bool, head_dim: int, tau2_max: float) -> AttentionTable:
    """Tabulate :class:`AttentionTable` on ``tau2 in [0, tau2_max]`` (cached).

    >>> tab = attention_table(8, True, 16, 0.0)
    >>> abs(float(tab.square_sum(0.0)) - sum(1 / t for t in range(1, 9)) / 8) < 1e-12
    True
    """
    grid = np.linspace(0.0, max(tau2_max, 1e-12), 41)
    if head_dim <= 200:
        nodes, weights = roots_genlaguerre(8, head_dim / 2 - 1)
        scale = 2 * nodes / head_dim  # X/hd at the nodes, X ~ chi^2_hd
    else:  # Laguerre weights overflow; chi^2_hd/hd ~ N(1, 2/hd) (error O(1/hd))
        nodes, weights = np.polynomial.hermite_e.hermegauss(8)
        scale = np.maximum(1 + math.sqrt(2 / head_dim) * nodes, 0.0)
    weights = weights / weights.sum()
    base_grid = np.linspace(0.0, grid[-1] * scale.max(), 25)
    base = np.log(_position_average(tokens, causal, base_grid))  # (25,)
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
    """

    log_q: np.ndarray
    theta: np.ndarray
    kappa: np.ndarray  # (len(log_q), len(theta))

    def correlation(self, q, r) -> np.ndarray:
        """``kappa`` at ``(q, r)``."""
        lq = np.log(np.asarray(q, dtype=float))
        th = np.arccos(np.clip(np.asarray(r, dtype=float), -1.0, 1.0))
        fq = np.clip((lq - self.log_q[0]) / (self.log_q[1] - self.log_q[0]), 0, len(self.log_q) - 1.000001)
        ft = np.clip(th / (self.theta[1] - self.theta[0]), 0, len(self.theta) - 1.000001)
        i, j = fq.astype(np.int64), ft.astype(np.int64)
        fq, ft = fq - i, ft - j
        k = self.kappa
        low = k[i, j] * (1 - ft) + k[i, j + 1] * ft
        high = k[i + 1, j] * (1 - ft) + k[i + 1, j + 1] * ft
        return low * (1 - fq) + high * fq


@lru_cache(maxsize=32)
def kernel_table(name: str, q_min: float, q_max: float) -> KernelTable:
    """Tabulate the output correlation of ``name`` for ``q`` in ``[q_min, q_max]``, ``r in [-1, 1]``.

    >>> tab = kernel_table("relu", 1.0, 1.0)
    >>> round(float(tab.correlation(1.0, 0.0)), 6)  # 1/pi
    0.31831
    """
    lo, hi = math.log(max(q_min, 1e-4)), math.log(max(q_max, q_min, 1e-4))
    log_q = np.linspace(lo, hi + 1e-9, max(2, int(np.ceil((hi - lo) / 0.25)) + 2))
    theta = np.linspace(0.0, np.pi, 129)
    q = np.exp(log_q)[:, None]
    kernel = dual_kernel(name, q, np.cos(theta)[None, :], order=32 if q_max <= 2 else 64)  # (nq, ntheta)
    return KernelTable(log_q, theta, kernel / second_moment(name, q))


def linear_moments(q_in, rho, alpha):
    """``(var, cov)`` of ``h W`` for input second moment ``q_in``, cosine ``rho`` (exact).

    >>> linear_moments(2.0, 0.5, 0.1)
    (0.2, 0.1)
    """
    return alpha * q_in, alpha * q_in * rho


def mlp_moments(q_in, rho, *, activation, alpha_in, alpha_out, ffn_ratio, table: KernelTable):
    """``(var, cov)`` of an MLP branch (SwiGLU: gate and up both with ``alpha_in``).

    >>> tab = kernel_table("relu", 1.0, 1.0)
    >>> var, cov = mlp_moments(1.0, 0.0, activation="relu", alpha_in=1.0, alpha_out=1.0, ffn_ratio=4.0, table=tab)
    >>> float(var), round(float(cov), 6)
    (2.0, 0.63662)
    """
    pre = alpha_in * np.asarray(q_in, dtype=float)
    var = ffn_ratio * alpha_out * second_moment(activation, pre)
    corr = table.correlation(pre, rho)
    if activation == "swiglu":  # silu part from the table, times the linear up-projection's r
        corr = corr * rho
    return var, var * corr


def attention_moments(q_in, rho, *, alpha_qk, alpha_vo, table: AttentionTable, rope: bool):
    """``(var, cov)`` of the attention branch (value path; module docstring).

    >>> tab = attention_table(4, False, 8, 0.0)
    >>> var, cov = attention_moments(1.0, 0.0, alpha_qk=0.0, alpha_vo=1.0, table=tab, rope=False)
    >>> round(var, 9), round(cov, 9)
    (0.25, 0.25)
    """
    q_in = np.asarray(q_in, dtype=float)
    tau2 = alpha_qk * q_in**2 * (1.0 if rope else (1 - rho))
    s = table.square_sum(tau2)
    gain = alpha_vo * q_in
    var = gain * ((1 - rho) * s + rho)
    cov = gain * ((1 - rho) * table.pair_overlap + rho)
    return (float(var), float(cov)) if np.ndim(var) == 0 else (var, cov)


# -- the recursion over a stack of sublayers ------------------------------------------
LINEAR, MLP, ATTENTION, MOE = 0, 1, 2, 3


@dataclass(frozen=True)
class SublayerPlan:
    """Per-sublayer parameters of a stack, arrays of length ``N`` (sublayers in order).

    A sublayer maps the stream ``x`` (second moment ``v``, cosine ``rho``) to
    ``y = N?(stream_scale x + B + alignment x/rms(x))`` with the branch
    ``B = mask * branch_scale * N_b?(f(input))``, ``input = sqrt(in_scale2) N(x)`` if
    ``norm_input`` else ``x`` (so its second moment is ``q_in = in_scale2`` or ``v``).
    ``branch2`` is ``branch_scale^2 * rho_mask``.
    """

    kind: np.ndarray  # (N,) int: LINEAR, MLP, ATTENTION, MOE
    block: np.ndarray  # (N,) 1-based block index
    norm_input: np.ndarray  # (N,) bool
    in_scale2: np.ndarray  # (N,) g^2
    norm_branch: np.ndarray  # (N,) bool (sandwich/peri)
    branch2: np.ndarray  # (N,)
    stream_scale2: np.ndarray  # (N,) (deepnorm)
    norm_after: np.ndarray  # (N,) bool (post, deepnorm)
    alpha_in: np.ndarray  # (N,) alpha of W_V, W1 (and W3), W (linear)
    alpha_out: np.ndarray  # (N,) alpha of W_O, W2; 1 for linear
    alpha_qk: np.ndarray  # (N,) alpha_q * alpha_k
    activation: str
    ffn_ratio: float
    width: int
    rope: bool
    alignment: float
    attention: AttentionTable | None
    kernel: KernelTable | None
    gate2: float = 1.0  # MoE E[sum g_i^2]
    gate_overlap0: float = 1.0  # MoE E[sum_i g_ti g_t'i] for independent routing (1/E)
    shared_expert: bool = False

    @property
    def size(self) -> int:
        return len(self.kind)

    def is_additive(self, idx) -> np.ndarray:
        """Steps whose increment does not depend on ``v``: ``v' = v + B(rho)``."""
        return self.norm_input[idx] & ~self.norm_after[idx] & (self.stream_scale2[idx] == 1) & (self.alignment == 0)


def _mlp_static(plan: SublayerPlan, q_in, alpha_in, alpha_out):
    """``(var, jvp_gain)`` of an MLP branch at input second moment ``q_in`` (no cosine needed)."""
    from theory.gaussian import derivative_moment, many_moments, second_moment, swiglu_jvp_gain
    pre = alpha_in * q_in
    var = plan.ffn_ratio * alpha_out * many_moments(lambda x: second_moment(plan.activation, x), pre)
    if plan.activation == "swiglu":
        moment = many_moments(swiglu_jvp_gain, pre)
    else:
        moment = many_moments(lambda x: derivative_moment(plan.activation, x), pre)
    return var, plan.ffn_ratio * alpha_out * alpha_in * moment


def static_moments(plan: SublayerPlan) -> dict:
    """Branch ``var`` and ``gain`` of the MLP/MoE steps with a normalised input, all at once.

    Their input second moment ``in_scale2`` is known in advance, so only the cosine part
    is left to the recursion. NaN elsewhere.
    """
    var, gain = np.full(plan.size, np.nan), np.full(plan.size, np.nan)
    idx = np.flatnonzero(plan.norm_input & ((plan.kind == MLP) | (plan.kind == MOE)))
    if len(idx):
        var[idx], gain[idx] = _mlp_static(plan, plan.in_scale2[idx], plan.alpha_in[idx], plan.alpha_out[idx])
    return {"var": var, "gain": gain}


def branch_moments(plan: SublayerPlan, idx, q_in, rho, static: dict | None = None):
    """``(var, cov, jvp_gain)`` of the bare sublayer ``f`` at steps ``idx`` (vectorised).

    ``jvp_gain`` is ``E||df v||^2/E||v||^2`` for a tangent ``v`` orthogonal to the input
    (value path only for attention). ``static``: from :func:`static_moments`.
    Source: derived here (module docstring).
    """
    idx = np.asarray(idx)
    var, cov, gain = (np.zeros(idx.shape) for _ in range(3))
    kind = plan.kind[idx]
    for code in np.unique(kind):
        m = kind == code
        i, q, r = idx[m], q_in[m], rho[m]
        a_in, a_out = plan.alpha_in[i], plan.alpha_out[i]
        if code == LINEAR:
            var[m], cov[m] = linear_moments(q, r, a_in)
            gain[m] = a_in
        elif code == ATTENTION:
            var[m], cov[m] = attention_moments(q, r, alpha_qk=plan.alpha_qk[i], alpha_vo=a_in * a_out,
                                               table=plan.attention, rope=plan.rope)
            tau2 = plan.alpha_qk[i] * q**2 * (1.0 if plan.rope else (1 - r))
            gain[m] = a_in * a_out * plan.attention.square_sum(tau2)
        else:
            if static is not None and not np.isnan(static["var"][i]).any():
                v1, g1 = static["var"][i], static["gain"][i]
            else:
                v1, g1 = _mlp_static(plan, q, a_in, a_out)
            corr = plan.kernel.correlation(a_in * q, r)
            c1 = v1 * (corr * r if plan.activation == "swiglu" else corr)
            if code == MOE:  # routing overlap: exact at r = 0 and r = 1, linear between (approx)
                overlap = plan.gate_overlap0 + (plan.gate2 - plan.gate_overlap0) * np.clip(r, 0, 1)
                extra = 1.0 if plan.shared_expert else 0.0
                v1, c1, g1 = v1 * (plan.gate2 + extra), c1 * (overlap + extra), g1 * (plan.gate2 + extra)
            var[m], cov[m], gain[m] = v1, c1, g1
    return var, cov, gain


def sublayer_step(plan: SublayerPlan, idx, v, c, static: dict | None = None):
    """One sublayer at steps ``idx`` from states ``(v, c)`` (arrays): returns a dict.

    Keys: ``v, c`` (after), ``branch`` (variance of the added branch incl. the aligned
    part), ``jac2`` (``E||(J - I) u||^2/E||u||^2`` of this sublayer, NaN where the sum is
    normalised), ``cos`` (cosine between the stream before and after).

    Jacobian (derived here): for ``h = g x/rms(x)``, ``dh/dx = (g/rms)(I - h h^T/(d g^2))``;
    a probe ``u ~ N(0, I)`` keeps ``d - 1`` directions and ``E[1/rms^2] = d/((d-2) v)`` for a
    Gaussian stream, so the input tangent has second moment ``g^2 (d-1)/((d-2) v)`` per
    coordinate, orthogonal to ``h``; the branch multiplies it by its ``jvp_gain``.
    """
    idx = np.asarray(idx)
    rho = c / v
    q_in = np.where(plan.norm_input[idx], plan.in_scale2[idx], v)
    f_var, f_cov, gain = branch_moments(plan, idx, q_in, rho, static)
    nb = plan.norm_branch[idx]
    safe = np.where(f_var > 0, f_var, 1.0)
    b_var = plan.branch2[idx] * np.where(nb, 1.0, f_var)
    b_cov = plan.branch2[idx] * np.where(nb, f_cov / safe, f_cov)
    d = plan.width
    proj = (d - 1) / (d - 2) if d > 2 else 1.0  # (d-1) directions left by the norm, E[1/rms^2] = d/((d-2) v)
    jac2 = plan.branch2[idx] * np.where(plan.norm_input[idx], plan.in_scale2[idx] / v * proj, 1.0) * gain
    jac2 = np.where(nb, jac2 / safe * proj, jac2)
    jac2 = np.where(plan.norm_after[idx], np.nan, jac2)
    root = np.sqrt(plan.stream_scale2[idx] * v)
    kept = root + plan.alignment
    v_new = kept**2 + b_var
    c_new = c * (kept / np.sqrt(v)) ** 2 + b_cov
    cos = kept / np.sqrt(v_new)
    after = plan.norm_after[idx]
    c_new = np.where(after, c_new / v_new, c_new)
    v_new = np.where(after, 1.0, v_new)
    return dict(v=v_new, c=c_new, branch=b_var + plan.alignment**2, jac2=jac2, cos=cos)


_KEYS = ("v", "c", "branch", "jac2", "cos")


_PARAMS = ("kind", "norm_input", "in_scale2", "norm_branch", "branch2", "stream_scale2", "norm_after",
           "alpha_in", "alpha_out", "alpha_qk")


def _periodic_from(plan: SublayerPlan, period: int) -> int:
    """First step from which every parameter repeats with the block ``period`` (autonomous tail)."""
    if plan.size <= period:
        return plan.size
    same = np.ones(plan.size - period, bool)
    for name in _PARAMS:
        values = getattr(plan, name)
        same &= values[period:] == values[:-period]
    breaks = np.flatnonzero(~same)
    return int(breaks[-1]) + 1 + period if len(breaks) else period


def _sequential(plan: SublayerPlan, start: int, stop: int, v: float, c: float, out: dict,
                static: dict, freeze_tol: float = 1e-13) -> tuple[float, float]:
    """Step by step; an autonomous tail whose state stopped moving is filled by repetition.

    Frozen when, over one block, ``v`` changes by < 1e-15 relative and the cosine by
    < ``freeze_tol`` (post/deepnorm, whose cosine creeps to its fixed point; the neglected
    drift is below ``freeze_tol`` times the remaining blocks, in practice far less).
    """
    period = int(np.sum(plan.block == plan.block[0]))
    autonomous = _periodic_from(plan, period)
    for n in range(start, stop):
        step = sublayer_step(plan, np.array([n]), np.array([v]), np.array([c]), static)
        for key in _KEYS:
            out[key][n] = step[key][0]
        v, c = float(step["v"][0]), float(step["c"][0])
        if not np.isfinite(v):
            for key in _KEYS:
                out[key][n + 1:stop] = np.inf if key in ("v", "branch") else np.nan
            return v, c
        end = n + 1
        if end % period == 0 and end - period > max(start, autonomous) and end < stop:
            old_v, old_c = out["v"][end - period - 1], out["c"][end - period - 1]
            if abs(v - old_v) <= 1e-15 * abs(v) and abs(c / v - old_c / old_v) < freeze_tol:
                for key in _KEYS:
                    out[key][end:stop] = np.resize(out[key][end - period:end], stop - end)
                return v, c
    return v, c


def token_recursion(plan: SublayerPlan, v0: float, c0: float, prefix: int = 500, start: int = 0) -> dict:
    """Run the (v, c) recursion through all sublayers of ``plan``.

    Returns a dict of arrays of length ``N``: ``v, c, branch, jac2, cos`` after each
    sublayer (``start > 0``: from sublayer ``start`` on, with ``(v0, c0)`` the state before
    it; earlier entries NaN). The first ``prefix`` sublayers run one by one; after that, runs of additive
    steps (norm on the input, no alignment) are solved together by fixed-point iteration
    on the cosine trajectory (converged to 1e-13, else sequential); other runs go step by
    step (~100 us each) until their state is stationary (:func:`_sequential`).

    >>> plan = SublayerPlan(np.array([LINEAR]), np.array([1]), np.array([True]), np.array([1.0]),
    ...     np.array([False]), np.array([1.0]), np.array([1.0]), np.array([False]), np.array([0.5]),
    ...     np.array([1.0]), np.array([0.0]), "relu", 4.0, 64, False, 0.0, None, None)
    >>> out = token_recursion(plan, 1.0, 0.0)
    >>> float(out["v"][0]), round(float(out["cos"][0]), 6)
    (1.5, 0.816497)
    """
    from theory.pair_tail import picard
    n_steps = plan.size
    out = {key: np.full(n_steps, np.nan) for key in _KEYS}
    head = min(start + prefix, n_steps)
    static = static_moments(plan)
    v, c = _sequential(plan, start, head, v0, c0, out, static)
    additive = plan.is_additive(np.arange(n_steps))
    while head < n_steps:  # segments of additive / non-additive steps (mix: post, then pre)
        stop = head + int(np.argmax(additive[head:] != additive[head])) if (additive[head:] != additive[head]).any() \
            else n_steps
        if not np.isfinite(v):
            for key in _KEYS:
                out[key][head:] = np.inf if key in ("v", "branch") else np.nan
            return out
        if not additive[head] or not picard(plan, head, stop, v, c, out, static):
            v, c = _sequential(plan, head, stop, v, c, out, static)
        v, c = float(out["v"][stop - 1]), float(out["c"][stop - 1])
        head = stop
    return out
