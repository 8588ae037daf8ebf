"""Per-position token covariance at random init: one sublayer of the T x T matrix recursion.

Derived here (docs/derivations.md#token-covariance-recursion), refining :mod:`theory.meanfield.pair_recursion`, which
tracks one mean inter-token covariance. State: ``K[t, t'] = E[x_t . x_t']/d``, the
per-coordinate covariance between token positions, in the mean-field limit
``d -> infinity`` with i.i.d. zero-mean Gaussian weights independent across sublayers.
One sublayer maps ``K`` as follows (``g^2 = in_scale2``):

- input: ``Q = g^2 R``, ``R = K/sqrt(diag K diag K^T)`` behind a norm (RMSNorm; LayerNorm
  gives the same ``R``: centring over features changes ``E[x_t.x_t']`` and ``E|x_t|^2`` by
  the same factor ``(d-1)/d`` for exchangeable zero-mean coordinates), else ``Q = K``.
- linear: ``alpha Q``. MLP: ``(d_ff/d) alpha_out E[phi(z_t) phi(z_t')]`` with ``Cov z = alpha_in Q``,
  elementwise (dual kernel, the table of :class:`theory.meanfield.tables.KernelTable`; for
  un-normalised input with unequal diagonals ``sqrt(M_t M_t') kappa(sqrt(q_t q_t'), r)``,
  exact for ReLU, an approximation otherwise).
- attention (value path): ``alpha_v alpha_o E[A Q A^T]``. For uniform rows ``A = Abar``
  (causal ``1/t`` on ``j <= t``, or ``1/T``) this is ``Abar Q Abar^T`` exactly. Softmax rows
  (score variance ``tau_t^2 = alpha_q alpha_k g^4 (1 - rho_t)``, ``rho_t`` the mean cosine of
  the keys row ``t`` sees; RoPE: ``rho_t (1 - spread_t)``, :func:`rope_spread`) are treated as exchangeable and
  independent across rows: ``E[a a^T] = Abar Abar^T + c_t (n I - 1 1^T)/(n - 1)``,
  ``c_t = S_t/n - 1/n^2``, ``S_t = E sum_j a_tj^2`` (:func:`theory.meanfield.softmax_rows.softmax_square_sum`),
  which adds ``(S_t - 1/n)(n tr Q_t - 1^T Q_t 1)/(n (n - 1))`` to the diagonal (approximation;
  it is the uniform law plus ``O(tau^2)``).
- attention tangent (:func:`tangent_step`): the value path as above on the tangent covariance, plus the
  path through the scores, ``alpha_v alpha_o alpha_q alpha_k`` :func:`score_path` (derived there).
- branch: times ``branch2`` (mask density ``rho`` x scale^2); sandwich: normalised per token.
- stream: ``K <- D K D + B`` with ``D_t = (sqrt(stream_scale2 K_tt) + a)/sqrt(K_tt)`` (deepnorm
  scale, aligned part ``a``); post-LN / deepnorm: ``K <- R`` of the sum.

The cross term of branch and stream vanishes (the last weight matrix is zero-mean and
independent of the stream). Metrics: ``var = mean_t K_tt``; ``token_cos`` = mean over
``t != t'`` of ``R_tt'`` (the mean of the mean-field cosines; the simulator averages the
sampled cosines, which differ by ``O(1/d)``); per-token cosine ``sqrt(K_tt/K'_tt)`` of the
stream before and after a sublayer (the angular metric averages ``arccos`` over tokens).

Exact regime: RMS/LayerNorm'd inputs, ``tau^2 -> 0`` (uniform attention), ``d -> infinity``.
At finite ``d`` the cosines ``R`` are ratios of random inner products (bias ``O(1/d)``): with
``width_law="finite-width"`` (:mod:`theory.meanfield.finite_width`, carried in the context) a normalised
sublayer is averaged over the law of the sample cosines at width ``d`` instead, and ``token_cos`` is their mean.

The attention rows' own moments live in :mod:`theory.meanfield.softmax_rows`. Every sublayer of a run
shares one :class:`RecursionContext`; :func:`run_block` runs one block, and
:mod:`theory.meanfield.stack_recursion` the whole stack (step by step, strides, hand-over).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from theory.meanfield.finite_width import (ATTENTION_SEED, FiniteWidth, attention_nodes, mean_sample_cosine,
                                          sampled_attention, smoothed_kernel)
from theory.meanfield.gaussian import derivative_kernel, derivative_moment, second_moment
from theory.meanfield.pair_recursion import static_moments
from theory.meanfield.plan import ATTENTION, LINEAR, MOE, SublayerPlan
from theory.meanfield.softmax_rows import (RowTable, leading_block_sums, rope_cos, row_table, rope_spread,
                                          score_key_traces, score_path, uniform_rows)
from theory.meanfield.tables import derivative_table

__all__ = ["RecursionContext", "recursion_context", "correlation", "token_cosine", "SublayerCov", "sublayer_cov",
           "tangent_step", "run_block", "tangent_pass", "UNIFORM_TAU2"]

UNIFORM_TAU2 = 0.02  # score variance below which attention counts as uniform (MC-checked: predict docstring)


@dataclass(frozen=True)
class RecursionContext:
    """What every sublayer of one run of the T x T recursion shares (:func:`recursion_context`)."""

    static: dict  # static_moments(plan): "var", "gain" (N,) of MLP/MoE steps with a normalised input
    causal: bool
    rows: RowTable | None = None  # softmax row moments per query row (plans with attention)
    abar: np.ndarray | None = None  # (T, T) uniform rows (plans with attention)
    rope_spread: np.ndarray | None = None  # (T,) RoPE only
    rope_cos: np.ndarray | None = None  # (T, T) RoPE only
    finite: FiniteWidth | None = None  # the finite-width law (docs/derivations.md#finite-width-token-covariance)


def recursion_context(plan: SublayerPlan, tokens: int, causal: bool, head_dim: int,
                      width_law: str = "mean-field", law_seed: int = ATTENTION_SEED) -> RecursionContext:
    """The :class:`RecursionContext` of ``plan`` for ``tokens`` positions (row tables, uniform rows, RoPE), under
    ``width_law`` ``mean-field`` or ``finite-width`` (:func:`theory.meanfield.finite_width.resolve_width_law`);
    ``law_seed`` seeds the finite-width law's attention average (:class:`theory.meanfield.finite_width.FiniteWidth`).

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> ctx = recursion_context(build_plan(Setting(depth=2, width=32, heads=4, tokens=4)), 4, True, 8)
    >>> ctx.abar.shape, ctx.rope_cos.shape  # (T, T) each
    ((4, 4), (4, 4))
    """
    rows = None
    if plan.attention is not None:
        rows = row_table(tokens, causal, head_dim, float(plan.attention.tau2_grid[-1]))
    finite = None
    if width_law == "finite-width":
        kernel = None if plan.kernel is None else smoothed_kernel(plan.kernel, plan.width, plan.activation == "swiglu")
        finite = FiniteWidth(plan.width, head_dim, attention_nodes(plan.depth), kernel, law_seed)
    return RecursionContext(static=static_moments(plan), causal=causal, rows=rows,
                            rope_spread=rope_spread(tokens, causal, head_dim) if plan.rope else None,
                            rope_cos=rope_cos(tokens, head_dim) if plan.rope else None,
                            abar=uniform_rows(tokens, causal) if rows is not None else None, finite=finite)


def correlation(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, diag K)``: the cosines ``K_tt'/sqrt(K_tt K_t't')`` (T, T) (a zero diagonal entry divides by 1) and (T,).

    >>> R, diag = correlation(np.array([[4.0, 2.0], [2.0, 1.0]]))
    >>> R.tolist(), diag.tolist()
    ([[1.0, 1.0], [1.0, 1.0]], [4.0, 1.0])
    """
    diag = np.diag(K).copy()
    root = np.sqrt(np.where(diag > 0, diag, 1.0))
    return K / np.outer(root, root), diag


