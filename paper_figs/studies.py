"""The atlas's figures: the papers' trained claims as trends over depth, width, training length and learning rate.

Every figure reads the shipped results (:mod:`simulate.study.atlas`, ``results/atlas``) and
nothing else, so it builds in seconds; ``quick`` changes nothing. ``NAME_figure(results)``
draws and returns the figure (notebook 08), ``study_NAME(out_dir, quick)`` saves it (the
registry). Each figure's title names the results folder it was drawn from and the study's
length, seeds and rates (:func:`study_caption`), so two atlases' figures side by side say
which is which. Every depth, width or rate the results hold is drawn (a colour per depth,
:func:`depth_styles`). Points are means over the seeds with 95 % t intervals (differences
of two schemes paired by seed, as the study's ``levels.csv``).

``study_depth``      P2 Fig. 2 at tiny scale: the variance profile of every depth against the
                     relative depth ``l/L`` (Pre-LN, LNS, one y range, a 95 % band over seeds),
                     ``||J - I||`` and the causal, permutation and usefulness scores against depth
``study_pruning``    P1 Fig. 1 for every depth: the loss change when one block is deleted, against
                     the relative depth ``l/L`` (a symmetric log axis fitted to the drops)
``study_lns_gain``   LNS against Pre-LN (held-out loss LNS minus Pre-LN; deep-half angular
                     distance and pruning drop as log(LNS / Pre-LN), the claims' statistics)
                     against depth, width and training steps: the levels of the study's first
                     line (a tuned study's tuned line, without its tuning seeds); a point that
                     rests on one model is hollow and says so
``study_width``      the width study: held-out loss, log var_L and the deep/shallow pruning ratio against
                     width, a colour per depth, Pre-LN solid and LNS dashed, each model at its cell's
                     tuned rate (the tuned line; the fixed-rate line not drawn: the shipped points hold
                     the chosen rates' models only)
``study_phase``      the learning-rate x depth phase diagram of the trained growth class and exponent,
                     and the held-out loss against the rate at every depth
                     (:mod:`paper_figs.study_phase`)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from paper_figs.legends import figure_legend
from paper_figs.style import METRIC_LABELS, new_figure, place_legend, save_figure
from simulate.claims import CLAIMS, t_interval
from simulate.runtime.versions import ROOT
from simulate.study.atlas import ATLAS_DIR, atlas_models, atlas_results, atlas_studies
from theory.verdicts import PointStatus, RateLine

__all__ = ["SCHEME_LABELS", "SCHEME_COLORS", "AXIS_LABELS", "LINTHRESH", "study_depth", "study_pruning",
           "study_lns_gain", "study_width", "depth_figure", "pruning_figure", "lns_gain_figure", "width_figure", "gain_labels", "axis_band",
           "errorbars", "depth_legend", "log_axis", "symlog_limits", "depth_styles", "atlas_name", "study_caption"]

SCHEME_LABELS = {"pre": "Pre-LN", "lns": "LNS"}
SCHEME_COLORS = {"pre": "C0", "lns": "C3"}
AXIS_LABELS = {"depth": "depth L (blocks)", "width": "width d", "steps": "training steps", "lr": "peak learning rate"}
# LNS against Pre-LN: the claims drawn and what each panel is about.
_GAIN = (("p1-lns-loss", "held-out loss"), ("p1-lns-angular", "deep-half angular distance"),
         ("p1-lns-prune", "deep-half pruning drop"))
_UNITS = {"val_loss": "nats/byte"}
# The depth figure's panels of one statistic against depth: (statistic, title, y label).
_DEPTH_PANELS = (("jac_dev_mean", "distance from the identity", f"block mean {METRIC_LABELS['jac_dev']}"),
                 ("causal_mean", "causal score (P2)", "block mean causal score"),
                 ("permutation_mean", "permutation score (P2)", "block mean permutation score"),
                 ("usefulness_log", "usefulness (P2)", f"block mean {METRIC_LABELS['usefulness_log']}"))
# The width figure's panels against width: (statistic, title, y label).
_WIDTH_PANELS = (("val_loss", "held-out loss", "held-out loss (nats/byte)"),
                 ("var_last", "last layer's variance (P1 Lemma 3.2)", r"$\log \sigma_L^2$"),
                 ("prune_log_ratio", "deep / shallow pruning drop (P1 Thm 3.3)", "log(deep drop / shallow drop)"))
_SCHEME_LINES = {"pre": "-", "lns": "--"}  # the width figure: a colour per depth, a dash per scheme
_LINESTYLES = ("-", "--", ":", "-.")
LINTHRESH = 1e-3  # nats/byte: the pruning axis is linear within this of 0 (a deletion that costs nothing), log beyond
_MARGIN_DECADES = 0.15  # room above the largest drop on the pruning axis


def atlas_name(results) -> str:
    """The results folder as a reader finds it: relative to the repository when inside it.

    >>> atlas_name(ATLAS_DIR)
    'results/atlas'
    """
    path = Path(results).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def study_caption(results, name: str, full_length_only: bool = False, levels: bool = False) -> str:
    """One line naming the results folder, the study, its training lengths, seeds and learning rates.

    Read from the study's points and spec (nothing typed in), e.g.
    ``results/atlas, study depth: 4000 steps (and 2000: stability), 3 seeds, lr tuned per scheme and cell``;
    for a figure that draws the full length only (``full_length_only``), ``4000 steps (the 2000-step twins
    not drawn)``. A figure of the study's levels (``levels``) names the seeds they rest on: a tuned study's
    levels are its tuned line without the tuning seeds, whose models chose the rates
    (:func:`simulate.study.judge.analysis.comparison_lines`), e.g. ``2 seeds (tuning seed 0 left out), the tuned line
    (the fixed-rate line not drawn)``.
    """
    report, study = atlas_results(name, results), atlas_studies(results)[name]
    points = report.points
    steps = sorted(int(s) for s in points["steps"].unique())
    if study.stability and len(steps) > 1:
        shorter = ", ".join(map(str, steps[:-1]))
        length = (f"{steps[-1]} steps (the {shorter}-step twins not drawn)" if full_length_only
                  else f"{steps[-1]} steps (and {shorter}: stability)")
    elif "steps" in study.axes:
        length = "steps " + ", ".join(map(str, steps))
    else:
        length = f"{steps[-1]} steps"
    rates = "lr tuned per scheme and cell" if study.tuned else (
        "lr " + ", ".join(f"{lr:g}" for lr in sorted(points["lr"].unique())))
    seeds = f"{points['seed'].nunique()} seeds"
    if levels and study.tuned:
        kept = set(points["seed"]) - set(study.tune_seeds)
        left = ", ".join(map(str, study.tune_seeds))
        seeds = f"{len(kept)} seeds (tuning seed{'s' * (len(study.tune_seeds) > 1)} {left} left out)"
        fixed = RateLine.FIXED in set(report.trends["line"])
        rates = "the tuned line" + (" (the fixed-rate line not drawn)" if fixed else "")
    return f"{atlas_name(results)}, study {name}: {length}, {seeds}, {rates}"


def depth_styles(depths) -> dict:
    """A colour (and past ten depths a dash) per depth, the same in every figure of one atlas.

    >>> depth_styles([2, 4])[4]
    {'color': 'C1', 'linestyle': '-'}
    """
    return {depth: {"color": f"C{i % 10}", "linestyle": _LINESTYLES[(i // 10) % len(_LINESTYLES)]}
            for i, depth in enumerate(sorted(depths))}


def axis_band(points: pd.DataFrame, statistic: str, axis: str, scheme: str) -> pd.DataFrame:
    """Per value of ``axis``: the mean of ``statistic`` over the ok models of ``scheme``, its t interval, n.

    >>> points = pd.DataFrame({"status": PointStatus.OK, "scheme": "pre", "depth": [4, 4, 8, 8],
    ...                        "x": [1.0, 3.0, 5.0, 7.0]})
    >>> axis_band(points, "x", "depth", "pre")[["depth", "mean", "n"]].values.tolist()
    [[4.0, 2.0, 2.0], [8.0, 6.0, 2.0]]
    """
    rows = points[(points["status"] == PointStatus.OK) & (points["scheme"] == scheme)]
    out = []
    for value, group in rows.groupby(axis):
        interval = t_interval(group[statistic])
        out.append({axis: float(value), "mean": interval.estimate, "low": interval.low, "high": interval.high,
                    "n": float(len(group))})
    return pd.DataFrame(out, columns=[axis, "mean", "low", "high", "n"])


def errorbars(ax, band: pd.DataFrame, axis: str, **style) -> np.ndarray:
    """Means with their intervals (``mean, low, high``) against ``axis``. A point without an interval (one model)
    draws no bar and a hollow marker; returns which points those are, ``(n,)`` booleans, for the figure's key."""
    x, mean = band[axis].to_numpy(float), band["mean"].to_numpy(float)
    low, high = band["low"].to_numpy(float), band["high"].to_numpy(float)
    alone = ~(np.isfinite(low) & np.isfinite(high))  # (n,)
    yerr = np.vstack([mean - low, high - mean])  # (2, n)
    bars = ax.errorbar(x, mean, yerr=np.nan_to_num(yerr), marker="o", markersize=3, capsize=2, lw=1, **style)
    if alone.any():
        ax.plot(x[alone], mean[alone], linestyle="none", marker="o", markersize=3, markerfacecolor="white",
                markeredgecolor=bars.lines[0].get_color(), zorder=bars.lines[0].get_zorder() + 0.1)
    return alone


