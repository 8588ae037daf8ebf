"""The trained probe's model: a byte-level causal LM whose stack of blocks is the Setting.

Vocabulary 256 (bytes): embedding (init N(0, input_std^2)), the Setting's blocks, a final
norm and an output head (init N(0, init_std^2), untied). Every block is wired by
:func:`theory.architecture.placement` and its weights drawn with
:func:`theory.architecture.weight_std` for each role of :data:`theory.architecture.ROLES`;
nothing here re-encodes a scheme. The conventions are those of the simulator
(``simulate/engine/blocks.py``, ``simulate/engine/stack.py``) so that at step 0 the two agree in law:
weights ``W`` (``d_in x d_out``) applied as ``x W``; SwiGLU ``(silu(h W_up) * h W_gate) W_down``;
RoPE 'rotate half' with base 10^4; GQA heads in consecutive groups; MoE gates a softmax
over the top-k router logits (or 1/k), every expert dense; one Bernoulli(rho) feature mask
per block (a buffer) on each of its branches, after the branch scale; the planted aligned
part ``alignment * x/rms(x)`` added to each branch. Trained-model choices (as LLaMA):
learnable norm gains (init 1, epsilon :data:`NORM_EPS`, LayerNorm without bias),
learnable per-channel branch gains wherever the placement's branch scale is not 1
(layerscale, skipinit), fused ``F.scaled_dot_product_attention``.

>>> from theory.setting import Setting
>>> model = CausalLM(Setting.preset("llama", depth=2, width=16, heads=2, tokens=8), seed=0)
>>> out = model(torch.zeros(3, 8, dtype=torch.long), collect=True)
>>> tuple(out.logits.shape), len(out.hidden), tuple(out.hidden[0].shape), sorted(out.branches[1])
((3, 8, 256), 3, (3, 8, 16), ['var_attn', 'var_mlp'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from simulate.engine import ACTIVATIONS
from theory import architecture

__all__ = ["VOCAB", "NORM_EPS", "BRANCH_METRIC", "Norm", "Attention", "MLP", "MoE", "Residual", "Block",
           "CausalLM", "ModelOutput", "block_groups"]

VOCAB = 256  # bytes
NORM_EPS = 1e-6
# The per-layer metric of each sublayer kind's branch (as the simulator names it).
BRANCH_METRIC = {"attention": "var_attn", "mlp": "var_mlp", "linear": "var_mlp", "moe": "var_mlp"}


def _weight(d_in: int, d_out: int, std: float, generator: torch.Generator) -> nn.Parameter:
    """A (d_out, d_in) nn.Linear-layout weight with N(0, std^2) entries (so ``x W^T`` = the simulator's ``x W``)."""
    return nn.Parameter(torch.randn(d_out, d_in, generator=generator) * std)


class Norm(nn.Module):
    """RMSNorm or LayerNorm over features with a learnable gain (init 1), no bias."""

    def __init__(self, kind: str, width: int):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "layernorm":
            return F.layer_norm(x, x.shape[-1:], self.weight, None, NORM_EPS)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.weight  # (B, T, d)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """LLaMA 'rotate half' on (B, T, heads, hd): [x1 cos - x2 sin, x2 cos + x1 sin] (simulate.engine.blocks.rope),
    computed as ``x cos + [-x2, x1] sin`` with ``cos``, ``sin`` (T, 1, hd) repeated over the two halves: the same
    floats in half the products."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)  # (B, T, heads, hd)
    return x * cos + rotated * sin


class Attention(nn.Module):
    """Causal softmax attention with RoPE and GQA/MQA: (B, T, d) -> (B, T, d).

    The three projections run as one product with the stacked weights ``[W_q; W_k; W_v]``, and
    RoPE turns the query and key heads in one call, before they are transposed: at d=64, L=16
    on the CPU, where a step is bound by the number of calls, a training step 5 % faster than
    three products and two RoPE calls (at d=128 the same within 1 %); the parameters stay three.
    """

    def __init__(self, setting, layer: int, generator: torch.Generator):
        super().__init__()
        d, hd = setting.width, setting.head_dim
        self.heads, self.kv_heads, self.head_dim = setting.heads, setting.resolved_kv_heads, hd
        self.causal, self.use_rope = setting.causal, setting.rope
        std = lambda role: architecture.weight_std(setting, layer, role)  # noqa: E731
        self.q = _weight(d, self.heads * hd, std("q"), generator)
        self.k = _weight(d, self.kv_heads * hd, std("k"), generator)
        self.v = _weight(d, self.kv_heads * hd, std("v"), generator)
        self.o = _weight(self.heads * hd, d, std("o"), generator)
        half = hd // 2
        freq = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)  # (hd/2,)
        angle = torch.arange(setting.tokens, dtype=torch.float64)[:, None] * freq  # (T, hd/2)
        angle = torch.cat([angle, angle], -1)  # (T, hd): both halves turn by the same angle
        self.register_buffer("cos", angle.cos().float()[:, None], persistent=False)  # (T, 1, hd)
        self.register_buffer("sin", angle.sin().float()[:, None], persistent=False)  # (T, 1, hd)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = h.shape
        query_key = self.heads + self.kv_heads
        qkv = F.linear(h, torch.cat([self.q, self.k, self.v]))  # (B, T, (H + 2 Hkv) hd)
        qkv = qkv.view(batch, tokens, query_key + self.kv_heads, self.head_dim)  # (B, T, H + 2 Hkv, hd)
        qk, v = qkv.split([query_key, self.kv_heads], 2)  # (B, T, H + Hkv, hd), (B, T, Hkv, hd)
        if self.use_rope:
            qk = _rope(qk, self.cos[:tokens].to(qk.dtype), self.sin[:tokens].to(qk.dtype))
        q, k = (part.transpose(1, 2) for part in qk.split([self.heads, self.kv_heads], 2))  # (B, H|Hkv, T, hd)
        out = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=self.causal,
                                             enable_gqa=self.heads != self.kv_heads)  # (B, H, T, hd)
        return F.linear(out.transpose(1, 2).reshape(batch, tokens, self.heads * self.head_dim), self.o)  # (B, T, d)


