"""The atlas's figures: the papers' trained claims as trends over depth, width, training length and learning rate.

Every figure reads the shipped results (:mod:`simulate.study.atlas`, ``results/atlas``) and
nothing else, so it builds in seconds; ``quick`` changes nothing. ``NAME_figure(results)``
draws and returns the figure (notebook 08), ``study_NAME(out_dir, quick)`` saves it (the
registry). Points are means over the
seeds with 95 % t intervals (differences of two schemes paired by seed, as the study's
``levels.csv``).

``study_depth``      P2 Fig. 2 at tiny scale: the variance profile of every depth (Pre-LN, LNS,
                     one y range), ``||J - I||`` and the causal, permutation and usefulness scores
                     against depth
``study_pruning``    P1 Fig. 1 for every depth: the loss change when one block is deleted, against
                     the relative depth ``l/L``
``study_lns_gain``   LNS minus Pre-LN (held-out loss, deep-half angular distance, deep-half pruning
                     drop) against depth, width and training steps
``study_phase``      the learning-rate x depth phase diagram of the trained growth class and exponent
                     (a grey cell: a class other than polynomial, named in the cell; a key below)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from paper_figs.legends import figure_legend
from paper_figs.style import METRIC_LABELS, new_figure, place_legend, save_figure
from simulate.claims import CLAIMS, Kind, growth_summary, t_interval
from simulate.study.atlas import ATLAS_DIR, atlas_models, atlas_results, atlas_studies

__all__ = ["study_depth", "study_pruning", "study_lns_gain", "study_phase", "depth_figure", "pruning_figure",
           "lns_gain_figure", "phase_figure", "axis_band"]

_LABEL = {"pre": "Pre-LN", "lns": "LNS"}
_COLOR = {"pre": "C0", "lns": "C3"}
_GAIN = (("p1-lns-loss", "held-out loss", "nats/byte"),
         ("p1-lns-angular", "deep-half angular distance", METRIC_LABELS["angular"]),
         ("p1-lns-prune", "deep-half pruning drop", "nats/byte"))
# The depth figure's panels of one statistic against depth: (statistic, title, y label).
_DEPTH_PANELS = (("jac_dev_mean", "distance from the identity", f"block mean {METRIC_LABELS['jac_dev']}"),
                 ("causal_mean", "causal score (P2)", "block mean causal score"),
                 ("permutation_mean", "permutation score (P2)", "block mean permutation score"),
                 ("usefulness_log", "usefulness (P2)", f"block mean {METRIC_LABELS['usefulness_log']}"))
# What a phase-diagram cell says when its growth class is not polynomial (those cells are grey).
_PHASE_KEY = "grey: not polynomial (exp: exponential, r = rate per layer; undet.: no class; pending: not trained)"
_AXIS_LABEL = {"depth": "depth L (blocks)", "width": "width d", "steps": "training steps", "lr": "peak learning rate"}


def axis_band(points: pd.DataFrame, statistic: str, axis: str, scheme: str) -> pd.DataFrame:
    """Per value of ``axis``: the mean of ``statistic`` over the ok models of ``scheme``, its t interval, n.

    >>> points = pd.DataFrame({"status": "ok", "scheme": "pre", "depth": [4, 4, 8, 8], "x": [1.0, 3.0, 5.0, 7.0]})
    >>> axis_band(points, "x", "depth", "pre")[["depth", "mean", "n"]].values.tolist()
    [[4.0, 2.0, 2.0], [8.0, 6.0, 2.0]]
    """
    rows = points[(points["status"] == "ok") & (points["scheme"] == scheme)]
    out = []
    for value, group in rows.groupby(axis):
        mean, low, high = t_interval(group[statistic])  # Interval(estimate, low, high)
        out.append({axis: float(value), "mean": mean, "low": low, "high": high, "n": float(len(group))})
    return pd.DataFrame(out, columns=[axis, "mean", "low", "high", "n"])


def _errorbars(ax, band: pd.DataFrame, axis: str, **style) -> None:
    x, mean = band[axis].to_numpy(), band["mean"].to_numpy()
    yerr = np.vstack([mean - band["low"].to_numpy(), band["high"].to_numpy() - mean])  # (2, n)
    ax.errorbar(x, mean, yerr=np.nan_to_num(yerr), marker="o", markersize=3, capsize=2, lw=1, **style)


def _log_axis(ax, values, axis: str) -> None:
    """A log x axis labelled with the study's own axis values."""
    values = sorted(set(float(v) for v in values))
    ax.set_xscale("log")
    ax.set_xticks(values, [f"{v:g}" for v in values])
    ax.minorticks_off()
    ax.set_xlabel(_AXIS_LABEL[axis])


def _mean_profile(models, scheme: str, depth: int) -> np.ndarray | None:
    """The mean last-step variance profile over the ok models of one cell (None while none is trained)."""
    curves = [m.evidence.last_profile() for m in models
              if m.status == "ok" and m.scheme == scheme and m.point.setting.depth == depth]  # (L+1,) each
    return np.mean(curves, axis=0) if curves else None  # (L+1,)