def depth_legend(panels) -> None:
    """One legend beside the last of ``panels`` with every depth drawn in any of them (artists labelled
    ``L=...``: lines or error bars), in order of depth: a depth one scheme has not trained yet (a deeper cell
    still tuning) still names the other scheme's artist."""
    entries = {label: handle for ax in panels for handle, label in zip(*ax.get_legend_handles_labels())
               if label.startswith("L=")}
    labels = sorted(entries, key=lambda label: int(label.removeprefix("L=")))
    place_legend(panels[-1], handles=[entries[label] for label in labels], labels=labels)


def log_axis(ax, values, axis: str) -> None:
    """A log x axis labelled with the study's own axis values."""
    values = sorted(set(float(v) for v in values))
    ax.set_xscale("log")
    ax.set_xticks(values, [f"{v:g}" for v in values])
    ax.minorticks_off()
    ax.set_xlabel(AXIS_LABELS[axis])


def symlog_limits(ax, values) -> None:
    """A symmetric log y axis (linear within :data:`LINTHRESH` of 0) whose limits fit ``values``: the largest
    :data:`_MARGIN_DECADES` below the top, the smallest (a negative one, or 0) at the bottom, so no panel keeps an
    empty range below its data and no point sits on its top edge.

    >>> from paper_figs.style import new_figure
    >>> fig, axes = new_figure()
    >>> symlog_limits(axes[0, 0], [2e-4, 0.5])
    >>> [round(float(v), 3) for v in axes[0, 0].get_ylim()]
    [0.0, 0.706]
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    ax.set_yscale("symlog", linthresh=LINTHRESH, linscale=0.5)
    top = 10 ** (np.log10(max(values.max(), LINTHRESH)) + _MARGIN_DECADES)
    lowest = min(values.min(), 0.0)
    if lowest <= -LINTHRESH:  # on the log part below 0: the same margin as at the top
        bottom = -10 ** (np.log10(-lowest) + _MARGIN_DECADES)
    else:  # on the linear part: a tenth more
        bottom = 1.1 * lowest
    ax.set_ylim(bottom, top)


def _profile_band(models, scheme: str, depth: int):
    """The last-step variance profile of one cell over its ok models: geometric mean and the 95 % t interval
    of ``log var`` per layer, as ``(mean, low, high)`` each ``(L+1,)``; None while no model is trained."""
    logs = [np.log(m.evidence.last_profile()) for m in models
            if m.status is PointStatus.OK and m.scheme == scheme and m.point.setting.depth == depth]  # (L+1,) each
    if not logs:
        return None
    logs = np.asarray(logs)  # (models, L+1)
    bands = [t_interval(logs[:, layer]) for layer in range(logs.shape[1])]
    return np.exp(np.array([[b.estimate for b in bands], [b.low for b in bands], [b.high for b in bands]]))  # (3, L+1)


def _full_length(points: pd.DataFrame, models: list) -> tuple[pd.DataFrame, list]:
    """The models trained for the study's whole length (a stability study also has shorter ones)."""
    steps = points["steps"].max()
    return points[points["steps"] == steps], [m for m in models if m.point.options["steps"] == steps]


