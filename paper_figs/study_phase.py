"""The atlas's learning-rate x depth phase diagram: the trained growth class, and the held-out loss at every depth.

From the ``lr_depth`` study where the results have one (the 400-step atlas, every seed), else
from the tuning models of a tuned depth study (its tuning seeds at every rate a cell tried, one
model per cell: the caption says so). Top: one heatmap per scheme, a cell per depth and rate,
with its class in words, coloured by the polynomial exponent ``p`` where the class is
polynomial, orange where it is exponential and grey where no class is shown: a profile of fewer
than :data:`~simulate.claims.along_axes.IDENTIFIABLE_BLOCKS` blocks cannot identify one
(:func:`shown_class`), or the fits cannot tell the classes apart. A cell a study never planned (a
tuned cell goes past its grid only where it chose an edge) is white and says "not tried"; only a
planned model that has not finished reads "pending". Bottom: the held-out loss against the rate,
one line per depth (:func:`paper_figs.studies.depth_styles`), one panel per scheme, one y range.

>>> cell_word(GrowthClass.EXPONENTIAL, 0.0741)
'exp\\nr=0.074'
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from paper_figs.legends import figure_legend
from paper_figs.studies import (AXIS_LABELS, SCHEME_LABELS, atlas_name, axis_band, depth_legend, depth_styles,
                                errorbars, log_axis, study_caption)
from paper_figs.style import save_figure, new_figure
from simulate.claims import CLAIMS, Kind, growth_summary
from simulate.claims.along_axes import IDENTIFIABLE_BLOCKS
from simulate.study.atlas import ATLAS_DIR, atlas_results, atlas_studies
from theory.verdicts import GrowthClass, PointStatus

__all__ = ["NOT_TRIED", "FILLS", "shown_class", "cell_word", "phase_cells", "phase_figure", "study_phase"]

NOT_TRIED = "not\ntried"
# The colour of a cell that has no polynomial exponent to colour it, by what the cell says.
FILLS = {"exp": "#f5b971", "no class": "0.85", "not tried": "white"}
_GROWTH_CLAIM = {"pre": "p1-lemma-3.2-growth", "lns": "p1-lns-growth"}


def shown_class(growth_class: GrowthClass, depth: int) -> GrowthClass:
    """The class a cell of ``depth`` blocks shows: ``not identifiable`` below
    :data:`~simulate.claims.along_axes.IDENTIFIABLE_BLOCKS` blocks, whatever the fit said (a level written by
    older code may carry a class there), else ``growth_class``.

    >>> shown_class(GrowthClass.POLYNOMIAL, 2)
    <GrowthClass.NOT_IDENTIFIABLE: 'not identifiable'>
    """
    return growth_class if depth >= IDENTIFIABLE_BLOCKS else GrowthClass.NOT_IDENTIFIABLE


def cell_word(growth_class: GrowthClass, value: float) -> str:
    """What a finished cell says: its exponent, its rate per layer, or that it has no class (undetermined, or too
    few blocks to identify one)."""
    if growth_class is GrowthClass.POLYNOMIAL:
        return f"p={value:.2f}"
    if growth_class is GrowthClass.EXPONENTIAL:
        return f"exp\nr={value:.2g}"
    return "n.i." if growth_class is GrowthClass.NOT_IDENTIFIABLE else "undet."


def _tuning_phase(results) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The phase diagram's cells from a tuned depth study's tuning models (its tuning seeds at every rate a cell
    tried): ``(levels, points, caption)``, levels and points shaped as an ``lr_depth`` study's, the caption naming
    the models drawn."""
    from simulate.study.plan.tuning import tuning_points
    from simulate.study.read.models import load_models

    study = atlas_studies(results)["depth"]
    tuning = dataclasses.replace(study, sweep=dataclasses.replace(study.sweep,
                                                                  points=tuple(tuning_points(study, results))))
    models = load_models(tuning, results, statistics=False)
    claim = {c.schemes[0]: c.id for c in CLAIMS.values() if c.kind is Kind.GROWTH}
    points, levels = [], []
    for m in models:
        cell = {"scheme": m.scheme, "depth": m.point.setting.depth, "lr": m.point.setting.lr,
                "steps": m.point.options["steps"]}
        loss = m.evidence.model_score("loss") if m.evidence is not None else np.nan
        points.append({**cell, "status": m.status, "val_loss": loss})
        if m.status is PointStatus.OK:
            summary = growth_summary(m.evidence.last_profile())
            exponential = summary.label is GrowthClass.EXPONENTIAL
            levels.append({**cell, "claim": claim[m.scheme], "statistic": "growth_rate" if exponential else
                           "growth_exponent", "growth_class": summary.label,
                           "mean": (summary.rate if exponential else summary.exponent).estimate})
    points = pd.DataFrame(points)
    steps = ", ".join(str(int(s)) for s in sorted(points["steps"].unique())) if len(points) else "no"
    seeds = ", ".join(map(str, study.tune_seeds))
    per_cell = "one model" if len(study.tune_seeds) == 1 else f"{len(study.tune_seeds)} models"
    caption = (f"{atlas_name(results)}, study depth, its tuning models: seed{'s' * (len(study.tune_seeds) > 1)} "
               f"{seeds}, {steps} steps, every rate each cell tried ({per_cell} per cell and rate)")
    return pd.DataFrame(levels, columns=["scheme", "depth", "lr", "claim", "statistic", "growth_class", "mean"]), \
        points, caption


