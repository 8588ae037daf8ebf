"""A naive simulator: the baseline ``simulate bench`` measures the workbench against.

Written as a careful researcher would write it without this workbench: an ``nn.Module``
LLaMA-style stack (RMSNorm, SwiGLU, RoPE, causal attention with GQA, ``nn.Linear``
without biases) built once, directly on the target device (``nn.utils.skip_init``, so
no wasted default init), and for each Monte-Carlo sample, one after another: every
weight re-drawn in place with ``nn.init.normal_(std)``, a fresh input, one forward pass
under ``torch.no_grad``, statistics recorded by forward hooks into a preallocated
float64 device tensor (no host copy until the end). Same architecture and metric
definitions as :mod:`simulate` (docs/design.md#schemes, simulate/engine/metrics.py)
for schemes pre, lns and post and the transformer block; the random streams differ,
so the two agree in law, not number by number.

>>> from theory.setting import Setting
>>> table = naive_simulate(Setting.preset("llama", width=16, heads=2, tokens=4, depth=2), samples=2,
...                        metrics=("var", "angular"))
>>> list(table.columns), sorted(int(layer) for layer in table.layer.unique())
(['layer', 'metric', 'mean', 'sem', 'ci_low', 'ci_high', 'n'], [0, 1, 2])
"""

from __future__ import annotations

import math

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from simulate.engine import ACTIVATIONS, table_from_stats
from theory import architecture

__all__ = ["NAIVE_METRICS", "NAIVE_SCHEMES", "NaiveTransformer", "naive_simulate", "naive_flops"]

NAIVE_METRICS = ("var", "var_attn", "var_mlp", "angular", "token_cos")
NAIVE_SCHEMES = ("pre", "lns", "post")


def _linear(d_in: int, d_out: int, device, dtype) -> nn.Linear:
    """A bias-free nn.Linear on ``device`` whose storage is left uninitialised (drawn per sample)."""
    return nn.utils.skip_init(nn.Linear, d_in, d_out, bias=False, device=device, dtype=dtype)


class RMSNorm(nn.Module):
    """x / rms(x) over features, no learnable scale (= LLaMA's at init), no epsilon (as simulate)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = x.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(torch.finfo(x.dtype).tiny)  # (B, T, 1)
        return x / rms


def _norm(kind: str, width: int) -> nn.Module:
    if kind == "rmsnorm":
        return RMSNorm()
    return nn.LayerNorm(width, eps=0.0, elementwise_affine=False)


def rope_tables(tokens: int, head_dim: int, device, dtype, base: float = 10000.0):
    """cos, sin tables (T, hd) of LLaMA's 'rotate half' RoPE."""
    half = head_dim // 2
    freq = base ** (-torch.arange(half, device=device, dtype=torch.float64) / half)  # (hd/2,)
    angle = torch.arange(tokens, device=device, dtype=torch.float64)[:, None] * freq  # (T, hd/2)
    return torch.cat([angle.cos()] * 2, -1).to(dtype), torch.cat([angle.sin()] * 2, -1).to(dtype)


class Attention(nn.Module):
    """Multi-head (GQA) causal attention with RoPE: (B, T, d) -> (B, T, d)."""

    def __init__(self, setting, device, dtype):
        super().__init__()
        d, self.heads, self.kv_heads = setting.width, setting.heads, setting.resolved_kv_heads
        self.head_dim, self.causal, self.use_rope = setting.head_dim, setting.causal, setting.rope
        self.q = _linear(d, self.heads * self.head_dim, device, dtype)
        self.k = _linear(d, self.kv_heads * self.head_dim, device, dtype)
        self.v = _linear(d, self.kv_heads * self.head_dim, device, dtype)
        self.o = _linear(self.heads * self.head_dim, d, device, dtype)
        cos, sin = rope_tables(setting.tokens, self.head_dim, device, dtype)
        self.register_buffer("cos", cos, persistent=False)  # (T, hd)
        self.register_buffer("sin", sin, persistent=False)  # (T, hd)

    def _rope(self, x: torch.Tensor) -> torch.Tensor:
        half = self.head_dim // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)  # (B, H, T, hd)
        return x * self.cos + rotated * self.sin

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = h.shape
        q = self.q(h).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.k(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, hd)
        v = self.v(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, hd)
        if self.use_rope:
            q, k = self._rope(q), self._rope(k)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                             enable_gqa=self.heads != self.kv_heads)  # (B, H, T, hd)
        return self.o(out.transpose(1, 2).reshape(batch, tokens, self.heads * self.head_dim))  # (B, T, d)