def depth_figure(results=ATLAS_DIR):
    """P2 Fig. 2 at tiny scale: variance profiles per depth against the relative depth l/L (a 2-block profile is
    as wide as a 64-block one), ||J - I|| and the three scores against depth."""
    points, models = _full_length(atlas_results("depth", results).points, atlas_models("depth", results))
    depths = sorted(int(d) for d in points["depth"].unique())
    styles = depth_styles(depths)
    fig, axes = new_figure(ncols=3, nrows=2, width=2.9, height=2.4)
    axes[0, 1].sharey(axes[0, 0])  # one y range: LNS's smaller growth is seen, not rescaled away
    for ax, scheme in zip(axes[0, :2], ("pre", "lns")):
        for depth in depths:
            band = _profile_band(models, scheme, depth)
            if band is None:  # a depth of an unfinished atlas
                continue
            relative = np.arange(band.shape[1]) / depth  # every depth over the whole axis, 0 = the input
            ax.plot(relative, band[0], lw=1, label=f"L={depth}", **styles[depth])
            ax.fill_between(relative, band[1], band[2], color=styles[depth]["color"], alpha=0.25, lw=0)
        ax.set_yscale("log")
        ax.set_xlabel(r"relative depth $\ell/L$ (0: the input)")
        ax.set_ylabel(f"stream variance {METRIC_LABELS['var']}")
        ax.set_title(f"{SCHEME_LABELS[scheme]}: variance, trained (y shared)", fontsize=8)
    depth_legend(axes[0, :2])
    for ax, (statistic, title, label) in zip([axes[0, 2], *axes[1]], _DEPTH_PANELS):
        for scheme in ("pre", "lns"):
            errorbars(ax, axis_band(points, statistic, "depth", scheme), "depth", color=SCHEME_COLORS[scheme],
                      label=SCHEME_LABELS[scheme])
        log_axis(ax, depths, "depth")
        ax.set_title(title, fontsize=8)
        ax.set_ylabel(label)
    place_legend(axes[1, 2])
    fig.suptitle("P2 Fig. 2 at tiny scale after training: geometric mean over seeds with its 95 % t band "
                 "(profiles), mean with its 95 % t interval (scores)\n"
                 + study_caption(results, "depth", full_length_only=True), fontsize=8)
    return fig


