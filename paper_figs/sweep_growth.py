"""From a sweep to a picture: how fast the stream variance grows with depth, per norm scheme.

A sweep (``simulate.sweep``, task ``run``) of the llama preset at LLaMA-130M's alpha over
scheme x depth x seeds; its ``summary.csv`` gives, per point, the growth exponent of
``var`` (the log-log slope over the last half of the layers, ``simulate.sweep.headline``)
and the final variance. Left: the exponent at depth L (mean over seeds, 95 % bars from the
spread between seeds); right: the final variance. Pre-LN's exponent climbs towards 1 with
depth (linear growth of the variance at random init, P1), LayerNorm Scaling's stays near 0
(its ``1/sqrt(l)`` branch scale, P1) and DeepNorm, which normalises after the residual
sum, keeps the variance at 1 (exponent 0). The sweep lives in the simulator's cache directory
(``$DEPTH_WORKBENCH_CACHE/sweeps/``) and is resumed, not redone, on a second build.
"""

from __future__ import annotations

from paper_figs.measure import llama_like, mc_sizes
from paper_figs.style import new_figure, place_legend, save_figure

__all__ = ["SCHEMES", "sweep_spec", "run_growth_sweep", "sweep_growth"]

SCHEMES = ("pre", "lns", "deepnorm")


def sweep_spec(quick: bool) -> dict:
    """The spec (as parsed TOML) of the figure's sweep."""
    size = mc_sizes(quick)
    base = llama_like(size.width, tokens=size.tokens, heads=2 if quick else 4)
    depths = [8, 16, 32, 64] if quick else [32, 128, 512, 1024]
    return {"task": "run", "name": f"sweep_growth{'_quick' if quick else ''}", "seeds": 2 if quick else 4,
            "setting": {"preset": "llama", "width": base.width, "heads": base.heads, "tokens": base.tokens,
                        "init_std": base.init_std},
            "axes": {"scheme": list(SCHEMES), "depth": depths},
            "options": {"samples": size.samples, "metrics": ["var"], "device": "cpu"}}


def run_growth_sweep(quick: bool):
    """Run (or resume) the figure's sweep; returns its summary (a DataFrame)."""
    from simulate.cache import cache_dir
    from simulate.sweep import parse_spec, read_summary, run_sweep

    spec = sweep_spec(quick)
    out = cache_dir() / "sweeps" / spec["name"]
    run_sweep(parse_spec(spec), out, workers=1 if quick else None)
    return read_summary(out)


def sweep_growth(out_dir, quick: bool = False):
    """Growth exponent of var and final var against depth per scheme, from a sweep's summary."""
    from simulate.sweep.plot import plot_summary

    summary = run_growth_sweep(quick)
    spec = sweep_spec(quick)
    fig, axes = new_figure(ncols=2, width=3.2, height=2.6)
    plot_summary(axes[0][0], summary, "growth_exponent", x="depth", by="scheme")
    axes[0][0].axhline(1.0, color="grey", lw=0.8, ls=":")
    axes[0][0].set_ylabel("growth exponent of var at depth L\n(log-log slope, layers L/2..L)")
    plot_summary(axes[0][1], summary, "final_var", x="depth", by="scheme", logy=True)
    axes[0][1].set_ylabel("final var (layer L)")
    for ax in axes[0]:
        ax.set_xlabel("depth L")
    place_legend(axes[0][1])
    setting = spec["setting"]
    fig.suptitle(f"sweep: llama d={setting['width']}, T={setting['tokens']}, alpha=d s^2="
                 f"{setting['width'] * setting['init_std'] ** 2:.3f}, S={spec['options']['samples']}, "
                 f"{spec['seeds']} seeds (mean, 95% over seeds)", fontsize=7)
    return save_figure(fig, out_dir, f"sweep_growth_d{setting['width']}")
