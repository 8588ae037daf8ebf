"""The score path of the attention tangent (theory.meanfield.softmax_rows.score_path) against a plain numpy Monte-Carlo.

One attention sublayer, one head (head_dim = d), causal softmax of q k^T/sqrt(d), weights N(0, alpha/d):
the Jacobian-vector product  d(out)_t = sum_j [a_tj (ds_tj - sum_j' a_tj' ds_tj') v_j + a_tj dv_j] W_o
with ds = (dq k^T + q dk^T)/sqrt(d), compared per entry of its per-coordinate covariance with the
mean-field value path plus score path at 4 standard errors. No torch.
"""

from __future__ import annotations

import numpy as np
import pytest

from theory.meanfield.softmax_rows import row_table, score_path, softmax_jacobian_square, uniform_rows


def _value_path(Q, s, causal):
    """The value path alpha_v alpha_o E[A Q A^T] of theory.meanfield.covariance (exchangeable rows), per unit alpha."""
    T = len(Q)
    abar = uniform_rows(T, causal)
    n = np.arange(1.0, T + 1) if causal else np.full(T, float(T))
    tr = np.cumsum(np.diag(Q)) if causal else np.full(T, np.trace(Q))
    one = np.diag(np.cumsum(np.cumsum(Q, 0), 1)) if causal else np.full(T, Q.sum())
    out = abar @ Q @ abar.T
    with np.errstate(invalid="ignore", divide="ignore"):
        out[np.diag_indices(T)] += np.where(n > 1, (s - 1 / n) * (n * tr - one) / (n * (n - 1)), 0.0)
    return out