def pruning_figure(results=ATLAS_DIR):
    """P1 Fig. 1 for every depth: the loss change when one block is deleted, against relative depth l/L."""
    _, models = _full_length(atlas_results("depth", results).points, atlas_models("depth", results))
    depths = sorted({m.point.setting.depth for m in models})
    styles = depth_styles(depths)
    fig, axes = new_figure(ncols=2, width=3.4, height=2.6)
    for ax, scheme in zip(axes[0], ("pre", "lns")):
        drawn = []
        for depth in depths:
            drops = [m.evidence.block_values("prune") for m in models
                     if m.status is PointStatus.OK and m.scheme == scheme and m.point.setting.depth == depth]
            if not drops:
                continue
            drawn.append(np.mean(drops, axis=0))  # (depth,)
            ax.plot(np.arange(1, depth + 1) / depth, drawn[-1], marker="o", markersize=2, lw=1,
                    label=f"L={depth}", **styles[depth])
        ax.axhline(0.0, color="k", lw=0.6)
        if drawn:
            symlog_limits(ax, np.concatenate(drawn))
        ax.set_xlabel("relative depth l/L of the deleted block")
        ax.set_ylabel("held-out loss change (nats/byte)")
        ax.set_title(f"{SCHEME_LABELS[scheme]}: pruning one block (P1 Fig. 1)", fontsize=8)
    depth_legend(axes[0])
    fig.suptitle(f"mean over seeds of the loss change when one block is deleted (y: linear within {LINTHRESH:g} "
                 "of 0, log beyond)\n"
                 + study_caption(results, "depth", full_length_only=True), fontsize=8)
    return fig


