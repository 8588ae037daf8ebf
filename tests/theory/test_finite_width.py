"""The finite-width law of the token covariance (theory.meanfield.finite_width): its pieces against exact values and
fixed-seed Monte-Carlo, its limit, its reproducibility, its bad input."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import gammaln

from theory.architecture import input_moments
from theory.constraints import ConstraintError
from theory.meanfield import finite_width
from theory.meanfield.finite_width import (FINITE_WIDTH_MIN, mean_sample_cosine, resolve_width_law,
                                          sampled_attention, smoothed_kernel)
from theory.meanfield.plan import build_plan
from theory.meanfield.prediction import predict
from theory.meanfield.softmax_rows import rope_rotate
from theory.meanfield.stack_recursion import stream_recursion
from theory.meanfield.tables import kernel_table
from theory.setting import Setting


def _olkin_pratt(rho, width):
    """E[r_hat] of ``width`` i.i.d. pairs (uncentred): Pearson's r of ``N = width + 1`` samples (Olkin & Pratt 1958),
    ``rho c 2F1(1/2, 1/2; (N + 1)/2; rho^2)``, the series summed to 400 terms (scipy's hyp2f1 fails at large c)."""
    n = width + 1
    factor = np.exp(2 * gammaln(n / 2) - gammaln((n - 1) / 2) - gammaln((n + 1) / 2))
    term, series = np.ones_like(rho), np.ones_like(rho)
    for k in range(400):
        term = term * (0.5 + k) ** 2 / (((n + 1) / 2 + k) * (k + 1)) * rho * rho
        series = series + term
    return rho * factor * series


@pytest.mark.parametrize("width", [8, 16, 32, 256])
def test_mean_sample_cosine_is_olkin_pratt(width):
    rho = np.linspace(-0.95, 0.95, 39)
    got, exact = mean_sample_cosine(rho, width), _olkin_pratt(rho, width)
    assert np.max(np.abs(got - exact)) < 5e-5, np.max(np.abs(got - exact))  # 12^3 nodes, 1025 angles


def _pair_cosines(rho, width, draws, rng):
    """Sample cosines of ``width`` i.i.d. coordinate pairs of correlation ``rho``: (draws,)."""
    x = rng.standard_normal((draws, width))
    y = rho * x + math.sqrt(1 - rho * rho) * rng.standard_normal((draws, width))
    return (x * y).sum(1) / np.sqrt((x * x).sum(1) * (y * y).sum(1))


@pytest.mark.parametrize("name, times_r", [("relu", False), ("silu", True)])
def test_smoothed_kernel_against_monte_carlo(name, times_r):
    """E[kappa(q, r_hat)] (times r_hat for SwiGLU) of the smoothed table against the average over sampled cosines."""
    width, q = 16, 1.0
    table = kernel_table(name, q, q)
    smoothed = smoothed_kernel(table, width, times_r)
    rng = np.random.default_rng(11)
    for rho in (0.0, 0.3, 0.7):
        r = _pair_cosines(rho, width, 100_000, rng)
        values = table.correlation(q, r) * (r if times_r else 1.0)
        mean, sem = values.mean(), values.std(ddof=1) / math.sqrt(len(values))
        got = float(smoothed.correlation(q, rho))
        assert abs(got - mean) <= 4 * sem + 3e-4, (name, rho, got, mean, sem)  # 3e-4: the table's own error


def _brute_attention(R, width, head_dim, causal, rope, draws, rng):
    """E[A G A^T] with tokens of ``width`` coordinates i.i.d. N(0, R), normalised, and one head of weights N(0, 1/d):
    the sublayer itself, per unit alpha_v alpha_o (score variance 1). Returns the per-draw mean diagonal and mean
    off-diagonal entry, (draws,) each."""
    tokens = len(R)
    x = np.linalg.cholesky(R) @ rng.standard_normal((draws, tokens, width))  # (S, T, d): columns N(0, R)
    h = math.sqrt(width) * x / np.linalg.norm(x, axis=-1, keepdims=True)  # (S, T, d), ||h_t||^2 = d
    w = rng.standard_normal((2, draws, width, head_dim)) / math.sqrt(width)
    q, k = h @ w[0], h @ w[1]  # (S, T, hd)
    if rope:
        q, k = rope_rotate(q), rope_rotate(k)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
    if causal:
        scores = np.where(np.tril(np.ones((tokens, tokens), bool)), scores, -np.inf)
    rows = np.exp(scores - scores.max(-1, keepdims=True))
    rows /= rows.sum(-1, keepdims=True)
    mixed = rows @ h / math.sqrt(width)  # (S, T, d)
    value = mixed @ mixed.transpose(0, 2, 1)  # (S, T, T): A G A^T with G = h h^T/d
    diag = np.einsum("stt->s", value) / tokens
    return diag, (value.sum((1, 2)) - diag * tokens) / (tokens * (tokens - 1))


@pytest.mark.parametrize("width, causal, rope", [(32, True, True), (6, False, False)])
def test_sampled_attention_is_the_sublayer_on_gaussian_tokens(width, causal, rope):
    """The T x T average (Bartlett factor, antithetic pairs, control variates; below width T a Gaussian factor)
    against the sublayer applied to tokens of ``width`` Gaussian coordinates, at correlated tokens."""
    tokens, head_dim = 8, 4
    rng = np.random.default_rng(5)
    root = np.tril(0.4 * rng.standard_normal((tokens, tokens))) + np.eye(tokens)
    R = root @ root.T
    R = R / np.sqrt(np.outer(np.diag(R), np.diag(R)))  # a correlation with positional structure
    value, sem = sampled_attention(R, 1.0, 1.0, width, head_dim, causal, rope, seed=1)
    diag, off = _brute_attention(R, width, head_dim, causal, rope, 40_000, rng)
    for got, draws, sem_got in ((np.diag(value).mean(), diag, sem),
                                ((value.sum() - np.trace(value)) / (tokens * (tokens - 1)), off, sem)):
        mean, sem_brute = draws.mean(), draws.std(ddof=1) / math.sqrt(len(draws))
        combined = math.hypot(sem_brute, sem_got * abs(got))
        assert abs(got - mean) <= 4 * combined, (got, mean, sem_brute, sem_got)


def test_mean_field_limit_of_uniform_attention():
    """With uniform rows the attention is linear in R_hat, so at a large width the law is the mean-field one."""
    setting = Setting(scheme="pre", block="transformer", depth=6, width=1 << 16, heads=1 << 12, tokens=8)
    plan = dataclasses.replace(build_plan(setting), alpha_qk=np.zeros(2 * setting.depth))
    args = (plan, *input_moments(setting), setting.tokens, True, setting.head_dim)
    mean_field, finite = stream_recursion(*args), stream_recursion(*args, width_law="finite-width")
    for key in ("v", "branch", "tcos"):
        assert np.allclose(finite.__dict__[key], mean_field.__dict__[key], rtol=1e-3, atol=1e-6), key


def test_width_law_choice_and_bounds():
    assert resolve_width_law("auto", FINITE_WIDTH_MIN) == "finite-width"
    assert resolve_width_law("auto", FINITE_WIDTH_MIN - 1) == "mean-field"
    assert resolve_width_law("auto", 32, tokens=4096) == "mean-field"
    with pytest.raises(ConstraintError, match="width_law='nope' is not allowed: one of mean-field, finite-width, auto"):
        resolve_width_law("nope", 32)
    with pytest.raises(ConstraintError, match=f"width=4 is not allowed: width >= {FINITE_WIDTH_MIN}"):
        resolve_width_law("finite-width", 4)


def test_reproducible_bit_for_bit():
    """The same setting gives the same numbers, drawn again (the cache of the averages emptied) or not."""
    setting = Setting(depth=3, width=32, tokens=16)
    first = predict(setting, "finite-width")
    finite_width.clear_attention_cache()
    second, third = predict(setting, "finite-width"), predict(setting, "finite-width")
    assert np.array_equal(first["value"].to_numpy(), second["value"].to_numpy(), equal_nan=True)
    assert np.array_equal(first["value"].to_numpy(), third["value"].to_numpy(), equal_nan=True)
    assert not np.array_equal(first["value"].to_numpy(), predict(setting, "mean-field")["value"].to_numpy(),
                              equal_nan=True)
    other = predict(setting, "finite-width", law_seed=1)["value"].to_numpy()  # another draw of the average
    assert not np.array_equal(first["value"].to_numpy(), other, equal_nan=True)


@pytest.mark.parametrize("causal, rope", [(True, True), (False, False)])
def test_control_variates_have_their_means(causal, rope):
    """The attention average's entrywise controls (finite_width._attention_draws) have the means it subtracts: the
    uniform rows' ``Abar E[R_hat] Abar^T``, and 0 for the softmax expansion's linear and quadratic parts (4 sem)."""
    tokens, width, head_dim, rng = 6, 16, 8, np.random.default_rng(5)
    R = 0.4 + 0.6 * np.eye(tokens)
    unit = finite_width._unit_tokens(np.linalg.cholesky(R), width, 20_000, rng)
    _, controls, _ = finite_width._attention_draws(unit, 0.7 / math.sqrt(head_dim), head_dim, causal, rope, rng)
    abar = np.tril(np.ones((tokens, tokens))) / np.arange(1, tokens + 1)[:, None] if causal else np.full(
        (tokens, tokens), 1 / tokens)
    expected = np.stack([(abar @ mean_sample_cosine(R, width) @ abar.T).ravel(), np.zeros(tokens**2),
                         np.zeros(tokens**2)])
    mean, sem = controls.mean(axis=0), controls.std(axis=0, ddof=1) / math.sqrt(len(controls))
    z = (mean - expected) / np.where(sem > 0, sem, 1.0)
    assert np.all(np.abs(z[sem > 1e-12]) < 4.5), np.abs(z).max()  # 108 entries: 4.5 is the family-wise 5 % limit
    assert np.all(np.abs(mean - expected)[sem <= 1e-12] < 1e-12)


@pytest.mark.slow
def test_independent_of_blas_threads(tmp_path):
    """Across BLAS thread counts the law is the same: predict runs numpy's OpenBLAS on one thread
    (theory.meanfield.blas_threads); where it cannot (another BLAS), threaded products sum in another order, 1e-12
    relative at T = 64, far below the average's Monte-Carlo error of ~1e-3."""
    code = ("import numpy as np, sys; from theory import Setting, predict; "
            "t = predict(Setting(depth=3, width=256, tokens=64), 'finite-width'); "
            "np.save(sys.argv[1], t['value'].to_numpy())")
    values = []
    for threads in ("1", "2"):
        path = tmp_path / f"threads-{threads}.npy"
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
        subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=env, timeout=300)
        values.append(np.load(path))
    finite = np.isfinite(values[0])
    assert np.allclose(values[0][finite], values[1][finite], rtol=1e-9, atol=0)
