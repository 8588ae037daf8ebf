"""The finite-width law of the token covariance: the recursion closed on the law of the sample cosines at width d.

Derived here (docs/derivations.md#finite-width-token-covariance). The mean-field recursion
(:mod:`theory.meanfield.covariance`) lets a sublayer read the cosines of its normalised input tokens as their
expectation ``R = corr(K)``. At width ``d`` a sublayer reads the cosines of ``d`` random coordinates,
``R_hat``, which scatter about ``R`` by ``O(1/sqrt(d))``, and its nonlinear maps do not average that out.
The finite-width law keeps ``K`` as the state and takes the stream's ``d`` coordinates to be i.i.d.
``N(0, K)`` across features (exact for the input, a Gaussian closure after it), so that ``d R_hat`` is the
correlation matrix of a Wishart ``W_d(K)`` matrix. Under that law:

- a normalised MLP adds ``(d_ff/d) alpha_out E[kappa(R_hat)]`` elementwise, the dual kernel averaged over the
  sample cosine of each pair (:func:`sample_cosine_nodes`, :func:`smoothed_kernel`);
- a normalised attention adds ``alpha_v alpha_o g^2 E[A R_hat A^T]``, the softmax rows ``A`` of scores drawn
  from the same ``R_hat`` that weights the values: a seeded small-matrix average with control variates
  (:func:`sampled_attention`), ``T x T`` work per draw and none of it ``d``;
- ``token_cos`` is the mean over pairs of ``E[r_hat]`` (:func:`mean_sample_cosine`).

As ``d -> infinity`` ``R_hat -> R``: the law tends to the mean-field one, except that the average draws the
softmax rows where the mean-field law treats them as exchangeable and independent.
:func:`resolve_width_law` picks the law (``width_law`` of :func:`theory.meanfield.prediction.predict`);
:class:`FiniteWidth` carries it through a recursion.

>>> resolve_width_law("auto", 32), resolve_width_law("auto", 8192)
('finite-width', 'mean-field')
>>> resolve_width_law("finite-width", 4)
Traceback (most recent call last):
...
theory.constraints.ConstraintError: width=4 is not allowed: width >= 8 with width_law='finite-width' (or mean-field)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from theory.cli import fail
from theory.constraints import Choice, ConstraintError
from theory.meanfield.softmax_rows import (key_norm_nodes, rope_cos, rope_rotate, uniform_rows,
                                          visible_trace_diagonal)
from theory.meanfield.tables import KernelTable

__all__ = ["WIDTH_LAWS", "WIDTH_LAW_CHOICE", "FINITE_WIDTH_MIN", "AUTO_MAX_WIDTH", "AUTO_MAX_TOKENS", "SEM_TARGET",
           "MAX_DRAW_WORK", "MAX_DRAW_ENTRIES", "FIRST_DRAW_WORK", "ATTENTION_SEED", "sem_target", "resolve_width_law",
           "add_width_law_argument", "check_width_law", "sample_cosine_nodes", "mean_sample_cosine", "smoothed_kernel",
           "sampled_attention", "clear_attention_cache", "attention_nodes", "FiniteWidth"]

WIDTH_LAWS = ("mean-field", "finite-width", "auto")
WIDTH_LAW_CHOICE = Choice(*WIDTH_LAWS)
FINITE_WIDTH_MIN = 8  # smallest width the law takes: the chi^2_(d-1) quadrature and the closure's checks
AUTO_MAX_WIDTH = 4096  # auto: finite-width below it (its correction to var falls like 1/d: 0.36 % at d = 256)
AUTO_MAX_TOKENS = 256  # auto: mean-field above (a draw costs T^3)
SEM_TARGET = 0.00075  # the attention average draws until the relative sem of its mean entries is below this
#                       times sqrt(64/d) (the simulator's standard error falls like 1/sqrt(d): sem_target) ...
MAX_DRAW_WORK = 1 << 26  # ... or draws x T^3 reach this (256 draws at T = 64, 16384 at T = 16: a draw costs ~T^3) ...
MAX_DRAW_ENTRIES = 1 << 22  # ... or draws x T^2 this (the memory of a chunk: 65536 draws at T = 8)
FIRST_DRAW_WORK = 1 << 14  # draws x T^2 of the first chunk (at least 16 pairs); each further chunk doubles the draws
ATTENTION_SEED = 38  # entropy of the attention average's generators (with the node and the sublayer)


def resolve_width_law(law: str, width: int, tokens: int = 1) -> str:
    """``mean-field`` or ``finite-width`` for ``width_law = law`` at this width and sequence length.

    ``auto`` is ``finite-width`` for ``FINITE_WIDTH_MIN <= width < AUTO_MAX_WIDTH`` and
    ``tokens <= AUTO_MAX_TOKENS``, else ``mean-field``. An unknown ``law``, or ``finite-width`` below
    :data:`FINITE_WIDTH_MIN`, raises :class:`theory.constraints.ConstraintError` naming the field.

    >>> resolve_width_law("mean-field", 4), resolve_width_law("auto", 4)
    ('mean-field', 'mean-field')
    """
    WIDTH_LAW_CHOICE.check("width_law", law)
    if law == "auto":
        fits = FINITE_WIDTH_MIN <= width < AUTO_MAX_WIDTH and tokens <= AUTO_MAX_TOKENS
        return "finite-width" if fits else "mean-field"
    if law == "finite-width" and width < FINITE_WIDTH_MIN:
        raise ConstraintError("width", width, f"width >= {FINITE_WIDTH_MIN} with width_law='finite-width' "
                                              "(or mean-field)")
    return law


def add_width_law_argument(parser) -> None:
    """``--width-law mean-field|finite-width|auto`` (default auto) on an argparse parser (:func:`resolve_width_law`)."""
    parser.add_argument("--width-law", default="auto", type=WIDTH_LAW_CHOICE.argparse_type(str),
                        metavar="|".join(WIDTH_LAWS),
                        help="the law of the token covariance: mean-field (d -> infinity), finite-width (the sample "
                             f"cosines at width d, d >= {FINITE_WIDTH_MIN}) or auto (finite-width for "
                             f"{FINITE_WIDTH_MIN} <= d < {AUTO_MAX_WIDTH} and T <= {AUTO_MAX_TOKENS}); default auto")


def check_width_law(prog: str, law: str, setting) -> None:
    """Exit 2 with one line naming ``--width-law`` when ``law`` does not take ``setting``
    (:func:`resolve_width_law`)."""
    try:
        resolve_width_law(law, setting.width, setting.tokens)
    except ConstraintError as error:
        fail(prog, f"--width-law {law}: {error}")


# -- the sample cosine of a pair --------------------------------------------------------------------
def sample_cosine_nodes(rho, width: int, order: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature of the cosine ``r_hat`` of ``width`` i.i.d. pairs of coordinates with correlation ``rho``.

    Bartlett's decomposition of the 2 x 2 Wishart: ``r_hat = a/sqrt(a^2 + (1 - rho^2) c_2^2)``,
    ``a = rho c_1 + sqrt(1 - rho^2) z``, with ``c_1^2 ~ chi^2_d``, ``c_2^2 ~ chi^2_(d-1)``, ``z ~ N(0, 1)``
    independent; ``order`` nodes for each (:func:`theory.meanfield.softmax_rows.key_norm_nodes`,
    Gauss-Hermite). Returns the nodes ``rho.shape + (order^3,)`` and their weights ``(order^3,)``.
    Source: derived here (docs/derivations.md#finite-width-token-covariance).

    >>> r, w = sample_cosine_nodes(np.array([0.5, 1.0]), 32)
    >>> (r @ w).round(4).tolist()  # E[r_hat]: a little below rho (Olkin-Pratt: 0.49409), 1
    [0.4941, 1.0]
    """
    scale1, w1 = key_norm_nodes(width, order)  # chi^2_d / d
    scale2, w2 = key_norm_nodes(width - 1, order)  # chi^2_(d-1) / (d-1)
    z, wz = np.polynomial.hermite_e.hermegauss(order)
    c1, c2 = np.sqrt(width * scale1), np.sqrt((width - 1) * scale2)  # (order,) each
    rho = np.asarray(rho, dtype=float)[..., None, None, None]
    sine = np.sqrt(np.clip(1 - rho * rho, 0.0, None))
    a = rho * c1[:, None, None] + sine * z[None, :, None]  # (..., order, order, 1)
    r = a / np.sqrt(a * a + (sine * c2[None, None, :]) ** 2)  # (..., order, order, order)
    weights = w1[:, None, None] * (wz / wz.sum())[None, :, None] * w2[None, None, :]
    return r.reshape(r.shape[:-3] + (-1,)), weights.ravel()


