"""The atlas's learning-rate x depth phase diagram: the trained growth class, and the held-out loss at every depth.

From the ``lr_depth`` study where the results have one (the 400-step atlas, every seed), else
from the tuning models of a tuned depth study (its tuning seeds at every rate a cell tried).
Top: one heatmap per scheme, a cell per depth and rate, coloured by the polynomial exponent
``p`` where the growth class is polynomial and grey otherwise, with its class in words. A
cell a study never planned (a tuned cell goes past its grid only where it chose an edge) is
white and says "not tried"; only a planned model that has not finished reads "pending".
Bottom: the held-out loss against the rate, one line per depth (:func:`paper_figs.studies.depth_styles`),
one panel per scheme, one y range.

>>> cell_word(GrowthClass.EXPONENTIAL, 0.0741)
'exp\\nr=0.074'
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from matplotlib.patches import Patch, Rectangle

from paper_figs.legends import figure_legend
from paper_figs.studies import (AXIS_LABELS, SCHEME_LABELS, axis_band, depth_legend, depth_styles, errorbars,
                                log_axis, study_caption)
from paper_figs.style import save_figure, new_figure
from simulate.claims import CLAIMS, Kind, growth_summary
from simulate.claims.along_axes import IDENTIFIABLE_BLOCKS
from simulate.study.atlas import ATLAS_DIR, atlas_results, atlas_studies
from theory.verdicts import GrowthClass

__all__ = ["NOT_TRIED", "cell_word", "phase_cells", "phase_figure", "study_phase"]

NOT_TRIED = "not\ntried"
_GROWTH_CLAIM = {"pre": "p1-lemma-3.2-growth", "lns": "p1-lns-growth"}


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
    tried): ``(levels, points, note)`` shaped as an ``lr_depth`` study's."""
    from simulate.study.analysis import load_models
    from simulate.study.tuning import tuning_points

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
        if m.status == "ok":
            summary = growth_summary(m.evidence.last_profile())
            label = summary.label if cell["depth"] >= IDENTIFIABLE_BLOCKS else GrowthClass.NOT_IDENTIFIABLE
            exponential = label is GrowthClass.EXPONENTIAL
            levels.append({**cell, "claim": claim[m.scheme], "statistic": "growth_rate" if exponential else
                           "growth_exponent", "growth_class": label,
                           "mean": (summary.rate if exponential else summary.exponent).estimate})
    points = pd.DataFrame(points)
    steps = ", ".join(str(int(s)) for s in sorted(points["steps"].unique())) if len(points) else "no"
    note = f"the tuning models: seed {', '.join(map(str, study.tune_seeds))}, {steps} steps"
    return pd.DataFrame(levels, columns=["scheme", "depth", "lr", "claim", "statistic", "growth_class", "mean"]), \
        points, note


def phase_cells(levels: pd.DataFrame, points: pd.DataFrame, scheme: str) -> pd.DataFrame:
    """One row per depth and rate of the diagram: ``depth, lr, text, exponent`` (NaN unless polynomial).

    A cell with a finished model says its class (:func:`cell_word`); one whose planned models are not
    finished says ``pending`` (or ``failed``); one no model of ``scheme`` was planned for, :data:`NOT_TRIED`.

    >>> points = pd.DataFrame({"scheme": "pre", "depth": [4, 4, 8], "lr": [1e-3, 1e-2, 1e-3],
    ...                        "status": ["ok", "pending", "ok"]})
    >>> levels = pd.DataFrame({"claim": "p1-lemma-3.2-growth", "statistic": ["growth_exponent", "growth_rate"],
    ...                        "depth": [4, 8], "lr": [1e-3, 1e-3], "mean": [1.2, 0.3],
    ...                        "growth_class": [GrowthClass.POLYNOMIAL, GrowthClass.EXPONENTIAL]})
    >>> phase_cells(levels, points, "pre")["text"].tolist()
    ['p=1.20', 'pending', 'exp\\nr=0.3', 'not\\ntried']
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
            if row is not None:
                text = cell_word(row.growth_class, row.mean)
            elif not len(planned):
                text = NOT_TRIED
            else:
                text = "pending" if (planned == "pending").any() else "failed"
            exponent = row.mean if row is not None and row.growth_class is GrowthClass.POLYNOMIAL else np.nan
            out.append({"depth": depth, "lr": lr, "text": text, "exponent": exponent})
    return pd.DataFrame(out, columns=["depth", "lr", "text", "exponent"])


def _heatmap(ax, cells: pd.DataFrame, scheme: str, vmax: float):
    """One scheme's cells coloured by their polynomial exponent on the scale ``[0, vmax]``; the image."""
    depths, lrs = sorted(cells["depth"].unique()), sorted(cells["lr"].unique())
    grid = cells.pivot(index="depth", columns="lr", values="exponent").reindex(index=depths, columns=lrs)
    ax.set_facecolor("0.85")  # cells that are not polynomial stay grey, named by their text
    ax.grid(False)
    mesh = ax.imshow(grid.to_numpy(float), origin="lower", aspect="auto", cmap="viridis", interpolation="nearest",
                     vmin=0.0, vmax=vmax)
    for r in cells.itertuples():
        i, j = depths.index(r.depth), lrs.index(r.lr)
        if r.text == NOT_TRIED:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor="0.85", lw=0.5))
        ax.text(j, i, r.text, ha="center", va="center", fontsize=7, color="0.4" if r.text == NOT_TRIED else "k",
                bbox=None if r.text == NOT_TRIED else {"boxstyle": "round,pad=0.2", "facecolor": "white",
                                                        "alpha": 0.8, "lw": 0})
    ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs])
    ax.set_yticks(range(len(depths)), [str(int(d)) for d in depths])
    ax.set_xlabel(AXIS_LABELS["lr"])
    ax.set_ylabel(AXIS_LABELS["depth"])
    ax.set_title(f"{SCHEME_LABELS[scheme]}: growth class of the trained variance", fontsize=8)
    return mesh


