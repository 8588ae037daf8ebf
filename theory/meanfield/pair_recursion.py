"""The pair recursion: the stream's (variance, inter-token covariance) through a stack of sublayers.

Superseded for predictions by the per-position T x T recursion of
:mod:`theory.meanfield.covariance` (which uses its branch moments); :func:`token_recursion`
remains the fast path for non-additive tails (post, deepnorm, mix, none) after the
step-by-step blocks, and :func:`solve_additive_run` solves runs of additive steps at once.

Derived here (docs/derivations.md#token-pair-recursion). Per coordinate of the stream track
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
  ``cov = (d_ff/d) alpha2 K_phi(alpha1 q_in, rho)`` (dual kernel, :mod:`theory.meanfield.gaussian`).
- attention (value path, rows ``a`` independent of ``W_V``, ``sum_j a_tj = 1``):
  ``var = alpha_v alpha_o q_in ((1-rho) S + rho)``, ``cov = alpha_v alpha_o q_in ((1-rho) P + rho)``
  with ``S = E_t E[sum_j a_tj^2]`` (:func:`theory.meanfield.softmax_rows.softmax_square_sum`,
  averaged over query positions) and ``P`` the mean over pairs ``t != t'`` of
  ``E[sum_j a_tj a_t'j]`` (:func:`theory.meanfield.softmax_rows.causal_pair_overlap`).
  Score variance ``tau^2 = alpha_q alpha_k q_in^2 (1 - rho)``; with RoPE the factor
  ``(1 - rho)`` is dropped (RoPE treated as decorrelating the keys).

Runs of additive steps (norm on the input, no norm after the sum, no alignment) have
increments that depend on the state only through the cosine; :func:`solve_additive_run`
solves such a run by fixed-point iteration on its cosine trajectory.

>>> from theory.meanfield.tables import kernel_table
>>> var, cov = mlp_moments(1.0, 1.0, activation="relu", alpha_in=1.0, alpha_out=1.0, ffn_ratio=4.0,
...                        table=kernel_table("relu", 1.0, 1.0))
>>> float(var), round(float(cov), 9)  # identical tokens: cov = var
(2.0, 2.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.meanfield.gaussian import derivative_moment, many_moments, second_moment, swiglu_jvp_gain
from theory.meanfield.plan import ATTENTION, LINEAR, MLP, MOE, SublayerPlan
from theory.meanfield.tables import AttentionTable, KernelTable

__all__ = ["linear_moments", "mlp_moments", "attention_moments", "static_moments", "branch_moments",
           "SublayerStep", "sublayer_step", "token_recursion", "solve_additive_run"]


def linear_moments(q_in, rho, alpha):
    """``(var, cov)`` of ``h W`` for input second moment ``q_in``, cosine ``rho`` (exact).

    >>> linear_moments(2.0, 0.5, 0.1)
    (0.2, 0.1)
    """
    return alpha * q_in, alpha * q_in * rho


def mlp_moments(q_in, rho, *, activation, alpha_in, alpha_out, ffn_ratio, table: KernelTable):
    """``(var, cov)`` of an MLP branch (SwiGLU: gate and up both with ``alpha_in``).

    >>> from theory.meanfield.tables import kernel_table
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

    >>> from theory.meanfield.tables import attention_table
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


def _mlp_static(plan: SublayerPlan, q_in, alpha_in, alpha_out):
    """``(var, jvp_gain)`` of an MLP branch at input second moment ``q_in`` (no cosine needed)."""
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
    is left to the recursion. NaN elsewhere. Returns ``{"var": (N,), "gain": (N,)}``.

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="mlp", activation="relu", depth=2, width=32, ffn_width=128))
    >>> {key: value.round(9).tolist() for key, value in static_moments(plan).items()}  # (d_ff/d)/2 = 2
    {'var': [2.0, 2.0], 'gain': [2.0, 2.0]}
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
    Source: derived here (module docstring; docs/derivations.md#token-pair-recursion).
    ``idx, q_in, rho`` (n,); returns three (n,) arrays.

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="mlp", activation="relu", depth=2, width=32, ffn_width=128))
    >>> var, cov, gain = branch_moments(plan, np.array([0, 1]), np.ones(2), np.array([0.0, 1.0]))
    >>> var.round(9).tolist(), cov.round(6).tolist(), gain.round(9).tolist()  # cov(rho = 0) = var/pi
    ([2.0, 2.0], [0.63662, 2.0], [2.0, 2.0])
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
                gate2 = plan.gate2[i]
                overlap = plan.gate_overlap0 + (gate2 - plan.gate_overlap0) * np.clip(r, 0, 1)
                extra = 1.0 if plan.shared_expert else 0.0
                v1, c1, g1 = v1 * (gate2 + extra), c1 * (overlap + extra), g1 * (gate2 + extra)
            var[m], cov[m], gain[m] = v1, c1, g1
    return var, cov, gain