def phase_cells(levels: pd.DataFrame, points: pd.DataFrame, scheme: str) -> pd.DataFrame:
    """One row per depth and rate of the diagram: ``depth, lr, text, exponent, fill``.

    A cell with a finished model says the class it shows (:func:`shown_class`, :func:`cell_word`), its
    ``exponent`` where that is polynomial (else NaN) and its ``fill`` (a key of :data:`FILLS`, or
    ``colour scale``: coloured by its exponent); one whose planned models are not finished says ``pending`` (or
    ``failed``); one no model of ``scheme`` was planned for, :data:`NOT_TRIED`.

    >>> deep = IDENTIFIABLE_BLOCKS  # a class is shown from here on
    >>> points = pd.DataFrame({"scheme": "pre", "depth": [2, 2, deep], "lr": [1e-3, 1e-2, 1e-3],
    ...                        "status": [PointStatus.OK, PointStatus.PENDING, PointStatus.OK]})
    >>> levels = pd.DataFrame({"claim": "p1-lemma-3.2-growth", "statistic": ["growth_exponent", "growth_rate"],
    ...                        "depth": [2, deep], "lr": [1e-3, 1e-3], "mean": [1.2, 0.3],
    ...                        "growth_class": [GrowthClass.POLYNOMIAL, GrowthClass.EXPONENTIAL]})
    >>> phase_cells(levels, points, "pre")[["text", "fill"]].values.tolist()  # doctest: +NORMALIZE_WHITESPACE
    [['n.i.', 'no class'], ['pending', 'no class'], ['exp\\nr=0.3', 'exp'], ['not\\ntried', 'not tried']]
    """
    rows = levels[(levels["claim"] == _GROWTH_CLAIM[scheme])
                  & levels["statistic"].isin(["growth_exponent", "growth_rate"])]  # the profile's class per cell
    finished = {(r.depth, r.lr): r for r in rows.itertuples()}
    mine = points[points["scheme"] == scheme]
    out = []
    for depth in sorted(points["depth"].unique()):
        for lr in sorted(points["lr"].unique()):
            row = finished.get((depth, lr))
            planned = mine[(mine["depth"] == depth) & (mine["lr"] == lr)]["status"]
            shown = shown_class(row.growth_class, depth) if row is not None else None
            if row is not None:
                text = cell_word(shown, row.mean)
            elif not len(planned):
                text = NOT_TRIED
            else:
                text = str(PointStatus.PENDING if (planned == PointStatus.PENDING).any() else PointStatus.FAILED)
            fill = {GrowthClass.POLYNOMIAL: "colour scale", GrowthClass.EXPONENTIAL: "exp"}.get(
                shown, "not tried" if text == NOT_TRIED else "no class")
            exponent = row.mean if shown is GrowthClass.POLYNOMIAL else np.nan
            out.append({"depth": depth, "lr": lr, "text": text, "exponent": exponent, "fill": fill})
    return pd.DataFrame(out, columns=["depth", "lr", "text", "exponent", "fill"])


def _heatmap(ax, cells: pd.DataFrame, scheme: str, vmax: float):
    """One scheme's cells: a polynomial one coloured by its exponent on the scale ``[0, vmax]``, any other filled
    by :data:`FILLS`; the image."""
    depths, lrs = sorted(cells["depth"].unique()), sorted(cells["lr"].unique())
    grid = cells.pivot(index="depth", columns="lr", values="exponent").reindex(index=depths, columns=lrs)
    ax.grid(False)
    mesh = ax.imshow(grid.to_numpy(float), origin="lower", aspect="auto", cmap="viridis", interpolation="nearest",
                     vmin=0.0, vmax=vmax)
    for r in cells.itertuples():
        i, j = depths.index(r.depth), lrs.index(r.lr)
        if r.fill in FILLS:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=FILLS[r.fill], edgecolor="0.7", lw=0.5))
        ax.text(j, i, r.text, ha="center", va="center", fontsize=7, color="0.4" if r.text == NOT_TRIED else "k",
                bbox=None if r.text == NOT_TRIED else {"boxstyle": "round,pad=0.2", "facecolor": "white",
                                                        "alpha": 0.8, "lw": 0})
    ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs])
    ax.set_yticks(range(len(depths)), [str(int(d)) for d in depths])
    ax.set_xlabel(AXIS_LABELS["lr"])
    ax.set_ylabel(AXIS_LABELS["depth"])
    ax.set_title(f"{SCHEME_LABELS[scheme]}: growth class of the trained variance", fontsize=8)
    return mesh