def _key(texts: set) -> list:
    """The figure legend: what grey, white and each word in a cell mean (only the words the diagram has)."""
    words = ["exp: exponential, r = rate per layer"] * any(t.startswith("exp") for t in texts)
    words += ["undet.: no class"] * ("undet." in texts) + ["pending: planned, not yet trained"] * ("pending" in texts)
    words += ["n.i.: too few blocks to identify a class (docs/studies.md#growth-across-depth)"] * ("n.i." in texts)
    words += ["failed: every planned model failed"] * ("failed" in texts)
    key = [(Patch(facecolor="0.85", edgecolor="0.5", linewidth=0.5),
            "grey: not polynomial" + (f" ({'; '.join(words)})" if words else ""))]
    if NOT_TRIED in texts:
        key.append((Patch(facecolor="white", edgecolor="0.5", linewidth=0.5),
                    "white: a rate the study never planned at that depth"))
    return key


def phase_figure(results=ATLAS_DIR):
    """The learning-rate x depth phase diagram: trained growth class and exponent, and the held-out loss."""
    if "lr_depth" in atlas_studies(results):
        results_ = atlas_results("lr_depth", results)
        levels, points, note, name = results_.levels, results_.points, "every seed", "lr_depth"
    else:
        (levels, points, note), name = _tuning_phase(results), "depth"
    fig, axes = new_figure(ncols=2, nrows=2, width=3.9, height=2.9)
    cells = {scheme: phase_cells(levels, points, scheme) for scheme in ("pre", "lns")}
    texts = set().union(*(set(c["text"]) for c in cells.values()))
    vmax = max(2.0, *(float(np.nanmax(c["exponent"].to_numpy(float), initial=0.0)) for c in cells.values()))
    for ax, scheme in zip(axes[0], cells):  # one colour scale: the same p is the same colour in both panels
        mesh = _heatmap(ax, cells[scheme], scheme, vmax)
    # beside the right panel, in the margin the loss legend below it keeps (a layout colorbar would go past it)
    fig.colorbar(mesh, cax=axes[0, 1].inset_axes([1.04, 0.0, 0.05, 1.0]), label="polynomial exponent p")
    styles = depth_styles(points["depth"].unique())
    axes[1, 1].sharey(axes[1, 0])
    for ax, scheme in zip(axes[1], ("pre", "lns")):
        for depth, style in styles.items():
            band = axis_band(points[points["depth"] == depth], "val_loss", "lr", scheme)
            if not band.empty:  # a depth of an unfinished atlas
                errorbars(ax, band, "lr", label=f"L={int(depth)}", **style)
        log_axis(ax, points["lr"], "lr")
        ax.set_ylabel("held-out loss (nats/byte)")
        ax.set_title(f"{SCHEME_LABELS[scheme]}: held-out loss against the rate", fontsize=8)
    depth_legend(axes[1])  # every depth either panel drew (a deeper cell may have one scheme only)
    figure_legend(fig, _key(texts), ncol=1)
    fig.suptitle(f"learning rate x depth ({note})\n{study_caption(results, name)}", fontsize=8)
    return fig


def study_phase(out_dir, quick: bool = False, results=ATLAS_DIR):
    """The learning-rate x depth phase diagram: trained growth class and exponent, and the held-out loss."""
    return save_figure(phase_figure(results), out_dir, "study_phase")
