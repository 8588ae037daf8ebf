"""P2's sparsity knobs at random init: mask density, MoE top-k, GQA groups, sequence length.

Each figure puts the paper's statement, the exact law derived here and the Monte-Carlo
measurement side by side, at a fixed layer, against the knob.
"""

from __future__ import annotations

import math

from theory.setting import Setting

from paper_figs.style import mc_sizes, new_figure, place_legend, plot_sweep, save_figure, sweep

__all__ = ["masked_linear", "moe_topk", "gqa_groups", "sequence_length"]


def _base(quick: bool, **kw) -> Setting:
    size = mc_sizes(quick)
    return Setting(**{"width": size.width, "tokens": size.tokens, "heads": 4, "scheme": "pre", **kw})


def masked_linear(out_dir, quick: bool = False):
    """Masked linear residual r_{l+1} = r_l + D_l W_l r_l: variance at depth L against rho."""
    size = mc_sizes(quick)
    alpha = 0.5
    rhos = [0.1, 0.25, 0.5, 0.75, 1.0] if quick else [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.85, 1.0]
    depths = (4, size.depth)
    fig, axes = new_figure(width=6.2, height=3.2)
    ax = axes[0][0]
    for depth in depths:
        settings = [Setting(block="linear", scheme="none", width=size.width, tokens=size.tokens, depth=depth,
                            mask_density=rho, init_std=math.sqrt(alpha / size.width)) for rho in rhos]
        measured, predicted = sweep(settings, rhos, "var", samples=size.samples)
        plot_sweep(ax, measured, predicted, label=f"L={depth}")
    ax.set_yscale("log")
    ax.set_xlabel("mask density rho (fraction of branch features kept)")
    ax.set_ylabel("stream variance sigma_L^2 at the last layer")
    ax.set_title(f"masked linear residual, no norm, alpha=d s^2={alpha:g}, d={size.width}", fontsize=7)
    place_legend(ax)
    return save_figure(fig, out_dir, f"masked_linear_vs_rho_d{size.width}_alpha{alpha:g}")


def moe_topk(out_dir, quick: bool = False):
    """MoE output variance (first block) against top-k, uniform and softmax gates."""
    size = mc_sizes(quick)
    experts = 8
    ks = [1, 2, 4, 8]
    fig, axes = new_figure(width=6.2, height=3.2)
    ax = axes[0][0]
    for uniform in (True, False):
        settings = [_base(quick, block="moe", depth=1, experts=experts, top_k=k, uniform_gates=uniform) for k in ks]
        measured, predicted = sweep(settings, ks, "var_mlp", samples=size.samples, layer=1)
        plot_sweep(ax, measured, predicted, label="uniform gates 1/k" if uniform else "softmax gates")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("top-k (experts per token)")
    ax.set_ylabel("MoE sublayer output variance, block 1")
    ax.set_title(f"pre-norm attention+MoE, E={experts}, d={size.width}, T={size.tokens}, s=1/sqrt(d)", fontsize=7)
    place_legend(ax)
    return save_figure(fig, out_dir, f"moe_vs_topk_E{experts}_d{size.width}")


def gqa_groups(out_dir, quick: bool = False):
    """Attention output variance against group size G (query heads per KV head)."""
    size = mc_sizes(quick)
    heads = 8 if size.width >= 64 else 4
    groups = [g for g in (1, 2, 4, 8, 16) if heads % g == 0]
    fig, axes = new_figure(width=6.2, height=3.2)
    ax = axes[0][0]
    for depth in (1, mc_sizes(quick).depth):
        settings = [_base(quick, block="attention", heads=heads, kv_heads=heads // g, depth=depth)
                    for g in groups]
        measured, predicted = sweep(settings, groups, "var_attn", samples=size.samples)
        plot_sweep(ax, measured, predicted, label=f"block {depth}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("group size G = heads / kv_heads")
    ax.set_ylabel("attention output variance at that block")
    ax.set_title(f"pre-norm causal attention, H={heads}, d={size.width}, T={size.tokens}, s=1/sqrt(d)", fontsize=7)
    place_legend(ax)
    return save_figure(fig, out_dir, f"gqa_vs_group_H{heads}_d{size.width}")


def sequence_length(out_dir, quick: bool = False):
    """Attention output variance (first block) against sequence length T, causal and not."""
    size = mc_sizes(quick)
    lengths = [2, 4, 8, 16, 32] if quick else [4, 16, 64, 256, 1024]
    fig, axes = new_figure(width=6.2, height=3.2)
    ax = axes[0][0]
    for causal in (False, True):
        settings = [_base(quick, block="attention", tokens=t, depth=1, causal=causal) for t in lengths]
        measured, predicted = sweep(settings, lengths, "var_attn", samples=size.samples, layer=1)
        plot_sweep(ax, measured, predicted, label="causal" if causal else "bidirectional")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel("attention output variance, block 1")
    ax.set_title(f"pre-norm attention, H=4, d={size.width}, s=1/sqrt(d), RoPE", fontsize=7)
    place_legend(ax)
    return save_figure(fig, out_dir, f"attention_vs_tokens_d{size.width}")