def _theory(Q, Cn, alpha_qk, causal, head_dim):
    T = len(Q)
    rows = row_table(T, causal, head_dim, max(alpha_qk * float(np.max(np.diag(Q))) ** 2, 1e-12))
    n = np.arange(1.0, T + 1) if causal else np.full(T, float(T))
    R = Q / np.sqrt(np.outer(np.diag(Q), np.diag(Q)))
    total = np.diag(np.cumsum(np.cumsum(R, 0), 1)) if causal else np.full(T, R.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(n > 1, (total - n) / (n * (n - 1)), 0.0)
    tau2 = alpha_qk * float(np.mean(np.diag(Q))) ** 2 * (1 - rho)
    s, jac = rows.at(tau2), rows.at(tau2, "j")
    value = _value_path(Cn, s, causal)
    score = alpha_qk * score_path(Q, Cn, s, jac, causal) if alpha_qk > 0 else np.zeros_like(Q)
    return value, score


def _monte_carlo(Q, Cn, alpha_qk, causal, d, samples, seed, batch=500):
    """Samples of the per-coordinate covariance y_t . y_t'/d (each (N, T, T)) of the tangent output:
    the value path y = A dV W_o, the score path y = dA V W_o and their sum."""
    rng = np.random.default_rng(seed)
    T = len(Q)
    lq, lc = np.linalg.cholesky(Q), np.linalg.cholesky(Cn)
    aq = np.sqrt(alpha_qk)  # alpha_q = alpha_k = sqrt(alpha_qk); alpha_v = alpha_o = 1
    mask = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
    parts = {"value": [], "score": [], "total": []}
    for _ in range(samples // batch):
        h = lq @ rng.standard_normal((batch, T, d))  # (B, T, d): per-coordinate covariance Q
        dh = lc @ rng.standard_normal((batch, T, d))  # tangent, independent of h: covariance Cn
        wq, wk, wv, wo = (rng.standard_normal((4, batch, d, d)) / np.sqrt(d))
        q, k, v = h @ (aq * wq), h @ (aq * wk), h @ wv
        dq, dk, dv = dh @ (aq * wq), dh @ (aq * wk), dh @ wv
        scores = np.where(mask, q @ k.transpose(0, 2, 1) / np.sqrt(d), -np.inf)
        a = np.exp(scores - scores.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ds = (dq @ k.transpose(0, 2, 1) + q @ dk.transpose(0, 2, 1)) / np.sqrt(d)
        da = a * (ds - (a * ds).sum(-1, keepdims=True))
        y_value, y_score = a @ dv @ wo, da @ v @ wo  # (B, T, d) each
        for key, y in (("value", y_value), ("score", y_score), ("total", y_value + y_score)):
            parts[key].append(y @ y.transpose(0, 2, 1) / d)  # (B, T, T)
    return {key: np.concatenate(val) for key, val in parts.items()}


def _mean_sem(x):
    """Mean and standard error; entries that are exactly zero in every sample (causal row 0) get sem = inf."""
    sem = x.std(0) / np.sqrt(len(x))
    return x.mean(0), np.where(sem > 0, sem, np.inf)


def _inputs(T, rho, seed):
    rng = np.random.default_rng(seed)
    Q = (1 - rho) * np.eye(T) + rho
    g = rng.standard_normal((T, 2 * T)) / np.sqrt(2 * T)
    Cn = 0.5 * np.eye(T) + g @ g.T  # a generic tangent covariance
    return Q, Cn


def test_jacobian_square_quadrature():
    assert np.allclose(softmax_jacobian_square([1, 2, 5], [0.0])[0], [0.0, 0.25, 4 / 25], atol=1e-10)
    rng = np.random.default_rng(0)
    s = rng.standard_normal((100_000, 4))
    a = np.exp(s) / np.exp(s).sum(1, keepdims=True)
    tr = (a**2).sum(1) - 2 * (a**3).sum(1) + ((a**2).sum(1)) ** 2
    assert abs(softmax_jacobian_square([4], [1.0])[0, 0] - tr.mean()) < 4 * tr.std() / np.sqrt(len(tr))


@pytest.mark.parametrize("causal", [True, False])
def test_score_path_zero_without_scores(causal):
    Q, Cn = _inputs(6, 0.3, 1)
    value, score = _theory(Q, Cn, 0.0, causal, 64)
    assert np.all(score == 0.0)
    rows = row_table(6, causal, 64, 0.0)  # tau^2 = 0: uniform rows, no score path
    s = rows.at(np.zeros(6))
    assert np.allclose(s, 1 / (np.arange(1, 7) if causal else np.full(6, 6)))


@pytest.mark.parametrize("T,rho,causal", [(4, 0.0, True), (8, 0.5, True), (6, 0.2, False)])
def test_attention_tangent_matches_monte_carlo(T, rho, causal):
    d, alpha_qk = 64, 1.0
    Q, Cn = _inputs(T, rho, T)
    value, score = _theory(Q, Cn, alpha_qk, causal, d)
    mc = _monte_carlo(Q, Cn, alpha_qk, causal, d, samples=6000, seed=T)
    diag = np.diag_indices(T)
    assert np.all(score[diag][1:] > 0.05 * value[diag][1:])  # the term matters
    mean, sem = _mean_sem(mc["total"])  # the trace metrics see the diagonal: value + score path
    z = (value + score - mean) / sem
    assert np.max(np.abs(z[diag])) < 4, z.round(2)
    assert np.max(np.abs(((value - mean) / sem)[diag])) > 4  # without the score path the diagonal is off
    s_mean, s_sem = _mean_sem(mc["score"])  # the score path alone
    zs = (score - s_mean)[diag][1:] / s_sem[diag][1:]
    assert np.max(np.abs(zs)) < 4, zs.round(2)
    # off the diagonal rows are treated as independent (E J_t (x) J_t' = E J_t (x) E J_t'): exact at rho = 0
    off = ~np.eye(T, dtype=bool)
    if rho == 0:
        assert np.max(np.abs((score - s_mean)[off] / s_sem[off])) < 4
    assert np.max(np.abs(score - s_mean)[off]) < 0.1 * np.mean(score[diag][1:])
    cross, cross_sem = _mean_sem(mc["total"] - mc["value"] - mc["score"])  # 2 E[value . score]: zero
    assert np.max(np.abs(cross / cross_sem)) < 4