class MLP(nn.Module):
    """``act(h W_up) W_down`` or SwiGLU ``(silu(h W_up) * h W_gate) W_down``: (B, T, d) -> (B, T, d)."""

    def __init__(self, setting, layer: int, generator: torch.Generator):
        super().__init__()
        d, d_ff = setting.width, setting.resolved_ffn_width
        self.activation = setting.activation
        std = lambda role: architecture.weight_std(setting, layer, role)  # noqa: E731
        self.up = _weight(d, d_ff, std("up"), generator)
        self.gate = _weight(d, d_ff, std("gate"), generator) if self.activation == "swiglu" else None
        self.down = _weight(d_ff, d, std("down"), generator)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.activation == "swiglu":
            return F.linear(F.silu(F.linear(h, self.up)) * F.linear(h, self.gate), self.down)
        return F.linear(ACTIVATIONS[self.activation](F.linear(h, self.up)), self.down)


class MoE(nn.Module):
    """Top-k mixture of MLP experts (+ optional shared expert); every expert runs on every token.

    ``sum_e g_e(h) expert_e(h)`` with ``g`` the softmax of the router logits over the top k
    (0 elsewhere) or ``1/k`` (``uniform_gates``), as :func:`simulate.engine.blocks.moe`.
    """

    def __init__(self, setting, layer: int, generator: torch.Generator):
        super().__init__()
        d, d_ff, experts = setting.width, setting.resolved_ffn_width, setting.experts
        self.top_k, self.uniform, self.activation = setting.top_k, setting.uniform_gates, setting.activation
        std = lambda role: architecture.weight_std(setting, layer, role)  # noqa: E731
        self.router = _weight(d, experts, std("router"), generator)
        self.up = nn.Parameter(torch.randn(experts, d, d_ff, generator=generator) * std("up"))  # (E, d, d_ff)
        self.gate = (nn.Parameter(torch.randn(experts, d, d_ff, generator=generator) * std("gate"))
                     if self.activation == "swiglu" else None)  # (E, d, d_ff)
        self.down = nn.Parameter(torch.randn(experts, d_ff, d, generator=generator) * std("down"))  # (E, d_ff, d)
        self.shared = MLP(setting, layer, generator) if setting.shared_expert else None

    def gates(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, E) gates: softmax (or 1/k) over the top-k router logits, 0 elsewhere."""
        logits = F.linear(h, self.router)  # (B, T, E)
        top = logits.detach().topk(self.top_k, dim=-1).indices  # (B, T, k)
        chosen = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, top, True)  # (B, T, E)
        if self.uniform:
            return chosen.to(h.dtype) / self.top_k
        return torch.softmax(logits.masked_fill(~chosen, float("-inf")), dim=-1)  # (B, T, E)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        up = torch.einsum("btd,edf->btef", h, self.up)  # (B, T, E, d_ff)
        if self.gate is not None:
            hidden = F.silu(up) * torch.einsum("btd,edf->btef", h, self.gate)  # (B, T, E, d_ff)
        else:
            hidden = ACTIVATIONS[self.activation](up)
        weighted = hidden * self.gates(h).unsqueeze(-1)  # (B, T, E, d_ff)
        out = torch.einsum("btef,efd->btd", weighted, self.down)  # (B, T, d)
        return out + self.shared(h) if self.shared is not None else out


_SUBLAYER_MODULES = {"attention": Attention, "mlp": MLP, "moe": MoE}


class _Linear(nn.Module):
    """The linear block's map ``h W`` (d x d, role 'linear')."""

    def __init__(self, setting, layer: int, generator: torch.Generator):
        super().__init__()
        self.weight = _weight(setting.width, setting.width, architecture.weight_std(setting, layer, "linear"),
                              generator)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight)


