"""Per-layer predictions for a :class:`~theory.setting.Setting`: exact laws and paper bounds.

``predict(setting)`` returns a long table with columns ``layer, metric, law, kind, value``
(docs/formats.md#theory-predict): layer 0 is the input, layer ``l`` the stream after block ``l``. The
random-init laws come from one recursion over the sublayers of the stack: the T x T
token-covariance recursion :func:`theory.meanfield.stack_recursion.stream_recursion` (per-position
covariance ``K[t, t']``, with tangent covariances for ``jac_dev`` and ``e2e_gain``), step by
step for the first blocks, then by geometric strides (additive schemes; numerical error
< 3e-3) or, for post/deepnorm/mix/none tails, the older pair recursion
:func:`theory.meanfield.pair_recursion.token_recursion` (mean variance and mean inter-token covariance).
Assumptions (derived here, docs/derivations.md#random-init-assumptions):
i.i.d. zero-mean Gaussian weights, no biases, norms
without epsilon (``||N(x)||^2 = d`` exactly), branch masks ``Bernoulli(rho)`` over
features shared by the tokens; the stream coordinates are then zero-mean and
uncorrelated, so the ``var`` metric (unbiased over features) equals ``v`` in expectation.
``width_law`` picks how a sublayer reads its input's token cosines: their mean-field value (``mean-field``) or
their law at the setting's width (``finite-width``, docs/derivations.md#finite-width-token-covariance; ``auto``,
the default, takes it for ``8 <= d < 4096`` and ``T <= 256``); the kinds below are the same under both.

Kinds: ``exact`` where the law is an equality in expectation under these assumptions
(Pre-LN-type variance of linear/MLP stacks, LNS, masked linear, ReLU without norm, post
and sandwich norms, skipinit, MoE MLP variance) and, in the uniform-attention regime
(normalised attention inputs, score variance ``alpha_q alpha_k g^4 <= UNIFORM_TAU2 = 0.02``,
e.g. the llama init ``s = 0.02`` up to d = 360; Pre-LN-type schemes; not MoE), the attention
curves ``var``, ``var_attn`` and ``token_cos`` of the T x T recursion: exact in the mean-field
limit ``d -> infinity`` (the norm's cosines are ratios: bias ``O(1/d)``). Monte-Carlo (float64,
llama init, T = 64, input std 0.02 and 1, Pre-LN and LNS): within 3 sem at d = 128 (256
samples, tau^2 = 0.003), d = 256 (128 samples, tau^2 = 0.0105), d = 360 (96 samples,
tau^2 = 0.021); at d = 32 4-5 % off, about 4 sem with 512 samples.
``approx`` where a further step enters (softmax rows with ``tau^2 > 0.01``: exchangeable,
independent rows with the softmax correction on the diagonal, RoPE through
:func:`theory.meanfield.softmax_rows.rope_spread`; Jacobian and angular metrics: ``E[ratio] ~ ratio of
expectations``, Gaussian stream for ``E[1/rms^2]``, attention tangents through the values
only); paper statements as ``approx`` (P1 recursions with ``c = 1``, P1's LN Jacobian
``J ~ I + f'/sigma`` read as ``jac_dev``, P2 Theorems 4, 5, GQA) or ``upper`` (P2 Theorems 1, 2).

>>> table = predict(Setting(preset=None, block="linear", depth=3, width=64))
>>> sub = table[(table.metric == "var") & (table.law == "preln-init")]
>>> sub.value.round(6).tolist()
[1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from theory.architecture import input_moments
from theory.meanfield.blas_threads import one_blas_thread
from theory.meanfield.covariance import UNIFORM_TAU2
from theory.meanfield.finite_width import ATTENTION_SEED, resolve_width_law
from theory.meanfield.stack_recursion import MAX_MATRIX_STEPS, StreamCurves, recursion_blocks, stream_recursion
from theory.meanfield.plan import ATTENTION, LINEAR, MLP, MOE, SUBLAYER_CODES, SublayerPlan, build_plan
from theory.setting import Setting
from theory.symbolic.iterations import iterate_p1_lemma_3_2, iterate_p1_lns

__all__ = ["predict", "predict_with_first_non_finite", "weight_decay_variance", "weight_decay_bound", "COLUMNS"]

COLUMNS = ("layer", "metric", "law", "kind", "value")
_PRE_LIKE = ("pre", "lns", "scaled-init", "depth-scaled-init", "layerscale")  # additive, normed inputs


# -- weight decay (P2 Theorem 3) ----------------------------------------------------------
def _weight_decay_lambdified(expr):
    import sympy as sp

    from theory.symbolic.symbols import eta, lam, sigma_G, t, u0_var
    u0 = sp.Symbol("u0")
    return sp.lambdify((t, eta, lam, sigma_G, u0), expr.xreplace({u0_var: u0}), "numpy")


def weight_decay_variance(steps, lr, weight_decay, grad_noise_std, init_var) -> np.ndarray:
    """Exact ``Var(u_t)``, t = 0..steps, of ``u_{t+1} = (1 - eta lam) u_t - eta g_t``.

    ``Var(u_t) = r^t Var(u_0) + eta^2 sigma_G^2 (1 - r^t)/(1 - r)``, ``r = (1 - eta lam)^2``.
    Source: derived here, docs/derivations.md#exact-weight-decay (``theory.symbolic.recursions.weight_decay_variance``,
    lambdified).
    Assumptions: gradient noise zero-mean, variance ``sigma_G^2``, independent of ``u_t``.

    >>> weight_decay_variance(2, 0.1, 1.0, 1.0, 1.0).round(6).tolist()
    [1.0, 0.82, 0.6742]
    >>> weight_decay_variance(2, 0.1, 0.0, 1.0, 1.0).round(6).tolist()  # no decay: a random walk
    [1.0, 1.01, 1.02]
    """
    from theory.symbolic.recursions import weight_decay_variance as closed_form
    if lr * weight_decay == 0:  # r = 1: a random walk, Var(u_t) = Var(u_0) + t eta^2 sigma_G^2
        return init_var + np.arange(int(steps) + 1) * lr**2 * grad_noise_std**2
    if lr * weight_decay == 1:  # r = 0: only the last noise step survives
        return np.concatenate([[init_var], np.full(int(steps), lr**2 * grad_noise_std**2)])
    func = _weight_decay_lambdified(closed_form())
    return np.asarray(func(np.arange(int(steps) + 1), lr, weight_decay, grad_noise_std, init_var), dtype=float)


def weight_decay_bound(steps, lr, weight_decay, grad_noise_std, init_var) -> np.ndarray:
    """P2 Theorem 3: ``Var(u_t) <= (1 - eta lam)^(2t) Var(u_0) + eta sigma_G^2/lam``, t = 0..steps.

    Source: P2 Theorem 3 (``theory.symbolic.bounds.p2_thm_3_bound``, lambdified); needs ``0 < eta lam <= 1``.

    >>> weight_decay_bound(1, 0.1, 1.0, 1.0, 1.0).round(6).tolist()
    [1.1, 0.91]
    """
    from theory.symbolic.bounds import p2_thm_3_bound
    func = _weight_decay_lambdified(p2_thm_3_bound())
    return np.asarray(func(np.arange(int(steps) + 1), lr, weight_decay, grad_noise_std, init_var), dtype=float)


# -- P1 recursions (paper, c = 1) -------------------------------------------------------------
# -- which laws are exact ---------------------------------------------------------------------
def _var_law(setting: Setting) -> str:
    if setting.alignment > 0:
        return "bridge-aligned"
    if setting.scheme == "lns":
        return "lns-init"
    if setting.scheme == "none" and setting.block == "linear":
        return "masked-linear"
    return "preln-init"


def _homogeneous(setting: Setting) -> bool:
    """Branch variance linear in the input second moment (linear block, ReLU MLP)."""
    return setting.block == "linear" or (setting.block == "mlp" and setting.activation == "relu")


def _uniform_attention(setting: Setting, plan: SublayerPlan) -> bool:
    """Attention in the uniform regime: normed inputs, score variance ``alpha_q alpha_k g^4 <= UNIFORM_TAU2``.

    There the matrix recursion (:mod:`theory.meanfield.covariance`) is exact in the mean-field limit
    (attention rows uniform up to ``O(tau^2)``, which the softmax term corrects on the diagonal).
    MoE blocks are excluded (their routing overlap between tokens is interpolated).
    """
    attn = plan.kind == ATTENTION
    if not attn.any() or setting.alignment > 0 or setting.block == "moe":
        return False
    tau2 = plan.alpha_qk[attn] * plan.in_scale2[attn] ** 2
    return bool(plan.norm_input[attn].all() and tau2.max() <= UNIFORM_TAU2)


def _matrix_blocks(plan: SublayerPlan, curves: StreamCurves) -> np.ndarray:
    """(M,) bool: planned blocks computed by the T x T recursion (before the switch to the pair recursion)."""
    return plan.blocks <= (plan.depth if curves.mode == "stride" else curves.matrix_blocks)


def _var_exact(setting: Setting, plan: SublayerPlan, curves: StreamCurves) -> np.ndarray:
    """Per planned block: is the ``var`` law exact (module docstring)? (M,) bool."""
    normed_after = plan.norm_after[plan.period - 1::plan.period]  # (M,) the blocks' last sublayers
    uniform = _uniform_attention(setting, plan) and setting.scheme not in ("mix", "none")
    attention_free = setting.block in ("linear", "mlp") or (uniform & _matrix_blocks(plan, curves))
    if setting.alignment > 0:
        base = setting.block in ("linear", "mlp") and setting.scheme in ("pre", "lns", "scaled-init",
                                                                       "depth-scaled-init", "layerscale")
    elif setting.scheme in ("sandwich", "peri", "skipinit"):
        base = setting.norm == "rmsnorm" or setting.scheme == "skipinit"
    elif setting.scheme == "none":
        base = _homogeneous(setting)
    elif setting.scheme == "mix":  # the Pre-LN part adds exact increments to the exact v = 1
        base = setting.block in ("linear", "mlp")
    else:
        base = attention_free & (not plan.norm_after.any())
    if setting.norm == "rmsnorm" or setting.alignment > 0:
        return normed_after | base
    return np.full(len(plan.blocks), base)


def _branch_exact(setting: Setting, plan: SublayerPlan, idx: np.ndarray, curves: StreamCurves) -> np.ndarray:
    """Per step in ``idx``: is the branch variance exact (MLP/linear/MoE; attention in the uniform regime)?"""
    kind = plan.kind[idx]
    normed_input = plan.norm_input[idx] | plan.norm_branch[idx]
    after_norm = (plan.block[idx] >= 2) & plan.norm_after.any()  # post/deepnorm: ||x||^2 = d
    homogeneous = (kind == LINEAR) | (setting.activation == "relu")
    in_matrix = _matrix_blocks(plan, curves)[idx // plan.period]
    uniform = ((kind == ATTENTION) & _uniform_attention(setting, plan) & in_matrix
               & (setting.scheme not in ("mix", "none")) & ~plan.norm_branch[idx])
    return ((kind != ATTENTION) & (normed_input | after_norm | homogeneous) & (setting.alignment == 0)) | uniform


# -- assembling the table ---------------------------------------------------------------------
def _rows(layer, metric: str, law: str, kind, value) -> tuple:
    """One group of rows: ``kind`` a string or a bool array (True: "exact", False: "approx")."""
    layer = np.asarray(layer, dtype=np.int64)
    value = np.broadcast_to(np.asarray(value, dtype=float), layer.shape)
    if isinstance(kind, str):
        kind = np.full(layer.shape, _KINDS.index(kind), dtype=np.int8)
    else:
        kind = np.where(np.broadcast_to(kind, layer.shape), 0, 1).astype(np.int8)
    return layer, metric, law, kind, value


_KINDS = ("exact", "approx", "upper", "lower")


def _table(groups: list[tuple], keep: np.ndarray | None = None) -> pd.DataFrame:
    """Concatenate row groups into the long table (categorical string columns, built fast); ``keep`` (depth + 1,)
    bool: only the rows of the layers it marks."""
    if keep is not None:
        groups = [(layer[keep[layer]], metric, law, kind[keep[layer]], value[keep[layer]])
                  for layer, metric, law, kind, value in groups]
    sizes = [len(group[0]) for group in groups]
    metrics = sorted({group[1] for group in groups})
    laws = sorted({group[2] for group in groups})
    def column(position, categories):
        codes = np.repeat([categories.index(group[position]) for group in groups], sizes)
        return pd.Categorical.from_codes(codes, categories)
    return pd.DataFrame({
        "layer": np.concatenate([group[0] for group in groups]),
        "metric": column(1, metrics), "law": column(2, laws),
        "kind": pd.Categorical.from_codes(np.concatenate([group[3] for group in groups]), _KINDS),
        "value": np.concatenate([group[4] for group in groups])})


def _block_products(values: np.ndarray, per_block: int) -> np.ndarray:
    return values.reshape(-1, per_block).prod(axis=1)  # (N,) -> (M, per_block) -> (M,)


def _planned_layers(plan: SublayerPlan) -> np.ndarray:
    """(M + 1,) the input (layer 0) and the planned blocks."""
    return np.concatenate([[0], plan.blocks])


def _random_init_rows(setting: Setting, plan: SublayerPlan, curves: StreamCurves) -> list[tuple]:
    per_block = plan.period
    layers = _planned_layers(plan)
    v0, c0 = input_moments(setting)
    last = np.arange(per_block - 1, plan.size, per_block)  # (M,) the blocks' last sublayers
    law = _var_law(setting)
    correction = setting.width / (setting.width - 1) if setting.norm == "layernorm" else 1.0
    var = np.concatenate([[v0], np.where(plan.norm_after[last], curves.v[last] * correction, curves.v[last])])
    exact = np.concatenate([[True], _var_exact(setting, plan, curves)])
    frames = [_rows(layers, "var", law, exact, var)]
    for code, metric in ((ATTENTION, "var_attn"), (MLP, "var_mlp"), (MOE, "var_mlp"), (LINEAR, "var_mlp")):
        idx = np.flatnonzero(plan.kind == code)
        if len(idx):
            branch_law = {"var_attn": "gqa-init" if setting.group_size > 1 else "causal-attention"}.get(
                metric, "moe-gates" if code == MOE else law)
            frames.append(_rows(plan.block[idx], metric, branch_law, _branch_exact(setting, plan, idx, curves),
                                curves.branch[idx]))
    frames.append(_rows(layers[1:], "angular", law, "approx", curves.angular))
    if setting.tokens >= 2:
        token_cos = np.concatenate([[c0 / v0], curves.tcos[last]])
        exact_cos = _uniform_attention(setting, plan) & _matrix_blocks(plan, curves) & (setting.scheme in _PRE_LIKE)
        frames.append(_rows(layers, "token_cos", "causal-attention", np.concatenate([[True], exact_cos]),
                            token_cos))
    gain = _block_products(1.0 + curves.jac2, per_block)  # (M,); NaN for blocks normalising the sum
    finite = np.isfinite(gain)
    if setting.alignment == 0 and finite.any():
        frames.append(_rows(layers[1:][finite], "jac_dev", "jacobian-init", "approx", np.sqrt(gain[finite] - 1.0)))
    if setting.alignment == 0 and plan.norm_input.all() and not plan.norm_branch.any() and finite.all():
        # P1's LN Jacobian dLN/dx ~ (g/sigma) I: J_l - I ~ sum of (g/sigma) df/dh, no projection, no
        # E[1/rms^2] correction, no product of sublayers: jac_dev^2 ~ sum_sublayers g^2 ||df/dh||^2/(d sigma^2)
        d = setting.width
        proj = (d - 1) / (d - 2) if d > 2 else 1.0
        p1 = np.sqrt(curves.jac2.reshape(-1, per_block).sum(axis=1) / proj)
        frames.append(_rows(layers[1:], "jac_dev", "p1-ln-jacobian", "approx", p1))
    if setting.alignment == 0 and finite.all():  # tangent of an isotropic probe: gains multiply
        e2e = np.sqrt(np.exp(np.cumsum(np.log(_block_products(curves.e2e2, per_block)))))
        frames.append(_rows(layers, "e2e_gain", "jacobian-init", "approx", np.concatenate([[1.0], e2e])))
    return frames


def _paper_rows(setting: Setting, plan: SublayerPlan) -> list[tuple]:
    """Paper statements evaluated on this setting (only where their assumptions are met)."""
    layers = _planned_layers(plan)
    v0, _ = input_moments(setting)
    rho, scheme, frames = setting.mask_density, setting.scheme, []
    if scheme in ("pre", "lns") and setting.alignment == 0:  # a recursion over every layer, read at the planned ones
        iterate = iterate_p1_lns if scheme == "lns" else iterate_p1_lemma_3_2
        frames.append(_rows(layers, "var", "p1-lns" if scheme == "lns" else "p1-lemma-3.2", "approx",
                            iterate(1.0, v0, setting.depth)[layers]))
    if scheme == "none" and setting.alignment == 0:
        sub_gains = [setting.alpha if code == LINEAR else setting.alpha**2 if code == ATTENTION
                     else setting.resolved_ffn_width / setting.width * setting.alpha**2 / 2
                     for code in SUBLAYER_CODES[setting.block]]
        bounded = setting.block != "moe" and (setting.block in ("linear", "attention")
                                              or setting.activation in ("relu", "gelu", "silu"))
        if bounded:
            factor = math.prod((1 + math.sqrt(gain * rho)) ** 2 for gain in sub_gains)
            law = "p2-thm-1" if setting.block == "linear" else "p2-thm-2"
            frames.append(_rows(layers, "var", law, "upper", v0 * np.exp(layers * math.log(factor))))
    attn = np.flatnonzero(plan.kind == ATTENTION)
    if len(attn) and not plan.norm_after.any() and plan.norm_input.all():
        base = plan.branch2[attn] * plan.alpha_in[attn] * plan.alpha_out[attn] * plan.in_scale2[attn]
        frames.append(_rows(plan.block[attn], "var_attn", "p2-thm-4", "approx", base / setting.tokens))
        if setting.group_size > 1:
            frames.append(_rows(plan.block[attn], "var_attn", "p2-gqa", "approx",
                                base / (setting.group_size * setting.tokens)))
    return frames


def _plan(setting: Setting, width_law: str, layers) -> SublayerPlan:
    """The plan :func:`predict` runs: of the blocks the recursion reads to write ``layers`` (a deep stack with a
    stride tail, :func:`theory.meanfield.stack_recursion.recursion_blocks`), else of every block."""
    if layers is None or setting.depth <= MAX_MATRIX_STEPS:
        return build_plan(setting)
    head = build_plan(setting, blocks=np.arange(1, MAX_MATRIX_STEPS + 1))  # any run's one-by-one blocks
    blocks = recursion_blocks(head, setting.tokens, width_law, layers)
    return build_plan(setting, blocks=blocks)


def predict(setting: Setting, width_law: str = "auto", layers=None, law_seed: int = ATTENTION_SEED) -> pd.DataFrame:
    """Per-layer predictions for ``setting``: columns ``layer, metric, law, kind, value``.

    Metrics ``var, var_attn, var_mlp, angular, token_cos, jac_dev, e2e_gain`` (docs/formats.md#layers-and-metrics),
    the random-init laws of :func:`theory.meanfield.stack_recursion.stream_recursion` (kinds in the module
    docstring) and the paper statements that apply (P1 Lemma 3.2 / LNS with ``c = 1``,
    P2 Theorems 1, 2 (upper), 4, GQA (approx); P2 Theorem 5 for MoE).
    ``width_law``: ``mean-field``, ``finite-width`` or ``auto``
    (:func:`theory.meanfield.finite_width.resolve_width_law`; an unknown value, or ``finite-width`` below
    ``d = 8``, raises :class:`theory.constraints.ConstraintError`). ``layers``: the layers to keep (integers in
    ``0..depth``; default all): the whole table's rows at those layers, without building the others (at depth
    ``10^6`` the whole table has ``10^7`` rows). A stack past ``MAX_MATRIX_STEPS`` blocks with a stride tail plans only
    the blocks it reads (:func:`theory.meanfield.stack_recursion.recursion_blocks`); above 4096 MLP steps its rows then
    differ from the whole table's by the static moments' spline error carried along the stack (below 1e-7 relative,
    docs/design.md#speed-of-the-theory). ``law_seed``: the seed of the finite-width law's attention average
    (:data:`theory.meanfield.finite_width.ATTENTION_SEED`; another one measures the law's own noise,
    docs/derivations.md#finite-width-token-covariance).
    Source: derived here (docs/derivations.md); paper rows cite their statement in ``law``.

    >>> t = predict(Setting(preset=None, block="mlp", activation="relu", depth=2, width=64, ffn_width=256))
    >>> t[(t.metric == "var_mlp")].value.tolist()
    [2.0, 2.0]
    >>> predict(Setting(preset=None, block="linear", depth=3, width=64), layers=[0, 3]).layer.unique().tolist()
    [0, 3]
    """
    return predict_with_first_non_finite(setting, width_law, layers, law_seed)[0]


def predict_with_first_non_finite(setting: Setting, width_law: str = "auto", layers=None,
                                  law_seed: int = ATTENTION_SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`predict` (at ``layers``), and the first row of each curve whose value is not finite (a blow-up; the
    same columns, empty when every value is finite), over every layer computed: the rows a selection of layers may
    leave out. Every layer is computed but where a selection plans fewer blocks (:func:`predict`); there the blocks
    between two planned ones are not, and a blow-up is found at the next planned block.

    >>> table, bad = predict_with_first_non_finite(Setting(preset=None, block="linear", depth=3, width=64), layers=[3])
    >>> len(table) > 0, bad.empty
    (True, True)
    """
    if not isinstance(setting, Setting):
        raise TypeError(f"predict needs a Setting, got {type(setting).__name__}")
    law = resolve_width_law(width_law, setting.width, setting.tokens)
    plan = _plan(setting, law, layers)
    v0, c0 = input_moments(setting)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"), one_blas_thread():  # small matrices only
        curves = stream_recursion(plan, v0, c0, setting.tokens, setting.causal, setting.head_dim, width_law=law,
                                  law_seed=law_seed)
        frames = _random_init_rows(setting, plan, curves) + _paper_rows(setting, plan)  # a blow-up: inf/NaN rows
    moe = np.flatnonzero(plan.kind == MOE)
    if len(moe):
        expert = curves.branch[moe] / (plan.gate2[moe] + (1.0 if setting.shared_expert else 0.0))
        value = expert * (1.0 / setting.top_k + (1.0 if setting.shared_expert else 0.0))
        frames.append(_rows(plan.block[moe], "var_mlp", "p2-thm-5", "approx", value))
    keep = None
    if layers is not None:
        keep = np.zeros(setting.depth + 1, dtype=bool)
        keep[np.asarray(layers, dtype=np.int64)] = True
    first_bad = []
    for layer, metric, law_name, kind, value in frames:
        bad = np.flatnonzero(~np.isfinite(value))[:1]
        first_bad.append((layer[bad], metric, law_name, kind[bad], value[bad]))
    return _table(frames, keep), _table(first_bad)
