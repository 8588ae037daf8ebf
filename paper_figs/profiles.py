"""Per-layer profiles of several settings, panel by panel, readable however many lines there are.

:func:`profile_figure` draws a grid of :class:`Panel` s; each panel shows one metric of a few
settings (its series): the Monte-Carlo mean with its 95 % band and the theory lines of
:func:`theory.predict`, in the series' colour, dashed by kind. The series are named by
labels written beside the curves' right ends (:func:`paper_figs.legends.direct_labels`), a
figure legend below explains the line styles once. The figures of
:mod:`paper_figs.depth_profiles` and the notebooks' profile plots are built with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from matplotlib.ticker import NullFormatter

from paper_figs.legends import direct_labels, figure_legend, style_handles
from paper_figs.measure import monte_carlo, profile_panel
from paper_figs.style import log_bands, log_limits_from_lines, new_figure, place_blowup_notes, place_legend, sources

__all__ = ["Panel", "derived_here", "profile_figure"]


@dataclass(frozen=True)
class Panel:
    """One axes of a profile figure: ``metric`` of each setting in ``series`` (label -> Setting)."""

    title: str
    metric: str
    series: dict = field(default_factory=dict)
    ylabel: str = ""
    log_y: bool = True


def derived_here(prediction):
    """The law ids of ``prediction`` derived here (exact laws and the bridge), not the papers' statements.

    >>> import pandas as pd
    >>> derived_here(pd.DataFrame({"law": ["p1-lemma-3.2", "preln-init"]}))
    ['preln-init']
    """
    import theory

    return [law for law in dict.fromkeys(prediction["law"]) if law in theory.LEMMAS
            and theory.LEMMAS[law].kind != "paper"]


def _reference_line(ax, setting, metric, *, samples, metrics, label):
    table, _ = monte_carlo(setting, samples=samples, metrics=tuple(metrics or (metric,)))
    rows = table[table["metric"] == metric].sort_values("layer")
    ax.plot(rows["layer"], rows["mean"], color="0.6", linewidth=1.0, zorder=1, label=label)


def profile_figure(panels, *, samples: int, metrics=None, laws=derived_here, reference=None, log_x: bool = True,
                   ncols: int | None = None, sharey: bool = False, labels: str = "direct", suptitle: str | None = None,
                   panel_size=(3.4, 2.6), xlabel: str = "layer l (0 = input)"):
    """A grid of per-layer profile panels.

    Parameters
    ----------
    panels : sequence of Panel
    samples : int
        Monte-Carlo samples per setting.
    metrics : sequence of str, optional
        What each run measures (default: the panel's metric); one set for all panels shares the cache.
    laws : callable or iterable of str or None
        Theory laws drawn: a function of the prediction (default :func:`derived_here`), ids, or None for all.
    reference : (label, Setting), optional
        A setting drawn as a thin grey line (MC mean only) in every panel, for comparison.
    labels : {'direct', 'legend', 'none'}
        Series named beside the curves, in a legend right of each panel, or not at all.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ncols = ncols or len(panels)
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=panel_size[0], height=panel_size[1], sharex=True,
                           sharey=sharey)
    ends, cut = {}, 0
    for index, (ax, panel) in enumerate(zip(axes.flat, panels)):
        if reference is not None:
            _reference_line(ax, reference[1], panel.metric, samples=samples, metrics=metrics, label=reference[0])
        ends[ax] = [_draw_series(ax, setting, panel.metric, label, f"C{k % 10}", samples=samples, metrics=metrics,
                                 laws=laws) for k, (label, setting) in enumerate(panel.series.items())]
        ax.set_xscale("log" if log_x else "linear")
        if log_x:  # a short depth range would label every minor tick (2x10^0, 3x10^0, ...) and crowd them
            ax.xaxis.set_minor_formatter(NullFormatter())
        if panel.log_y and all(_positive(line.get_ydata()) for line in ax.get_lines()
                               if line.get_transform() == ax.transData):
            ax.set_yscale("log")
            cut += log_bands(ax)
            log_limits_from_lines(ax, shared=axes.flat[:index] if sharey else ())  # the panels drawn so far
        place_blowup_notes(ax)  # the scale is final: each note on the side of its line with room
        ax.set_title(panel.title)
        if not sharey or index % ncols == 0:
            ax.set_ylabel(panel.ylabel or panel.metric)
        if index + ncols >= len(panels):  # the lowest panel of its column
            ax.set_xlabel(xlabel)
        if labels == "legend":
            place_legend(ax)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    kinds = {source.kind for source in sources(fig) if source.law is not None}
    blowups = any(text.get_gid() == "blowup" for ax in axes.flat for text in ax.texts)
    figure_legend(fig, style_handles(kinds, blowup=blowups, reference=reference[0] if reference else None,
                                     band_cut=cut > 0))
    if suptitle:
        fig.suptitle(suptitle)
    if labels == "direct":  # last: the spacing of the labels needs the final axes heights
        for ax, items in ends.items():
            direct_labels(ax, [item for item in items if item is not None])
    return fig


def _positive(values) -> bool:
    """Whether every drawn (finite) value is above 0: a line a log axis can show (NaN: a gap, not drawn)."""
    values = np.asarray(values, float)
    return bool((values[np.isfinite(values)] > 0).all())


def _draw_series(ax, setting, metric, label, color, *, samples, metrics, laws):
    """One series of a panel; returns ``(label, x, y, color)`` of its last measured point, or None."""
    table, _ = profile_panel(ax, setting, metric, samples=samples, label=label, color=color, laws=laws,
                             metrics=metrics)
    rows = table[table["metric"] == metric].sort_values("layer")
    return (label, float(rows["layer"].iloc[-1]), float(rows["mean"].iloc[-1]), color) if len(rows) else None