def _key(cells: pd.DataFrame, one_model_points: bool) -> list:
    """The figure legend: each fill the diagram has, with the words of its cells, and the loss panels' hollow
    markers where a point is one model."""
    texts, fills = set(cells["text"]), set(cells["fill"])
    key = []
    if "exp" in fills:
        key.append((Patch(facecolor=FILLS["exp"], edgecolor="0.5", linewidth=0.5),
                    "orange: exponential (exp), r = rate per layer"))
    if "no class" in fills:
        words = [f"n.i.: fewer than {IDENTIFIABLE_BLOCKS} blocks, too few to identify a class "
                 "(docs/studies.md#growth-across-depth)"] * ("n.i." in texts)
        words += ["undet.: the fits cannot tell the classes apart"] * ("undet." in texts)
        words += ["pending: planned, not yet trained"] * ("pending" in texts)
        words += ["failed: every planned model failed"] * ("failed" in texts)
        key.append((Patch(facecolor=FILLS["no class"], edgecolor="0.5", linewidth=0.5),
                    f"grey: no class shown ({'; '.join(words)})"))
    if "not tried" in fills:
        key.append((Patch(facecolor=FILLS["not tried"], edgecolor="0.5", linewidth=0.5),
                    "white: a rate the study never planned at that depth"))
    if one_model_points:
        key.append((Line2D([], [], color="0.3", marker="o", markersize=3, markerfacecolor="white", lw=0),
                    "hollow marker (loss): one model, no interval"))
    return key


def phase_figure(results=ATLAS_DIR):
    """The learning-rate x depth phase diagram: trained growth class and exponent, and the held-out loss."""
    if "lr_depth" in atlas_studies(results):
        study = atlas_results("lr_depth", results)
        levels, points, caption = study.levels, study.points, f"{study_caption(results, 'lr_depth')} (every seed)"
    else:
        levels, points, caption = _tuning_phase(results)
    fig, axes = new_figure(ncols=2, nrows=2, width=3.9, height=2.9)
    cells = {scheme: phase_cells(levels, points, scheme) for scheme in ("pre", "lns")}
    vmax = max(2.0, *(float(np.nanmax(c["exponent"].to_numpy(float), initial=0.0)) for c in cells.values()))
    for ax, scheme in zip(axes[0], cells):  # one colour scale: the same p is the same colour in both panels
        mesh = _heatmap(ax, cells[scheme], scheme, vmax)
    if any((c["fill"] == "colour scale").any() for c in cells.values()):  # a scale only for cells it colours
        # beside the right panel, in the margin the loss legend below it keeps (a layout colorbar would go past it)
        fig.colorbar(mesh, cax=axes[0, 1].inset_axes([1.04, 0.0, 0.05, 1.0]), label="polynomial exponent p")
    styles = depth_styles(points["depth"].unique())
    axes[1, 1].sharey(axes[1, 0])
    one_model = False
    for ax, scheme in zip(axes[1], ("pre", "lns")):
        for depth, style in styles.items():
            band = axis_band(points[points["depth"] == depth], "val_loss", "lr", scheme)
            if not band.empty:  # a depth of an unfinished atlas
                one_model |= bool(errorbars(ax, band, "lr", label=f"L={int(depth)}", **style).any())
        log_axis(ax, points["lr"], "lr")
        ax.set_ylabel("held-out loss (nats/byte)")
        ax.set_title(f"{SCHEME_LABELS[scheme]}: held-out loss against the rate", fontsize=8)
    depth_legend(axes[1])  # every depth either panel drew (a deeper cell may have one scheme only)
    figure_legend(fig, _key(pd.concat(cells.values()), one_model), ncol=1)
    fig.suptitle(f"learning rate x depth: the growth class of the trained variance, and the held-out loss\n{caption}",
                 fontsize=8)
    return fig


def study_phase(out_dir, quick: bool = False, results=ATLAS_DIR):
    """The learning-rate x depth phase diagram: trained growth class and exponent, and the held-out loss."""
    return save_figure(phase_figure(results), out_dir, "study_phase")