def token_cosine(K: np.ndarray, ctx: RecursionContext) -> float:
    """``token_cos`` of the state ``K`` (T, T): the mean over ``t != t'`` of ``R_tt'`` (mean-field) or of the
    expected sample cosine ``E[r_hat_tt']`` (finite width); 0 for one token.

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan, K = build_plan(Setting(block="mlp", depth=1, width=16, tokens=2)), np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> token_cosine(K, recursion_context(plan, 2, True, 4)), round(token_cosine(K, recursion_context(plan, 2, True, 4,
    ...                                                                           "finite-width")), 4)
    (0.5, 0.4881)
    """
    if len(K) < 2:
        return 0.0
    R = correlation(K)[0]
    if ctx.finite is not None:
        return ctx.finite.mean_cosine(R)
    return float(R[~np.eye(len(K), dtype=bool)].mean())


def _row_square_sums(plan: SublayerPlan, n: int, R: np.ndarray, q_scale: float,
                     ctx: RecursionContext) -> tuple[np.ndarray, np.ndarray]:
    """``(S_t, J_t)`` at ``tau_t^2 = alpha_qk q^2 (1 - rho_t)`` (RoPE: no ``1 - rho_t``), ``rho_t`` the keys' mean cosine.

    ``S_t`` (T,); ``J_t`` (2, T): ``E tr J_t^2`` for the score path of the tangent.
    """
    n_vis = ctx.rows.visible
    total = leading_block_sums(R) if ctx.causal else np.full(len(n_vis), R.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rho_t = np.where(n_vis > 1, (total - n_vis) / (n_vis * (n_vis - 1)), 0.0)
    if plan.rope:  # the rotated common part of the keys cancels only in part (rope_spread)
        rho_t = rho_t * (1 - ctx.rope_spread)
    tau2 = plan.alpha_qk[n] * q_scale**2 * np.clip(1 - rho_t, 0, None)
    return ctx.rows.at(tau2), ctx.rows.at(tau2, "j")


def _attention(plan: SublayerPlan, n: int, Q: np.ndarray, R: np.ndarray, q_scale: float, ctx: RecursionContext,
               s_given: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(alpha_vo E[A Q A^T], S_t, J_t)`` (module docstring); ``S_t`` from ``s_given`` when given (then ``J_t`` None).

    ``Q`` (T, T); ``S_t`` (T,); ``J_t`` (2, T), None for uniform rows.
    """
    abar, rows = ctx.abar, ctx.rows
    out = abar @ Q @ abar.T
    n_vis = rows.visible
    jac = None
    if plan.alpha_qk[n] > 0 and len(n_vis) > 1:
        s = s_given
        if s is None:
            s, jac = _row_square_sums(plan, n, R, q_scale, ctx)
        if ctx.causal:
            tr, one = np.cumsum(np.diag(Q)), leading_block_sums(Q)
        else:
            tr, one = np.full(len(n_vis), np.trace(Q)), np.full(len(n_vis), Q.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            extra = np.where(n_vis > 1, (s - 1 / n_vis) * (n_vis * tr - one) / (n_vis * (n_vis - 1)), 0.0)
        out.flat[:: len(out) + 1] += extra
    else:
        s = 1.0 / n_vis
    return plan.alpha_in[n] * plan.alpha_out[n] * out, s, jac


def _mlp(plan: SublayerPlan, n: int, Q: np.ndarray, R: np.ndarray, normed: bool, ctx: RecursionContext) -> np.ndarray:
    a_in, a_out = plan.alpha_in[n], plan.alpha_out[n]
    static = ctx.static
    if normed and not np.isnan(static["var"][n]):
        var = np.full(len(Q), static["var"][n])
        pre = np.float64(a_in * plan.in_scale2[n])  # one pre-activation variance, broadcast against R
    else:
        pre_d = a_in * np.diag(Q)
        var = plan.ffn_ratio * a_out * second_moment(plan.activation, pre_d)
        pre = np.sqrt(np.outer(pre_d, pre_d))
    smoothed = normed and ctx.finite is not None
    if smoothed:  # averaged over the sample cosines' law, SwiGLU's gate r included
        corr = ctx.finite.kernel.correlation(pre, R)
    elif plan.activation == "relu":  # arc-cosine closed form
        r = np.clip(R, -1.0, 1.0)
        corr = (np.sqrt(1 - r * r) + (np.pi - np.arccos(r)) * r) / np.pi
    else:
        corr = plan.kernel.correlation(np.maximum(pre, 1e-300), R)
    if plan.activation == "swiglu" and not smoothed:
        corr = corr * R
    root = np.sqrt(var)
    out = np.outer(root, root) * corr
    np.fill_diagonal(out, var)
    return out * _moe_overlap(plan, n, R) if plan.kind[n] == MOE else out


def _finite_attention_correction(plan: SublayerPlan, n: int, R: np.ndarray, meanfield: np.ndarray,
                                 ctx: RecursionContext) -> np.ndarray:
    """The finite-width law's correction (T, T) to the mean-field attention branch ``meanfield`` of step ``n``
    (:meth:`theory.meanfield.finite_width.FiniteWidth.attention_correction`, :func:`sampled_attention`)."""
    finite, block = ctx.finite, int(plan.block[n])
    alpha_vo = plan.alpha_in[n] * plan.alpha_out[n]

    def sample(R_node: np.ndarray, seed) -> np.ndarray:
        return alpha_vo * sampled_attention(R_node, float(plan.in_scale2[n]), float(plan.alpha_qk[n]), finite.width,
                                            finite.head_dim, ctx.causal, plan.rope, seed)[0]

    return finite.attention_correction(block, n % plan.period, R, meanfield, sample)


@dataclass(frozen=True)
class SublayerCov:
    """One sublayer of the matrix recursion (:func:`sublayer_cov`), and what its tangents need.

    ``K`` (T, T) after the sublayer, ``branch`` (mean branch variance), ``cos_tok`` (T,) the
    per-token cosine before/after; for :func:`tangent_step`: ``diag_in`` (T,), ``f_diag`` (T,),
    ``R`` (T, T), ``scale`` (T,), ``S`` (T,) and ``J`` (2, T) (attention; else None). Set by
    :func:`run_block`: the tangents' ``traces`` before and ``traces_after`` the sublayer, and an
    MLP's tangent kernel ``mlp_tangent`` (T, T), or an attention's score-path traces ``key_traces`` (T, T)
    (:func:`theory.meanfield.softmax_rows.score_key_traces`), shared by the block and end-to-end tangents.
    """

    K: np.ndarray
    branch: float
    cos_tok: np.ndarray
    diag_in: np.ndarray
    f_diag: np.ndarray
    R: np.ndarray
    scale: np.ndarray
    S: np.ndarray | None
    J: np.ndarray | None
    traces: tuple = ()
    traces_after: tuple = ()
    mlp_tangent: np.ndarray | None = None
    key_traces: np.ndarray | None = None


def sublayer_cov(plan: SublayerPlan, n: int, K: np.ndarray, ctx: RecursionContext) -> SublayerCov:
    """One sublayer ``n`` on the T x T state ``K``: new ``K``, branch covariance, per-token quantities.

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="linear", depth=1, width=16, tokens=2))
    >>> ctx = recursion_context(plan, 2, True, 4)
    >>> step = sublayer_cov(plan, 0, np.eye(2), ctx)  # K (2, 2): orthogonal unit tokens
    >>> step.K.tolist(), step.branch  # v = 1 + alpha g^2 = 2
    ([[2.0, 0.0], [0.0, 2.0]], 1.0)
    """
    R, diag = correlation(K)
    normed = bool(plan.norm_input[n])
    Q = plan.in_scale2[n] * R if normed else K
    code = plan.kind[n]
    if code == LINEAR:
        f = plan.alpha_in[n] * Q
    elif code == ATTENTION:
        f, s, jac = _attention(plan, n, Q, R, plan.in_scale2[n] if normed else np.float64(np.mean(diag)), ctx)
        if normed and ctx.finite is not None:
            f = f + _finite_attention_correction(plan, n, R, f, ctx)
    else:
        f = _mlp(plan, n, Q, R, normed, ctx)
    f_diag = np.diag(f).copy()
    if plan.norm_branch[n]:
        safe = np.sqrt(np.where(f_diag > 0, f_diag, 1.0))
        f = f / np.outer(safe, safe)
        if ctx.finite is not None:  # the normalised branch's cosines are sample cosines of its d coordinates
            f = mean_sample_cosine(f, ctx.finite.width)
    B = plan.branch2[n] * f
    kept = np.sqrt(plan.stream_scale2[n] * diag) + plan.alignment
    scale = kept / np.sqrt(np.where(diag > 0, diag, 1.0))
    new = K * np.outer(scale, scale) + B
    new_diag = np.diag(new).copy()
    cos_tok = kept / np.sqrt(new_diag)
    if plan.norm_after[n]:
        new = correlation(new)[0]
    return SublayerCov(K=new, branch=float(np.mean(np.diag(B))) + plan.alignment**2, cos_tok=cos_tok,
                       diag_in=diag, f_diag=f_diag, R=R, scale=scale, S=s if code == ATTENTION else None,
                       J=jac if code == ATTENTION else None)


def _mlp_tangent_kernel(plan: SublayerPlan, n: int, R: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``M_tt'`` with branch tangent covariance ``M * Cn`` (``Cn`` the tangent entering ``W1``, per unit ``alpha_in``).

    ReLU/GELU/SiLU: ``(d_ff/d) alpha_out alpha_in E[phi'(z_t) phi'(z_t')]``; SwiGLU (``silu(z1) z3``):
    ``(d_ff/d) alpha_out alpha_in (E[silu'(z1) silu'(z1')] E[z3 z3'] + E[silu(z1) silu(z1')])``.
    ``q`` (T,) pre-activation variances; unequal ``q``: geometric mean (exact for ReLU).
    """
    name = "silu" if plan.activation == "swiglu" else plan.activation
    if np.all(q == q[0]):  # one variance: (1, 1) factors below, broadcast against R
        q = q[:1]
    qq = np.sqrt(np.outer(q, q))
    if name == "relu":  # closed form (pi - arccos r)/(2 pi)
        return plan.ffn_ratio * plan.alpha_out[n] * plan.alpha_in[n] * derivative_kernel("relu", 1.0, R) \
            * (_moe_overlap(plan, n, R) if plan.kind[n] == MOE else 1.0)
    grid = plan.kernel.log_q  # the same q range as the forward kernel table of the plan
    dtab = derivative_table(name, float(np.exp(grid[0])), float(np.exp(grid[-1])))
    dm = derivative_moment(name, q)
    kern = np.sqrt(np.outer(dm, dm)) * dtab.correlation(np.maximum(qq, 1e-300), R)
    if plan.activation == "swiglu":
        sm = second_moment("silu", q)
        kern = kern * qq * R + np.sqrt(np.outer(sm, sm)) * plan.kernel.correlation(np.maximum(qq, 1e-300), R)
    out = plan.ffn_ratio * plan.alpha_out[n] * plan.alpha_in[n] * kern
    return out * _moe_overlap(plan, n, R) if plan.kind[n] == MOE else out