_SUBLAYER_MODULES["linear"] = _Linear


class Residual(nn.Module):
    """One residual sublayer wired by a :class:`theory.architecture.Placement`.

    ``branch = mask * (gain * N_b(f(input_scale * N(x) or x))) + alignment * x/rms(x)``;
    ``out = N(stream_scale * x + branch)`` if the placement normalises after the add, else
    ``x + branch`` (:class:`theory.architecture.Placement`).
    """

    def __init__(self, kind: str, setting, layer: int, input_scale: float, generator: torch.Generator):
        super().__init__()
        place = architecture.placement(setting, layer)
        self.kind, self.metric = kind, BRANCH_METRIC[kind]
        self.input_scale, self.stream_scale = float(input_scale), float(place.stream_scale)
        self.norm_input = Norm(setting.norm, setting.width) if place.norm_input else None
        self.fn = _SUBLAYER_MODULES[kind](setting, layer, generator)
        self.norm_branch = Norm(setting.norm, setting.width) if place.norm_branch else None
        # layerscale / skipinit: the branch scale is a learnable per-channel gain initialised to it
        self.gain = (nn.Parameter(torch.full((setting.width,), float(place.branch_scale)))
                     if place.branch_scale != 1.0 else None)
        self.norm_after = Norm(setting.norm, setting.width) if place.norm_after_add else None

    def branch(self, x: torch.Tensor, mask: torch.Tensor | None, alignment: float) -> torch.Tensor:
        """The branch added to (or normalised with) the stream: (B, T, d) -> (B, T, d)."""
        h = self.norm_input(x) if self.norm_input is not None else x
        if self.input_scale != 1.0:
            h = h * self.input_scale
        f = self.fn(h)  # (B, T, d)
        if self.norm_branch is not None:
            f = self.norm_branch(f)
        if self.gain is not None:
            f = f * self.gain
        if mask is not None:
            f = f * mask
        if alignment > 0:  # the planted aligned part (docs/derivations.md#bridge-aligned), as the simulator plants it
            f = f + alignment * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True).clamp_min(1e-30))
        return f

    def combine(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """The stream after this sublayer."""
        if self.norm_after is not None:
            return self.norm_after(x * self.stream_scale + branch)
        return x + branch


@dataclass
class BlockOutput:
    """A block's output stream, its increment (residual blocks: summed without cancellation) and branches."""

    out: torch.Tensor  # (B, T, d)
    increment: torch.Tensor | None  # (B, T, d), out - x; None unless asked for, and for blocks that normalise the sum
    branches: dict[str, torch.Tensor] = field(default_factory=dict)  # metric name -> (B, T, d)


class Block(nn.Module):
    """Block ``layer`` (1-based): the sublayers of ``setting.block`` in order, one feature mask.

    ``moe_lns_top_k``: P2's LNS factor ``top_k/sqrt(l)`` in MoE blocks
    (:func:`theory.architecture.moe_lns_input_scale`) instead of ``1/sqrt(l)``.
    """

    def __init__(self, setting, layer: int, generator: torch.Generator, moe_lns_top_k: bool = False):
        super().__init__()
        self.layer, self.alignment = layer, float(setting.alignment)
        scale = (architecture.moe_lns_input_scale(setting, layer) if moe_lns_top_k
                 else architecture.placement(setting, layer).input_scale)
        self.sublayers = nn.ModuleList(Residual(kind, setting, layer, scale, generator)
                                       for kind in architecture.SUBLAYERS[setting.block])
        self.residual = not architecture.placement(setting, layer).norm_after_add
        if setting.mask_density < 1.0:
            mask = torch.bernoulli(torch.full((setting.width,), setting.mask_density), generator=generator)
            self.register_buffer("mask", mask)  # (d,) D_l, one per block, on every branch
        else:
            self.mask = None

    def run(self, x: torch.Tensor, collect: bool = False, with_increment: bool = False) -> BlockOutput:
        """The block on ``x`` (B, T, d), with (``with_increment``, residual blocks) its increment and
        (``collect``) its branch outputs; training asks for neither."""
        increment = torch.zeros_like(x) if with_increment and self.residual else None
        branches = {}
        stream = x
        for sublayer in self.sublayers:
            branch = sublayer.branch(stream, self.mask, self.alignment)  # (B, T, d)
            if collect:
                branches[sublayer.metric] = branch
            stream = sublayer.combine(stream, branch)
            if increment is not None:
                increment = increment + branch
        return BlockOutput(stream, increment, branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(x).out

    def deviation(self, x: torch.Tensor) -> torch.Tensor:
        """``block(x) - x``: its tangent is ``(J_l - I) v`` (for residual blocks without cancelling ``v``)."""
        result = self.run(x, with_increment=True)
        return result.increment if result.increment is not None else result.out - x


@dataclass
class ModelOutput:
    """Logits (B, T, 256) or None; with ``collect``: streams h_0..h_L and per-block branch outputs."""

    logits: torch.Tensor | None
    hidden: list[torch.Tensor] = field(default_factory=list)  # L+1 tensors (B, T, d); h_0 enters block 1
    branches: list[dict[str, torch.Tensor]] = field(default_factory=list)  # index l: block l ({} at 0, skipped)


class CausalLM(nn.Module):
    """Byte-level causal LM built from a Setting (module docstring); ``seed`` fixes every initial weight.

    ``forward(tokens, *, embeddings=None, skip=(), replace=None, collect=False, logits=True)``:

    - ``tokens`` (B, T) int64 bytes, or ``embeddings`` (B, T, d) fed in place of the token
      lookup (the input norm of peri still applies);
    - ``skip``: 1-based blocks whose output is their input;
    - ``replace``: {block: callable (B, T, d) -> (B, T, d)} used instead of the block;
    - ``collect``: also return the streams h_0..h_L (raw, never after the final norm) and
      each block's branch outputs before the residual add;
    - ``logits=False``: stop before the final norm and head.
    """

    def __init__(self, setting, seed: int = 0, moe_lns_top_k: bool = False):
        super().__init__()
        self.setting = setting
        generator = torch.Generator().manual_seed(seed)
        d = setting.width
        self.embed = nn.Embedding(VOCAB, d)
        with torch.no_grad():
            self.embed.weight.copy_(torch.randn(VOCAB, d, generator=generator) * setting.input_std)
        self.input_norm = Norm(setting.norm, d) if architecture.normalises_input(setting) else None
        self.blocks = nn.ModuleList(Block(setting, layer, generator, moe_lns_top_k)
                                    for layer in range(1, setting.depth + 1))
        self.final_norm = Norm(setting.norm, d)
        self.head = _weight(d, VOCAB, setting.resolved_init_std, generator)  # (256, d)

    def embed_tokens(self, tokens: torch.Tensor | None = None, embeddings: torch.Tensor | None = None):
        """h_0 (B, T, d): the embedding of ``tokens`` (or ``embeddings``), input-normalised under peri."""
        h = self.embed(tokens) if embeddings is None else embeddings
        return self.input_norm(h) if self.input_norm is not None else h

    def readout(self, h: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, 256) of the last stream."""
        return F.linear(self.final_norm(h), self.head)

    def forward(self, tokens: torch.Tensor | None = None, *, embeddings: torch.Tensor | None = None,
                skip: Iterable[int] = (), replace: Mapping[int, Callable] | None = None,
                collect: bool = False, logits: bool = True) -> ModelOutput:
        skip, replace = set(skip), dict(replace or {})
        h = self.embed_tokens(tokens, embeddings)  # (B, T, d)
        result = ModelOutput(None, [h] if collect else [], [{}] if collect else [])
        for layer, block in enumerate(self.blocks, start=1):
            branches = {}
            if layer in replace:
                h = replace[layer](h)
            elif layer not in skip:
                step = block.run(h, collect)
                h, branches = step.out, step.branches
            if collect:
                result.hidden.append(h)
                result.branches.append(branches)
        result.logits = self.readout(h) if logits else None
        return result


def block_groups(model: CausalLM) -> list[list[tuple[str, nn.Parameter]]]:
    """Named parameters per layer: 0 = embedding (and peri's input norm), l = block l (final norm, head left out)."""
    groups = [[(f"embed.{n}", p) for n, p in model.embed.named_parameters()]]
    if model.input_norm is not None:
        groups[0] += [(f"input_norm.{n}", p) for n, p in model.input_norm.named_parameters()]
    groups += [[(f"blocks.{i}.{n}", p) for n, p in block.named_parameters()] for i, block in enumerate(model.blocks)]
    return groups