def _full_length(points: pd.DataFrame, models: list) -> tuple[pd.DataFrame, list]:
    """The models trained for the study's whole length (a stability study also has shorter ones)."""
    steps = points["steps"].max()
    return points[points["steps"] == steps], [m for m in models if m.point.options["steps"] == steps]


def depth_figure(results=ATLAS_DIR):
    """P2 Fig. 2 at tiny scale: variance profiles per depth, ||J - I|| and the three scores against depth."""
    points, models = _full_length(atlas_results("depth", results).points, atlas_models("depth", results))
    depths = sorted(points["depth"].unique())
    fig, axes = new_figure(ncols=3, nrows=2, width=2.9, height=2.4)
    colors = {depth: f"C{i}" for i, depth in enumerate(depths)}
    axes[0, 1].sharey(axes[0, 0])  # one y range: LNS's smaller growth is seen, not rescaled away
    for ax, scheme in zip(axes[0, :2], ("pre", "lns")):
        for depth in depths:
            profile = _mean_profile(models, scheme, int(depth))
            if profile is None:  # a depth of an unfinished atlas
                continue
            ax.plot(np.arange(len(profile)), profile, lw=1, color=colors[depth], label=f"L={depth}")
        ax.set_yscale("log")
        ax.set_xlabel(r"layer $\ell$")
        ax.set_ylabel(f"stream variance {METRIC_LABELS['var']}")
        ax.set_title(f"{_LABEL[scheme]}: variance, trained (y shared)", fontsize=8)
    place_legend(axes[0, 1])
    for ax, (statistic, title, label) in zip([axes[0, 2], *axes[1]], _DEPTH_PANELS):
        for scheme in ("pre", "lns"):
            _errorbars(ax, axis_band(points, statistic, "depth", scheme), "depth", color=_COLOR[scheme],
                       label=_LABEL[scheme])
        _log_axis(ax, depths, "depth")
        ax.set_title(title, fontsize=8)
        ax.set_ylabel(label)
    place_legend(axes[1, 2])
    return fig


def pruning_figure(results=ATLAS_DIR):
    """P1 Fig. 1 for every depth: the loss change when one block is deleted, against relative depth l/L."""
    _, models = _full_length(atlas_results("depth", results).points, atlas_models("depth", results))
    depths = sorted({m.point.setting.depth for m in models})
    fig, axes = new_figure(ncols=2, width=3.4, height=2.6)
    for ax, scheme in zip(axes[0], ("pre", "lns")):
        for i, depth in enumerate(depths):
            drops = [m.evidence.block_values("prune") for m in models
                     if m.status == "ok" and m.scheme == scheme and m.point.setting.depth == depth]
            if not drops:
                continue
            ax.plot(np.arange(1, depth + 1) / depth, np.mean(drops, axis=0), marker="o", markersize=2, lw=1,
                    color=f"C{i}", label=f"L={depth}")
        ax.axhline(0.0, color="k", lw=0.6)
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_xlabel("relative depth l/L of the deleted block")
        ax.set_ylabel("held-out loss change (nats/byte)")
        ax.set_title(f"{_LABEL[scheme]}: pruning one block (P1 Fig. 1)", fontsize=8)
    place_legend(axes[0, 1])
    return fig


def lns_gain_figure(results=ATLAS_DIR):
    """LNS minus Pre-LN (loss, deep angular distance, deep pruning drop) against depth, width and steps, as far
    as the results have those studies; a stability study's shorter models beside the full-length ones."""
    names = [name for name in ("depth", "width", "steps") if name in atlas_studies(results)]
    fig, axes = new_figure(ncols=len(names), nrows=3, width=2.5, height=2.0)
    for col, name in enumerate(names):
        levels = atlas_results(name, results).levels
        lengths = sorted(levels["steps"].unique()) if "steps" in levels and name != "steps" else [None]
        for row, (claim, label, unit) in enumerate(_GAIN):
            ax = axes[row, col]
            ax.set_title(f"{label}, LNS - Pre-LN", fontsize=7)
            for steps, color in zip(lengths[::-1], ("C2", "0.6")):
                rows = levels[(levels["claim"] == claim) & ((levels["steps"] == steps) if steps else True)]
                _errorbars(ax, rows.sort_values(name), name, color=color,
                           label=f"{steps} steps" if len(lengths) > 1 else None)
            ax.axhline(0.0, color="k", lw=0.6)
            _log_axis(ax, levels[name], name)
            if col == 0:
                ax.set_ylabel(unit)
        if len(lengths) > 1:
            place_legend(axes[0, col])
    return fig


