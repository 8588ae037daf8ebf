"""Per-layer profiles at random init: variance, ||J_l - I|| and token cosine against depth.

Each panel draws the Monte-Carlo mean with its 95 % band and every theory curve that
``theory.predict`` gives for the metric (solid: exact law, dashed: upper bound, dotted:
lower bound, dash-dot: approximate law).
"""

from __future__ import annotations

from theory.setting import Setting

from paper_figs.style import llama_like, mc_sizes, new_figure, place_legend, profile_panel, save_figure

__all__ = ["SCHEMES_SHOWN", "variance_by_scheme", "jac_dev_by_scheme", "token_cosine"]

SCHEMES_SHOWN = ("pre", "lns", "scaled-init", "depth-scaled-init", "sandwich", "deepnorm")


def _base(quick: bool, **overrides) -> Setting:
    size = mc_sizes(quick)
    return llama_like(size.width, depth=size.depth, tokens=size.tokens, heads=4, **overrides)


def _scheme_panels(out_dir, quick: bool, metric: str, ylabel: str, name: str, schemes, log_y: bool):
    size = mc_sizes(quick)
    blocks = (("transformer", "swiglu"), ("mlp", "relu"))
    fig, axes = new_figure(ncols=len(blocks), width=5.6, height=3.4)
    for ax, (block, activation) in zip(axes[0], blocks):
        base = _base(quick, block=block, activation=activation)
        for scheme in schemes:
            profile_panel(ax, base.replace(scheme=scheme), metric, samples=size.samples, label=scheme)
        ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("layer l (block index; 0 = input)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"llama {block} ({activation}), alpha=d s^2={base.alpha:.3g}, d={base.width}, T={base.tokens}, "
                     f"L={base.depth}", fontsize=7)
        place_legend(ax)
    fig.suptitle(f"{ylabel} at random init, Monte-Carlo (bands: 95 % CI) vs theory", fontsize=8)
    return save_figure(fig, out_dir, f"{name}_d{size.width}_L{size.depth}")


def variance_by_scheme(out_dir, quick: bool = False):
    """Stream variance sigma_l^2 against layer for several norm schemes."""
    return _scheme_panels(out_dir, quick, "var", "stream variance sigma_l^2 (per coordinate)", "variance_by_scheme",
                          SCHEMES_SHOWN, log_y=True)


def jac_dev_by_scheme(out_dir, quick: bool = False):
    """||J_l - I||_F / sqrt(T d) against layer: how close each block is to the identity."""
    return _scheme_panels(out_dir, quick, "jac_dev", "||J_l - I||_F / sqrt(T d)", "jac_dev_by_scheme",
                          ("pre", "lns", "scaled-init", "depth-scaled-init"), log_y=True)


def token_cosine(out_dir, quick: bool = False):
    """Mean cosine between distinct tokens against layer (rank collapse), input std 0.02 vs 1."""
    size = mc_sizes(quick)
    fig, axes = new_figure(ncols=2, width=4.8, height=3.2)
    for ax, scheme in zip(axes[0], ("pre", "lns")):
        for input_std in (1.0, 0.02):
            setting = llama_like(size.width, depth=size.depth, tokens=size.tokens, heads=4, scheme=scheme,
                                 input_std=input_std)
            profile_panel(ax, setting, "token_cos", samples=size.samples, label=f"input std {input_std:g}")
        ax.set_xscale("log")
        ax.set_xlabel("layer l (block index; 0 = input)")
        ax.set_ylabel("mean cosine between distinct tokens")
        ax.set_title(f"{scheme}: llama, alpha={setting.alpha:.3g}, d={size.width}, T={size.tokens}, "
                     f"L={size.depth}", fontsize=7)
        place_legend(ax)
    fig.suptitle("Token cosine (rank collapse) at random init", fontsize=8)
    return save_figure(fig, out_dir, f"token_cosine_d{size.width}_L{size.depth}")
