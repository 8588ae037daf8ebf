"""The (variance, token covariance) recursion: attention weights, kernels, limits, Monte-Carlo."""

import dataclasses
import math

import numpy as np
import pytest

from theory.gaussian import dual_kernel, second_moment
from theory.setting import Setting
from theory.tokens import (
    attention_moments, attention_table, causal_pair_overlap, kernel_table, mlp_moments, softmax_square_sum,
)
from theory.prediction import build_plan, input_moments
from theory.tokens import token_recursion
from theory.covariance import stream_recursion


def _softmax_mc(n, tau2, draws=200_000, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((draws, n)) * math.sqrt(tau2)  # (draws, n)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    x = (a**2).sum(axis=1)
    return x.mean(), x.std() / math.sqrt(draws)


def test_softmax_square_sum_uniform_limit():
    n = np.arange(1, 50)
    np.testing.assert_allclose(softmax_square_sum(n, 0.0)[0], 1 / n, rtol=1e-10)


@pytest.mark.parametrize("n,tau2", [(2, 1.0), (8, 4.0), (64, 1.0), (5, 9.0)])
def test_softmax_square_sum_against_monte_carlo(n, tau2):
    mean, sem = _softmax_mc(n, tau2)
    assert abs(float(softmax_square_sum(n, tau2)[0, 0]) - mean) < 4 * sem


def test_causal_pair_overlap_brute_force():
    for tokens in (2, 3, 7, 20):
        pairs = [1 / max(t, u) for t in range(1, tokens + 1) for u in range(1, tokens + 1) if t != u]
        assert abs(causal_pair_overlap(tokens) - np.mean(pairs)) < 1e-14


def test_attention_table_interpolates_position_average():
    tokens, tau2 = 300, 0.7
    tab = attention_table(tokens, True, 10**6, tau2)  # huge head dim: no key-norm spread
    direct = np.mean([softmax_square_sum(t, tau2)[0, 0] for t in range(1, tokens + 1)])
    assert abs(float(tab.square_sum(tau2)) / direct - 1) < 1e-3


@pytest.mark.parametrize("name", ["relu", "gelu", "silu"])
def test_kernel_table_accuracy(name):
    rng = np.random.default_rng(0)
    tab = kernel_table(name, 1e-6, 2.0)
    q, r = np.exp(rng.uniform(np.log(1e-6), np.log(2.0), 3000)), rng.uniform(0, 1, 3000)
    exact = dual_kernel(name, q, r) / second_moment(name, q)
    assert np.abs(tab.correlation(q, r) - exact).max() < 3e-4


def _normalised_tokens(rng, samples, tokens, width, cos):
    shared = rng.standard_normal((samples, 1, width))
    own = rng.standard_normal((samples, tokens, width))
    x = math.sqrt(cos) * shared + math.sqrt(1 - cos) * own  # (S, T, d)
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True))  # ||h_t||^2 = d


def test_uniform_causal_attention_with_correlated_tokens_monte_carlo():
    """var = alpha_v alpha_o ((1 - rho) H_T/T + rho), cov with the causal pair overlap."""
    rng = np.random.default_rng(3)
    samples, tokens, width, rho = 2000, 6, 64, 0.4
    h = _normalised_tokens(rng, samples, tokens, width, rho)
    cos = np.einsum("std,sud->stu", h, h) / width  # (S, T, T)
    rho_hat = cos[:, ~np.eye(tokens, dtype=bool)].mean()
    w_v = rng.standard_normal((samples, width, width)) / math.sqrt(width)
    w_o = rng.standard_normal((samples, width, width)) / math.sqrt(width)
    attn = np.tril(np.ones((tokens, tokens))) / np.arange(1, tokens + 1)[:, None]  # (T, T) uniform causal
    y = np.einsum("tu,sud,sde,sef->stf", attn, h, w_v, w_o, optimize=True)  # (S, T, d)
    per_sample = (y**2).mean(axis=(1, 2))  # (S,)
    tab = attention_table(tokens, True, 32, 0.0)
    var, _ = attention_moments(1.0, rho_hat, alpha_qk=0.0, alpha_vo=1.0, table=tab, rope=False)
    sem = per_sample.std() / math.sqrt(samples)
    assert abs(per_sample.mean() - var) < 4 * sem


