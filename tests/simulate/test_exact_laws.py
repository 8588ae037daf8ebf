"""Monte-Carlo means against exact random-init laws (docs/derivations.md), within 4 standard errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulate import simulate, weight_decay_process
from theory.setting import Setting


def make(**fields) -> Setting:
    return Setting(**fields)


def column(table, metric):
    rows = table[table.metric == metric].sort_values("layer")
    return rows.layer.to_numpy(), rows["mean"].to_numpy(), rows["sem"].to_numpy()


def silu_second_moment(variance: float) -> float:
    """E[silu(z)^2], z ~ N(0, variance), by Gauss-Hermite (probabilists') quadrature."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    z = math.sqrt(variance) * nodes
    return float(np.sum(weights * (z / (1 + np.exp(-z))) ** 2) / math.sqrt(2 * math.pi))


@pytest.mark.parametrize("weights", ["dense", "implicit"])
def test_masked_linear_variance_is_exact(mc_close, weights):
    """P2 Thm 1 setting: E var_l = var_0 (1 + alpha rho)^l exactly (docs/derivations.md#masked-linear)."""
    setting = make(block="linear", scheme="none", depth=6, width=48, tokens=4, mask_density=0.5,
                   init_std=1.2 / math.sqrt(48), input_std=0.7)
    table = simulate(setting, samples=1500, seed=1, dtype="float64", weights=weights)
    layers, mean, sem = column(table, "var")
    exact = 0.7**2 * (1 + setting.alpha * 0.5) ** layers
    mc_close(f"masked linear var ({weights})", mean, sem, exact)


@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
def test_relu_mlp_increment_under_pre(mc_close, norm):
    """Pre-LN: the norm output has unit second moment, so each ReLU MLP adds alpha*d_ff*s^2/2."""
    s = 0.15
    setting = make(block="mlp", scheme="pre", norm=norm, activation="relu", depth=4, width=64, ffn_width=96,
                   tokens=6, init_std=s)
    table = simulate(setting, samples=400, seed=2, dtype="float64", metrics="var,var_mlp")
    increment = setting.alpha * 96 * s**2 / 2
    _, mean, sem = column(table, "var_mlp")
    mc_close(f"relu MLP increment ({norm})", mean, sem, np.full(4, increment))
    layers, mean, sem = column(table, "var")
    mc_close(f"relu MLP var ({norm})", mean, sem, 1.0 + layers * increment)


def test_swiglu_increment_under_pre(mc_close):
    """SwiGLU: d_ff s^2 E[silu(z1)^2] E[z2^2], z ~ N(0, alpha)."""
    s = 0.2
    setting = make(block="mlp", scheme="pre", activation="swiglu", depth=3, width=32, ffn_width=80, tokens=6,
                   init_std=s)
    table = simulate(setting, samples=400, seed=3, dtype="float64", metrics="var_mlp")
    alpha = setting.alpha
    increment = 80 * s**2 * silu_second_moment(alpha) * alpha
    _, mean, sem = column(table, "var_mlp")
    mc_close("swiglu increment", mean, sem, np.full(3, increment))


@pytest.mark.parametrize("shared", [False, True])
def test_moe_uniform_gates_divide_by_k(mc_close, shared):
    """Top-k MoE with uniform gates 1/k: (1/k) x the single-expert increment (+1 x for a shared expert)."""
    s = 0.15
    setting = make(block="moe", scheme="pre", activation="relu", depth=2, width=32, ffn_width=48, heads=2,
                   tokens=6, experts=4, top_k=3, uniform_gates=True, shared_expert=shared, init_std=s)
    table = simulate(setting, samples=400, seed=4, dtype="float64", metrics="var_mlp")
    single = setting.alpha * 48 * s**2 / 2
    _, mean, sem = column(table, "var_mlp")
    mc_close(f"moe uniform gates (shared={shared})", mean, sem, np.full(2, single / 3 + (single if shared else 0)))


@pytest.mark.parametrize("causal", [True, False])
def test_uniform_attention_variance(mc_close, causal):
    """Tiny weights make softmax uniform: var_attn = alpha^2 H_T/T (causal) or alpha^2/T (i.i.d. tokens)."""
    tokens, width = 12, 32
    setting = make(block="attention", scheme="pre", depth=1, width=width, heads=2, tokens=tokens, causal=causal,
                   init_std=1e-3)
    table = simulate(setting, samples=600, seed=5, dtype="float64", metrics="var_attn")
    harmonic = sum(1 / t for t in range(1, tokens + 1))
    exact = setting.alpha**2 * (harmonic / tokens if causal else 1 / tokens)
    _, mean, sem = column(table, "var_attn")
    mc_close(f"uniform attention (causal={causal})", mean / exact, sem / exact, np.ones(1))


def exact_weight_decay_variance(steps, lr, wd, noise_std, init_var):
    decay = (1 - lr * wd) ** 2
    t = np.arange(steps + 1)
    return decay**t * init_var + lr**2 * noise_std**2 * (1 - decay**t) / (1 - decay)


def test_weight_decay_process_matches_exact_law(mc_close):
    """P2 Thm 3 process: the exact Var(u_t) (docs/derivations.md#exact-weight-decay), also theory's."""
    setting = make(lr=0.2, weight_decay=0.5, grad_noise_std=1.5, init_std=0.8, width=64, depth=40)
    table = weight_decay_process(setting, samples=200, seed=6)
    layers, mean, sem = column(table, "var")
    exact = exact_weight_decay_variance(40, 0.2, 0.5, 1.5, 0.64)
    assert layers.tolist() == list(range(41))
    mc_close("weight-decay process var", mean, sem, exact)
    import theory

    if hasattr(theory, "weight_decay_variance"):
        np.testing.assert_allclose(theory.weight_decay_variance(40, 0.2, 0.5, 1.5, 0.64), exact, rtol=1e-12)


def test_lns_divides_the_increment_by_l(mc_close):
    """LNS scales the norm output by 1/sqrt(l): the ReLU MLP increment is alpha*d_ff*s^2/(2l)."""
    s = 0.15
    setting = make(block="mlp", scheme="lns", activation="relu", depth=5, width=48, ffn_width=64, tokens=6,
                   init_std=s)
    table = simulate(setting, samples=400, seed=7, dtype="float64", metrics="var_mlp")
    layers, mean, sem = column(table, "var_mlp")
    mc_close("lns increment", mean, sem, setting.alpha * 64 * s**2 / 2 / layers)


def test_aligned_part_adds_a_to_the_rms(mc_close):
    """The aligned family with b = 0 (skipinit, beta = 0): x_l = x_0 (1 + l a / r_0) per token, r_0 = rms(x_0).

    With x_0 ~ N(0, I_d) the norm ||x_0|| and the direction are independent, so
    E var_l = 1 + 2 l a E||x_0||/sqrt(d) + (l a)^2, E||x_0|| = sqrt(2) Gamma((d+1)/2)/Gamma(d/2).
    """
    a, d = 0.5, 64
    setting = make(block="mlp", scheme="skipinit", depth=5, width=d, tokens=4, alignment=a)
    table = simulate(setting, samples=200, seed=8, dtype="float64")
    layers, mean, sem = column(table, "var")
    mean_norm = math.sqrt(2) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
    mc_close("aligned rms growth", mean, sem, 1 + 2 * layers * a * mean_norm / math.sqrt(d) + (layers * a) ** 2)


def test_pre_ln_init_growth_matches_torch_float32_and_64(mc_close):
    """float32 and float64 streams agree (same seed, same draws up to rounding)."""
    setting = make(block="transformer", scheme="pre", depth=3, width=32, heads=2, tokens=5)
    low = simulate(setting, samples=4, seed=9, dtype="float32", weights="dense")
    high = simulate(setting, samples=4, seed=9, dtype="float64", weights="dense")
    np.testing.assert_allclose(low["mean"], high["mean"], rtol=1e-3)


def test_implicit_weights_have_the_law_of_dense_weights(mc_close):
    """Tangent rows meet each weight with the primal rows, so every metric keeps its law."""
    setting = make(block="transformer", scheme="pre", depth=2, width=32, heads=2, tokens=6, init_std=0.25)
    dense = simulate(setting, samples=150, seed=12, dtype="float64", metrics="all", weights="dense")
    implicit = simulate(setting, samples=150, seed=13, dtype="float64", metrics="all", weights="implicit")
    merged = dense.merge(implicit, on=["layer", "metric"], suffixes=("_dense", "_implicit"))
    merged = merged[merged.layer > 0]  # layer 0 = input only
    combined_sem = np.hypot(merged["sem_dense"], merged["sem_implicit"])
    mc_close("implicit vs dense, all metrics", merged["mean_implicit"], combined_sem, merged["mean_dense"])


PREDICT_CASES = {
    "masked-linear": dict(block="linear", scheme="none", depth=5, width=48, tokens=4, mask_density=0.5,
                          init_std=1.2 / math.sqrt(48), input_std=0.7),
    "pre-relu-mlp": dict(block="mlp", scheme="pre", activation="relu", depth=4, width=64, ffn_width=96, tokens=6,
                         init_std=0.15),
    "lns-swiglu-mlp": dict(block="mlp", scheme="lns", activation="swiglu", depth=4, width=32, ffn_width=80,
                           tokens=6, init_std=0.2),
    "moe-uniform-gates": dict(block="moe", scheme="pre", activation="relu", depth=2, width=32, ffn_width=48, heads=2,
                              tokens=6, experts=4, top_k=2, uniform_gates=True, init_std=0.15),
}


@pytest.mark.parametrize("case", sorted(PREDICT_CASES))
def test_agrees_with_theory_predict_exact_rows(mc_close, case):
    """theory.predict's 'exact' var/var_mlp rows (where it gives them) within 4 sem."""
    import theory

    setting = make(**PREDICT_CASES[case])
    predicted = theory.predict(setting)
    predicted = predicted[(predicted.kind == "exact") & predicted.metric.isin(["var", "var_mlp"])]
    assert not predicted.empty, f"theory.predict has no exact var/var_mlp rows for {case}"
    table = simulate(setting, samples=600, seed=14, dtype="float64", metrics="var,var_mlp")
    merged = predicted.merge(table, on=["layer", "metric"])
    assert len(merged) == len(predicted)
    mc_close(f"theory.predict {case}", merged["mean"], merged["sem"], merged["value"])