def _tuning_phase(results) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The phase diagram's cells from a tuned depth study's tuning models (one per scheme, depth and rate):
    ``(levels, points, note)`` shaped as an ``lr_depth`` study's."""
    import dataclasses

    from simulate.study.analysis import load_models
    from simulate.study.tuning import tuning_points

    study = atlas_studies(results)["depth"]
    tuning = dataclasses.replace(study, sweep=dataclasses.replace(study.sweep,
                                                                  points=tuple(tuning_points(study, results))))
    models = load_models(tuning, results, statistics=False)
    claim = {c.schemes[0]: c.id for c in CLAIMS.values() if c.kind is Kind.GROWTH}
    points, levels = [], []
    for m in models:
        cell = {"scheme": m.scheme, "depth": m.point.setting.depth, "lr": m.point.setting.lr}
        loss = m.evidence.model_score("loss") if m.evidence is not None else np.nan
        points.append({**cell, "status": m.status, "val_loss": loss})
        if m.status == "ok":
            summary = growth_summary(m.evidence.last_profile())
            levels.append({**cell, "claim": claim[m.scheme], "statistic": "var_growth", "growth_class": summary.label,
                           "mean": (summary.rate if summary.label == "exponential" else summary.exponent).estimate})
    note = (f"the tuning models: seed {', '.join(map(str, study.tune_seeds))}, "
            f"{study.stability[1] if study.stability else ''} steps")
    return pd.DataFrame(levels, columns=["scheme", "depth", "lr", "claim", "statistic", "growth_class", "mean"]), \
        pd.DataFrame(points), note


def phase_figure(results=ATLAS_DIR):
    """The learning-rate x depth phase diagram: trained growth class and exponent, and the held-out loss.

    From the ``lr_depth`` study where the results have one (the 400-step atlas), else from the
    tuning models of a tuned depth study (one seed per cell).
    """
    if "lr_depth" in atlas_studies(results):
        results_ = atlas_results("lr_depth", results)
        levels, points, note = results_.levels, results_.points, "every seed"
    else:
        levels, points, note = _tuning_phase(results)
    fig, axes = new_figure(ncols=3, width=3.4, height=2.5)
    for ax, (claim, scheme) in zip(axes[0, :2], (("p1-lemma-3.2-growth", "pre"), ("p1-lns-growth", "lns"))):
        rows = levels[(levels["claim"] == claim) & (levels["statistic"] == "var_growth")]
        lrs, depths = sorted(points["lr"].unique()), sorted(points["depth"].unique())  # every planned cell
        grid = np.full((len(depths), len(lrs)), np.nan)  # (depths, lrs)
        for r in rows.itertuples():
            if r.growth_class == "polynomial":
                grid[depths.index(r.depth), lrs.index(r.lr)] = r.mean
        ax.set_facecolor("0.85")  # cells that are not polynomial stay grey, named by their text (_PHASE_KEY)
        ax.grid(False)
        mesh = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest",
                         vmin=0.0, vmax=max(2.0, float(np.nanmax(grid, initial=0.0))))
        texts = {(r.depth, r.lr): {"polynomial": f"p={r.mean:.2f}", "exponential": f"exp\nr={r.mean:.2g}"}.get(
            r.growth_class, "undet.") for r in rows.itertuples()}
        for i, depth in enumerate(depths):
            for j, lr in enumerate(lrs):
                ax.text(j, i, texts.get((depth, lr), "pending"), ha="center", va="center", fontsize=7,
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.8, "lw": 0})
        ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs], fontsize=7)
        ax.set_yticks(range(len(depths)), [str(d) for d in depths])
        ax.set_xlabel(_AXIS_LABEL["lr"])
        ax.set_ylabel(_AXIS_LABEL["depth"])
        ax.set_title(f"{_LABEL[scheme]}: growth class of var", fontsize=8)
        fig.colorbar(mesh, ax=ax, label="polynomial exponent p")
    ax = axes[0, 2]
    for scheme in ("pre", "lns"):
        for depth, style in zip(sorted(points["depth"].unique()), ("-", "--")):
            band = axis_band(points[points["depth"] == depth], "val_loss", "lr", scheme)
            if band.empty:  # a depth of an unfinished atlas
                continue
            _errorbars(ax, band, "lr", color=_COLOR[scheme], linestyle=style, label=f"{_LABEL[scheme]}, L={depth}")
    _log_axis(ax, points["lr"], "lr")
    ax.set_ylabel("held-out loss (nats/byte)")
    ax.set_title(f"held-out loss against learning rate\n({note})", fontsize=8)
    place_legend(ax)
    figure_legend(fig, [(Patch(facecolor="0.85", edgecolor="0.5", linewidth=0.5), _PHASE_KEY)])
    return fig


def study_depth(out_dir, quick: bool = False, results=ATLAS_DIR):
    """P2 Fig. 2 at tiny scale: variance profiles per depth, ||J - I|| and the three scores against depth."""
    return save_figure(depth_figure(results), out_dir, "study_depth")


def study_pruning(out_dir, quick: bool = False, results=ATLAS_DIR):
    """P1 Fig. 1 for every depth: the loss change when one block is deleted, against relative depth l/L."""
    return save_figure(pruning_figure(results), out_dir, "study_pruning")


def study_lns_gain(out_dir, quick: bool = False, results=ATLAS_DIR):
    """LNS minus Pre-LN (loss, deep angular distance, deep pruning drop) against depth, width and steps."""
    return save_figure(lns_gain_figure(results), out_dir, "study_lns_gain")


def study_phase(out_dir, quick: bool = False, results=ATLAS_DIR):
    """The learning-rate x depth phase diagram: trained growth class and exponent, and the held-out loss."""
    return save_figure(phase_figure(results), out_dir, "study_phase")
