"""Per-position token covariance at random init: the T x T matrix recursion.

Derived here (THEORY.md B, "token correlation"), refining :mod:`theory.tokens`, which
tracks one mean inter-token covariance. State: ``K[t, t'] = E[x_t . x_t']/d``, the
per-coordinate covariance between token positions, in the mean-field limit
``d -> infinity`` with i.i.d. zero-mean Gaussian weights independent across sublayers.
One sublayer maps ``K`` as follows (``g^2 = in_scale2``):

- input: ``Q = g^2 R``, ``R = K/sqrt(diag K diag K^T)`` behind a norm (RMSNorm; LayerNorm
  gives the same ``R``: centring over features changes ``E[x_t.x_t']`` and ``E|x_t|^2`` by
  the same factor ``(d-1)/d`` for exchangeable zero-mean coordinates), else ``Q = K``.
- linear: ``alpha Q``. MLP: ``(d_ff/d) alpha_out E[phi(z_t) phi(z_t')]`` with ``Cov z = alpha_in Q``,
  elementwise (dual kernel, the table of :class:`theory.tokens.KernelTable`; for
  un-normalised input with unequal diagonals ``sqrt(M_t M_t') kappa(sqrt(q_t q_t'), r)``,
  exact for ReLU, an approximation otherwise).
- attention (value path): ``alpha_v alpha_o E[A Q A^T]``. For uniform rows ``A = Abar``
  (causal ``1/t`` on ``j <= t``, or ``1/T``) this is ``Abar Q Abar^T`` exactly. Softmax rows
  (score variance ``tau_t^2 = alpha_q alpha_k g^4 (1 - rho_t)``, ``rho_t`` the mean cosine of
  the keys row ``t`` sees; RoPE: ``rho_t (1 - spread_t)``, :func:`rope_spread`) are treated as exchangeable and
  independent across rows: ``E[a a^T] = Abar Abar^T + c_t (n I - 1 1^T)/(n - 1)``,
  ``c_t = S_t/n - 1/n^2``, ``S_t = E sum_j a_tj^2`` (:func:`theory.tokens.softmax_square_sum`),
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
At finite ``d`` the cosines ``R`` are ratios of random inner products (bias ``O(1/d)``).

The attention rows' own moments live in :mod:`theory.attention_rows`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from theory.attention_rows import rope_cos, row_table, rope_spread, score_path, uniform_rows
from theory.gaussian import second_moment
from theory.tokens import ATTENTION, LINEAR, MOE, SublayerPlan

__all__ = ["sublayer_cov", "tangent_step", "matrix_recursion", "exact_blocks", "stride_tail", "stream_recursion",
           "UNIFORM_TAU2", "MATRIX_BUDGET", "STRIDE_EPS"]

UNIFORM_TAU2 = 0.02  # score variance below which attention counts as uniform (MC-checked: predict docstring)
MATRIX_BUDGET = 5e7  # T^2 x steps of the matrix recursion before handing over to the pair recursion
MAX_MATRIX_STEPS = 512
STRIDE_EPS = 0.03  # relative stride of the additive tail (stride_tail)


def _correlation(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    diag = np.diag(K).copy()
    root = np.sqrt(np.where(diag > 0, diag, 1.0))
    return K / np.outer(root, root), diag


def _row_square_sums(plan: SublayerPlan, n: int, R: np.ndarray, q_scale: float, info) -> np.ndarray:
    """``S_t`` at ``tau_t^2 = alpha_qk q^2 (1 - rho_t)`` (RoPE: no ``1 - rho_t``), ``rho_t`` the keys' mean cosine."""
    n_vis = info["rows"].visible
    total = np.diag(np.cumsum(np.cumsum(R, axis=0), axis=1)) if info["causal"] else np.full(len(n_vis), R.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rho_t = np.where(n_vis > 1, (total - n_vis) / (n_vis * (n_vis - 1)), 0.0)
    if plan.rope:  # the rotated common part of the keys cancels only in part (rope_spread)
        rho_t = rho_t * (1 - info["rope_spread"])
    tau2 = plan.alpha_qk[n] * q_scale**2 * np.clip(1 - rho_t, 0, None)
    info["J"] = info["rows"].at(tau2, "j")  # (2, T): E tr J_t^2 for the score path of the tangent
    return info["rows"].at(tau2)


def _attention(plan: SublayerPlan, n: int, Q: np.ndarray, R: np.ndarray, q_scale: float, info) -> np.ndarray:
    """``alpha_vo E[A Q A^T]`` (module docstring); ``info['S']`` gets ``S_t``."""
    abar, rows = info["abar"], info["rows"]
    out = abar @ Q @ abar.T
    n_vis = rows.visible
    if plan.alpha_qk[n] > 0 and len(n_vis) > 1:
        s = info.get("S_given")
        if s is None:
            s = _row_square_sums(plan, n, R, q_scale, info)
        if info["causal"]:
            c1 = np.cumsum(np.cumsum(Q, axis=0), axis=1)
            tr, one = np.cumsum(np.diag(Q)), np.diag(c1)
        else:
            tr, one = np.full(len(n_vis), np.trace(Q)), np.full(len(n_vis), Q.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            extra = np.where(n_vis > 1, (s - 1 / n_vis) * (n_vis * tr - one) / (n_vis * (n_vis - 1)), 0.0)
        out[np.diag_indices_from(out)] += extra
    else:
        s = 1.0 / n_vis
        info["J"] = None
    info["S"] = s
    return plan.alpha_in[n] * plan.alpha_out[n] * out


def _mlp(plan: SublayerPlan, n: int, Q: np.ndarray, R: np.ndarray, normed: bool, static: dict) -> np.ndarray:
    a_in, a_out = plan.alpha_in[n], plan.alpha_out[n]
    if normed and not np.isnan(static["var"][n]):
        var = np.full(len(Q), static["var"][n])
        pre = np.full(Q.shape, a_in * plan.in_scale2[n])
    else:
        pre_d = a_in * np.diag(Q)
        var = plan.ffn_ratio * a_out * second_moment(plan.activation, pre_d)
        pre = np.sqrt(np.outer(pre_d, pre_d))
    if plan.activation == "relu":  # arc-cosine closed form
        r = np.clip(R, -1.0, 1.0)
        corr = (np.sqrt(1 - r * r) + (np.pi - np.arccos(r)) * r) / np.pi
    else:
        corr = plan.kernel.correlation(np.maximum(pre, 1e-300), R)
    if plan.activation == "swiglu":
        corr = corr * R
    root = np.sqrt(var)
    out = np.outer(root, root) * corr
    out[np.diag_indices_from(out)] = var
    return out * _moe_overlap(plan, R) if plan.kind[n] == MOE else out


def sublayer_cov(plan: SublayerPlan, n: int, K: np.ndarray, static: dict, info: dict) -> dict:
    """One sublayer ``n`` on the T x T state ``K``: new ``K``, branch covariance, per-token quantities."""
    R, diag = _correlation(K)
    normed = bool(plan.norm_input[n])
    Q = plan.in_scale2[n] * R if normed else K
    code = plan.kind[n]
    if code == LINEAR:
        f = plan.alpha_in[n] * Q
    elif code == ATTENTION:
        f = _attention(plan, n, Q, R, plan.in_scale2[n] if normed else np.float64(np.mean(diag)), info)
    else:
        f = _mlp(plan, n, Q, R, normed, info["static"])
    f_diag = np.diag(f).copy()
    if plan.norm_branch[n]:
        safe = np.sqrt(np.where(f_diag > 0, f_diag, 1.0))
        f = f / np.outer(safe, safe)
    B = plan.branch2[n] * f
    kept = np.sqrt(plan.stream_scale2[n] * diag) + plan.alignment
    scale = kept / np.sqrt(np.where(diag > 0, diag, 1.0))
    new = K * np.outer(scale, scale) + B
    new_diag = np.diag(new).copy()
    cos_tok = kept / np.sqrt(new_diag)
    if plan.norm_after[n]:
        new = _correlation(new)[0]
    return dict(K=new, branch=float(np.mean(np.diag(B))) + plan.alignment**2, cos_tok=cos_tok,
                diag_in=diag, f_diag=f_diag, R=R, scale=scale, S=info.get("S") if code == ATTENTION else None,
                J=info.get("J") if code == ATTENTION else None)


@lru_cache(maxsize=16)
def derivative_table(name: str, q_min: float, q_max: float):
    """:class:`theory.tokens.KernelTable` of ``phi'``: ``E[phi'(z) phi'(z')]/E[phi'(z)^2]`` on ``(log q, arccos r)``."""
    from theory.gaussian import derivative_kernel, derivative_moment
    from theory.tokens import KernelTable
    lo, hi = math.log(max(q_min, 1e-4)), math.log(max(q_max, q_min, 1e-4))
    log_q = np.linspace(lo, hi + 1e-9, max(2, int(np.ceil((hi - lo) / 0.25)) + 2))
    theta = np.linspace(0.0, np.pi, 129)
    q = np.exp(log_q)[:, None]
    kernel = derivative_kernel(name, q, np.cos(theta)[None, :], order=32)  # Jacobian metrics are approx anyway
    return KernelTable(log_q, theta, kernel / derivative_moment(name, q))


def _mlp_tangent_kernel(plan: SublayerPlan, n: int, R: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``M_tt'`` with branch tangent covariance ``M * Cn`` (``Cn`` the tangent entering ``W1``, per unit ``alpha_in``).

    ReLU/GELU/SiLU: ``(d_ff/d) alpha_out alpha_in E[phi'(z_t) phi'(z_t')]``; SwiGLU (``silu(z1) z3``):
    ``(d_ff/d) alpha_out alpha_in (E[silu'(z1) silu'(z1')] E[z3 z3'] + E[silu(z1) silu(z1')])``.
    ``q`` (T,) pre-activation variances; unequal ``q``: geometric mean (exact for ReLU).
    """
    from theory.gaussian import derivative_moment
    name = "silu" if plan.activation == "swiglu" else plan.activation
    qq = np.sqrt(np.outer(q, q))
    if name == "relu":  # closed form (pi - arccos r)/(2 pi)
        from theory.gaussian import derivative_kernel
        return plan.ffn_ratio * plan.alpha_out[n] * plan.alpha_in[n] * derivative_kernel("relu", 1.0, R) \
            * (_moe_overlap(plan, R) if plan.kind[n] == MOE else 1.0)
    grid = plan.kernel.log_q  # the same q range as the forward kernel table of the plan
    dtab = derivative_table(name, float(np.exp(grid[0])), float(np.exp(grid[-1])))
    uniform = bool(np.all(q == q[0]))
    moment = (lambda f: np.full(len(q), float(f(q[:1])[0]))) if uniform else (lambda f: f(q))
    dm = moment(lambda x: derivative_moment(name, x))
    kern = np.sqrt(np.outer(dm, dm)) * dtab.correlation(np.maximum(qq, 1e-300), R)
    if plan.activation == "swiglu":
        sm = moment(lambda x: second_moment("silu", x))
        kern = kern * qq * R + np.sqrt(np.outer(sm, sm)) * plan.kernel.correlation(np.maximum(qq, 1e-300), R)
    out = plan.ffn_ratio * plan.alpha_out[n] * plan.alpha_in[n] * kern
    return out * _moe_overlap(plan, R) if plan.kind[n] == MOE else out


def _moe_overlap(plan: SublayerPlan, R: np.ndarray) -> np.ndarray:
    """MoE factor: ``E sum_i g_ti g_t'i`` (+1 for a shared expert); off the diagonal linear in ``r`` (approx)."""
    extra = 1.0 if plan.shared_expert else 0.0
    overlap = plan.gate_overlap0 + (plan.gate2 - plan.gate_overlap0) * np.clip(R, 0, 1)
    overlap[np.diag_indices_from(overlap)] = plan.gate2
    return overlap + extra


def tangent_step(plan: SublayerPlan, n: int, C: np.ndarray, step: dict, info: dict) -> np.ndarray:
    """Tangent covariance after sublayer ``n`` (``C``: T x T per-coordinate covariance of ``dx``).

    Derived here. Norm: ``dh_t = (g/rms_t) P_t dx_t`` (``P_t`` removes the direction of ``h_t``;
    the tangent is orthogonal to the stream in the mean field), so ``Cn = g^2 C/sqrt(K_tt K_t't')``,
    the diagonal times ``(d-1)/(d-2)`` (``E[1/rms^2] = d/((d-2) K_tt)`` for a Gaussian stream and
    ``d - 1`` directions kept). Branch tangent (cross term with ``dx`` zero: zero-mean weights):
    linear ``alpha Cn``; attention ``alpha_v alpha_o (E[A Cn A^T] + alpha_q alpha_k`` :func:`score_path` ``)``:
    the value path ``A dV`` as the forward map plus the score path ``dA V`` (zero for ``alpha_qk = 0``;
    their cross term vanishes in the mean field, see :func:`score_path`); MLP ``M * Cn``
    (:func:`_mlp_tangent_kernel`). ``C' = D C D + branch2 * branch tangent``.
    """
    d = plan.width
    proj = (d - 1) / (d - 2) if d > 2 else 1.0
    diag = step["diag_in"]
    normed = bool(plan.norm_input[n])
    if normed:
        root = np.sqrt(diag)
        Cn = plan.in_scale2[n] * C / np.outer(root, root)
        Cn[np.diag_indices_from(Cn)] *= proj
    else:
        Cn = C
    code = plan.kind[n]
    if code == LINEAR:
        f = plan.alpha_in[n] * Cn
    elif code == ATTENTION:
        f = _attention(plan, n, Cn, step["R"], plan.in_scale2[n] if normed else np.float64(np.mean(diag)),
                       dict(info, S_given=step["S"]))
        if step.get("J") is not None and plan.alpha_qk[n] > 0:  # the path through the scores
            Q = plan.in_scale2[n] * step["R"] if normed else step["R"] * np.sqrt(np.outer(diag, diag))
            f = f + plan.alpha_in[n] * plan.alpha_out[n] * plan.alpha_qk[n] * score_path(
                Q, Cn, step["S"], step["J"], info["causal"], info.get("rope_cos") if plan.rope else None)
    else:
        if "mlp_tangent" not in step:  # shared by the block and end-to-end tangents
            q = plan.alpha_in[n] * (np.full(len(diag), plan.in_scale2[n]) if normed else diag)
            step["mlp_tangent"] = _mlp_tangent_kernel(plan, n, step["R"], q)
        f = step["mlp_tangent"] * Cn
    if plan.norm_branch[n]:  # sandwich: the outer norm divides by the branch rms (projection ignored)
        safe = np.sqrt(np.where(step["f_diag"] > 0, step["f_diag"], 1.0))
        f = f / np.outer(safe, safe)
        f[np.diag_indices_from(f)] *= proj
    return C * np.outer(step["scale"], step["scale"]) + plan.branch2[n] * f


_STEP_KEYS = ("v", "c", "tcos", "branch", "jac2", "e2e2", "cos")


def matrix_recursion(plan: SublayerPlan, K0: np.ndarray, blocks: int, info: dict) -> dict:
    """Run blocks ``1..blocks`` sublayer by sublayer from ``K0`` (T x T).

    Returns per-step arrays (length ``N``, NaN after the last step run): ``v, c`` (mean
    diagonal / off-diagonal of ``K``), ``tcos`` (mean off-diagonal of ``R``), ``branch``,
    ``jac2`` (block tangent from ``I``: ``tr C_after/tr C_before - 1``), ``e2e2`` (the same ratio
    for the tangent carried from the input), ``cos`` (mean per-token cosine before/after the
    sublayer); ``angular`` (L,); and the last states ``K``, ``C``.
    """
    tokens, period = len(K0), info["period"]
    out = {key: np.full(plan.size, np.nan) for key in _STEP_KEYS}
    out["angular"] = np.full(int(plan.block[-1]), np.nan)
    off = ~np.eye(tokens, dtype=bool)
    tangents = not plan.norm_after.any() and plan.alignment == 0
    K, C, eye = np.array(K0, dtype=float), np.eye(tokens), np.eye(tokens)
    for block in range(1, blocks + 1):
        K, pair, steps = _run_block(plan, block, K, [eye, C] if tangents else [], info)
        C = pair[1] if tangents else C
        for p, step in enumerate(steps):
            n = (block - 1) * period + p
            Kn = step["K"]
            out["v"][n] = np.mean(np.diag(Kn))
            out["branch"][n] = step["branch"]
            out["cos"][n] = np.mean(step["cos_tok"])
            if tangents:
                out["jac2"][n] = step["traces_after"][0] / step["traces"][0] - 1.0
                out["e2e2"][n] = step["traces_after"][1] / step["traces"][1]
            out["c"][n] = Kn[off].mean() if tokens > 1 else 0.0
            out["tcos"][n] = _correlation(Kn)[0][off].mean() if tokens > 1 else 0.0
        cos = np.prod([step["cos_tok"] for step in steps], axis=0)
        out["angular"][block - 1] = np.mean(np.arccos(np.clip(cos, -1, 1)) / np.pi)
        if not np.all(np.isfinite(np.diag(K))):
            last = block * period
            out["v"][last:] = out["branch"][last:] = np.inf
            break
    out["K"], out["C"] = K, C
    return out


def exact_blocks(plan: SublayerPlan, tokens: int) -> int:
    """Blocks run step by step: ``min(L, 512/P, 5e7/(P T^2))`` (at least one)."""
    period = int(np.sum(plan.block == plan.block[0]))
    steps = min(plan.size, MAX_MATRIX_STEPS, int(MATRIX_BUDGET / max(tokens, 1) ** 2))
    return max(1, steps // period)


def stream_recursion(plan: SublayerPlan, v0: float, c0: float, tokens: int, causal: bool, head_dim: int,
                     matrix_blocks: int | None = None, eps: float | None = None) -> dict:
    """The matrix recursion over all blocks: step by step, then (additive plans) geometric strides.

    The first :func:`exact_blocks` blocks run one by one (:func:`matrix_recursion`). After that
    (relative stride ``eps``: :data:`STRIDE_EPS`, larger up to 0.1 when ``T^2`` is large),
    an additive plan (norm on every input, no norm after the sum, no alignment: Pre-LN, LNS,
    scaled inits, LayerScale, sandwich) continues with :func:`stride_tail`; other plans hand
    over to the pair recursion :func:`theory.tokens.token_recursion` with
    ``(v, c) = (mean_t K_tt, mean_{t != t'} K_tt')`` (an approximation: token positions forgotten).
    Returns per-step arrays ``v, c, tcos, branch, jac2, e2e2, cos``, per-block ``angular``,
    ``matrix_blocks`` (blocks run step by step) and ``mode`` ("matrix", "stride" or "pairs").
    """
    from theory.tokens import static_moments, token_recursion
    period = int(np.sum(plan.block == plan.block[0]))
    L = int(plan.block[-1])
    blocks = min(L, exact_blocks(plan, tokens) if matrix_blocks is None else max(1, matrix_blocks))
    K0 = np.full((tokens, tokens), float(c0))
    np.fill_diagonal(K0, v0)
    rows = None
    if plan.attention is not None:
        rows = row_table(tokens, causal, head_dim, float(plan.attention.tau2_grid[-1]))
    info = {"static": static_moments(plan), "causal": causal, "rows": rows, "period": period,
            "rope_spread": rope_spread(tokens, causal, head_dim) if plan.rope else None,
            "rope_cos": rope_cos(tokens, head_dim) if plan.rope else None,
            "abar": uniform_rows(tokens, causal) if rows is not None else None}
    out = matrix_recursion(plan, K0, blocks, info)
    out["matrix_blocks"], out["mode"] = blocks, "matrix"
    stop = blocks * period
    if stop >= plan.size or not np.isfinite(out["v"][stop - 1]):
        return out
    tangents = not plan.norm_after.any() and plan.alignment == 0
    if eps is None:  # a node costs ~4 blocks: keep the strides within about MATRIX_BUDGET too (large T)
        budget = MATRIX_BUDGET / max(tokens, 1) ** 2
        eps = min(0.1, max(STRIDE_EPS, 4 * period * math.log(L / blocks) / budget))
    if tangents and plan.is_additive(np.arange(stop, plan.size)).all():
        states, nodes = stride_tail(plan, blocks, out["K"], out["C"], info, eps)
        _fill_tail(plan, out, blocks, states, nodes, period)
        out["mode"] = "stride"
        return out
    pairs = token_recursion(plan, float(out["v"][stop - 1]), float(out["c"][stop - 1]), start=stop)
    for key in ("v", "c", "branch", "jac2", "cos"):
        out[key][stop:] = pairs[key][stop:]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["tcos"][stop:] = pairs["c"][stop:] / pairs["v"][stop:]
    out["e2e2"][stop:] = 1.0 + pairs["jac2"][stop:]
    cos = np.clip(out["cos"][stop:].reshape(-1, period).prod(axis=1), -1.0, 1.0)
    out["angular"][blocks:] = np.arccos(cos) / np.pi
    out["mode"] = "pairs"
    return out


def _run_block(plan: SublayerPlan, block: int, K: np.ndarray, tangents: list, info: dict):
    """Block ``block`` (1-based) from state ``K`` with tangent covariances ``tangents``: ``(K, tangents, steps)``."""
    period = info["period"]
    steps = []
    for n in range((block - 1) * period, block * period):
        step = sublayer_cov(plan, n, K, info["static"], info)
        step["traces"] = [np.trace(C) for C in tangents]
        tangents = [tangent_step(plan, n, C, step, info) for C in tangents]
        step["traces_after"] = [np.trace(C) for C in tangents]
        steps.append(step)
        K = step["K"]
    return K, tangents, steps


def _tangent_pass(plan: SublayerPlan, block: int, steps: list, C: np.ndarray, info: dict) -> np.ndarray:
    for n, step in zip(range((block - 1) * info["period"], block * info["period"]), steps):
        C = tangent_step(plan, n, C, step, info)
    return C


def stride_tail(plan: SublayerPlan, done: int, K: np.ndarray, C: np.ndarray, info: dict, eps: float = STRIDE_EPS):
    """Blocks ``done+1..L`` of an additive plan by geometric strides ``h = max(1, floor(eps b))`` blocks.

    Derived here (numerics). For additive steps ``K_{b+1} = K_b + F_b(K_b)`` with ``F`` slowly
    varying once ``b`` is large; a stride uses the explicit midpoint rule,
    ``K_{b+h} = K_b + h F_{b_mid}(K_b + (h - 1) F_b(K_b)/2)`` (the sum over blocks ``b+1..b+h`` is
    centred on ``b + 1 + (h - 1)/2``), and the block tangent map ``C -> C + T C`` at the
    same midpoint: ``C_{b+h} = C + h T C + h (h - 1)/2 T^2 C + h (h-1) (h-2)/6 T^3 C`` (binomial
    expansion of ``(I + T)^h`` to third order). Per-block outputs are evaluated at the nodes (from the state before the
    block) and interpolated linearly in ``b`` between nodes (``log`` for the gains). Error against
    the full loop (llama presets, T = 8, strides from block 40 on, depth 400): < 1e-3 relative for
    ``eps = 0.03`` (tested with tolerance 3e-3).
    Returns node arrays: ``state_b`` with ``v, tcos, e2e2`` (state after block ``b``), ``block_b``
    with ``branch, jac2 (P,)`` and ``angular`` of block ``b``.
    """
    L = int(plan.block[-1])
    tokens = len(K)
    off = ~np.eye(tokens, dtype=bool)

    def state_row(b, K, C):
        R = _correlation(K)[0]
        return b, float(np.mean(np.diag(K))), float(R[off].mean()) if tokens > 1 else 0.0, float(np.trace(C)) / tokens

    def block_row(b, steps):
        jac2 = [st["traces_after"][0] / st["traces"][0] - 1.0 for st in steps]
        cos = np.prod([st["cos_tok"] for st in steps], axis=0)
        return (b, [st["branch"] for st in steps], jac2, float(np.mean(np.arccos(np.clip(cos, -1, 1)) / np.pi)))

    states, blocks = [state_row(done, K, C)], []
    b = done
    eye = np.eye(tokens)
    while b < L:
        h = min(max(1, int(eps * b)), max(1, L - 1 - b))  # the last block is run from the exact state
        K1, (_, C1), steps = _run_block(plan, b + 1, K, [eye, C], info)
        blocks.append(block_row(b + 1, steps))
        if h == 1:
            K, C = K1, C1
        else:
            mid = b + 1 + (h - 1) // 2
            K_mid = K + 0.5 * (h - 1) * (K1 - K)  # state before block b + 1 + (h - 1)/2, the middle of the h blocks
            K2, (BC,), mid_steps = _run_block(plan, mid, K_mid, [C], info)
            TC = BC - C
            T2C = _tangent_pass(plan, mid, mid_steps, TC, info) - TC
            T3C = _tangent_pass(plan, mid, mid_steps, T2C, info) - T2C
            K = K + h * (K2 - K_mid)
            C = C + h * TC + h * (h - 1) / 2 * T2C + h * (h - 1) * (h - 2) / 6 * T3C
        b += h
        if not np.all(np.isfinite(np.diag(K))):
            break
        states.append(state_row(b, K, C))
    if blocks[-1][0] < b and np.all(np.isfinite(np.diag(K))):  # last block from the final state (O(1/L))
        blocks.append(block_row(b, _run_block(plan, b, K, [eye], info)[2]))
    return states, blocks


def _fill_tail(plan: SublayerPlan, out: dict, start_block: int, states: list, blocks: list, period: int) -> None:
    """Fill the per-step arrays of blocks ``start_block+1..L`` by interpolation between nodes."""
    L = int(plan.block[-1])
    b = np.arange(start_block + 1, L + 1, dtype=float)
    sb, sv, stc, se = (np.array(col, dtype=float) for col in zip(*states))
    bb = np.array([row[0] for row in blocks], dtype=float)
    branch = np.array([row[1] for row in blocks], dtype=float)  # (nodes, P)
    jac2 = np.array([row[2] for row in blocks], dtype=float)
    v_after = np.interp(b, sb, sv)
    log_e = np.interp(np.concatenate([[start_block], b]), sb, np.log(se))
    first = start_block * period
    for p in range(period):
        idx = np.arange(first + p, plan.size, period)
        out["branch"][idx] = np.interp(b, bb, branch[:, p])
        out["jac2"][idx] = np.expm1(np.interp(b, bb, np.log1p(jac2[:, p])))
        out["e2e2"][idx] = np.exp(np.diff(log_e)) if p == period - 1 else 1.0
    later = np.zeros(len(b))
    for p in range(period - 1, -1, -1):  # v after sublayer p = v after the block - later branches
        idx = np.arange(first + p, plan.size, period)
        out["v"][idx] = v_after - later
        later = later + out["branch"][idx]
        out["tcos"][idx] = np.interp(b, sb, stc)
        out["c"][idx] = out["tcos"][idx] * out["v"][idx]
        out["cos"][idx] = np.nan
    out["angular"][start_block:] = np.interp(b, bb, np.array([row[3] for row in blocks]))