def gain_labels(claim: str) -> tuple[str, str]:
    """``(what the statistic is, its y label)`` of an LNS-against-Pre-LN claim, read from its definition: a
    statistic of logs (``*_log``) differs as ``log(LNS / Pre-LN)``, any other as ``LNS - Pre-LN`` in its unit.

    >>> gain_labels("p1-lns-prune")
    ('log(LNS / Pre-LN)', 'log(LNS / Pre-LN) (0: equal)')
    >>> gain_labels("p1-lns-loss")
    ('LNS − Pre-LN', 'LNS − Pre-LN (nats/byte)')
    """
    statistic = CLAIMS[claim].statistic
    if statistic.endswith("_log"):
        return "log(LNS / Pre-LN)", "log(LNS / Pre-LN) (0: equal)"
    unit = _UNITS.get(statistic)
    return "LNS − Pre-LN", "LNS − Pre-LN" + (f" ({unit})" if unit else "")


def lns_gain_figure(results=ATLAS_DIR):
    """LNS against Pre-LN (loss difference; deep angular distance and deep pruning drop as log ratios) against
    depth, width and steps, one row per study the results have along that one axis; a stability study's shorter
    models in grey.

    The levels of each study's first line, as its ``levels.csv`` (:func:`study_caption` with ``levels``); a
    point whose mean rests on one model (the other seeds' statistic undefined, e.g. the log of a drop that is
    not positive) is hollow and marked ``n=1``."""
    studies = atlas_studies(results)
    # one row per study along one axis; a study along two (the atlas's width x depth) waits for its own figure
    names = [name for name in ("depth", "width", "steps") if name in studies and studies[name].axes == (name,)]
    fig, axes = new_figure(ncols=len(_GAIN), nrows=len(names), width=2.8, height=2.6)
    lengths_drawn: dict = {}
    alone_drawn = False
    for row, name in enumerate(names):
        levels = atlas_results(name, results).levels
        lengths = sorted(levels["steps"].unique()) if "steps" in levels and name != "steps" else [None]
        colours = dict(zip(lengths[::-1], ("C2", *[f"{0.45 + 0.15 * k:.2f}" for k in range(len(lengths))])))
        for col, (claim, what) in enumerate(_GAIN):
            ax = axes[row, col]
            kind, ylabel = gain_labels(claim)
            ax.set_title(f"{what}\n{kind}", fontsize=8)
            for steps in lengths[::-1]:
                rows = levels[(levels["claim"] == claim) & ((levels["steps"] == steps) if steps else True)]
                rows = rows.sort_values(name)
                alone = errorbars(ax, rows, name, color=colours[steps])
                for r in rows[alone & rows["mean"].notna().to_numpy()].itertuples():  # a drawn point
                    ax.annotate(f"n={int(r.n)}", (getattr(r, name), r.mean), xytext=(-4, 4), textcoords="offset points",
                                ha="right", fontsize=7, color=colours[steps])
                alone_drawn |= bool(alone.any())
                if steps:
                    lengths_drawn[int(steps)] = colours[steps]
            ax.axhline(0.0, color="k", lw=0.6)
            log_axis(ax, levels[name], name)
            ax.set_ylabel(ylabel)
    full = max(lengths_drawn, default=None)
    key = [(Line2D([], [], color=colour, marker="o", markersize=3),
            f"{steps} steps" + (" (full length)" if steps == full else " (twins of the same seeds: stability)"))
           for steps, colour in sorted(lengths_drawn.items(), reverse=True)] if len(lengths_drawn) > 1 else []
    if alone_drawn:
        key.append((Line2D([], [], color="0.3", marker="o", markersize=3, markerfacecolor="white", lw=0),
                    "hollow, n=1: one model's value, no interval (the other seeds' statistic undefined or not "
                    "trained)"))
    figure_legend(fig, key, ncol=min(len(key), 3) or None)
    captions = "\n".join(study_caption(results, name, levels=True) for name in names)
    fig.suptitle("LNS against Pre-LN, paired by seed: mean, 95 % t interval (0: no difference)\n" + captions,
                 fontsize=8)
    return fig