@pytest.mark.parametrize("activation", ["relu", "swiglu"])
def test_mlp_increment_and_covariance_monte_carlo(activation):
    rng = np.random.default_rng(4)
    samples, width, ffn, rho, alpha = 4000, 64, 128, 0.5, 1.3
    h = _normalised_tokens(rng, samples, 2, width, rho)  # (S, 2, d)
    s = math.sqrt(alpha / width)
    z = np.einsum("std,sdf->stf", h, rng.standard_normal((samples, width, ffn)) * s)  # (S, 2, ffn)
    if activation == "relu":
        hidden = np.maximum(z, 0)
    else:
        z3 = np.einsum("std,sdf->stf", h, rng.standard_normal((samples, width, ffn)) * s)
        hidden = z / (1 + np.exp(-z)) * z3
    y = np.einsum("stf,sfd->std", hidden, rng.standard_normal((samples, ffn, width)) * s)  # (S, 2, d)
    var_s, cov_s = (y**2).mean(axis=(1, 2)), (y[:, 0] * y[:, 1]).mean(axis=1)
    tab = kernel_table("silu" if activation == "swiglu" else activation, alpha, alpha)
    var, cov = mlp_moments(1.0, rho, activation=activation, alpha_in=alpha, alpha_out=alpha,
                           ffn_ratio=ffn / width, table=tab)
    assert abs(var_s.mean() - float(var)) < 4 * var_s.std() / math.sqrt(samples)
    assert abs(cov_s.mean() - float(cov)) < 4 * cov_s.std() / math.sqrt(samples) + 0.01 * float(var)


def _run(setting):
    plan = build_plan(setting)
    return plan, token_recursion(plan, *input_moments(setting))


def test_identical_tokens_stay_identical():
    setting = Setting.preset("llama", scheme="pre", depth=30, width=64, heads=4, tokens=16, input_cos=0.999999)
    _, out = _run(setting)
    assert np.all(out["c"] / out["v"] > 0.999999 - 1e-9)


def test_single_token_has_no_mixing():
    setting = Setting.preset("llama", scheme="pre", block="attention", depth=5, width=64, heads=4, tokens=1)
    plan, out = _run(setting)
    alpha = setting.alpha
    np.testing.assert_allclose(out["branch"], alpha**2, rtol=1e-12)  # sum_j a_j^2 = 1


def test_rank_collapse_and_input_std():
    """Tokens correlate with depth, much faster from a small input (llama init)."""
    base = Setting.preset("llama", scheme="pre", depth=50, width=256, tokens=64)
    small = _run(base.replace(input_std=0.02))[1]
    large = _run(base)[1]
    cos_small = small["c"][1::2] / small["v"][1::2]  # after each block (SwiGLU lowers it a little)
    cos_large = large["c"][1::2] / large["v"][1::2]
    assert np.all(np.diff(cos_small) > 0) and cos_small[-1] > 0.9
    assert cos_large[-1] < cos_small[-1]
    assert small["branch"][::2][10] > 5 * small["branch"][0]  # attention increments grow with the cosine


@pytest.mark.parametrize("scheme,block", [("lns", "transformer"), ("sandwich", "moe"), ("pre", "linear")])
def test_fixed_point_tail_matches_sequential(scheme, block):
    setting = Setting.preset("llama", scheme=scheme, block=block, depth=600, width=64, heads=4, tokens=16,
                             input_std=0.02)
    plan = build_plan(setting)
    v0, c0 = input_moments(setting)
    fast, slow = token_recursion(plan, v0, c0, prefix=50), token_recursion(plan, v0, c0, prefix=10**6)
    for key in ("v", "c", "branch", "jac2", "cos"):
        np.testing.assert_allclose(fast[key], slow[key], rtol=1e-10)


def test_frozen_post_tail_matches_full_iteration():
    import theory.tokens as tokens
    setting = Setting(preset=None, scheme="post", block="mlp", activation="relu", depth=3000, width=64)
    plan = build_plan(setting)
    v0, c0 = input_moments(setting)
    frozen = token_recursion(plan, v0, c0)
    full = {key: np.empty(plan.size) for key in tokens._KEYS}
    tokens._sequential(plan, 0, plan.size, v0, c0, full, tokens.static_moments(plan), freeze_tol=0.0)
    for key in tokens._KEYS:
        np.testing.assert_allclose(frozen[key], full[key], rtol=1e-9, atol=1e-9)