@dataclass(frozen=True)
class SublayerStep:
    """One sublayer of the pair recursion (:func:`sublayer_step`), every field ``(n,)``.

    ``v, c`` after the sublayer, ``branch`` (variance of the added branch incl. the aligned
    part), ``jac2`` (``E||(J - I) u||^2/E||u||^2`` of this sublayer, NaN where the sum is
    normalised), ``cos`` (cosine between the stream before and after).
    """

    v: np.ndarray
    c: np.ndarray
    branch: np.ndarray
    jac2: np.ndarray
    cos: np.ndarray


def sublayer_step(plan: SublayerPlan, idx, v, c, static: dict | None = None) -> SublayerStep:
    """One sublayer at steps ``idx`` from states ``(v, c)`` (arrays ``(n,)``).

    Jacobian (derived here, docs/derivations.md#jacobian-init):
    for ``h = g x/rms(x)``, ``dh/dx = (g/rms)(I - h h^T/(d g^2))``;
    a probe ``u ~ N(0, I)`` keeps ``d - 1`` directions and ``E[1/rms^2] = d/((d-2) v)`` for a
    Gaussian stream, so the input tangent has second moment ``g^2 (d-1)/((d-2) v)`` per
    coordinate, orthogonal to ``h``; the branch multiplies it by its ``jvp_gain``.

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="linear", depth=2, width=16))
    >>> step = sublayer_step(plan, np.array([0]), np.array([1.0]), np.array([0.0]))
    >>> {key: np.round(getattr(step, key), 6).tolist() for key in _KEYS}  # jac2 = (d - 1)/(d - 2) = 15/14
    {'v': [2.0], 'c': [0.0], 'branch': [1.0], 'jac2': [1.071429], 'cos': [0.707107]}
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
    return SublayerStep(v=v_new, c=c_new, branch=b_var + plan.alignment**2, jac2=jac2, cos=cos)


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
            out[key][n] = getattr(step, key)[0]
        v, c = float(step.v[0]), float(step.c[0])
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
        if not additive[head] or not solve_additive_run(plan, head, stop, v, c, out, static):
            v, c = _sequential(plan, head, stop, v, c, out, static)
        v, c = float(out["v"][stop - 1]), float(out["c"][stop - 1])
        head = stop
    return out


# -- additive runs at once ----------------------------------------------------------------------
class _AdditiveTail:
    """Branch ``(var, cov)`` increments of additive steps as a cheap function of the cosine.

    Everything that does not depend on the cosine (input second moments, MLP moments,
    kernel-grid rows) is computed once; a call costs a few array operations per step.
    """

    def __init__(self, plan: SublayerPlan, idx: np.ndarray, static: dict):
        self.plan = plan
        q = plan.in_scale2[idx]
        kind = plan.kind[idx]
        self.attn, self.mlp = np.flatnonzero(kind == ATTENTION), np.flatnonzero((kind == MLP) | (kind == MOE))
        gate2 = plan.gate2[idx]  # (len(idx),)
        self.moe_factor = np.where(kind == MOE, gate2 + (1.0 if plan.shared_expert else 0.0), 1.0)
        self.gain = np.where(kind == ATTENTION, plan.alpha_in[idx] * plan.alpha_out[idx] * q,
                             np.where(kind == LINEAR, plan.alpha_in[idx] * q, static["var"][idx] * self.moe_factor))
        self.attn_gain, self.tau0 = self.gain[self.attn], (plan.alpha_qk[idx] * q**2)[self.attn]
        self.mlp_gain, self.is_moe, self.mlp_gate2 = self.gain[self.mlp], kind[self.mlp] == MOE, gate2[self.mlp]
        if len(self.mlp):
            table = plan.kernel
            lq = np.log(plan.alpha_in[idx][self.mlp] * q[self.mlp])
            fq = np.clip((lq - table.log_q[0]) / (table.log_q[1] - table.log_q[0]), 0, len(table.log_q) - 1.000001)
            self.row = fq.astype(np.int64)
            self.row_frac = fq - self.row
        self.nb = plan.norm_branch[idx]
        self.branch2 = plan.branch2[idx]
        self.any_nb = bool(self.nb.any())

    def _kernel(self, rho: np.ndarray) -> np.ndarray:
        table = self.plan.kernel
        ft = np.arccos(np.clip(rho, -1.0, 1.0))
        ft *= 1.0 / (table.theta[1] - table.theta[0])
        np.clip(ft, 0, len(table.theta) - 1.000001, out=ft)
        j = ft.astype(np.int64)
        ft -= j
        k, i, fq = table.cells, self.row, self.row_frac
        low = k(i, j) * (1 - ft) + k(i, j + 1) * ft
        return low + fq * (k(i + 1, j) * (1 - ft) + k(i + 1, j + 1) * ft - low)

    def __call__(self, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        plan = self.plan
        f_var, f_cov = self.gain.copy(), self.gain * rho  # linear: (alpha q, alpha q rho)
        if len(self.attn):
            r = rho[self.attn]
            s = plan.attention.square_sum(self.tau0 * (1.0 if plan.rope else 1 - r))
            f_var[self.attn] = self.attn_gain * ((1 - r) * s + r)
            f_cov[self.attn] = self.attn_gain * ((1 - r) * plan.attention.pair_overlap + r)
        if len(self.mlp):
            r = rho[self.mlp]
            corr = self._kernel(r)
            if plan.activation == "swiglu":
                corr *= r
            if self.is_moe.any():
                extra = 1.0 if plan.shared_expert else 0.0
                overlap = plan.gate_overlap0 + (self.mlp_gate2 - plan.gate_overlap0) * np.clip(r, 0, 1)
                corr = np.where(self.is_moe, corr * (overlap + extra) / (self.mlp_gate2 + extra), corr)
            f_cov[self.mlp] = self.mlp_gain * corr
        if self.any_nb:
            safe = np.where(f_var > 0, f_var, 1.0)
            f_var, f_cov = np.where(self.nb, 1.0, f_var), np.where(self.nb, f_cov / safe, f_cov)
        return self.branch2 * f_var, self.branch2 * f_cov


def solve_additive_run(plan: SublayerPlan, start: int, stop: int, v0: float, c0: float, out: dict, static: dict,
                       tol: float = 1e-13, max_iter: int = 100) -> bool:
    """Fixed-point iteration on the whole tail at once (additive steps only).

    Given a guess of the cosine before every step, the increments follow, their cumulative
    sums give ``(v, c)`` and a new cosine trajectory; the map contracts because ``v`` has
    grown over the prefix (measured: 6-8 iterations to 1e-13 for the llama presets).
    Fills ``out[key][start:stop]`` (arrays (N,)) for the keys of :func:`sublayer_step`; returns
    whether it converged (False: nothing written, step sequentially).

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="linear", depth=4, width=16))
    >>> out = {key: np.full(4, np.nan) for key in ("v", "c", "branch", "jac2", "cos")}
    >>> solve_additive_run(plan, 0, 4, 1.0, 0.0, out, static_moments(plan)), out["v"].tolist()
    (True, [2.0, 3.0, 4.0, 5.0])
    """
    idx = np.arange(start, stop)
    tail = _AdditiveTail(plan, idx, static)
    rho = np.full(len(idx), c0 / v0)  # guess: the cosine stays where it is
    for _ in range(max_iter):
        d_var, d_cov = tail(rho)
        v_before = v0 + np.concatenate([[0.0], np.cumsum(d_var[:-1])])  # (n,)
        rho_new = (c0 + np.concatenate([[0.0], np.cumsum(d_cov[:-1])])) / v_before
        done = np.max(np.abs(rho_new - rho)) < tol
        rho = rho_new
        if done:
            _fill_additive(plan, tail, idx, v_before, rho, static, out)
            return True
    return False


def _fill_additive(plan, tail, idx, v_before, rho, static, out) -> None:
    """Outputs of additive steps from the converged cosines (as :func:`sublayer_step`)."""
    start, stop = idx[0], idx[-1] + 1
    d_var, d_cov = tail(rho)
    v_after = v_before + d_var
    gain = static["gain"][idx] * tail.moe_factor  # MLP/MoE jvp gains; attention and linear below
    kind = plan.kind[idx]
    lin = kind == LINEAR
    gain[lin] = plan.alpha_in[idx][lin]
    if len(tail.attn):
        r = rho[tail.attn]
        tau2 = tail.tau0 * (1.0 if plan.rope else 1 - r)
        gain[tail.attn] = (plan.alpha_in[idx][tail.attn] * plan.alpha_out[idx][tail.attn]
                           * plan.attention.square_sum(tau2))
    d = plan.width
    proj = (d - 1) / (d - 2) if d > 2 else 1.0
    jac2 = plan.branch2[idx] * plan.in_scale2[idx] / v_before * proj * gain
    if tail.any_nb:  # sandwich: the outer norm divides by the bare branch's rms
        f_var = branch_moments(plan, idx, plan.in_scale2[idx], rho, static)[0]
        jac2 = np.where(tail.nb, jac2 / np.where(f_var > 0, f_var, 1.0) * proj, jac2)
    out["v"][start:stop] = v_after
    out["c"][start:stop] = rho * v_before + d_cov
    out["branch"][start:stop] = d_var
    out["jac2"][start:stop] = jac2
    out["cos"][start:stop] = np.sqrt(v_before / v_after)