def width_figure(results=ATLAS_DIR):
    """The width study at its full length: held-out loss, ``log var_L`` and the deep/shallow pruning log ratio
    against width, a colour per depth and a dash per scheme; each point the mean over the seeds of its cell at the
    cell's tuned rate with its 95 % t interval (hollow: one model)."""
    planned = atlas_results("width", results).points
    planned = planned[planned["steps"] == planned["steps"].max()]  # the full length's models, finished or not
    points = planned[planned["status"] == PointStatus.OK]
    depths = sorted(int(d) for d in points["depth"].unique())
    styles = depth_styles(depths)
    fig, axes = new_figure(ncols=len(_WIDTH_PANELS), width=2.9, height=2.6)
    alone_drawn = False
    for ax, (statistic, title, label) in zip(axes[0], _WIDTH_PANELS):
        for depth in depths:
            for scheme, dash in _SCHEME_LINES.items():
                band = axis_band(points[points["depth"] == depth], statistic, "width", scheme)
                alone_drawn |= bool(errorbars(ax, band, "width", color=styles[depth]["color"], linestyle=dash,
                                              label=f"L={depth}" if scheme == "pre" else None).any())
        log_axis(ax, points["width"], "width")
        ax.set_title(title, fontsize=8)
        ax.set_ylabel(label)
    key = [(Line2D([], [], color="0.3", linestyle=dash), SCHEME_LABELS[scheme])
           for scheme, dash in _SCHEME_LINES.items()]
    key += [(Line2D([], [], color=styles[depth]["color"], marker="o", markersize=3), f"L={depth}") for depth in depths]
    if alone_drawn:
        key.append((Line2D([], [], color="0.3", marker="o", markersize=3, markerfacecolor="white", lw=0),
                    "hollow: one model, no interval"))
    figure_legend(fig, key, ncol=min(len(key), 6))
    fig.suptitle(f"the width study: mean over the seeds at each cell's tuned rate, 95 % t interval; {len(points)} of "
                 f"{len(planned)} full-length models finished\n"
                 + study_caption(results, "width", full_length_only=True) + " (the fixed-rate line not drawn)",
                 fontsize=8)
    return fig


def study_depth(out_dir, quick: bool = False, results=ATLAS_DIR):
    """P2 Fig. 2 at tiny scale: variance profiles per depth, ||J - I|| and the three scores against depth."""
    return save_figure(depth_figure(results), out_dir, "study_depth")


def study_pruning(out_dir, quick: bool = False, results=ATLAS_DIR):
    """P1 Fig. 1 for every depth: the loss change when one block is deleted, against relative depth l/L."""
    return save_figure(pruning_figure(results), out_dir, "study_pruning")


def study_lns_gain(out_dir, quick: bool = False, results=ATLAS_DIR):
    """LNS against Pre-LN (loss difference, log ratios of deep angular distance and pruning drop) along the axes."""
    return save_figure(lns_gain_figure(results), out_dir, "study_lns_gain")


def study_width(out_dir, quick: bool = False, results=ATLAS_DIR):
    """The width study: loss, log var_L and the pruning ratio against width, per depth and scheme."""
    return save_figure(width_figure(results), out_dir, "study_width")