# -- the T x T covariance recursion (theory.covariance) ---------------------------------------------


def _uniform_plan(setting):
    """The plan of ``setting`` with ``alpha_q alpha_k = 0``: exactly uniform attention rows."""
    plan = build_plan(setting)
    return dataclasses.replace(plan, alpha_qk=np.zeros(plan.size))


def _reference(setting, v0, c0):
    """Plain loops over token pairs: Pre-LN/LNS, uniform attention, ReLU MLP, branch mask rho."""
    T, alpha, ratio, rho = setting.tokens, setting.alpha, setting.resolved_ffn_width / setting.width, \
        setting.mask_density
    K = [[v0 if t == u else c0 for u in range(T)] for t in range(T)]
    rows = [[(1 / (t + 1) if u <= t else 0.0) if setting.causal else 1 / T for u in range(T)] for t in range(T)]
    trace = []
    for block in range(1, setting.depth + 1):
        g2 = 1 / block if setting.scheme == "lns" else 1.0
        for kind in ("attention", "mlp"):
            R = [[K[t][u] / math.sqrt(K[t][t] * K[u][u]) for u in range(T)] for t in range(T)]
            if kind == "attention":
                B = [[alpha * alpha * g2 * sum(rows[t][i] * rows[u][j] * R[i][j] for i in range(T) for j in range(T))
                      for u in range(T)] for t in range(T)]
            else:
                def arccos_kernel(r):
                    r = min(1.0, max(-1.0, r))
                    return alpha * g2 * (math.sqrt(1 - r * r) + (math.pi - math.acos(r)) * r) / (2 * math.pi)
                B = [[ratio * alpha * arccos_kernel(R[t][u]) for u in range(T)] for t in range(T)]
            K = [[K[t][u] + rho * B[t][u] for u in range(T)] for t in range(T)]
            pairs = [(t, u) for t in range(T) for u in range(T) if t != u]
            trace.append((sum(K[t][t] for t in range(T)) / T, sum(rho * B[t][t] for t in range(T)) / T,
                          sum(K[t][u] / math.sqrt(K[t][t] * K[u][u]) for t, u in pairs) / len(pairs)))
    return np.array(trace)  # (steps, 3): var, branch var, token cosine


@pytest.mark.parametrize("scheme,causal,rho", [("pre", True, 1.0), ("lns", True, 0.5), ("pre", False, 1.0)])
def test_matrix_recursion_against_plain_reference(scheme, causal, rho):
    setting = Setting(scheme=scheme, block="transformer", activation="relu", width=64, ffn_width=96, heads=4,
                      tokens=4, depth=5, causal=causal, rope=False, input_std=0.3, input_cos=0.2, mask_density=rho,
                      init_std=math.sqrt(1.3 / 64))
    out = stream_recursion(_uniform_plan(setting), *input_moments(setting), 4, causal, setting.head_dim)
    ref = _reference(setting, *input_moments(setting))
    np.testing.assert_allclose(out["v"], ref[:, 0], rtol=1e-12)
    np.testing.assert_allclose(out["branch"], ref[:, 1], rtol=1e-12)
    np.testing.assert_allclose(out["tcos"], ref[:, 2], rtol=1e-12)


