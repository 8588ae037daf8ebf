"""Legends and labels that never hide data: line-style keys below the figure, curve names beside the curves.

:func:`figure_legend` puts one key for the whole figure below its axes (constrained layout
makes room); :func:`style_handles` builds that key from the line styles of
:mod:`paper_figs.style` (Monte-Carlo band, one entry per theory kind, a reference line, the
blow-up marker). :func:`direct_labels` writes each series' name at the right end of its
curve, outside the axes, moved apart (:func:`spread`) so that no two overlap.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from paper_figs.style import KIND_WORDS, LAW_LINESTYLE, LEGEND_FONTSIZE, MC_MARKER

__all__ = ["style_handles", "series_handles", "figure_legend", "step_colours", "spread", "direct_labels"]


def style_handles(kinds, *, mc: bool = True, blowup: bool = False, reference: str | None = None,
                  band_cut: bool = False) -> list:
    """Legend handles that explain the line styles: MC band, one per theory kind, blow-up, reference, and where
    a band on a log axis stops because its lower end reaches 0 (:func:`paper_figs.style.log_bands`)."""
    handles = []
    if mc:
        handles.append((Line2D([], [], color="0.3", linewidth=0.7, **MC_MARKER),
                        Patch(color="0.3", alpha=0.25, linewidth=0)))
    labels = [("Monte Carlo mean, 95 % band" + (" (left out where it reaches 0: log axis)" if band_cut else ""))] \
        if mc else []
    for kind in [k for k in LAW_LINESTYLE if k in set(kinds)]:
        handles.append(Line2D([], [], color="0.3", linestyle=LAW_LINESTYLE[kind], linewidth=1.2))
        labels.append(f"theory: {KIND_WORDS[kind]}")
    if reference:
        handles.append(Line2D([], [], color="0.6", linewidth=1.0))
        labels.append(reference)
    if blowup:
        handles.append(Line2D([], [], color="crimson", linestyle="--", linewidth=0.8))
        labels.append("numerical blow-up (inf/nan)")
    return list(zip(handles, labels))


def series_handles(series) -> list:
    """One legend entry per coloured series: ``series`` is ``[(label, colour)]``; the styles say the rest."""
    return [(Line2D([], [], color=color, linewidth=1.5), label) for label, color in series]


def step_colours(fig, axes, steps, *, label: str = "training step") -> dict:
    """A colour per training step from one colormap, and one colorbar beside ``axes`` that names them.

    Many logged steps make a legend longer than its panel; a colorbar keys them in one strip.

    >>> from paper_figs.style import new_figure
    >>> fig, axes = new_figure(ncols=2)
    >>> colours = step_colours(fig, axes.ravel().tolist(), [0, 10, 20])
    >>> sorted(colours), len(fig.axes)
    ([0, 10, 20], 3)
    """
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    steps = sorted(int(s) for s in steps)
    norm = Normalize(vmin=min(steps), vmax=max(max(steps), min(steps) + 1))
    mappable = ScalarMappable(norm=norm, cmap=colormaps["viridis"])
    fig.colorbar(mappable, ax=axes, label=label, fraction=0.04, pad=0.02)
    return {step: mappable.to_rgba(step) for step in steps}


def figure_legend(fig, handles_labels, *, ncol: int | None = None) -> None:
    """One legend for the whole figure, below the axes (constrained layout makes room for it)."""
    if not handles_labels:
        return
    handles, labels = zip(*handles_labels)
    from matplotlib.legend_handler import HandlerTuple

    fig.legend(handles, labels, loc="outside lower center", ncol=ncol or min(len(handles), 4),
               fontsize=LEGEND_FONTSIZE, frameon=False, handler_map={tuple: HandlerTuple(ndivide=1)})


def spread(positions, step: float, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Move sorted ``positions`` apart to at least ``step`` each, staying in ``[low, high]`` when they fit.

    >>> spread([0.5, 0.5, 0.5], 0.1).round(3).tolist()
    [0.5, 0.6, 0.7]
    >>> spread([0.95, 0.97], 0.1).round(3).tolist()
    [0.9, 1.0]
    """
    out = np.asarray(positions, dtype=float).copy()  # (n,) ascending
    for i in range(1, len(out)):
        out[i] = max(out[i], out[i - 1] + step)
    if len(out) and out[-1] > high:
        out[-1] = max(high, low + step * (len(out) - 1))
        for i in range(len(out) - 2, -1, -1):
            out[i] = min(out[i], out[i + 1] - step)
    return out


def direct_labels(ax, items, *, fontsize: float = LEGEND_FONTSIZE) -> list:
    """Write each curve's label beside its right end, outside the axes, spread so none overlap.

    Call after the scales and limits are final. ``items``: ``(label, x, y, color)`` in data
    coordinates (the curve's last point); a thin line joins each label to its point.
    """
    fig = ax.figure
    if fig.get_layout_engine() is not None:
        fig.get_layout_engine().execute(fig)
    to_axes = ax.transData + ax.transAxes.inverted()
    points = [(label, x, y, color) for label, x, y, color in items if np.isfinite(x) and np.isfinite(y)
              and (y > 0 or ax.get_yscale() != "log")]
    if not points:
        return []
    heights = [float(np.clip(to_axes.transform((x, y))[1], 0.0, 1.0)) for _, x, y, _ in points]
    order = np.argsort(heights, kind="stable")
    step = 1.3 * fontsize * fig.dpi / 72.0 / max(ax.get_window_extent().height, 1.0)
    placed = spread(np.asarray(heights)[order], step)
    texts = []
    for slot, index in zip(placed, order):
        label, x, y, color = points[index]
        texts.append(ax.annotate(label, xy=(x, y), xycoords="data", xytext=(1.04, slot), textcoords="axes fraction",
                                 va="center", ha="left", fontsize=fontsize, color=color, annotation_clip=False,
                                 arrowprops=dict(arrowstyle="-", color=color, linewidth=0.5, shrinkA=1, shrinkB=0)))
    return texts
