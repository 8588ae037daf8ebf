"""Sublayers in forward-mode ("dual") form: a primal stream and its tangents together.

A dual tensor has shape ``(C, S, T, d)``: channel 0 is the primal stream, channels
1..C-1 are tangents (Jacobian probes) pushed forward by the same map. Linear maps act
on every channel alike (so each weight meets primal and tangent rows in one call and
the implicit Gaussian product keeps their joint law exact); each nonlinearity applies
its derivative at the primal to the tangents. Nothing here forms a Jacobian.

Sublayers (docs/design.md#schemes; all weights N(0, std^2), no biases):
linear ``h W``; MLP ``act(h W1) W2`` or SwiGLU ``(silu(h W1) * h W3) W2``;
attention (MHA/GQA/MQA, RoPE, causal, softmax(q k^T/sqrt(head_dim)), W_O);
MoE (router ``h W_r``, top-k, softmax or uniform gates, optional shared expert).

>>> import torch
>>> h = torch.randn(2, 1, 3, 8, dtype=torch.float64)  # (C, S, T, d)
>>> out = norm(h, "rmsnorm")
>>> bool(torch.allclose(out[0].pow(2).mean(-1), torch.ones(1, 3, dtype=torch.float64)))
True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from simulate.engine.weights import PART, WeightSampler, expert_part
from theory import architecture

__all__ = ["Ctx", "linear", "linears", "norm", "rms_direction", "activation", "rope", "attention", "mlp", "moe",
           "linear_sublayer", "SUBLAYERS"]


@dataclass
class Ctx:
    """What a sublayer needs: the sampler, the block index, the setting, the weight stds.

    ``std(role)`` gives the std of weight ``role`` ('q', 'k', 'v', 'o', 'up', 'gate',
    'down', 'router', 'linear') in this block, scheme factors included.
    """

    sampler: WeightSampler
    layer: int
    setting: object
    std: Callable[[str], float]
    want_entropy: bool = False
    entropy: torch.Tensor | None = None  # (S,) mean attention entropy, set by attention


def linears(x: torch.Tensor, ctx: Ctx, parts, d_outs, roles) -> tuple[torch.Tensor, ...]:
    """Independent Gaussian weights ``(ctx.layer, part)`` on the same rows, every channel:
    (C, S, T, d) -> ((C, S, T, d_out_i), ...). One factorisation serves them all (implicit mode)."""
    channels, samples, tokens, d_in = x.shape
    rows = x.permute(1, 0, 2, 3).reshape(samples, channels * tokens, d_in)  # (S, C*T, d)
    outs = ctx.sampler.apply_many(rows, [(ctx.layer, part) for part in parts], d_outs,
                                  [ctx.std(role) for role in roles])  # (S, C*T, d_out_i) each
    return tuple(out.reshape(samples, channels, tokens, out.shape[-1]).permute(1, 0, 2, 3)
                 for out in outs)  # (C, S, T, d_out_i) each


def linear(x: torch.Tensor, ctx: Ctx, part: int, d_out: int, role: str) -> torch.Tensor:
    """Apply the Gaussian weight ``(ctx.layer, part)`` to every channel: (C, S, T, d) -> (C, S, T, d_out)."""
    return linears(x, ctx, (part,), (d_out,), (role,))[0]


def norm(x: torch.Tensor, kind: str) -> torch.Tensor:
    """RMSNorm or LayerNorm over features, no learnable parameters, no epsilon.

    rmsnorm: h = x/r, r = sqrt(mean x^2), tangent (dx - h mean(h dx))/r.
    layernorm: c = x - mean x, h = c/sd (biased sd), tangent (dc - h mean(h dc))/sd.
    """
    primal = x[0]  # (S, T, d)
    if kind == "layernorm":
        primal = primal - primal.mean(-1, keepdim=True)  # (S, T, d)
    scale = primal.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(torch.finfo(x.dtype).tiny)  # (S, T, 1)
    h = primal / scale  # (S, T, d)
    if x.shape[0] == 1:
        return h.unsqueeze(0)
    tangent = x[1:]  # (C-1, S, T, d)
    if kind == "layernorm":
        tangent = tangent - tangent.mean(-1, keepdim=True)
    tangent = (tangent - h * (h * tangent).mean(-1, keepdim=True)) / scale  # (C-1, S, T, d)
    return torch.cat([h.unsqueeze(0), tangent], 0)  # (C, S, T, d)


def rms_direction(x: torch.Tensor) -> torch.Tensor:
    """x / rms(x) per token (the aligned direction, docs/derivations.md#bridge-aligned): RMSNorm of the stream."""
    return norm(x, "rmsnorm")


# The MLP activations by Setting name (SwiGLU's silu gate is "silu"); the trainer and the naive reference use it too.
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


def _act_derivative(z: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "relu":
        return (z > 0).to(z.dtype)
    if kind == "silu":
        sig = torch.sigmoid(z)
        return sig * (1 + z * (1 - sig))
    if kind == "gelu":  # exact (erf) GELU: Phi(z) + z phi(z)
        return 0.5 * (1 + torch.erf(z / math.sqrt(2))) + z * torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    raise ValueError(f"activation {kind!r}")


def activation(z: torch.Tensor, kind: str) -> torch.Tensor:
    """Element-wise act on the primal, act'(primal) * tangent on the tangents."""
    out = ACTIVATIONS[kind](z[0]).unsqueeze(0)  # (1, S, T, n)
    if z.shape[0] == 1:
        return out
    return torch.cat([out, _act_derivative(z[0], kind) * z[1:]], 0)  # (C, S, T, n)


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Dual product a*b: primal a0 b0, tangents a' b0 + a0 b'."""
    primal = (a[0] * b[0]).unsqueeze(0)
    if a.shape[0] == 1:
        return primal
    return torch.cat([primal, a[1:] * b[0] + a[0] * b[1:]], 0)


@functools.lru_cache(maxsize=16)
def _rope_tables(tokens: int, half: int, base: float, device: torch.device, dtype: torch.dtype):
    """cos and sin of the RoPE angles t * base^(-i/half), each (T, half), cached per (T, hd, dtype, device)."""
    freq = base ** (-torch.arange(half, device=device, dtype=torch.float64) / half)  # (hd/2,)
    angle = torch.arange(tokens, device=device, dtype=torch.float64)[:, None] * freq  # (T, hd/2)
    return angle.cos().to(dtype), angle.sin().to(dtype)


def rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary embedding, LLaMA 'rotate half' convention, on (C, S, heads, T, hd) (linear: all channels).

    out = [x1 cos - x2 sin, x2 cos + x1 sin] for the halves x1, x2 of each head: two
    passes over x (no rotated copy), into a fresh contiguous tensor.
    """
    tokens, half = x.shape[-2], x.shape[-1] // 2
    cos, sin = _rope_tables(tokens, half, base, x.device, x.dtype)  # (T, hd/2) each
    first, second = x[..., :half], x[..., half:]  # (C, S, heads, T, hd/2) each
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # (C, S, heads, T, hd)
    torch.mul(first, cos, out=out[..., :half]).addcmul_(second, sin, value=-1)
    torch.mul(second, cos, out=out[..., half:]).addcmul_(first, sin)
    return out


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    channels, samples, tokens, width = x.shape
    return x.reshape(channels, samples, tokens, heads, width // heads).transpose(2, 3)  # (C, S, heads, T, hd)


def _dual_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: Ctx) -> torch.Tensor:
    """Softmax attention with tangents, (C, S, H, T, hd) each -> (C, S, H, T, hd); the entropy into ctx."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q[0] @ k[0].transpose(-1, -2) * scale  # (S, H, T, T)
    tokens = q.shape[-2]
    if ctx.setting.causal:
        future = torch.ones(tokens, tokens, dtype=torch.bool, device=q.device).triu(1)  # (T, T)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (S, H, T, T)
    if ctx.want_entropy:
        ctx.entropy = torch.special.entr(weights.double()).sum(-1).mean((-1, -2))  # (S,)
    out = (weights @ v[0]).unsqueeze(0)  # (1, S, H, T, hd)
    if q.shape[0] > 1:
        d_scores = (q[1:] @ k[0].transpose(-1, -2) + q[0] @ k[1:].transpose(-1, -2)) * scale  # (C-1, S, H, T, T)
        d_weights = weights * (d_scores - (weights * d_scores).sum(-1, keepdim=True))  # (C-1, S, H, T, T)
        out = torch.cat([out, d_weights @ v[0] + weights @ v[1:]], 0)  # (C, S, H, T, hd)
    return out


def attention(h: torch.Tensor, ctx: Ctx) -> torch.Tensor:
    """Softmax attention sublayer on a dual input (C, S, T, d) -> (C, S, T, d).

    Tangent of the scores ds = (dq k^T + q dk^T)/sqrt(hd); of the rows
    da = a*(ds - sum(a ds)); of the output da v + a dv. Heads share a key-value head
    in consecutive groups of G = heads/kv_heads (GQA; MQA when kv_heads = 1).
    """
    setting = ctx.setting
    heads, kv_heads, head_dim = setting.heads, setting.resolved_kv_heads, setting.head_dim
    q, k, v = linears(h, ctx, (PART["q"], PART["k"], PART["v"]),
                      (heads * head_dim, kv_heads * head_dim, kv_heads * head_dim), ("q", "k", "v"))
    q = _heads(q, heads)  # (C, S, H, T, hd)
    k, v = _heads(k, kv_heads), _heads(v, kv_heads)  # (C, S, Hkv, T, hd) each
    if setting.rope:
        q, k = rope(q), rope(k)
    group = heads // kv_heads
    if h.shape[0] == 1 and not ctx.want_entropy:  # primal only: one fused kernel, no (T, T) weights kept
        out = F.scaled_dot_product_attention(q[0], k[0], v[0], is_causal=setting.causal,
                                             enable_gqa=group > 1).unsqueeze(0)  # (1, S, H, T, hd)
    else:
        if group > 1:
            k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)  # (C, S, H, T, hd)
        out = _dual_attention(q, k, v, ctx)  # (C, S, H, T, hd)
    merged = out.transpose(2, 3).reshape(h.shape[0], h.shape[1], h.shape[2], heads * head_dim)  # (C, S, T, d)
    return linear(merged, ctx, PART["o"], setting.width, "o")


def _mlp_parts(h: torch.Tensor, ctx: Ctx, parts: tuple[int, int, int]) -> torch.Tensor:
    """act(h W1) W2 or (silu(h W1) * h W3) W2 with the weights of ``parts`` (up, gate, down)."""
    setting = ctx.setting
    d_ff = setting.resolved_ffn_width
    if setting.activation == "swiglu":
        up, gate = linears(h, ctx, parts[:2], (d_ff, d_ff), ("up", "gate"))  # (C, S, T, d_ff) each
        if up.shape[0] == 1:  # no tangents: in place on the fresh products (no new d_ff-wide buffers)
            hidden = F.silu(up, inplace=True).mul_(gate)  # (1, S, T, d_ff)
        else:
            hidden = _product(activation(up, "silu"), gate)  # (C, S, T, d_ff)
    else:
        hidden = activation(linear(h, ctx, parts[0], d_ff, "up"), setting.activation)  # (C, S, T, d_ff)
    return linear(hidden, ctx, parts[2], setting.width, "down")  # (C, S, T, d)


def mlp(h: torch.Tensor, ctx: Ctx) -> torch.Tensor:
    """Dense MLP sublayer (C, S, T, d) -> (C, S, T, d)."""
    return _mlp_parts(h, ctx, (PART["up"], PART["gate"], PART["down"]))


def _gates(logits: torch.Tensor, top_k: int, uniform: bool) -> torch.Tensor:
    """Dense (C, S, T, E) gates: softmax (or 1/k) over the top-k primal logits, 0 elsewhere."""
    top = logits[0].topk(top_k, dim=-1).indices  # (S, T, k)
    chosen = torch.zeros_like(logits[0], dtype=torch.bool).scatter_(-1, top, True)  # (S, T, E)
    if uniform:
        gates = chosen.to(logits.dtype) / top_k  # (S, T, E)
        return torch.cat([gates.unsqueeze(0), torch.zeros_like(logits[1:])], 0)
    gates = torch.softmax(logits[0].masked_fill(~chosen, float("-inf")), dim=-1)  # (S, T, E)
    d_logits = logits[1:]  # (C-1, S, T, E)
    d_gates = gates * (d_logits - (gates * d_logits).sum(-1, keepdim=True))  # zero off the top-k
    return torch.cat([gates.unsqueeze(0), d_gates], 0)  # (C, S, T, E)


def moe(h: torch.Tensor, ctx: Ctx) -> torch.Tensor:
    """Top-k MoE sublayer: sum_e gate_e * expert_e(h) (+ shared expert); every expert sees every token.

    Gates are piecewise smooth in h: the top-k choice is that of the primal.
    """
    setting = ctx.setting
    logits = linear(h, ctx, PART["router"], setting.experts, "router")  # (C, S, T, E)
    gates = _gates(logits, setting.top_k, setting.uniform_gates)  # (C, S, T, E)
    total = torch.zeros_like(h)  # (C, S, T, d)
    for expert in range(setting.experts):
        parts = tuple(expert_part(expert, role) for role in ("up", "gate", "down"))
        total = total + _product(gates[..., expert:expert + 1], _mlp_parts(h, ctx, parts))
    if setting.shared_expert:
        total = total + _mlp_parts(h, ctx, (PART["shared_up"], PART["shared_gate"], PART["shared_down"]))
    return total


def linear_sublayer(h: torch.Tensor, ctx: Ctx) -> torch.Tensor:
    """The linear block's map h W (d x d), P2 Theorem 1."""
    return linear(h, ctx, PART["linear"], ctx.setting.width, "linear")


# Block -> its sublayers in order, as (name of the variance metric, function).
_SUBLAYER_FUNCTIONS = {"linear": ("var_mlp", linear_sublayer), "mlp": ("var_mlp", mlp),
                       "attention": ("var_attn", attention), "moe": ("var_mlp", moe)}
# block -> ((branch metric, sublayer function), ...) in the order of the spec (theory.architecture)
SUBLAYERS = {block: tuple(_SUBLAYER_FUNCTIONS[kind] for kind in kinds) for block, kinds in architecture.SUBLAYERS.items()}