_THETA = np.linspace(0.0, np.pi, 1025)  # the grid of E[r_hat], uniform in theta = arccos rho


@lru_cache(maxsize=16)
def _cosine_means(width: int) -> np.ndarray:
    """``E[r_hat]`` at ``rho = cos(_THETA)`` (1025,): :func:`sample_cosine_nodes`, once per width."""
    r, w = sample_cosine_nodes(np.cos(_THETA), width)  # (1025, n), (n,)
    return r @ w


def mean_sample_cosine(rho, width: int) -> np.ndarray:
    """``E[r_hat]`` at each correlation of ``rho`` (any shape): the table of :func:`_cosine_means` interpolated
    linearly in ``arccos rho``, its odd part taken (``E[r_hat]`` is odd in ``rho``: 0 at independent tokens, exactly).

    >>> mean_sample_cosine(np.array([[1.0, 0.3], [0.3, 1.0]]), 16).round(4).tolist()
    [[1.0, 0.2915], [0.2915, 1.0]]
    """
    theta, means = np.arccos(np.clip(np.asarray(rho, dtype=float), -1.0, 1.0)), _cosine_means(width)
    return 0.5 * (np.interp(theta, _THETA, means) - np.interp(np.pi - theta, _THETA, means))


def smoothed_kernel(table: KernelTable, width: int, times_r: bool) -> KernelTable:
    """The correlation ``kappa(q, r)`` (times ``r`` when ``times_r``: SwiGLU's linear gate) of ``table``
    averaged over the sample cosine's law at each grid ``rho``: ``E[kappa(q, r_hat)]``, as a :class:`KernelTable`
    on the same grid whose cells are computed when first read.

    >>> from theory.meanfield.tables import kernel_table
    >>> tab = smoothed_kernel(kernel_table("relu", 1.0, 1.0), 16, False)
    >>> round(float(tab.correlation(1.0, 0.0)), 4)  # at rho = 0: 1/pi + E[r_hat^2]/(2 pi) + ..., E[r_hat^2] = 1/16
    0.3284
    """
    nodes, weights = sample_cosine_nodes(np.cos(table.theta), width)  # (len(theta), n), (n,)

    def cell(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        r = nodes[j]  # (cells, n)
        values = table.correlation(np.exp(table.log_q[i])[:, None], r)  # (cells, n)
        return (values * r if times_r else values) @ weights  # (cells,)

    return KernelTable(table.log_q, table.theta, cell)


# -- the attention average ----------------------------------------------------------------------------
def _root(R: np.ndarray) -> np.ndarray:
    """A factor ``L`` with ``L L^T = R`` (T x T): Cholesky, or by eigenvalues (negative rounding clipped) where ``R``
    is singular (identical tokens)."""
    try:
        return np.linalg.cholesky(R)
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(R)
        return vectors * np.sqrt(np.clip(values, 0.0, None))


def _unit_tokens(root: np.ndarray, width: int, pairs: int, rng: np.random.Generator) -> np.ndarray:
    """Rows of ``root B`` normalised: tokens whose Gram ``U U^T`` has the law of the cosines of ``W_d(R)``, in
    antithetic pairs. Returns (2 pairs, T, min(T, d)): draw ``i`` and ``pairs + i`` are a pair.

    ``B`` is Bartlett's lower-triangular factor of ``W_d(I)`` (``width >= T``): ``B_tt^2 ~ chi^2_(d-t+1)``,
    ``B_tj ~ N(0, 1)`` below the diagonal; the pair's second member has those below-diagonal entries negated, a
    draw of the same law whose leading fluctuation of each cosine (``B_tj B_jj``) has the opposite sign.
    Below ``width = T``, ``B`` is a ``T x d`` Gaussian matrix and the two members are independent.
    """
    tokens = len(root)
    if width >= tokens:
        B = np.zeros((2 * pairs, tokens, tokens))
        below = np.tril_indices(tokens, -1)
        normals = rng.standard_normal((pairs, len(below[0])))
        B[:, below[0], below[1]] = np.concatenate([normals, -normals])
        B[:, np.arange(tokens), np.arange(tokens)] = np.tile(
            np.sqrt(rng.chisquare(width - np.arange(tokens), (pairs, tokens))), (2, 1))
    else:
        B = rng.standard_normal((2 * pairs, tokens, width))
    Y = root @ B  # (2 pairs, T, T')
    return Y / np.maximum(np.linalg.norm(Y, axis=-1, keepdims=True), 1e-300)


def _attention_draws(unit: np.ndarray, score_scale: float, head_dim: int, causal: bool, rope: bool,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One head per draw on the tokens ``unit`` (2 pairs, T, T'), the two members of a pair with the same normals
    ``z_q, z_k``. Returns ``A U U^T A^T`` (2 pairs, T^2), three entrywise control variates (2 pairs, 3, T^2) and the
    query and key norms ``|q_t|^2/hd - 1``, ``|k_t|^2/hd - 1`` (2 pairs, 2, T) (mean 0).

    The controls, each of mean 0 (:func:`sampled_attention` subtracts the first's known mean):

    1. ``Abar R_hat Abar^T`` with the uniform rows ``Abar``: mean ``Abar E[R_hat] Abar^T``;
    2. the part of the softmax's first-order expansion ``A ~ Abar + dA``, ``dA_t = P_t s_t/n_t`` (``s_t`` row ``t``'s
       scores, ``P_t`` centring on its ``n_t`` visible keys), that is linear in the scores:
       ``dA R_hat Abar^T + Abar R_hat dA^T``, odd in ``z_q``, so of mean 0 given the tokens;
    3. on the diagonal, the quadratic part ``(dA R_hat dA^T)_tt`` less its mean given the tokens,
       ``E[s_tj s_tj' | U] = c^2 hd R_hat_jj' kappa(j - j')`` (``c`` the score scale, ``kappa`` :func:`rope_cos`, 1
       without RoPE), so ``c^2 hd tr(P_t R_hat P_t (R_hat o kappa))/n_t^2``
       (:func:`theory.meanfield.softmax_rows.visible_trace_diagonal`).
    """
    draws, tokens, inner = unit.shape
    normals = rng.standard_normal((draws // 2, inner, 2 * head_dim))
    qk = unit @ np.concatenate([normals, normals])  # (2 pairs, T, 2 hd)
    q, k = qk[..., :head_dim], qk[..., head_dim:]
    norms = np.stack([(q * q).mean(-1), (k * k).mean(-1)], axis=1) - 1.0  # (2 pairs, 2, T)
    if rope:
        q, k = rope_rotate(q), rope_rotate(k)
    scores = score_scale * (q @ k.transpose(0, 2, 1))  # (2 pairs, T, T)
    visible = np.tril(np.ones((tokens, tokens), dtype=bool)) if causal else np.ones((tokens, tokens), dtype=bool)
    seen = visible.sum(axis=1)[:, None]  # (T, 1): n_t
    shown = np.where(visible, scores, 0.0)
    linear_rows = np.where(visible, shown - shown.sum(axis=-1, keepdims=True) / seen, 0.0) / seen  # dA
    if causal:
        scores = np.where(visible, scores, -np.inf)
    rows = np.exp(scores - scores.max(axis=-1, keepdims=True))
    rows /= rows.sum(axis=-1, keepdims=True)  # (2 pairs, T, T): softmax rows
    mixed = rows @ unit  # (2 pairs, T, T')
    uniform = (np.cumsum(unit, axis=1) / np.arange(1, tokens + 1)[:, None] if causal
               else np.broadcast_to(unit.mean(axis=1, keepdims=True), unit.shape))  # (2 pairs, T, T'): Abar U
    moved = linear_rows @ unit  # dA U
    first = moved @ uniform.transpose(0, 2, 1)  # dA R_hat Abar^T
    gram = unit @ unit.transpose(0, 2, 1)  # R_hat
    kernel = rope_cos(tokens, head_dim) if rope else 1.0
    quadratic = np.zeros((draws, tokens, tokens))
    quadratic[:, np.arange(tokens), np.arange(tokens)] = (np.square(moved).sum(axis=-1) - score_scale**2 * head_dim
                                                          * visible_trace_diagonal(gram, gram * kernel, causal)
                                                          / seen[:, 0] ** 2)
    controls = np.stack([uniform @ uniform.transpose(0, 2, 1), first + first.transpose(0, 2, 1), quadratic], axis=1)
    return (mixed @ mixed.transpose(0, 2, 1)).reshape(draws, -1), controls.reshape(draws, 3, -1), norms


def _regress(cov_gg: np.ndarray, cov_gy: np.ndarray) -> np.ndarray:
    """Least-squares coefficients ``Cov(g)^-1 Cov(g, y)`` per entry: ``cov_gg`` (..., m, m), ``cov_gy`` (..., m). The
    features are scaled to unit variance and the correlation matrix gets ``1e-10`` on its diagonal, so that a feature
    that does not vary (rounding only) gets coefficient 0 and one that is a combination of the others (the uniform
    control of the last row is the mean cosine) shares its weight with them instead of making the system singular."""
    scale = np.sqrt(np.abs(np.diagonal(cov_gg, axis1=-2, axis2=-1)))  # (..., m)
    live = scale > 1e-12 * max(float(scale.max(initial=0.0)), 1e-300)
    safe = np.where(live, scale, 1.0)
    corr = np.where(live[..., :, None] & live[..., None, :], cov_gg / (safe[..., :, None] * safe[..., None, :]), 0.0)
    corr = corr + np.eye(cov_gg.shape[-1]) * np.where(live, 1e-10, 1.0)[..., None]
    beta = np.linalg.solve(corr, (np.where(live, cov_gy, 0.0) / safe)[..., None])[..., 0]
    return np.where(live, beta / safe, 0.0)


@dataclass
class _ControlledMean:
    """The running mean of independent units ``y`` (T^2 entries each) less what the features explain by least squares,
    from sums only: per entry ``e`` the features are ``f`` (k shared ones of known mean 0) and ``c_e`` (m entrywise
    controls, of known mean 0), ``beta_e = Cov(g_e)^+ Cov(g_e, y_e)`` with ``g_e = (f, c_e)``, and the mean is
    ``mean(y_e) - beta_e^T mean(g_e)``. ``parts`` keeps each unit's mean diagonal and mean off-diagonal entry of ``y``
    and of each control for the relative standard error."""

    tokens: int
    units: int = 0
    sums: dict = field(default_factory=dict)  # running sums: "f" (k,), "ff" (k, k), "y" (T^2,), "c", "cy" (m, T^2),
    #                                           "cc" (m, m, T^2), "fy" (k, T^2), "fc" (k, m, T^2)
    features: list = field(default_factory=list)  # (units, k) blocks
    parts: list = field(default_factory=list)  # (units, 1 + m, 2) blocks: of y, then of each control

    def add(self, y: np.ndarray, f: np.ndarray, c: np.ndarray) -> None:
        """Units ``y`` (n, T^2) with their shared features ``f`` (n, k) and entrywise controls ``c`` (n, m, T^2)."""
        self.units += len(y)
        new = {"f": f.sum(axis=0), "ff": f.T @ f, "y": y.sum(axis=0), "c": c.sum(axis=0),
               "cc": np.einsum("nap,nbp->abp", c, c), "cy": np.einsum("nap,np->ap", c, y), "fy": f.T @ y,
               "fc": np.einsum("nk,nap->kap", f, c)}
        self.sums = {key: self.sums.get(key, 0.0) + value for key, value in new.items()}
        self.features.append(f)
        self.parts.append(self._part(np.concatenate([y[:, None], c], axis=1)))

    def _part(self, y: np.ndarray) -> np.ndarray:
        """Mean diagonal and mean off-diagonal entry of each unit: (..., T^2) -> (..., 2)."""
        T = self.tokens
        diag = y[..., :: T + 1].mean(axis=-1)
        return np.stack([diag, (y.sum(axis=-1) - diag * T) / max(T * (T - 1), 1)], axis=-1)

    def mean(self) -> np.ndarray:
        """The controlled mean, (T^2,)."""
        n, s = self.units, self.sums
        mean_f, mean_c = s["f"] / n, s["c"] / n  # (k,), (m, T^2)
        k, m = len(mean_f), len(mean_c)
        cov = np.empty((mean_c.shape[1], k + m, k + m))  # per entry: the covariance of (f, c_e)
        cov[:, :k, :k] = s["ff"] - n * np.outer(mean_f, mean_f)
        cross = s["fc"] - np.einsum("k,ap->kap", s["f"], mean_c)  # (k, m, T^2)
        cov[:, :k, k:] = cross.transpose(2, 0, 1)
        cov[:, k:, :k] = cross.transpose(2, 1, 0)
        cov[:, k:, k:] = (s["cc"] - n * np.einsum("ap,bp->abp", mean_c, mean_c)).transpose(2, 0, 1)
        cov_gy = np.concatenate([s["fy"] - np.outer(s["f"], s["y"]) / n, s["cy"] - s["c"] * s["y"] / n]).T
        beta = _regress(cov, cov_gy)  # (T^2, k + m)
        return s["y"] / n - beta[:, :k] @ mean_f - (beta[:, k:] * mean_c.T).sum(axis=1)

    def relative_sem(self) -> float:
        """The larger relative standard error of the controlled mean diagonal and mean off-diagonal entry."""
        f, parts = np.concatenate(self.features), np.concatenate(self.parts)  # (units, k), (units, 1 + m, 2)
        worst = 0.0
        for column in range(1 if self.tokens < 2 else 2):
            g = np.column_stack([f, parts[:, 1:, column]])  # the shared features and this part of each control
            centred, y = g - g.mean(axis=0), parts[:, 0, column]
            corrected = y - centred @ _regress(centred.T @ centred, centred.T @ (y - y.mean()))
            sem = corrected.std(ddof=g.shape[1] + 1) / math.sqrt(self.units)
            worst = max(worst, float(sem / abs(corrected.mean())))
        return worst


def sampled_attention(R: np.ndarray, scale2: float, alpha_qk: float, width: int, head_dim: int, causal: bool,
                      rope: bool, seed, target: float | None = None) -> tuple[np.ndarray, float]:
    """``g^2 E[A R_hat A^T]`` (T x T) of one normalised attention sublayer (per unit ``alpha_v alpha_o``), and the
    Monte-Carlo relative standard error of its mean diagonal and mean off-diagonal entry (the larger).

    ``R`` is the correlation of the stream entering the norm, ``scale2 = g^2`` the norm's squared scale,
    ``alpha_qk = alpha_q alpha_k``. Each draw takes ``R_hat`` (:func:`_unit_tokens`) and one head's scores
    ``g^2 sqrt(alpha_qk) (U z_q)(U z_k)^T/sqrt(hd)`` (RoPE, causal mask) from the same tokens ``U``; the
    values' Gram, ``E[v_j.v_l] = hd alpha_v g^2 R_hat_jl``, and ``W_o`` are averaged exactly. Draws come in
    antithetic pairs (:func:`_unit_tokens`, the same ``z``), and control variates of known mean remove what
    the query and key norms and the mean sample cosine explain of each entry (their means are 0 and
    :func:`mean_sample_cosine`), and, entry by entry, what the uniform rows' ``Abar R_hat Abar^T`` (the Wishart
    fluctuation) and the softmax's first-order expansion in the scores (their fluctuation) explain
    (:func:`_attention_draws`; :class:`_ControlledMean`). The pairs double from :data:`FIRST_DRAW_WORK`/(2 T^2)
    until the relative sem is at most ``target`` (default :func:`sem_target`) or ``min(`` :data:`MAX_DRAW_WORK` ``/T^3,`` :data:`MAX_DRAW_ENTRIES`
    ``/T^2)`` draws are made. Generator: numpy's
    default seeded by ``seed``; float64. The same arguments give the same numbers, and a repeated call returns them
    (read-only) from a cache of the last 256 without drawing again. Source: derived here
    (docs/derivations.md#finite-width-token-covariance).

    >>> value, sem = sampled_attention(np.eye(4), 1.0, 0.0, 64, 8, True, False, 0)
    >>> float(np.diag(value).mean().round(3)), sem < 0.0015  # uniform rows: E[sum_j r_hat_jl / t^2] = H_4/4
    (0.521, True)
    """
    R = np.ascontiguousarray(R, dtype=float)
    target = sem_target(width) if target is None else target
    return _cached_attention(R.tobytes(), len(R), float(scale2), float(alpha_qk), int(width), int(head_dim),
                             bool(causal), bool(rope), seed, float(target))


def sem_target(width: int) -> float:
    """The relative standard error the attention average aims at, at width ``d``: :data:`SEM_TARGET` x sqrt(64/d).

    The simulator's standard error of ``var_attn`` and ``token_cos`` at the accuracy map's sample count falls like
    ``1/sqrt(d)`` (measured on the Pre-LN transformer cells, T = 16: 1.07, 0.53, 0.28 % of ``var_attn`` at d = 16, 64,
    256; ``python -m simulate bench --theory --law-noise``), and so must the law's own noise to stay below a fifth of
    it (docs/derivations.md#finite-width-token-covariance).

    >>> sem_target(64), sem_target(256)
    (0.00075, 0.000375)
    """
    return SEM_TARGET * math.sqrt(64 / width)


@lru_cache(maxsize=256)
def _cached_attention(data: bytes, tokens: int, scale2: float, alpha_qk: float, width: int, head_dim: int,
                      causal: bool, rope: bool, seed, target: float) -> tuple[np.ndarray, float]:
    """:func:`sampled_attention` of the correlation ``data`` (T x T float64 bytes), its value read-only."""
    R = np.frombuffer(data).reshape(tokens, tokens)
    rng = np.random.default_rng(seed)
    root = _root(R)
    pairs = max(16, FIRST_DRAW_WORK // (2 * tokens**2))
    cap = max(pairs, min(MAX_DRAW_WORK // (2 * tokens**3), MAX_DRAW_ENTRIES // (2 * tokens**2)))
    off = ~np.eye(tokens, dtype=bool)
    expected = mean_sample_cosine(R, width)  # E[R_hat] (T, T)
    expected_cosine = expected[off].mean() if tokens > 1 else 0.0
    abar = uniform_rows(tokens, causal)
    expected_uniform = (abar @ expected @ abar.T).ravel()  # E[Abar R_hat Abar^T] (T^2,)
    average = _ControlledMean(tokens)
    while True:
        pairs = min(pairs, cap - average.units)
        unit = _unit_tokens(root, width, pairs, rng)  # (2 pairs, T, T')
        values, controls, norms = _attention_draws(unit, scale2 * math.sqrt(alpha_qk / head_dim), head_dim, causal,
                                                   rope, rng)
        controls[:, 0] -= expected_uniform
        total = np.square(unit.sum(axis=1)).sum(axis=1)  # (2 pairs,): |sum_t u_t|^2 = T + sum_{t != t'} r_hat_tt'
        cosine = (total - tokens) / max(tokens * (tokens - 1), 1) - expected_cosine
        drawn = np.column_stack([norms.mean(axis=2), cosine if tokens > 1 else np.zeros(2 * pairs)])  # (2 pairs, 3)
        average.add(0.5 * (values[:pairs] + values[pairs:]),  # (pairs, T^2): a pair is one unit
                    0.5 * (drawn[:pairs] + drawn[pairs:]),  # (pairs, 3)
                    0.5 * (controls[:pairs] + controls[pairs:]))  # (pairs, 3, T^2)
        sem = average.relative_sem()
        if sem <= target or average.units >= cap:
            value = scale2 * average.mean().reshape(tokens, tokens)
            value.flags.writeable = False
            return value, sem
        pairs = average.units  # double the draws


def clear_attention_cache() -> None:
    """Empty the cache of :func:`sampled_attention` (the next prediction draws its averages again, to the same numbers).

    >>> clear_attention_cache()
    """
    _cached_attention.cache_clear()


def attention_nodes(depth: int) -> np.ndarray:
    """Blocks at which the attention average is drawn: the powers of two up to ``depth``.

    >>> attention_nodes(12).tolist(), len(attention_nodes(10**6))
    ([1, 2, 4, 8], 20)
    """
    return 2 ** np.arange(int(math.log2(depth)) + 1, dtype=np.int64)


@dataclass
class FiniteWidth:
    """The finite-width law in a recursion: the width, the smoothed MLP kernel, the attention corrections.

    The attention average is drawn at the :func:`attention_nodes` only; a block between two nodes adds the
    last node's correction ``sampled - mean-field`` (per sublayer of the block) to the mean-field value at its
    own state. ``corrections`` maps ``(node, sublayer)`` to that ``T x T`` correction.
    """

    width: int
    head_dim: int
    nodes: np.ndarray
    kernel: KernelTable | None
    seed: int = ATTENTION_SEED  # the attention average's (with the node and the sublayer)
    corrections: dict = field(default_factory=dict)

    def mean_cosine(self, R: np.ndarray) -> float:
        """``token_cos``: the mean over pairs ``t != t'`` of ``E[r_hat_tt']`` at the stream's correlation ``R``."""
        off = ~np.eye(len(R), dtype=bool)
        return float(mean_sample_cosine(R[off], self.width).mean())

    def attention_correction(self, block: int, position: int, R: np.ndarray, meanfield: np.ndarray,
                             sample) -> np.ndarray:
        """The correction (T x T) at ``block``: ``sample(R, seed) - meanfield`` at the node, reused up to the next."""
        node = int(self.nodes[np.searchsorted(self.nodes, block, side="right") - 1])
        key = (node, position)
        if key not in self.corrections:
            self.corrections[key] = sample(R, (self.seed, node, position)) - meanfield
        return self.corrections[key]
