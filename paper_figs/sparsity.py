"""P2's sparsity knobs at random init: mask density, MoE top-k, GQA groups, sequence length.

Each figure puts the paper's statement, the exact law derived here (docs/derivations.md) and the Monte-Carlo
measurement side by side, at a fixed layer, against the knob.
"""

from __future__ import annotations

import math

from theory.setting import Setting

from paper_figs.measure import mc_sizes, sweep_panel
from paper_figs.style import new_figure, place_legend, save_figure

__all__ = ["GQA_LAWS", "sweep_figure", "masked_linear", "moe_topk", "gqa_groups", "sequence_length"]

# The GQA laws and the ids theory.predict gives them at G = 1 (no key-value head shared): there the group law is
# plain attention's and P2's GQA statement reduces to its Theorem 4 (paper_figs.measure.with_aliases).
GQA_LAWS = {"gqa-init": "causal-attention", "p2-gqa": "p2-thm-4"}


def _base(quick: bool, **kw) -> Setting:
    size = mc_sizes(quick)
    return Setting(**{"width": size.width, "tokens": size.tokens, "heads": 4, "scheme": "pre", **kw})


def sweep_figure(xs, series: dict, metric: str, *, samples: int, layer=None, laws=None, xlabel: str, ylabel: str,
                 title: str, log2_x: bool = True, aliases=None):
    """One panel: ``metric`` against a knob ``xs`` for each ``series`` (label -> settings, one per x).

    MC points with 95 % error bars over theory lines (:func:`paper_figs.measure.sweep_panel`),
    read off at ``layer`` (default each setting's last), log y, the legend right of the axes.
    ``aliases``: laws that go by another id at some knob values (e.g. :data:`GQA_LAWS`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(width=6.2, height=3.2)
    ax = axes[0][0]
    for label, settings in series.items():
        sweep_panel(ax, settings, xs, metric, samples=samples, layer=layer, label=label, laws=laws, aliases=aliases)
    if log2_x:
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    place_legend(ax)
    return fig


def _sweep_figure(out_dir, name: str, quick: bool, xs, series: dict, metric: str, **kwargs) -> list:
    return save_figure(sweep_figure(xs, series, metric, samples=mc_sizes(quick).samples, **kwargs), out_dir, name)


def masked_linear(out_dir, quick: bool = False):
    """Masked linear residual r_{l+1} = r_l + D_l W_l r_l: variance at depth L against rho."""
    size = mc_sizes(quick)
    alpha = 0.5
    rhos = [0.1, 0.25, 0.5, 0.75, 1.0] if quick else [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.85, 1.0]
    series = {f"L={depth}": [Setting(block="linear", scheme="none", width=size.width, tokens=size.tokens, depth=depth,
                                     mask_density=rho, init_std=math.sqrt(alpha / size.width)) for rho in rhos]
              for depth in (4, size.depth)}
    return _sweep_figure(out_dir, f"masked_linear_vs_rho_d{size.width}_alpha{alpha:g}", quick, rhos, series, "var",
                         xlabel="mask density rho (fraction of branch features kept)",
                         ylabel="stream variance sigma_L^2 at the last layer", log2_x=False,
                         title=f"masked linear residual, no norm, alpha=d s^2={alpha:g}, d={size.width}")


def moe_topk(out_dir, quick: bool = False):
    """MoE output variance (first block) against top-k, uniform and softmax gates."""
    size = mc_sizes(quick)
    experts = 8
    ks = [1, 2, 4, 8]
    series = {("uniform gates 1/k" if uniform else "softmax gates"):
              [_base(quick, block="moe", depth=1, experts=experts, top_k=k, uniform_gates=uniform) for k in ks]
              for uniform in (True, False)}
    return _sweep_figure(out_dir, f"moe_vs_topk_E{experts}_d{size.width}", quick, ks, series, "var_mlp", layer=1,
                         xlabel="top-k (experts per token)", ylabel="MoE sublayer output variance, block 1",
                         title=f"pre-norm attention+MoE, E={experts}, d={size.width}, T={size.tokens}, s=1/sqrt(d)")


def gqa_groups(out_dir, quick: bool = False):
    """Attention output variance against group size G (query heads per KV head)."""
    size = mc_sizes(quick)
    heads = 8 if size.width >= 64 else 4
    groups = [g for g in (1, 2, 4, 8, 16) if heads % g == 0]
    series = {f"block {depth}": [_base(quick, block="attention", heads=heads, kv_heads=heads // g, depth=depth)
                                 for g in groups]
              for depth in (1, size.depth)}
    return _sweep_figure(out_dir, f"gqa_vs_group_H{heads}_d{size.width}", quick, groups, series, "var_attn",
                         laws=list(GQA_LAWS), aliases=GQA_LAWS,
                         xlabel="group size G = heads / kv_heads (at G = 1 the laws are plain attention's)",
                         ylabel="attention output variance at that block",
                         title=f"pre-norm causal attention, H={heads}, d={size.width}, T={size.tokens}, s=1/sqrt(d)")


def sequence_length(out_dir, quick: bool = False):
    """Attention output variance (first block) against sequence length T, causal and not."""
    size = mc_sizes(quick)
    lengths = [2, 4, 8, 16, 32] if quick else [4, 16, 64, 256, 1024]
    series = {("causal" if causal else "bidirectional"):
              [_base(quick, block="attention", tokens=t, depth=1, causal=causal) for t in lengths]
              for causal in (False, True)}
    return _sweep_figure(out_dir, f"attention_vs_tokens_d{size.width}", quick, lengths, series, "var_attn", layer=1,
                         xlabel="sequence length T (tokens)", ylabel="attention output variance, block 1",
                         title=f"pre-norm attention, H=4, d={size.width}, s=1/sqrt(d), RoPE")