class FeedForward(nn.Module):
    """SwiGLU ``w2(silu(w1 h) * w3 h)`` or ``w2(act(w1 h))``: (B, T, d) -> (B, T, d)."""

    def __init__(self, setting, device, dtype):
        super().__init__()
        d, d_ff = setting.width, setting.resolved_ffn_width
        self.activation = setting.activation
        self.w1 = _linear(d, d_ff, device, dtype)
        self.w3 = _linear(d, d_ff, device, dtype) if self.activation == "swiglu" else None
        self.w2 = _linear(d_ff, d, device, dtype)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.activation == "swiglu":
            return self.w2(F.silu(self.w1(h)) * self.w3(h))
        act = ACTIVATIONS[self.activation]
        return self.w2(act(self.w1(h)))


class Block(nn.Module):
    """Attention then MLP, wired by :func:`theory.architecture.placement` (pre, lns or post)."""

    def __init__(self, setting, layer: int, device, dtype):
        super().__init__()
        self.place = architecture.placement(setting, layer)
        self.attn_norm, self.mlp_norm = _norm(setting.norm, setting.width), _norm(setting.norm, setting.width)
        self.attn, self.mlp = Attention(setting, device, dtype), FeedForward(setting, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.place.norm_after_add:
            x = self.attn_norm(x + self.attn(x))
            return self.mlp_norm(x + self.mlp(x))
        x = x + self.attn(self.attn_norm(x) * self.place.input_scale)
        return x + self.mlp(self.mlp_norm(x) * self.place.input_scale)


class NaiveTransformer(nn.Module):
    """The stack of ``setting.depth`` blocks; the stream is recorded before any final norm."""

    def __init__(self, setting, device, dtype):
        super().__init__()
        _check_supported(setting)
        self.blocks = nn.ModuleList(Block(setting, layer, device, dtype) for layer in range(1, setting.depth + 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def _check_supported(setting) -> None:
    if setting.scheme not in NAIVE_SCHEMES:
        raise ValueError(f"scheme={setting.scheme!r} is not allowed in the naive simulator: "
                         f"one of {', '.join(NAIVE_SCHEMES)}")
    if setting.block != "transformer":
        raise ValueError(f"block={setting.block!r} is not allowed in the naive simulator: transformer")
    if setting.mask_density < 1.0 or setting.alignment > 0:
        raise ValueError("the naive simulator has no branch masks or alignment: "
                         "mask_density=1 and alignment=0 are required")


# -- metrics (definitions of simulate/engine/metrics.py, per sample; x is (1, T, d)) -----------
def _var(x: torch.Tensor) -> torch.Tensor:
    return x.double().var(dim=-1).mean()  # () mean over tokens of the feature variance


def _angular(previous: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    cos = F.cosine_similarity(previous.double(), current.double(), dim=-1)  # (1, T)
    return (torch.arccos(cos.clamp(-1.0, 1.0)) / math.pi).mean()  # ()


def _token_cos(x: torch.Tensor) -> torch.Tensor:
    tokens = x.shape[-2]
    unit = F.normalize(x.double(), dim=-1)  # (1, T, d)
    return ((unit.sum(-2).pow(2).sum() - tokens) / (tokens * (tokens - 1)))  # ()


class _Recorder:
    """Forward hooks writing per-sample statistics into a (L+1, M, S) float64 device tensor."""

    def __init__(self, model: NaiveTransformer, metrics: tuple[str, ...], samples: int, device):
        self.index = {name: i for i, name in enumerate(metrics)}
        self.values = torch.full((len(model.blocks) + 1, len(metrics), samples), math.nan,
                                 dtype=torch.float64, device=device)  # (L+1, M, S)
        self.sample = 0
        self.handles = []
        for layer, block in enumerate(model.blocks, start=1):
            self.handles.append(block.register_forward_hook(self._block_hook(layer)))
            for name, module in (("var_attn", block.attn), ("var_mlp", block.mlp)):
                if name in self.index:
                    self.handles.append(module.register_forward_hook(self._branch_hook(layer, name)))

    def put(self, layer: int, name: str, value: torch.Tensor) -> None:
        if name in self.index:
            self.values[layer, self.index[name], self.sample] = value

    def record_stream(self, layer: int, stream: torch.Tensor, previous: torch.Tensor | None) -> None:
        self.put(layer, "var", _var(stream))
        if "token_cos" in self.index and stream.shape[-2] > 1:
            self.put(layer, "token_cos", _token_cos(stream))
        if previous is not None and "angular" in self.index:
            self.put(layer, "angular", _angular(previous, stream))

    def _block_hook(self, layer: int):
        def hook(module, inputs, output):
            self.record_stream(layer, output, inputs[0])
        return hook

    def _branch_hook(self, layer: int, name: str):
        def hook(module, inputs, output):
            self.put(layer, name, _var(output))
        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def naive_flops(setting) -> float:
    """Matmul flops of one forward pass of one sample (2 per multiply-add; attention T x T in full).

    >>> from theory.setting import Setting
    >>> naive_flops(Setting.preset('llama', width=4, heads=1, tokens=2, depth=1, ffn_width=8))
    704.0
    """
    d, d_ff, tokens = setting.width, setting.resolved_ffn_width, setting.tokens
    kv = setting.resolved_kv_heads * setting.head_dim
    projections = d * d + 2 * d * kv + d * d  # q, k, v, o
    mlp = (3 if setting.activation == "swiglu" else 2) * d * d_ff
    attention_core = 2 * tokens * tokens * d  # scores and weighted values
    return float(setting.depth * (2 * tokens * (projections + mlp) + 2 * attention_core))


def naive_simulate(setting, *, samples: int = 8, seed: int = 0, metrics=("var",), device="cpu",
                   dtype: str | torch.dtype = "float32", progress: bool = False) -> pd.DataFrame:
    """Per-layer statistics of ``setting``, one sample after another through an nn.Module stack.

    Parameters
    ----------
    setting : theory.Setting
        A transformer block with scheme pre, lns or post, no masks, no alignment.
    samples, seed : int
        Monte-Carlo samples; one ``torch.Generator`` on ``device`` seeded by ``seed``.
    metrics : sequence of str
        From :data:`NAIVE_METRICS`.
    device : str or torch.device
    dtype : 'float32', 'float64' or a torch dtype (statistics are float64).
    progress : bool
        A tqdm bar over samples.

    Returns
    -------
    pandas.DataFrame with columns layer, metric, mean, sem, ci_low, ci_high, n.
    """
    requested = tuple(m.strip() for m in metrics.split(",")) if isinstance(metrics, str) else tuple(metrics)
    unknown = [m for m in requested if m not in NAIVE_METRICS]
    if unknown or not requested:
        raise ValueError(f"metrics={unknown[0] if unknown else ''!r} is not allowed in the naive simulator: "
                         f"names from {', '.join(NAIVE_METRICS)}")
    metrics = tuple(m for m in NAIVE_METRICS if m in requested)
    device = torch.device(device)
    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    std = setting.resolved_init_std
    model = NaiveTransformer(setting, device, torch_dtype).eval()
    recorder = _Recorder(model, metrics, samples, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    shape = (1, setting.tokens, setting.width)
    try:
        with torch.no_grad():
            for sample in tqdm(range(samples), desc="naive samples", disable=None if progress else True,
                               leave=False):
                recorder.sample = sample
                for parameter in model.parameters():
                    nn.init.normal_(parameter, 0.0, std, generator=generator)
                x = torch.randn(shape, generator=generator, device=device, dtype=torch_dtype)  # (1, T, d)
                if setting.input_cos > 0:
                    common = torch.randn((1, 1, setting.width), generator=generator, device=device,
                                         dtype=torch_dtype)  # (1, 1, d)
                    x = math.sqrt(setting.input_cos) * common + math.sqrt(1 - setting.input_cos) * x
                x = setting.input_std * x
                recorder.record_stream(0, x, None)
                model(x)
    finally:
        recorder.remove()
    return table_from_stats(recorder.values.cpu().numpy(), metrics)  # the one host copy
