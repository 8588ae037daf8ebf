"""Trained Pre-LN against trained LNS over depth: P1's variance figure, its Fig. 1, angular heatmaps, the bridge.

Each figure reads tiny trained runs (:mod:`paper_figs.trained_runs`); bands are 95 % t
intervals over seeds (a line only, with one seed). The random-init theory
(:func:`theory.predict`'s exact law) stands beside the measured step-0 profile.
``trained_bridge`` draws the measured aligned strength ``a_l`` of each block against the
stream scale ``sigma_{l-1}`` at every logged step, with the regime boundary ``a = sigma/L``:
above it the aligned part alone grows the stream by more than a factor e over the stack
(exponential-looking growth, docs/derivations.md#bridge-aligned); below it growth is additive (derived here,
docs/scores.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from paper_figs import trained_runs as tr
from paper_figs.legends import figure_legend, step_colours
from paper_figs.style import LAW_LINESTYLE, new_figure, place_legend, plot_theory, save_figure

__all__ = ["variance_figure", "trained_variance", "trained_pruning", "trained_angular", "trained_bridge"]

_SCHEMES = ("pre", "lns")
_LABEL = {"pre": "Pre-LN", "lns": "LNS"}
_INIT_LAW = {"pre": "preln-init", "lns": "lns-init"}


def _var_band(paths, step: int):
    """Per layer: the geometric mean over seeds of ``var`` at ``step`` and its band, the 95 % t interval of
    ``log var`` (``layer, mean, low, high``): a variance spread over orders of magnitude gets a band a log axis
    can draw, never one below 0."""
    tables = []
    for path in paths:
        layers = tr.train_layers(path)
        rows = layers[(layers["metric"] == "var") & (layers["step"] == step)]
        tables.append(pd.DataFrame({"layer": rows["layer"], "score": "var", "value": np.log(rows["mean"])}))
    band = tr.seed_band(tables, "var")
    return band.assign(**{c: np.exp(band[c]) for c in ("mean", "low", "high")})


def variance_figure(groups: dict):
    """The stream variance per layer at every logged step (a colour per step, one colorbar), mean over seeds with
    its 95 % t band, and the random-init law (:func:`theory.predict`) beside the step-0 profile.

    Parameters
    ----------
    groups : dict
        ``{scheme: [run directory per seed]}`` of ``pre`` and ``lns`` runs (:func:`paper_figs.trained_runs.runs`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import theory
    from simulate.training.run_directory import RunDirectory

    fig, axes = new_figure(ncols=2, width=3.3, height=2.8)
    steps = sorted({int(s) for paths in groups.values() for s in tr.train_layers(paths[0])["step"].unique()})
    colours = step_colours(fig, axes.ravel().tolist(), steps)
    seeds = set()
    for ax, scheme in zip(axes[0], _SCHEMES):
        paths = groups[scheme]
        seeds.add(len(paths))
        for step in sorted(tr.train_layers(paths[0])["step"].unique()):
            band = _var_band(paths, int(step))
            ax.plot(band["layer"], band["mean"], marker="o", markersize=2.5, lw=1, color=colours[int(step)],
                    label=f"step {step}")
            ax.fill_between(band["layer"], band["low"], band["high"], color=colours[int(step)], alpha=0.2, lw=0)
        setting = RunDirectory(paths[0]).setting
        plot_theory(ax, theory.predict(setting), "var", color="k", laws=[_INIT_LAW[scheme]],
                    label_prefix="init theory: ")
        ax.set_yscale("log")
        ax.set_xlabel("layer l (0 = embedding)")
        ax.set_ylabel("variance of the residual stream")
        ax.set_title(f"{_LABEL[scheme]}, d={setting.width}, L={setting.depth}, {len(paths)} seed(s)")
    band = "geometric mean over seeds, 95 % t band of log var" if min(seeds) > 1 else "one seed (no band over seeds)"
    figure_legend(fig, [((Line2D([], [], color="0.4", marker="o", markersize=2.5, lw=1),
                          Patch(color="0.4", alpha=0.2, lw=0)), f"measured at one logged step: {band}"),
                         (Line2D([], [], color="k", linestyle=LAW_LINESTYLE["exact"]),
                          "random-init law (preln-init / lns-init): step 0's theory")])
    return fig


def trained_variance(out_dir, quick: bool = False):
    """Variance per layer at several training steps, Pre-LN and LNS (P1's variance figure), init theory beside."""
    return save_figure(variance_figure(tr.runs(quick, _SCHEMES)), out_dir, "trained_variance")


def trained_pruning(out_dir, quick: bool = False):
    """Loss increase when one block is deleted, per block, Pre-LN against LNS, trained and at step 0 (P1 Fig. 1)."""
    groups = tr.runs(quick, _SCHEMES)
    fig, axes = new_figure(ncols=1, width=4.2, height=2.8)
    ax = axes[0, 0]
    for i, scheme in enumerate(_SCHEMES):
        for at_init, style in ((False, "-"), (True, ":")):
            band = tr.seed_band([s for s, _ in tr.run_scores(groups[scheme], quick, at_init)], "prune")
            color = f"C{i}"
            ax.plot(band["layer"], band["mean"], linestyle=style, marker="o", markersize=2.5, color=color,
                    label=f"{_LABEL[scheme]}, {'step 0' if at_init else 'trained'}")
            ax.fill_between(band["layer"], band["low"], band["high"], color=color, alpha=0.15 if at_init else 0.25,
                            lw=0)
    ax.axhline(0.0, color="k", lw=0.6)
    ax.set_xlabel("block l deleted")
    ax.set_ylabel("held-out loss change (nats/byte)")
    ax.set_title("pruning one block (P1 Fig. 1); LNS keeps each position's 1/sqrt(l)")
    place_legend(ax)
    return save_figure(fig, out_dir, "trained_pruning")


def trained_angular(out_dir, quick: bool = False):
    """Angular distance d(x_l, x_{l+n}) of the last token, step 0 beside trained, Pre-LN and LNS."""
    groups = tr.runs(quick, _SCHEMES)
    fig, axes = new_figure(ncols=2, nrows=2, width=3.0, height=2.6)
    for row, scheme in enumerate(_SCHEMES):
        for col, at_init in enumerate((True, False)):
            ax = axes[row, col]
            pairs = [p for _, p in tr.run_scores(groups[scheme], quick, at_init)]
            depth = int(max(p["other"].max() for p in pairs))
            matrix = tr.angular_matrix(pairs, depth)
            shown = np.ma.masked_invalid(matrix[:, 1:].T)  # rows n = 1..L, columns l = 0..L
            mesh = ax.pcolormesh(np.arange(depth + 1), np.arange(1, depth + 1), shown, shading="nearest",
                                 cmap="viridis", vmin=0.0)
            fig.colorbar(mesh, ax=ax, label="arccos(cos)/pi")
            ax.set_xlabel("layer l")
            ax.set_ylabel("distance n")
            ax.set_title(f"{_LABEL[scheme]}, {'step 0' if at_init else 'trained'} ({len(pairs)} seed(s))")
    return save_figure(fig, out_dir, "trained_angular")


def trained_bridge(out_dir, quick: bool = False):
    """Measured aligned strength a_l against sigma_l over training, with the regime boundary a = sigma/L."""
    groups = tr.runs(quick, ("pre", "lns"))
    bridges = {scheme: pd.concat([pd.read_csv(f"{p}/bridge.csv") for p in groups[scheme]]).dropna(subset=["align_a"])
               for scheme in ("pre", "lns")}
    fig, axes = new_figure(ncols=2, width=3.3, height=2.8)
    colours = step_colours(fig, axes.ravel().tolist(), {s for b in bridges.values() for s in b["step"].unique()})
    depths = set()
    for ax, (scheme, bridge) in zip(axes[0], bridges.items()):
        depth = int(bridge["layer"].max())
        depths.add(depth)
        for step in sorted(bridge["step"].unique()):
            rows = bridge[bridge["step"] == step]
            ax.scatter(rows["sigma_in"], rows["align_a"], s=8, color=colours[int(step)], label=f"step {step}")
        sigma = np.geomspace(max(bridge["sigma_in"].min(), 1e-6), bridge["sigma_in"].max(), 50)
        ax.plot(sigma, sigma / depth, "k--", lw=1, label=f"boundary a = sigma/L (L={depth})")
        ax.axhline(0.0, color="grey", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_xlabel("sigma_{l-1} (rms of the stream into block l)")
        ax.set_ylabel("a_l (aligned strength)")
        ax.set_title(f"{_LABEL[scheme]}: every block, every logged step", fontsize=8)
    figure_legend(fig, [(Line2D([], [], color="k", linestyle="--", lw=1),
                         f"boundary a = sigma/L (L={'/'.join(map(str, sorted(depths)))}): above it the aligned part "
                         "alone grows the stream e-fold over the stack")])
    return save_figure(fig, out_dir, "trained_bridge")
