"""Isolating where the attention laws lose accuracy: the token Gram matrix's finite-width fluctuations.

At the first block of a Pre-LN stack the normalised input tokens ``n_j`` are independent, and the
mean-field recursion (docs/derivations.md#token-covariance-recursion) treats their cosines
``G_jl = n_j.n_l/d`` as their expectation, 0. At finite width they are ``O(1/sqrt(d))``, and the same
cosines enter twice: in the keys (``Cov(s_j, s_l) = tau^2 G_jl`` for the scores of one query) and in the
values (``<v_j, v_l> ~ G_jl``). Their product does not average out:
``E[sum_jl A_ij A_il G_jl] > E[sum_j A_ij^2]``, by a relative amount that grows with ``T`` (more pairs)
and shrinks with ``d``. :func:`gram_fluctuation_excess` measures that excess directly, with the keys and
values either built from the same finite-width tokens (the stack) or independent (the mean-field model);
``tests/simulate/test_accuracy_map.py::test_layer_one_attention_gap_is_the_gram_fluctuation`` shows that it
is the whole first-block error of the attention branch variance (docs/accuracy.md#the-transformer-blocks-gap).

>>> excess, sem = gram_fluctuation_excess(width=64, tokens=16, causal=True, samples=400, seed=0)
>>> bool(0.0 < excess < 0.03) and bool(0.0 < sem < 0.01)
True
"""

from __future__ import annotations

import numpy as np

from theory.meanfield.softmax_rows import rope_rotate

__all__ = ["gram_fluctuation_excess"]


def _overlap(keys: np.ndarray, queries: np.ndarray, values_gram: np.ndarray,
             causal: bool, rope: bool) -> np.ndarray:
    """Per sample: ``mean_i sum_jl A_ij A_il V_jl`` for scores ``q_i.k_j/sqrt(hd)``, (S,)."""
    head_dim = queries.shape[-1]
    if rope:
        queries, keys = rope_rotate(queries), rope_rotate(keys)
    scores = queries @ keys.transpose(0, 2, 1) / np.sqrt(head_dim)  # (S, T, T)
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)  # (S, T, T): rows of attention
    return np.einsum("sij,sil,sjl->si", weights, weights, values_gram).mean(axis=1)  # (S, T) -> (S,)


def gram_fluctuation_excess(width: int, tokens: int, causal: bool, *, heads: int = 4, rope: bool = True,
                            samples: int = 4000, seed: int = 0, chunk: int = 500) -> tuple[float, float]:
    """Relative excess of the first block's attention overlap from finite-width token cosines, and its sem.

    One head of ``width/heads`` dimensions, weights of variance ``1/width`` (the Setting's default, score
    variance 1), independent Gaussian input tokens normalised to ``||n||^2 = d``. Returns
    ``E[O_finite]/E[O_meanfield] - 1`` with ``O = mean_i sum_jl A_ij A_il V_jl``: finite, keys ``W_k n_j``
    and ``V = G`` (the tokens' cosines); mean-field, keys independent Gaussian of the same variance and
    ``V = I``. The sem is the delta method over the two independent Monte-Carlo means.

    Source: derived here (docs/accuracy.md#the-transformer-blocks-gap); the branch variance of the first
    block is ``s_v^2 s_o^2 d E[O]`` in both models, so this is its relative error under the mean-field law.
    """
    rng = np.random.default_rng(seed)
    head_dim = width // heads
    finite, meanfield = [], []
    for start in range(0, samples, chunk):
        size = min(chunk, samples - start)
        x = rng.standard_normal((size, tokens, width))
        n = np.sqrt(width) * x / np.linalg.norm(x, axis=-1, keepdims=True)  # (S, T, d), ||n_j||^2 = d
        gram = n @ n.transpose(0, 2, 1) / width  # (S, T, T): the cosines
        w_q, w_k = rng.standard_normal((2, size, width, head_dim)) / np.sqrt(width)  # one head, per sample
        queries = n @ w_q  # (S, T, d) @ (S, d, hd) -> (S, T, hd)
        finite.append(_overlap(n @ w_k, queries, gram, causal, rope))
        independent = rng.standard_normal((size, tokens, head_dim))  # keys of the mean-field model, var 1
        meanfield.append(_overlap(independent, queries, np.broadcast_to(np.eye(tokens), gram.shape), causal,
                                  rope))
    a, b = np.concatenate(finite), np.concatenate(meanfield)  # (samples,) each
    ratio = a.mean() / b.mean()
    sem = ratio * np.hypot(a.std(ddof=1) / np.sqrt(len(a)) / a.mean(), b.std(ddof=1) / np.sqrt(len(b)) / b.mean())
    return float(ratio - 1.0), float(sem)
