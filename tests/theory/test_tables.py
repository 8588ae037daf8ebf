"""Softmax row moments, the mean-field tables and the branch moments against brute force and Monte-Carlo."""

import math

import numpy as np
import pytest

from theory.meanfield.gaussian import dual_kernel, second_moment
from theory.meanfield.pair_recursion import attention_moments, mlp_moments
from theory.meanfield.softmax_rows import causal_pair_overlap, softmax_square_sum
from theory.meanfield.tables import attention_table, kernel_table


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


@pytest.mark.parametrize("name", ["gelu", "silu"])
def test_kernel_table_cells_equal_the_grid_computed_at_once(name):
    """A cell computed when first read has the value of the whole grid computed in one call (bit for bit)."""
    tab = kernel_table(name, 0.3, 3.0)
    q, r = np.exp(tab.log_q)[:, None], np.cos(tab.theta)[None, :]
    at_once = dual_kernel(name, q, r, order=64) / second_moment(name, q)  # (nq, ntheta)
    rng = np.random.default_rng(1)
    i, j = rng.integers(0, len(tab.log_q), 200), rng.integers(0, len(tab.theta), 200)
    assert (tab.cells(i, j) == at_once[i, j]).all()
    i, j = np.indices(at_once.shape)
    assert (tab.cells(i, j) == at_once).all()


def test_wide_kernel_table_computes_only_what_a_stack_reads():
    """An un-normalised stream's table spans q in [1e-4, 1e8]; predict reads (and computes) a few of its cells."""
    from theory import Setting, predict
    from theory.meanfield.plan import build_plan

    setting = Setting(scheme="none", block="transformer", depth=32, width=64, heads=4, tokens=16)
    predict(setting)
    tab = build_plan(setting).kernel
    assert np.exp(tab.log_q[-1]) > 1e7, "the table of a raw stream covers a wide range"
    assert 0 < np.isfinite(tab.kappa).mean() < 0.1, np.isfinite(tab.kappa).mean()


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
