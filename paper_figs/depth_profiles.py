"""Per-layer profiles at random init: variance, ||J_l - I|| and token cosine against depth.

Each panel draws, per scheme, the Monte-Carlo mean with its 95 % band and the law derived
here for the metric (``theory.predict``; solid: exact law, dash-dot: approximate law),
the scheme named beside its curve (:func:`paper_figs.profiles.profile_figure`).
"""

from __future__ import annotations

from theory.setting import Setting

from paper_figs.profiles import Panel, profile_figure
from paper_figs.measure import llama_like, mc_sizes
from paper_figs.style import save_figure

__all__ = ["SCHEMES_SHOWN", "variance_by_scheme", "jac_dev_by_scheme", "token_cosine"]

SCHEMES_SHOWN = ("pre", "lns", "scaled-init", "depth-scaled-init", "sandwich", "deepnorm")
BLOCKS_SHOWN = (("transformer", "swiglu"), ("mlp", "relu"))


def _base(quick: bool, **overrides) -> Setting:
    size = mc_sizes(quick)
    return llama_like(size.width, depth=size.depth, tokens=size.tokens, heads=4, **overrides)


def _sizes_line(setting: Setting) -> str:
    return f"alpha=d s^2={setting.alpha:.3g}, d={setting.width}, T={setting.tokens}, L={setting.depth}"


def _scheme_panels(out_dir, quick: bool, metric: str, ylabel: str, name: str, schemes):
    size = mc_sizes(quick)
    panels = []
    for block, activation in BLOCKS_SHOWN:
        base = _base(quick, block=block, activation=activation)
        panels.append(Panel(f"llama {block} ({activation})\n{_sizes_line(base)}", metric,
                            {scheme: base.replace(scheme=scheme) for scheme in schemes}, ylabel=ylabel))
    fig = profile_figure(panels, samples=size.samples, panel_size=(3.9, 3.0),
                         suptitle=f"{ylabel} at random init: Monte Carlo vs the laws derived here")
    return save_figure(fig, out_dir, f"{name}_d{size.width}_L{size.depth}")


def variance_by_scheme(out_dir, quick: bool = False):
    """Stream variance sigma_l^2 against layer for several norm schemes."""
    return _scheme_panels(out_dir, quick, "var", "stream variance sigma_l^2", "variance_by_scheme", SCHEMES_SHOWN)


def jac_dev_by_scheme(out_dir, quick: bool = False):
    """||J_l - I||_F / sqrt(T d) against layer: how close each block is to the identity."""
    return _scheme_panels(out_dir, quick, "jac_dev", "||J_l - I||_F / sqrt(T d)", "jac_dev_by_scheme",
                          ("pre", "lns", "scaled-init", "depth-scaled-init"))


def token_cosine(out_dir, quick: bool = False):
    """Mean cosine between distinct tokens against layer (rank collapse), input std 0.02 vs 1."""
    size = mc_sizes(quick)
    panels = []
    for scheme in ("pre", "lns"):
        base = _base(quick, scheme=scheme)
        panels.append(Panel(f"{scheme}: llama\n{_sizes_line(base)}", "token_cos",
                            {f"input std {std:g}": base.replace(input_std=std) for std in (1.0, 0.02)},
                            ylabel="mean cosine between distinct tokens", log_y=False))
    fig = profile_figure(panels, samples=size.samples, panel_size=(3.9, 3.0), sharey=True,
                         suptitle="Token cosine (rank collapse) at random init")
    return save_figure(fig, out_dir, f"token_cosine_d{size.width}_L{size.depth}")
