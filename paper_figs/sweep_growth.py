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
:func:`summary_figure` draws any such sweep's summary (notebook 07 draws its example sweep with it).
"""

from __future__ import annotations

from paper_figs.measure import llama_like, mc_sizes
from paper_figs.style import new_figure, place_legend, save_figure

__all__ = ["SCHEMES", "sweep_spec", "run_growth_sweep", "summary_figure", "sweep_growth"]

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


def summary_figure(summary, spec: dict):
    """A ``run`` sweep's summary against depth, a line per scheme: left the growth exponent of ``var`` over the
    last half of the layers, right ``var`` at the last layer; points are means over the seeds, bars their 95 %
    interval (+-1.96 sem over seeds). ``spec``: the sweep's spec as parsed TOML (its title says the sizes).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from simulate.sweep.plot import plot_summary

    fig, axes = new_figure(ncols=2, width=3.3, height=2.7)
    left, right = axes[0]
    plot_summary(left, summary, "growth_exponent", x="depth", by="scheme")
    left.axhline(1.0, color="grey", lw=0.8, ls=":")
    left.set_ylabel("growth exponent p of var (var ~ L^p,\nlog-log slope over layers L/2..L)")
    left.set_title("how fast the variance grows at depth L", fontsize=8)
    plot_summary(right, summary, "final_var", x="depth", by="scheme", logy=True)
    right.set_ylabel("stream variance at layer L")
    right.set_title("the variance at the last layer", fontsize=8)
    for ax in (left, right):
        ax.set_xlabel("depth L (blocks)")
    handles, labels = right.get_legend_handles_labels()
    place_legend(right, handles=handles, labels=[label.removeprefix("scheme=") for label in labels], title="scheme")
    setting, options = spec.get("setting", {}), spec.get("options", {})
    alpha = setting["width"] * setting["init_std"] ** 2 if "init_std" in setting and "width" in setting else None
    sizes = ", ".join([f"{setting.get('preset', 'default')} d={setting.get('width', '?')}",
                       f"T={setting.get('tokens', '?')}"] + ([f"alpha=d s^2={alpha:.3f}"] if alpha else [])
                      + [f"S={options.get('samples', '?')} samples", f"{spec.get('seeds', 1)} seeds"])
    fig.suptitle(f"sweep {spec.get('name', '')}: {sizes}\npoints: mean over seeds; bars: 95 % interval "
                 "(+-1.96 standard errors over seeds)", fontsize=8)
    return fig


def sweep_growth(out_dir, quick: bool = False):
    """Growth exponent of var and final var against depth per scheme, from a sweep's summary."""
    spec = sweep_spec(quick)
    fig = summary_figure(run_growth_sweep(quick), spec)
    return save_figure(fig, out_dir, f"sweep_growth_d{spec['setting']['width']}")
