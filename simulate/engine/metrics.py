"""Per-layer metrics of the residual stream: the one place they are defined.

The stream x has shape (S, T, d) (samples, tokens, width). Each metric is a number
per sample, averaged over tokens; mean, sem and the 95% CI (mean +- 1.96 sem, :mod:`simulate.engine.tables`) are
over the S samples (``simulate.engine.tables.table_from_stats``). Layer 0 is the input (the stream
entering block 1, after the input norm under peri); layer l the stream after block l.

var           x.var(dim=-1) (unbiased, over features), mean over tokens.
var_attn      the same for the attention branch added in block l (after scaling,
var_mlp       masking and the aligned part); var_mlp also for the linear and MoE branch.
angular       arccos(cos(x_{l-1}[t], x_l[t]))/pi, mean over tokens (ShortGPT block influence).
jac_dev       sqrt(||(J_l - I) v||^2 / (T d)), v ~ N(0, I_{T d}) one fresh probe per
              sample and block over the whole stream (Hutchinson: its square estimates
              ||J_l - I||_F^2/(T d)); (J_l - I) v is the forward tangent of the branches,
              never a difference, except for blocks that normalise the sum (post, deepnorm)
              which have no identity path.
e2e_gain      ||(dx_l/dx_0) v|| / ||v||, one probe v ~ N(0, I_{T d}) carried from layer 0.
kurtosis      m4/m2^2 of the centred features of a token, mean over tokens (3 for Gaussian).
token_cos     mean cosine between distinct tokens x[t], x[t'] (t != t'), raw vectors;
              undefined (absent) when T = 1.
attn_entropy  entropy (nats) of an attention row, mean over heads and query tokens.

All statistics are computed in float64 and folded into a preallocated
(L+1, n_metrics+1, S) float64 tensor on the run's device as each layer is produced
(the extra row flags a finite stream); nothing else is kept per layer.

>>> import torch
>>> x = torch.randn(3, 5, 64, dtype=torch.float64)
>>> float(angular(x, x).abs().max()) < 1e-6, tuple(stream_var(x).shape)
(True, (3,))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

__all__ = ["METRICS", "BRANCH_METRICS", "SUBLAYER_METRICS", "Moments", "moments", "stream_var", "angular",
           "kurtosis", "token_cos", "norm_ratio", "rms_per_element", "StatsBuffer", "metrics_of_block",
           "parse_metrics"]

METRICS = ("var", "var_attn", "var_mlp", "angular", "jac_dev", "e2e_gain", "kurtosis", "token_cos",
           "attn_entropy")
BRANCH_METRICS = ("var_attn", "var_mlp")
# The metrics that exist only where a block has a sublayer of this kind (theory.architecture.SUBLAYERS):
# its branch variance, and the attention entropy of an attention sublayer.
SUBLAYER_METRICS = {"attention": ("var_attn", "attn_entropy"), "mlp": ("var_mlp",), "linear": ("var_mlp",),
                    "moe": ("var_mlp",)}


def metrics_of_block(block: str) -> tuple[str, ...]:
    """The metrics a ``block`` has, in METRICS order: the stream ones and those of its sublayers.

    >>> metrics_of_block("mlp")
    ('var', 'var_mlp', 'angular', 'jac_dev', 'e2e_gain', 'kurtosis', 'token_cos')
    >>> "attn_entropy" in metrics_of_block("attention"), "var_mlp" in metrics_of_block("attention")
    (True, False)
    """
    from theory.architecture import SUBLAYERS

    if block not in SUBLAYERS:
        raise ValueError(f"block={block!r} is not allowed: one of {', '.join(SUBLAYERS)}")
    owned = {m for kind in SUBLAYERS[block] for m in SUBLAYER_METRICS[kind]}
    every_sublayer = {m for names in SUBLAYER_METRICS.values() for m in names}
    return tuple(m for m in METRICS if m in owned or m not in every_sublayer)


def parse_metrics(metrics, block: str | None = None) -> tuple[str, ...]:
    """Validate a metric list ('all', a comma-separated string or names) into METRICS order.

    With ``block``, 'all' means every metric of that block (:func:`metrics_of_block`) and a
    metric the block does not have (``var_attn`` of an ``mlp`` block) is a ValueError naming
    the metric, the block and the metrics it has.

    >>> parse_metrics("jac_dev,var")
    ('var', 'jac_dev')
    >>> parse_metrics("all", "attention")[-2:]
    ('token_cos', 'attn_entropy')
    >>> parse_metrics("var_attn", "mlp")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: metrics='var_attn' is not allowed for block='mlp' (its sublayers: mlp): names from var, var_mlp, ...
    """
    if isinstance(metrics, str):
        metrics = "all" if metrics.strip() == "all" else [m.strip() for m in metrics.split(",") if m.strip()]
    allowed = METRICS if block is None else metrics_of_block(block)
    names = allowed if metrics == "all" else tuple(metrics)
    unknown = [m for m in names if m not in METRICS]
    if unknown or not names:
        raise ValueError(f"metrics={unknown[0] if unknown else ''!r} is not allowed: "
                         f"names from {', '.join(METRICS)} or 'all'")
    absent = [m for m in names if m not in allowed]
    if absent:
        from theory.architecture import SUBLAYERS

        raise ValueError(f"metrics={absent[0]!r} is not allowed for block={block!r} (its sublayers: "
                         f"{', '.join(SUBLAYERS[block])}): names from {', '.join(allowed)} or 'all'")
    return tuple(m for m in METRICS if m in names)


class Moments(NamedTuple):
    """A stream (S, T, d) in float64 with its per-token feature sums (S, T) and sums of squares (S, T)."""

    x: torch.Tensor
    s1: torch.Tensor
    s2: torch.Tensor

    @property
    def var(self) -> torch.Tensor:
        """Unbiased variance over features, mean over tokens: (S,). (s2 - s1^2/d)/(d - 1) in float64.

        Non-finite exactly when some entry of the stream is (float64 sums of float32 squares
        cannot overflow), so it doubles as the finiteness flag.
        """
        width = self.x.shape[-1]
        return ((self.s2 - self.s1 * self.s1 / width) / (width - 1)).mean(-1)  # (S,)


def moments(x: torch.Tensor) -> Moments:
    """Cast once to float64 and take the two per-token feature sums: (S, T, d) -> :class:`Moments`.

    Three cheap reductions instead of ``var`` (whose two-pass float64 kernel cost ~7x more
    here); the one-pass formula loses accuracy only when the per-token mean exceeds ~1e6
    standard deviations, which a zero-mean random stack never approaches.
    """
    xd = x.double()  # (S, T, d)
    return Moments(xd, xd.sum(-1), torch.linalg.vector_norm(xd, dim=-1).square())  # (S, T) each


def stream_var(x: torch.Tensor) -> torch.Tensor:
    """Unbiased variance over features, mean over tokens: (S, T, d) -> (S,)."""
    return moments(x).var  # (S,)


def angular(previous: torch.Tensor | Moments, current: torch.Tensor | Moments) -> torch.Tensor:
    """arccos(cosine of x_{l-1}[t] and x_l[t])/pi, mean over tokens: (S, T, d) x2 -> (S,).

    Accepts :class:`Moments` (reusing their float64 copies and squared norms). The dot
    products are exact float64 products of the stored values; norms are clamped at
    1e-8 as ``torch.nn.functional.cosine_similarity`` does.
    """
    a = previous if isinstance(previous, Moments) else moments(previous)
    b = current if isinstance(current, Moments) else moments(current)
    dot = torch.linalg.vecdot(a.x, b.x)  # (S, T)
    norms = a.s2.sqrt().clamp_min(1e-8) * b.s2.sqrt().clamp_min(1e-8)  # (S, T)
    return (torch.arccos((dot / norms).clamp(-1.0, 1.0)) / math.pi).mean(-1)  # (S,)


def kurtosis(x: torch.Tensor) -> torch.Tensor:
    """m4/m2^2 of the centred features, mean over tokens: (S, T, d) -> (S,)."""
    centred = x.double() - x.double().mean(-1, keepdim=True)  # (S, T, d)
    m2 = centred.pow(2).mean(-1)  # (S, T)
    return (centred.pow(4).mean(-1) / m2.pow(2)).mean(-1)  # (S,)


def token_cos(x: torch.Tensor) -> torch.Tensor:
    """Mean cosine over ordered pairs t != t' of tokens: (S, T, d) -> (S,), via ||sum unit||^2 = T + sum_{t!=t'} cos."""
    tokens = x.shape[1]
    unit = torch.nn.functional.normalize(x.double(), dim=-1)  # (S, T, d)
    total = unit.sum(1).pow(2).sum(-1)  # (S,)
    return (total - tokens) / (tokens * (tokens - 1))  # (S,)


def rms_per_element(x: torch.Tensor) -> torch.Tensor:
    """sqrt(||x||^2 / (T d)) per sample: (S, T, d) -> (S,). jac_dev of a deviation tangent (J - I) v."""
    return x.double().pow(2).mean((-1, -2)).sqrt()  # (S,)


def norm_ratio(tangent: torch.Tensor, probe_norm: torch.Tensor) -> torch.Tensor:
    """||tangent|| / ||v|| per sample: (S, T, d), (S,) -> (S,). e2e_gain."""
    return tangent.double().pow(2).sum((-1, -2)).sqrt() / probe_norm  # (S,)


class StatsBuffer:
    """Per-layer, per-sample statistics in one preallocated float64 device tensor.

    ``values`` has shape (L+1, n_metrics+1, S) filled with NaN; row ``n_metrics``
    holds 1.0 where the sample's stream was finite at that layer. ``put`` writes
    without a host sync; ``first_bad_layer`` syncs once per call.
    """

    def __init__(self, depth: int, metrics: tuple[str, ...], samples: int, device: torch.device):
        self.metrics = metrics
        self.index = {name: i for i, name in enumerate(metrics)}
        self.values = torch.full((depth + 1, len(metrics) + 1, samples), math.nan,
                                 dtype=torch.float64, device=device)  # (L+1, M+1, S)

    def wants(self, name: str) -> bool:
        return name in self.index

    def put(self, layer: int, name: str, per_sample: torch.Tensor) -> None:
        """Store a (S,) metric of ``layer`` if ``name`` was asked for."""
        if name in self.index:
            self.values[layer, self.index[name]] = per_sample

    def put_finite(self, layer: int, stream: torch.Tensor) -> None:
        """Flag whether each sample's stream (S, T, d) is finite at ``layer``.

        ``stream`` may also be a per-sample statistic (S,) that is finite exactly when the
        sample's stream is (e.g. :attr:`Moments.var`): no extra pass over the stream.
        """
        finite = torch.isfinite(stream)  # (S, ...) like stream
        self.values[layer, -1] = (finite.flatten(1).all(-1) if stream.dim() > 1 else finite).double()  # (S,)

    def first_bad_layer(self, start: int, stop: int) -> int | None:
        """First layer in [start, stop) whose stream is not finite for some sample, else None."""
        flags = self.values[start:stop, -1]  # (n, S)
        bad = (flags != 1.0).any(-1).nonzero()
        return None if bad.numel() == 0 else start + int(bad[0, 0])

    def to_numpy(self, upto: int):
        """(upto, M, S) float64 numpy array of the metrics of layers 0..upto-1."""
        return self.values[:upto, :-1].cpu().numpy()