def _monte_carlo_stack(samples, tokens, width, ffn, depth, input_std, seed=7):
    """Pre-LN blocks (uniform causal attention, ReLU MLP) in float64 numpy: per-sample metrics per block."""
    rng = np.random.default_rng(seed)
    s = 1 / math.sqrt(width)
    rows = np.tril(np.ones((tokens, tokens))) / np.arange(1, tokens + 1)[:, None]
    x = rng.standard_normal((samples, tokens, width)) * input_std  # (S, T, d)
    off = ~np.eye(tokens, dtype=bool)
    record = {"var_attn": [], "token_cos": [], "var": []}
    for _ in range(depth):
        h = x / np.sqrt((x**2).mean(-1, keepdims=True))
        w_v, w_o = (rng.standard_normal((samples, width, width)) * s for _ in range(2))
        y = np.einsum("tu,sud,sde,sef->stf", rows, h, w_v, w_o, optimize=True)
        record["var_attn"].append(y.var(-1, ddof=1).mean(-1))
        x = x + y
        h = x / np.sqrt((x**2).mean(-1, keepdims=True))
        w1, w2 = rng.standard_normal((samples, width, ffn)) * s, rng.standard_normal((samples, ffn, width)) * s
        x = x + np.einsum("stf,sfd->std", np.maximum(np.einsum("std,sdf->stf", h, w1), 0), w2)
        u = x / np.linalg.norm(x, axis=-1, keepdims=True)
        record["token_cos"].append(np.einsum("std,sud->stu", u, u)[:, off].mean(-1))
        record["var"].append(x.var(-1, ddof=1).mean(-1))
    return {key: np.array(value) for key, value in record.items()}  # (depth, S)


def test_causal_attention_with_correlated_tokens_monte_carlo():
    """Blocks 2-3: tokens correlated by block 1; the pair recursion misses the positions, the matrix one not."""
    tokens, width, ffn, depth, input_std, samples = 6, 64, 128, 3, 0.1, 800
    setting = Setting(block="transformer", activation="relu", width=width, ffn_width=ffn, heads=4, tokens=tokens,
                      depth=depth, input_std=input_std, rope=False)
    plan = _uniform_plan(setting)
    new = stream_recursion(plan, *input_moments(setting), tokens, True, setting.head_dim)
    old = token_recursion(plan, *input_moments(setting))
    measured = _monte_carlo_stack(samples, tokens, width, ffn, depth, input_std)
    old_off = 0.0
    for block in (2, 3):
        attn, last = 2 * block - 2, 2 * block - 1
        for key, predicted, pair in (("var_attn", new["branch"][attn], old["branch"][attn]),
                                     ("token_cos", new["tcos"][last], old["c"][last] / old["v"][last]),
                                     ("var", new["v"][last], old["v"][last])):
            values = measured[key][block - 1]
            sem = values.std() / math.sqrt(samples)
            assert abs(values.mean() - predicted) < 4 * sem, (block, key)
            old_off = max(old_off, abs(values.mean() - pair) / sem)
    assert old_off > 6  # the equal-cosine pair recursion is off by 6.7 (var_attn) and 16 (token_cos) sem


@pytest.mark.parametrize("kw", [dict(scheme="pre"), dict(scheme="lns", init_std=None),
                                dict(scheme="pre", input_std=0.02)])
def test_stride_tail_matches_full_loop(kw):
    """Geometric strides after the step-by-step blocks: within 3e-3 of running every block."""
    setting = Setting.preset("llama", depth=400, width=64, heads=4, tokens=8, **kw)
    plan = build_plan(setting)
    args = (plan, *input_moments(setting), 8, True, setting.head_dim)
    full, fast = stream_recursion(*args, matrix_blocks=10**9), stream_recursion(*args, matrix_blocks=40)
    assert full["mode"] == "matrix" and fast["mode"] == "stride"
    for key in ("v", "branch", "tcos", "jac2"):
        np.testing.assert_allclose(fast[key], full[key], rtol=3e-3)
    np.testing.assert_allclose(fast["angular"], full["angular"], rtol=3e-3)
    np.testing.assert_allclose(np.cumprod(fast["e2e2"])[1::2], np.cumprod(full["e2e2"])[1::2], rtol=3e-3)  # blocks


def test_uniform_regime_labels():
    """Small scores (llama init): attention curves exact; alpha = 1 (scores of variance ~1): approx."""
    from theory.prediction import predict
    small = predict(Setting.preset("llama", depth=6, width=64, heads=4, tokens=16))
    large = predict(Setting(depth=6, width=64, heads=4, tokens=16))
    for table, kind in ((small, "exact"), (large, "approx")):
        for metric in ("var", "var_attn", "token_cos"):
            rows = table[(table.metric == metric) & table.law.astype(str).str.startswith("exact") & (table.layer > 0)]
            assert set(rows.kind) == {kind}, (metric, kind)
