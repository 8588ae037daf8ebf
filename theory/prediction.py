"""Per-layer predictions for a :class:`~theory.setting.Setting`: exact laws and paper bounds.

``predict(setting)`` returns a long table with columns ``layer, metric, law, kind, value``
(CONTRACT.md): layer 0 is the input, layer ``l`` the stream after block ``l``. The
random-init laws come from one recursion over the sublayers of the stack: the T x T
token-covariance recursion :func:`theory.covariance.stream_recursion` (per-position
covariance ``K[t, t']``, with tangent covariances for ``jac_dev`` and ``e2e_gain``), step by
step for the first blocks, then by geometric strides (additive schemes; numerical error
< 3e-3) or, for post/deepnorm/mix/none tails, the older pair recursion
:func:`theory.tokens.token_recursion` (mean variance and mean inter-token covariance).
Assumptions (derived here): i.i.d. zero-mean Gaussian weights, no biases, norms
without epsilon (``||N(x)||^2 = d`` exactly), branch masks ``Bernoulli(rho)`` over
features shared by the tokens; the stream coordinates are then zero-mean and
uncorrelated, so the ``var`` metric (unbiased over features) equals ``v`` in expectation.

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
:func:`theory.attention_rows.rope_spread`; Jacobian and angular metrics: ``E[ratio] ~ ratio of
expectations``, Gaussian stream for ``E[1/rms^2]``, attention tangents through the values
only); paper statements as ``approx`` (P1 recursions with ``c = 1``, P1's LN Jacobian
``J ~ I + f'/sigma`` read as ``jac_dev``, P2 Theorems 4, 5, GQA) or ``upper`` (P2 Theorems 1, 2).

>>> table = predict(Setting(preset=None, block="linear", depth=3, width=64))
>>> sub = table[(table.metric == "var") & (table.law == "exact-preln-init")]
>>> sub.value.round(6).tolist()
[1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import sympy as sp

from theory import architecture
from theory.architecture import input_moments
from theory.bounds import iterate_p1_lemma_3_2, iterate_p1_lns
from theory.setting import Setting, SettingError, add_setting_arguments, setting_from_args
from theory.covariance import UNIFORM_TAU2, stream_recursion
from theory.tokens import ATTENTION, LINEAR, MLP, MOE, SublayerPlan, attention_table, kernel_table

__all__ = ["predict", "build_plan", "moe_gate_square_sum", "weight_decay_variance", "weight_decay_bound",
           "main", "first_non_finite", "COLUMNS"]

COLUMNS = ("layer", "metric", "law", "kind", "value")
_KIND_CODES = {"linear": LINEAR, "mlp": MLP, "attention": ATTENTION, "moe": MOE}
_SUBLAYERS = {block: tuple(_KIND_CODES[kind] for kind in kinds) for block, kinds in architecture.SUBLAYERS.items()}
_PRE_LIKE = ("pre", "lns", "scaled-init", "depth-scaled-init", "layerscale")  # additive, normed inputs
_RAW_TAU2_MAX = 25.0  # attention scores of un-normalised streams: table clipped here (approx)


# -- weight decay (P2 Theorem 3) ----------------------------------------------------------
def _weight_decay_lambdified(expr):
    from theory.symbols import eta, lam, sigma_G, t, u0_var
    u0 = sp.Symbol("u0")
    return sp.lambdify((t, eta, lam, sigma_G, u0), expr.xreplace({u0_var: u0}), "numpy")


def weight_decay_variance(steps, lr, weight_decay, grad_noise_std, init_var) -> np.ndarray:
    """Exact ``Var(u_t)``, t = 0..steps, of ``u_{t+1} = (1 - eta lam) u_t - eta g_t``.

    ``Var(u_t) = r^t Var(u_0) + eta^2 sigma_G^2 (1 - r^t)/(1 - r)``, ``r = (1 - eta lam)^2``.
    Source: derived here (``theory.recursions.weight_decay_variance``, lambdified).
    Assumptions: gradient noise zero-mean, variance ``sigma_G^2``, independent of ``u_t``.

    >>> weight_decay_variance(2, 0.1, 1.0, 1.0, 1.0).round(6).tolist()
    [1.0, 0.82, 0.6742]
    """
    from theory.recursions import weight_decay_variance as closed_form
    if lr * weight_decay == 1:  # r = 0: only the last noise step survives
        return np.concatenate([[init_var], np.full(int(steps), lr**2 * grad_noise_std**2)])
    func = _weight_decay_lambdified(closed_form())
    return np.asarray(func(np.arange(int(steps) + 1), lr, weight_decay, grad_noise_std, init_var), dtype=float)


def weight_decay_bound(steps, lr, weight_decay, grad_noise_std, init_var) -> np.ndarray:
    """P2 Theorem 3: ``Var(u_t) <= (1 - eta lam)^(2t) Var(u_0) + eta sigma_G^2/lam``, t = 0..steps.

    Source: P2 Theorem 3 (``theory.bounds.p2_thm_3_bound``, lambdified); needs ``0 < eta lam <= 1``.

    >>> weight_decay_bound(1, 0.1, 1.0, 1.0, 1.0).round(6).tolist()
    [1.1, 0.91]
    """
    from theory.bounds import p2_thm_3_bound
    func = _weight_decay_lambdified(p2_thm_3_bound())
    return np.asarray(func(np.arange(int(steps) + 1), lr, weight_decay, grad_noise_std, init_var), dtype=float)


# -- MoE gates ------------------------------------------------------------------------------
def moe_gate_square_sum(experts: int, top_k: int, logit_var: float, uniform: bool = False,
                        draws: int = 1 << 17, seed: int = 0) -> float:
    """``E[sum_i g_i^2]`` over the top-k gates (softmax over the top-k logits).

    Logits i.i.d. ``N(0, logit_var)`` (router ``h W_r`` with ``||h||^2`` fixed). Uniform gates:
    exactly ``1/k``; ``k = 1``: exactly 1; otherwise a fixed-seed numpy Monte-Carlo with
    ``draws`` samples (standard error < 1e-3 for 2^17 draws). Source: derived here.

    >>> moe_gate_square_sum(8, 2, 1.0, uniform=True), moe_gate_square_sum(8, 1, 1.0)
    (0.5, 1.0)
    """
    if uniform or top_k == 1 or logit_var == 0:
        return 1.0 if top_k == 1 else 1.0 / top_k
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((draws, experts)) * math.sqrt(logit_var)  # (draws, E)
    top = -np.sort(-logits, axis=1)[:, :top_k]  # (draws, k), descending
    gates = np.exp(top - top[:, :1])
    gates /= gates.sum(axis=1, keepdims=True)
    return float((gates**2).sum(axis=1).mean())


# -- the plan of a stack ----------------------------------------------------------------------
def build_plan(setting: Setting) -> SublayerPlan:
    """The :class:`~theory.tokens.SublayerPlan` of ``setting`` (scheme semantics of CONTRACT.md)."""
    subs = _SUBLAYERS[setting.block]
    block = np.repeat(np.arange(1, setting.depth + 1), len(subs))  # (N,)
    kind = np.tile(np.array(subs), setting.depth)
    wiring = architecture.placements(setting, block)  # fields (N,)
    raw = ~wiring.norm_input
    in_scale2 = wiring.input_scale**2
    branch2 = setting.mask_density * wiring.branch_scale**2
    alpha = setting.alpha
    f = {role: architecture.weight_std_factor(setting, block, role) ** 2
         for role in ("q", "k", "v", "o", "up", "down", "linear")}
    alpha_in = alpha * np.select([kind == LINEAR, kind == ATTENTION], [f["linear"], f["v"]], f["up"])
    alpha_out = np.select([kind == LINEAR, kind == ATTENTION], [np.ones(block.shape), alpha * f["o"]], alpha * f["down"])
    alpha_qk = alpha**2 * f["q"] * f["k"]
    q_in = np.where(raw, 1.0, in_scale2)
    attention = kernel = None
    if ATTENTION in subs:
        tau2_max = _RAW_TAU2_MAX if raw.any() else float(np.max(alpha_qk * q_in**2))
        attention = attention_table(setting.tokens, setting.causal, setting.head_dim, tau2_max)
    if MLP in subs or MOE in subs:
        pre = alpha * f["up"] * q_in
        lo, hi = (1e-8, 1e8) if raw.any() else (float(pre.min()), float(pre.max()))
        kernel = kernel_table("silu" if setting.activation == "swiglu" else setting.activation, lo, hi)
    router_var = alpha * float(np.median(q_in))  # logits of the router: N(0, alpha q_in)
    return SublayerPlan(
        kind=kind, block=block, norm_input=wiring.norm_input, in_scale2=in_scale2, norm_branch=wiring.norm_branch,
        branch2=branch2, stream_scale2=wiring.stream_scale**2, norm_after=wiring.norm_after_add, alpha_in=alpha_in, alpha_out=alpha_out, alpha_qk=alpha_qk,
        activation=setting.activation, ffn_ratio=setting.resolved_ffn_width / setting.width, width=setting.width,
        rope=setting.rope, alignment=setting.alignment, attention=attention, kernel=kernel,
        gate2=moe_gate_square_sum(setting.experts, setting.top_k, router_var, setting.uniform_gates),
        gate_overlap0=1.0 / setting.experts, shared_expert=setting.shared_expert)


# -- P1 recursions (paper, c = 1) -------------------------------------------------------------
# -- which laws are exact ---------------------------------------------------------------------
def _var_law(setting: Setting) -> str:
    if setting.alignment > 0:
        return "bridge-aligned"
    if setting.scheme == "lns":
        return "exact-lns-init"
    if setting.scheme == "none" and setting.block == "linear":
        return "exact-masked-linear"
    return "exact-preln-init"


def _homogeneous(setting: Setting) -> bool:
    """Branch variance linear in the input second moment (linear block, ReLU MLP)."""
    return setting.block == "linear" or (setting.block == "mlp" and setting.activation == "relu")


def _uniform_attention(setting: Setting, plan: SublayerPlan) -> bool:
    """Attention in the uniform regime: normed inputs, score variance ``alpha_q alpha_k g^4 <= UNIFORM_TAU2``.

    There the matrix recursion (:mod:`theory.covariance`) is exact in the mean-field limit
    (attention rows uniform up to ``O(tau^2)``, which the softmax term corrects on the diagonal).
    MoE blocks are excluded (their routing overlap between tokens is interpolated).
    """
    attn = plan.kind == ATTENTION
    if not attn.any() or setting.alignment > 0 or setting.block == "moe":
        return False
    tau2 = plan.alpha_qk[attn] * plan.in_scale2[attn] ** 2
    return bool(plan.norm_input[attn].all() and tau2.max() <= UNIFORM_TAU2)


def _matrix_blocks(setting: Setting, out: dict) -> np.ndarray:
    """(L,) bool: blocks computed by the T x T recursion (before the switch to the pair recursion)."""
    return np.arange(1, setting.depth + 1) <= (setting.depth if out["mode"] == "stride" else out["matrix_blocks"])


def _var_exact(setting: Setting, plan: SublayerPlan, out: dict) -> np.ndarray:
    """Per block: is the ``var`` law exact (module docstring)? (L,) bool."""
    last = np.arange(setting.depth) * len(_SUBLAYERS[setting.block]) + len(_SUBLAYERS[setting.block]) - 1
    normed_after = plan.norm_after[last]
    uniform = _uniform_attention(setting, plan) and setting.scheme not in ("mix", "none")
    attention_free = setting.block in ("linear", "mlp") or (uniform & _matrix_blocks(setting, out))
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
    return normed_after | base if setting.norm == "rmsnorm" or setting.alignment > 0 else np.full(setting.depth, base)


def _branch_exact(setting: Setting, plan: SublayerPlan, idx: np.ndarray, out: dict) -> np.ndarray:
    """Per step in ``idx``: is the branch variance exact (MLP/linear/MoE; attention in the uniform regime)?"""
    kind = plan.kind[idx]
    normed_input = plan.norm_input[idx] | plan.norm_branch[idx]
    after_norm = (plan.block[idx] >= 2) & plan.norm_after.any()  # post/deepnorm: ||x||^2 = d
    homogeneous = (kind == LINEAR) | (setting.activation == "relu")
    in_matrix = _matrix_blocks(setting, out)[plan.block[idx] - 1]
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


def _table(groups: list[tuple]) -> pd.DataFrame:
    """Concatenate row groups into the long table (categorical string columns, built fast)."""
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
    return values.reshape(-1, per_block).prod(axis=1)  # (N,) -> (L, per_block) -> (L,)


def _random_init_rows(setting: Setting, plan: SublayerPlan, out: dict) -> list[tuple]:
    depth, per_block = setting.depth, len(_SUBLAYERS[setting.block])
    layers = np.arange(depth + 1)
    v0, c0 = input_moments(setting)
    last = np.arange(depth) * per_block + per_block - 1
    law = _var_law(setting)
    correction = setting.width / (setting.width - 1) if setting.norm == "layernorm" else 1.0
    var = np.concatenate([[v0], np.where(plan.norm_after[last], out["v"][last] * correction, out["v"][last])])
    exact = np.concatenate([[True], _var_exact(setting, plan, out)])
    frames = [_rows(layers, "var", law, exact, var)]
    for code, metric in ((ATTENTION, "var_attn"), (MLP, "var_mlp"), (MOE, "var_mlp"), (LINEAR, "var_mlp")):
        idx = np.flatnonzero(plan.kind == code)
        if len(idx):
            branch_law = {"var_attn": "exact-gqa-init" if setting.group_size > 1 else "exact-causal-attention"}.get(
                metric, "exact-moe" if code == MOE else law)
            frames.append(_rows(plan.block[idx], metric, branch_law, _branch_exact(setting, plan, idx, out),
                                out["branch"][idx]))
    frames.append(_rows(layers[1:], "angular", law, "approx", out["angular"]))
    if setting.tokens >= 2:
        token_cos = np.concatenate([[c0 / v0], out["tcos"][last]])
        exact_cos = _uniform_attention(setting, plan) & _matrix_blocks(setting, out) & (setting.scheme in _PRE_LIKE)
        frames.append(_rows(layers, "token_cos", "exact-causal-attention", np.concatenate([[True], exact_cos]),
                            token_cos))
    gain = _block_products(1.0 + out["jac2"], per_block)  # (L,); NaN for blocks normalising the sum
    finite = np.isfinite(gain)
    if setting.alignment == 0 and finite.any():
        frames.append(_rows(layers[1:][finite], "jac_dev", "exact-jacobian-init", "approx", np.sqrt(gain[finite] - 1.0)))
    if setting.alignment == 0 and plan.norm_input.all() and not plan.norm_branch.any() and finite.all():
        # P1's LN Jacobian dLN/dx ~ (g/sigma) I: J_l - I ~ sum of (g/sigma) df/dh, no projection, no
        # E[1/rms^2] correction, no product of sublayers: jac_dev^2 ~ sum_sublayers g^2 ||df/dh||^2/(d sigma^2)
        d = setting.width
        proj = (d - 1) / (d - 2) if d > 2 else 1.0
        p1 = np.sqrt(out["jac2"].reshape(-1, per_block).sum(axis=1) / proj)
        frames.append(_rows(layers[1:], "jac_dev", "p1-ln-jacobian", "approx", p1))
    if setting.alignment == 0 and finite.all():  # tangent of an isotropic probe: gains multiply
        e2e = np.sqrt(np.exp(np.cumsum(np.log(_block_products(out["e2e2"], per_block)))))
        frames.append(_rows(layers, "e2e_gain", "exact-jacobian-init", "approx", np.concatenate([[1.0], e2e])))
    return frames


def _paper_rows(setting: Setting, plan: SublayerPlan) -> list[tuple]:
    """Paper statements evaluated on this setting (only where their assumptions are met)."""
    depth, layers = setting.depth, np.arange(setting.depth + 1)
    v0, _ = input_moments(setting)
    rho, scheme, frames = setting.mask_density, setting.scheme, []
    if scheme in ("pre", "lns") and setting.alignment == 0:
        frames.append(_rows(layers, "var", "p1-lns" if scheme == "lns" else "p1-lemma-3.2", "approx",
                            (iterate_p1_lns if scheme == "lns" else iterate_p1_lemma_3_2)(1.0, v0, depth)))
    if scheme == "none" and setting.alignment == 0:
        sub_gains = [setting.alpha if code == LINEAR else setting.alpha**2 if code == ATTENTION
                     else setting.resolved_ffn_width / setting.width * setting.alpha**2 / 2
                     for code in _SUBLAYERS[setting.block]]
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


def predict(setting: Setting) -> pd.DataFrame:
    """Per-layer predictions for ``setting``: columns ``layer, metric, law, kind, value``.

    Metrics ``var, var_attn, var_mlp, angular, token_cos, jac_dev, e2e_gain`` (CONTRACT.md),
    the random-init laws of :func:`theory.tokens.token_recursion` (kinds in the module
    docstring) and the paper statements that apply (P1 Lemma 3.2 / LNS with ``c = 1``,
    P2 Theorems 1, 2 (upper), 4, GQA (approx); P2 Theorem 5 for MoE).
    Source: derived here; paper rows cite their statement in ``law``.

    >>> t = predict(Setting(preset=None, block="mlp", activation="relu", depth=2, width=64, ffn_width=256))
    >>> t[(t.metric == "var_mlp")].value.tolist()
    [2.0, 2.0]
    """
    if not isinstance(setting, Setting):
        raise TypeError(f"predict needs a Setting, got {type(setting).__name__}")
    plan = build_plan(setting)
    v0, c0 = input_moments(setting)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # a blow-up gives inf/NaN rows
        out = stream_recursion(plan, v0, c0, setting.tokens, setting.causal, setting.head_dim)
        frames = _random_init_rows(setting, plan, out) + _paper_rows(setting, plan)
    moe = np.flatnonzero(plan.kind == MOE)
    if len(moe):
        expert = out["branch"][moe] / (plan.gate2 + (1.0 if setting.shared_expert else 0.0))
        value = expert * (1.0 / setting.top_k + (1.0 if setting.shared_expert else 0.0))
        frames.append(_rows(plan.block[moe], "var_mlp", "p2-thm-5", "approx", value))
    return _table(frames)


# -- command line -----------------------------------------------------------------------------
def write_csv(table: pd.DataFrame, path: str) -> None:
    """Write ``table`` as plain CSV (no quotes, full float precision) with pyarrow.

    pyarrow's multi-threaded writer takes about 2 s for the 9e6 rows of depth 10^6,
    where ``DataFrame.to_csv`` takes about 30 s.
    """
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    with open(path, "wb") as stream:  # pyarrow quotes a header it writes itself
        stream.write((",".join(table.columns) + "\n").encode())
        pa_csv.write_csv(pa.Table.from_pandas(table, preserve_index=False), stream,
                         pa_csv.WriteOptions(include_header=False, quoting_style="none"))


def main(argv=None) -> int:
    """``python -m theory predict [SETTING FLAGS] --out FILE.csv``: write the table atomically.

    Bad settings exit with code 2 and one line on stderr; no file is written.
    """
    from theory.cli import CliParser, atomic_write, fail, output_path
    prog = "python -m theory predict"
    parser = CliParser(prog=prog, description="Per-layer predictions (CSV: layer,metric,law,kind,value).")
    add_setting_arguments(parser)
    parser.add_argument("--out", required=True, metavar="FILE.csv", help="output CSV file")
    args = parser.parse_args(argv)
    try:
        setting = setting_from_args(args)
    except (SettingError, ValueError) as error:
        fail(prog, str(error))
    out = output_path(prog, args.out, directory=False)
    table = predict(setting)
    atomic_write(out, lambda temp: write_csv(table, temp))
    metrics = ",".join(sorted(table.metric.unique()))
    print(f"wrote {len(table)} rows ({setting.depth + 1} layers; {metrics}) to {out}")
    blow_up = first_non_finite(table)
    if blow_up:
        print(f"{prog}: warning: {blow_up}", file=sys.stderr)
    return 0


def first_non_finite(table: pd.DataFrame) -> str:
    """Where the predicted curves leave float64 (inf/nan), one line per table; "" when all are finite.

    >>> first_non_finite(pd.DataFrame({"layer": [0, 1, 2], "metric": "var", "law": "x", "value": [1, 2, np.inf]}))
    'not finite from layer 2 (var/x at 2); those values are written as inf/nan'
    """
    bad = table[~np.isfinite(table["value"].to_numpy(dtype=float))]
    if bad.empty:
        return ""
    starts = bad.groupby(["metric", "law"], observed=True)["layer"].min().sort_values()  # (curves,)
    curves = ", ".join(f"{metric}/{law} at {layer}" for (metric, law), layer in starts.items())
    return f"not finite from layer {int(starts.iloc[0])} ({curves}); those values are written as inf/nan"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