def _moe_overlap(plan: SublayerPlan, n: int, R: np.ndarray) -> np.ndarray:
    """MoE factor of step ``n``: ``E sum_i g_ti g_t'i`` (+1 for a shared expert); off the diagonal linear in ``r``
    (approx)."""
    extra = 1.0 if plan.shared_expert else 0.0
    gate2 = plan.gate2[n]
    overlap = plan.gate_overlap0 + (gate2 - plan.gate_overlap0) * np.clip(R, 0, 1)
    np.fill_diagonal(overlap, gate2)
    return overlap + extra


def _mlp_tangent(plan: SublayerPlan, n: int, step: SublayerCov) -> np.ndarray:
    """The MLP tangent kernel of sublayer ``n`` at its forward ``step`` (:func:`_mlp_tangent_kernel`), (T, T)."""
    normed = bool(plan.norm_input[n])
    q = plan.alpha_in[n] * (np.full(len(step.diag_in), plan.in_scale2[n]) if normed else step.diag_in)
    return _mlp_tangent_kernel(plan, n, step.R, q)


def tangent_step(plan: SublayerPlan, n: int, C: np.ndarray, step: SublayerCov, ctx: RecursionContext) -> np.ndarray:
    """Tangent covariance after sublayer ``n`` (``C``: T x T per-coordinate covariance of ``dx``).

    Derived here (docs/derivations.md#jacobian-init).
    Norm: ``dh_t = (g/rms_t) P_t dx_t`` (``P_t`` removes the direction of ``h_t``;
    the tangent is orthogonal to the stream in the mean field), so ``Cn = g^2 C/sqrt(K_tt K_t't')``,
    the diagonal times ``(d-1)/(d-2)`` (``E[1/rms^2] = d/((d-2) K_tt)`` for a Gaussian stream and
    ``d - 1`` directions kept). Branch tangent (cross term with ``dx`` zero: zero-mean weights):
    linear ``alpha Cn``; attention ``alpha_v alpha_o (E[A Cn A^T] + alpha_q alpha_k`` :func:`score_path` ``)``:
    the value path ``A dV`` as the forward map plus the score path ``dA V`` (zero for ``alpha_qk = 0``;
    their cross term vanishes in the mean field, see :func:`score_path`); MLP ``M * Cn``
    (:func:`_mlp_tangent_kernel`). ``C' = D C D + branch2 * branch tangent``.
    ``C`` (T, T), ``step`` from :func:`sublayer_cov` (its ``mlp_tangent`` when :func:`run_block` set it);
    returns (T, T).

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="linear", depth=1, width=16, tokens=2))
    >>> ctx = recursion_context(plan, 2, True, 4)
    >>> step = sublayer_cov(plan, 0, np.eye(2), ctx)
    >>> tangent_step(plan, 0, np.eye(2), step, ctx).round(6).tolist()  # 1 + (d - 1)/(d - 2) = 29/14
    [[2.071429, 0.0], [0.0, 2.071429]]
    """
    d = plan.width
    proj = (d - 1) / (d - 2) if d > 2 else 1.0
    diag = step.diag_in
    normed = bool(plan.norm_input[n])
    if normed:
        root = np.sqrt(diag)
        Cn = plan.in_scale2[n] * C / np.outer(root, root)
        Cn.flat[:: len(Cn) + 1] *= proj
    else:
        Cn = C
    code = plan.kind[n]
    if code == LINEAR:
        f = plan.alpha_in[n] * Cn
    elif code == ATTENTION:
        f = _attention(plan, n, Cn, step.R, plan.in_scale2[n] if normed else np.float64(np.mean(diag)), ctx,
                       s_given=step.S)[0]
        if step.J is not None and plan.alpha_qk[n] > 0:  # the path through the scores
            f = f + plan.alpha_in[n] * plan.alpha_out[n] * plan.alpha_qk[n] * score_path(
                _score_input(plan, n, step), Cn, step.S, step.J, ctx.causal, ctx.rope_cos if plan.rope else None,
                step.key_traces)
    else:
        f = (_mlp_tangent(plan, n, step) if step.mlp_tangent is None else step.mlp_tangent) * Cn
    if plan.norm_branch[n]:  # sandwich: the outer norm divides by the branch rms (projection ignored)
        safe = np.sqrt(np.where(step.f_diag > 0, step.f_diag, 1.0))
        f = f / np.outer(safe, safe)
        f.flat[:: len(f) + 1] *= proj
    return C * np.outer(step.scale, step.scale) + plan.branch2[n] * f


