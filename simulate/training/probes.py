"""Per-layer statistics of a model in training: the simulator's metrics, JVP probes, norms, aligned strengths.

On a batch of sequences (the fixed held-out probe batch, or the training batch where
cheap), with the definitions of :mod:`simulate.engine.metrics` (one number per sequence; mean,
sem and CI over the sequences by :func:`simulate.engine.tables.table_from_stats`). Layer 0 is
the stream entering block 1 (the embedding output), layer ``l`` the raw stream after
block ``l``, never after the final norm.

=========  ==================================================================
var...     ``var``, ``var_attn``, ``var_mlp`` (each branch before the residual
           add), ``angular``, ``kurtosis``, ``token_cos``: as the simulator's
jac_dev    ``||(J_l - I) v|| / sqrt(T d)``, one fresh probe ``v ~ N(0, I)`` per
           sequence and block (``torch.func.jvp`` of the block's increment)
e2e_gain   ``||(dx_l/dx_0) v|| / ||v||``, one probe per sequence from layer 0
           (both in one ``vmap``-ed JVP per block, :func:`jacobian_statistics`)
align_a,   the aligned strength of block ``l``'s increment on the stream and the
align_b    rest (:mod:`theory.meanfield.bridge`), per-sequence delta-method
           pseudo-values whose mean is the pooled estimate
grad_norm  ``||grad||`` of block ``l``'s parameters (layer 0: the embedding), one
param_norm value per layer (n = 1, no sem)
=========  ==================================================================

Probe random numbers come from generators keyed by ``(seed, step)``
(:func:`simulate.training.data.step_generator`), so a resumed run measures the same.

>>> from theory.setting import Setting
>>> from simulate.training.model import CausalLM
>>> model = CausalLM(Setting.preset("llama", depth=2, width=16, heads=2, tokens=8), seed=0)
>>> result = probe(model, torch.zeros(3, 8, dtype=torch.long), torch.zeros(3, 8, dtype=torch.long), seed=0, step=0)
>>> sorted(result.table.metric.unique()) == sorted(PROBE_METRICS), int(result.table.n.max())
(True, 3)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.func import jvp, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from simulate.engine import (angular, kurtosis, moments, norm_ratio, rms_per_element, stream_var, table_from_stats,
                             token_cos)
from simulate.training.data import step_generator
from simulate.training.model import CausalLM, ModelOutput, block_groups
from theory.meanfield.bridge import aligned_pseudo_values

__all__ = ["PROBE_METRICS", "BATCH_METRICS", "NORM_METRICS", "LAYER_METRICS", "StreamMoments", "ProbeResult",
           "trace_statistics", "jacobian_statistics", "probe", "norms_table", "lm_loss"]

BATCH_METRICS = ("var", "var_attn", "var_mlp", "angular", "kurtosis", "token_cos", "align_a", "align_b")
PROBE_METRICS = BATCH_METRICS[:4] + ("jac_dev", "e2e_gain") + BATCH_METRICS[4:]
NORM_METRICS = ("grad_norm", "param_norm")
LAYER_METRICS = PROBE_METRICS + NORM_METRICS


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Token-mean next-byte cross-entropy (nats): (B, T, 256), (B, T) -> ()."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


@dataclass
class StreamMoments:
    """Per-sequence token means (numpy, (L+1, S)) behind the bridge (:mod:`theory.meanfield.bridge`).

    ``mean_square[l]`` = ``||h_l||^2/d``; ``feature_mean_sq[l]`` = ``xbar^2`` (a token's
    feature mean, squared); ``cross[l]`` = ``<f_l, h_{l-1}>/d`` and ``branch_ms[l]`` =
    ``||f_l||^2/d`` for the increment ``f_l = h_l - h_{l-1}`` (row 0: NaN).
    """

    mean_square: np.ndarray
    feature_mean_sq: np.ndarray
    cross: np.ndarray
    branch_ms: np.ndarray
    width: int


def _stream_moments(hidden: list[torch.Tensor]) -> StreamMoments:
    streams = [h.detach().double() for h in hidden]  # L+1 x (S, T, d)
    nan = np.full(streams[0].shape[0], np.nan)
    mean_square = [h.pow(2).mean(-1).mean(-1) for h in streams]  # (S,) each
    feature_mean_sq = [h.mean(-1).pow(2).mean(-1) for h in streams]
    cross, branch_ms = [nan], [nan]
    for previous, current in zip(streams[:-1], streams[1:]):
        increment = current - previous  # (S, T, d)
        cross.append((increment * previous).mean(-1).mean(-1).cpu().numpy())
        branch_ms.append(increment.pow(2).mean(-1).mean(-1).cpu().numpy())
    as_array = lambda rows: np.stack([np.asarray(r.cpu() if torch.is_tensor(r) else r) for r in rows])  # noqa: E731
    return StreamMoments(as_array(mean_square), as_array(feature_mean_sq), np.stack(cross), np.stack(branch_ms),
                         streams[0].shape[-1])


def trace_statistics(output: ModelOutput, metrics=BATCH_METRICS) -> tuple[np.ndarray, StreamMoments]:
    """Per-sequence values (L+1, len(metrics), S) of a ``collect=True`` forward, and its moments.

    Entries a layer does not have (branch metrics and ``angular`` at layer 0, ``var_attn``
    in blocks without attention) stay NaN, so the table leaves them out.
    """
    hidden = [h.detach() for h in output.hidden]  # L+1 x (S, T, d)
    index = {name: i for i, name in enumerate(metrics)}
    values = np.full((len(hidden), len(metrics), hidden[0].shape[0]), np.nan)  # (L+1, M, S)

    def put(layer: int, name: str, per_sequence) -> None:
        if name in index:
            values[layer, index[name]] = per_sequence.cpu().numpy() if torch.is_tensor(per_sequence) else per_sequence

    previous = None
    for layer, h in enumerate(hidden):
        current = moments(h)
        put(layer, "var", current.var)
        put(layer, "kurtosis", kurtosis(h))
        if h.shape[1] > 1:
            put(layer, "token_cos", token_cos(h))
        if previous is not None:
            put(layer, "angular", angular(previous, current))
        for name, branch in output.branches[layer].items():
            put(layer, name, stream_var(branch.detach()))
        previous = current
    stream = _stream_moments(hidden)
    a_s, b_s = aligned_pseudo_values(stream.mean_square[:-1], stream.cross[1:], stream.branch_ms[1:])  # (L, S) each
    put_rows = {"align_a": a_s, "align_b": b_s}
    for name, rows in put_rows.items():
        if name in index:
            values[1:, index[name]] = rows
    return values, stream


def jacobian_statistics(model: CausalLM, hidden: list[torch.Tensor], seed: int, step: int):
    """``jac_dev`` and ``e2e_gain`` per layer and sequence, (L+1, S) numpy each.

    One pass over the blocks: at block ``l`` the two tangents (the end-to-end probe carried
    from layer 0, and a fresh probe ``v_l``) are pushed through ``block.deviation`` at the
    measured input ``h_{l-1}`` by one ``vmap``-ed ``torch.func.jvp`` (the primal computed
    once). ``(J_l - I) v_l`` is the second tangent; the first becomes ``t + (J_l - I) t`` =
    ``J_l t``. Attention runs on the math kernel (the fused ones have no forward mode).
    """
    hidden = [h.detach() for h in hidden]  # L+1 x (S, T, d)
    jac_gen, e2e_gen = step_generator(seed, step, "jac_probe"), step_generator(seed, step, "e2e_probe")
    shape, device, dtype = hidden[0].shape, hidden[0].device, hidden[0].dtype
    jac = np.full((len(hidden), shape[0]), np.nan)  # (L+1, S)
    e2e = np.full((len(hidden), shape[0]), np.nan)
    carried = torch.randn(shape, generator=e2e_gen).to(device, dtype)  # (S, T, d)
    probe_norm = carried.double().pow(2).sum((-1, -2)).sqrt()  # (S,)
    e2e[0] = 1.0
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), warnings.catch_warnings():
        # torch's first forward-mode AD call scripts its decompositions with the deprecated torch.jit
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=DeprecationWarning)
        for layer, block in enumerate(model.blocks, start=1):
            fresh = torch.randn(shape, generator=jac_gen).to(device, dtype)  # (S, T, d) v_l

            def deviation_tangent(tangent, block=block, primal=hidden[layer - 1]):
                return jvp(block.deviation, (primal,), (tangent,))[1]

            moved = vmap(deviation_tangent)(torch.stack([carried, fresh]))  # (2, S, T, d)
            jac[layer] = rms_per_element(moved[1]).cpu().numpy()
            carried = carried + moved[0]  # J_l t
            e2e[layer] = norm_ratio(carried, probe_norm).cpu().numpy()
    return jac, e2e


@dataclass
class ProbeResult:
    """One probe: the per-layer table, the loss of the probe batch and the bridge moments."""

    table: pd.DataFrame
    loss: float
    moments: StreamMoments


def probe(model: CausalLM, tokens: torch.Tensor, targets: torch.Tensor, seed: int, step: int,
          jacobian: bool = True) -> ProbeResult:
    """Every metric of :data:`PROBE_METRICS` on the batch ``tokens`` (S, T) in float32, no gradients."""
    with torch.no_grad():
        output = model(tokens, collect=True)
        loss = float(lm_loss(output.logits, targets))
    values, stream = trace_statistics(output, BATCH_METRICS)  # (L+1, M, S)
    names = BATCH_METRICS
    if jacobian:
        jac, e2e = jacobian_statistics(model, output.hidden, seed, step)
        values = np.concatenate([values, jac[:, None], e2e[:, None]], 1)  # (L+1, M+2, S)
        names = BATCH_METRICS + ("jac_dev", "e2e_gain")
    order = [names.index(m) for m in PROBE_METRICS if m in names]
    return ProbeResult(table_from_stats(values[:, order], tuple(names[i] for i in order)), loss, stream)


def norms_table(model: CausalLM, gradients: bool = True) -> pd.DataFrame:
    """``grad_norm`` (of the current ``.grad``, before clipping) and ``param_norm`` per layer (n = 1)."""
    groups = block_groups(model)
    values = np.full((len(groups), 2, 1), np.nan)  # (L+1, 2, 1)
    with torch.no_grad():
        for layer, group in enumerate(groups):
            values[layer, 1, 0] = float(torch.sqrt(sum(p.double().pow(2).sum() for _, p in group)))
            if gradients:
                squares = [p.grad.double().pow(2).sum() for _, p in group if p.grad is not None]
                values[layer, 0, 0] = float(torch.sqrt(sum(squares))) if squares else 0.0
    return table_from_stats(values, NORM_METRICS)