def _score_input(plan: SublayerPlan, n: int, step: SublayerCov) -> np.ndarray:
    """The covariance ``Q`` (T, T) the scores of attention step ``n`` read (:func:`score_path`)."""
    if plan.norm_input[n]:
        return plan.in_scale2[n] * step.R
    return step.R * np.sqrt(np.outer(step.diag_in, step.diag_in))


def run_block(plan: SublayerPlan, block: int, K: np.ndarray, tangents: list, ctx: RecursionContext):
    """Block ``block`` (1-based) from state ``K`` with tangent covariances ``tangents``: ``(K, tangents, steps)``.

    ``K`` and each tangent (T, T); ``steps``: the :class:`SublayerCov` records of the block, with
    the tangents' traces before and after each sublayer (``traces``, ``traces_after``) and an
    MLP's tangent kernel computed once for all tangents.

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="transformer", depth=2, width=32, heads=4, tokens=2))
    >>> K, (C,), steps = run_block(plan, 1, np.eye(2), [np.eye(2)], recursion_context(plan, 2, True, 8))
    >>> K.shape, C.shape, len(steps)  # attention and MLP
    ((2, 2), (2, 2), 2)
    """
    steps = []
    for n in plan.steps(block):
        step = sublayer_cov(plan, n, K, ctx)
        if tangents and plan.kind[n] not in (LINEAR, ATTENTION):
            step = replace(step, mlp_tangent=_mlp_tangent(plan, n, step))
        elif tangents and step.J is not None and plan.alpha_qk[n] > 0:
            step = replace(step, key_traces=score_key_traces(_score_input(plan, n, step), ctx.causal,
                                                             ctx.rope_cos if plan.rope else None))
        traces = tuple(np.trace(C) for C in tangents)
        tangents = [tangent_step(plan, n, C, step, ctx) for C in tangents]
        steps.append(replace(step, traces=traces, traces_after=tuple(np.trace(C) for C in tangents)))
        K = step.K
    return K, tangents, steps


def tangent_pass(plan: SublayerPlan, block: int, steps: list, C: np.ndarray, ctx: RecursionContext) -> np.ndarray:
    """The tangent ``C`` (T, T) through block ``block`` along the forward ``steps`` of :func:`run_block`."""
    for n, step in zip(plan.steps(block), steps):
        C = tangent_step(plan, n, C, step, ctx)
    return C
