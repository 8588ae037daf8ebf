"""The shared look of the paper figures; what they measure and predict is :mod:`paper_figs.measure`.

Every figure module draws with these helpers, so all figures share one style: Monte-Carlo
estimates as a line with a 95 % band (``ci_low`` .. ``ci_high`` of the simulator's table),
theory as lines whose dash says what kind of law it is (exact, upper or lower bound,
approximate), numerical blow-up marked at its layer, every text at least
:data:`MIN_FONTSIZE` points, legends outside the axes (or, where lines are many, labels
beside the curves: :mod:`paper_figs.legends`), and each figure written as PNG and PDF
atomically. What each line was drawn from is recorded (:func:`sources`), so the tests
can check a figure's numbers against the simulator and the theory. Nothing here runs a
simulation or a prediction.

>>> LAW_LINESTYLE["exact"], LAW_LINESTYLE["upper"]
('-', '--')
"""

from __future__ import annotations

import io
import math
import os
import weakref
from dataclasses import dataclass
from pathlib import Path

import matplotlib

if "MPLBACKEND" not in os.environ:  # headless by default; a notebook's kernel names its inline backend
    matplotlib.use("Agg")

import numpy as np  # noqa: E402  (after the backend is chosen)
import pandas as pd  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from theory.files import atomic_write  # noqa: E402

__all__ = [
    "DEFAULT_OUT_DIR",
    "MIN_FONTSIZE",
    "LEGEND_FONTSIZE",
    "LAW_LINESTYLE",
    "LAW_MARKERS",
    "THEORY_ZORDER",
    "MARKED_POINTS",
    "MC_MARKER",
    "KIND_WORDS",
    "METRIC_LABELS",
    "place_legend",
    "log_limits_from_lines",
    "new_figure",
    "figure_png",
    "save_figure",
    "Source",
    "sources",
    "plot_mc_band",
    "log_bands",
    "plot_theory",
    "annotate_blowup",
    "place_blowup_notes",
    "plot_sweep",
]

DEFAULT_OUT_DIR = Path(__file__).resolve().parent / "out"

MIN_FONTSIZE = 7.0  # points: the smallest text of any figure (readable at 100 %)
LEGEND_FONTSIZE = 7.0
# How a theory line is dashed, by the ``kind`` column of theory.predict.
LAW_LINESTYLE = {"exact": "-", "upper": "--", "lower": ":", "approx": "-."}
KIND_WORDS = {"exact": "exact law", "approx": "approximate law", "upper": "upper bound", "lower": "lower bound"}
# Axis labels of the metrics and scores, in mathtext as the papers write them (simulate/engine/metrics.py
# and simulate/scores define them; jac_dev is the Hutchinson estimate of ||J_l - I||_F / sqrt(T d)).
METRIC_LABELS = {"var": r"$\sigma_\ell^2$", "jac_dev": r"$\|J_\ell - I\|_F/\sqrt{Td}$",
                 "angular": r"$\arccos\,\cos(x_{\ell-1}, x_\ell)/\pi$",
                 "usefulness_log": r"$\log(\mathcal{L}_\mathrm{lin}/\mathcal{L})$"}
# Markers that tell apart several laws of one kind in a sweep plot.
LAW_MARKERS = ("", "x", "+", "^", "v", "s")
THEORY_ZORDER = 3  # theory lines above the Monte-Carlo markers (zorder 2): a matching law stays visible
MARKED_POINTS = 40  # a Monte-Carlo line of more points is marked at spaced points only
MC_MARKER = {"marker": "o", "markersize": 3.0, "markerfacecolor": "white", "markeredgewidth": 0.8}  # open circles

matplotlib.rcParams.update({
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": LEGEND_FONTSIZE,
    "figure.titlesize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
})


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = 3.4, height: float = 2.6, **subplot_kw):
    """A figure with ``nrows x ncols`` axes of ``width x height`` inches each, constrained layout.

    The figure is not pyplot's: it has its own Agg canvas and is in no global list, so nothing
    else (``plt.close('all')``, a notebook's inline backend drawing pyplot's figures after a cell
    or a widget message, on another thread) can draw or close it; it goes when the last
    reference does. A notebook shows it with ``display(fig)`` or as a cell's value.

    >>> import matplotlib.pyplot as plt
    >>> fig, axes = new_figure(ncols=2)
    >>> axes.shape, fig.get_size_inches().tolist(), plt.get_fignums()
    ((1, 2), [6.8, 2.6], [])
    """
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)


def figure_png(fig, scale: float = 1.0) -> bytes:
    """``fig`` rendered as PNG bytes at ``scale`` times its own dpi, cropped to what it draws (as a notebook shows a
    figure); shown at ``1/scale`` of its pixel width, a scale of 2 is sharp on a high-density screen.

    >>> fig, axes = new_figure()
    >>> figure_png(fig)[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi * scale, bbox_inches="tight")
    return buffer.getvalue()


def place_legend(ax, fontsize: float = LEGEND_FONTSIZE, *, handles=None, labels=None, ncol: int = 1,
                 title=None) -> None:
    """The legend outside the axes, on the right, so it never hides data (``handles`` and ``labels``: its entries,
    by default the axes' labelled artists)."""
    kwargs = {k: v for k, v in (("handles", handles), ("labels", labels)) if v is not None}
    ax.legend(**kwargs, fontsize=max(fontsize, LEGEND_FONTSIZE), loc="upper left", bbox_to_anchor=(1.02, 1.0),
              borderaxespad=0.0, ncol=ncol, title=title, title_fontsize=max(fontsize, LEGEND_FONTSIZE))


def log_limits_from_lines(ax, pad: float = 1.6, ceiling: float = 1e250, *, shared=()) -> None:
    """On a log y axis, fit the limits to the plotted lines (data coordinates) and not to the bands.

    A 95 % band near a blow-up reaches down to ~0 (mean - 1.96 sem < 0); the limits then follow
    the means and the theory lines, and the band is cut at the axes' edge. Values above
    ``ceiling`` (a theory curve far past a blow-up) run off the top. ``shared``: further axes
    that share this y axis; their lines count too.
    """
    if ax.get_yscale() != "log":
        return
    lo, hi = ax.get_xlim()
    values = []
    for line in [line for axis in (ax, *shared) for line in axis.get_lines()]:
        if line.get_transform() != line.axes.transData:
            continue  # axvline and friends live partly in axes coordinates
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        keep = np.isfinite(x) & (y > 0) & (y <= ceiling) & (x >= min(lo, hi)) & (x <= max(lo, hi))
        values.append(y[keep])
    values = np.concatenate(values) if values else np.array([])
    if values.size:
        ax.set_ylim(values.min() / pad, values.max() * pad)


def save_figure(fig, out_dir: str | os.PathLike, name: str) -> list[Path]:
    """Write ``name.png`` and ``name.pdf`` into ``out_dir`` atomically.

    Each file goes through :func:`theory.files.atomic_write`, so a reader never sees half a file.

    Returns
    -------
    list of Path
        The PNG and the PDF path.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [atomic_write(out / f"{name}.{ext}",
                         lambda temp, ext=ext: fig.savefig(temp, format=ext, bbox_inches="tight"))
            for ext in ("png", "pdf")]


@dataclass(frozen=True)
class Source:
    """What a plotted line was drawn from (read by the figure tests).

    ``settings`` holds one Setting for a per-layer profile (x = layer) or one per point of a
    sweep (x = ``xs``, each read off at ``layers``). ``law`` is None for the Monte-Carlo mean
    (measured with ``run_monte_carlo(setting, **mc)``), else the theory law drawn (``kind``);
    ``point_laws``, where a sweep's law goes by another id at some points
    (:func:`paper_figs.measure.with_aliases`), the id ``theory.predict`` gives each point.
    """

    artist: object
    metric: str
    settings: tuple
    law: str | None = None
    kind: str | None = None
    mc: dict | None = None
    xs: tuple | None = None
    layers: tuple | None = None
    point_laws: tuple | None = None


_SOURCES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_BANDS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # axes -> [[band, x, low, high], ...]


def sources(fig) -> list[Source]:
    """Every :class:`Source` recorded for the lines of ``fig`` (empty for a figure of other lines)."""
    return _SOURCES.setdefault(fig, [])


def plot_mc_band(ax, table: pd.DataFrame, metric: str, *, label: str, color=None, x: str = "layer"):
    """Monte-Carlo mean as markers+line with its 95 % confidence band.

    The markers are open (:data:`MC_MARKER`) and theory lines (:func:`plot_theory`) are drawn above them,
    so a law that matches the measurement is seen as a line through the circles; past
    :data:`MARKED_POINTS` points the markers are spaced along the drawn line (``markevery``), so a
    deep profile shows its line and not a ribbon of markers. On a log axis call :func:`log_bands`
    once the scale is set.

    Parameters
    ----------
    table : DataFrame
        The simulator's table (``layer, metric, mean, sem, ci_low, ci_high, n``).
    metric : str
        Which metric's rows to draw.
    x : str
        The column on the horizontal axis.
    """
    rows = table[table["metric"] == metric].sort_values(x)
    if rows.empty:
        return None
    (line,) = ax.plot(rows[x], rows["mean"], linewidth=0.7, color=color, zorder=2, **MC_MARKER,
                      markevery=None if len(rows) <= MARKED_POINTS else 0.03,
                      label=f"{label} (MC, n={int(rows['n'].iloc[0])})")
    band = [rows[c].to_numpy(float) for c in (x, "ci_low", "ci_high")]  # (3, points)
    _BANDS.setdefault(ax, []).append([ax.fill_between(*band, color=line.get_color(), alpha=0.25, linewidth=0),
                                      *band])
    return line


def log_bands(ax) -> int:
    """On a log y axis, draw each Monte-Carlo band of ``ax`` (:func:`plot_mc_band`) only where its lower end is
    above 0; returns how many points were left without a band.

    A 95 % band ``mean +- 1.96 sem`` reaches 0 where the samples spread over orders of magnitude (near a
    blow-up); on a log axis such a point would draw a spike down to the axis. The band stops there
    instead, and the figure says so (:func:`paper_figs.legends.style_handles`, ``band_cut``).

    >>> fig, axes = new_figure()
    >>> table = pd.DataFrame({"layer": [0, 1, 2], "metric": "var", "mean": [1.0, 2.0, 3.0], "n": 4,
    ...                       "ci_low": [0.5, -1.0, 2.0], "ci_high": [1.5, 5.0, 4.0]})
    >>> _ = plot_mc_band(axes[0][0], table, "var", label="x")
    >>> axes[0][0].set_yscale("log"); log_bands(axes[0][0])
    1
    """
    cut = 0
    for entry in _BANDS.get(ax, []):
        band, x, low, high = entry
        keep = low > 0
        if keep.all() or band not in ax.collections:
            continue
        cut += int((~keep).sum())
        colour = band.get_facecolor()[0]
        band.remove()
        entry[0] = ax.fill_between(x, np.where(keep, low, np.nan), high, where=keep, color=colour, linewidth=0)
    return cut


def plot_theory(ax, prediction: pd.DataFrame, metric: str, *, color=None, laws=None, label_prefix: str = "",
                x: str = "layer", kinds=None, ceiling: float | None = None, points: bool = False) -> list:
    """Theory curves of one metric: one line per law, dashed by its kind.

    Parameters
    ----------
    prediction : DataFrame
        ``theory.predict`` output (``layer, metric, law, kind, value``).
    laws, kinds : iterable of str, optional
        Only these law ids / kinds (default: every law that predicts ``metric``).
    ceiling : float, optional
        Values above it, and values that are not finite, are left out of the line (NaN), so a curve
        that runs past the plotted range ends at its edge and matplotlib never sees a value it cannot
        scale (a log axis near 1e308 overflows). A curve with fewer than two values left is not drawn.
    points : bool
        Draw a curve of one value as a marker (a one-block stack's law has one layer past the input) instead
        of leaving it out.

    Returns
    -------
    list of (law, kind, Line2D)

    >>> fig, axes = new_figure()
    >>> curve = pd.DataFrame({"layer": [0, 1, 2], "metric": "var", "law": "a", "kind": "exact",
    ...                       "value": [1.0, 1e200, np.inf]})
    >>> [(law, line.get_ydata().tolist()) for law, _, line in plot_theory(axes[0][0], curve, "var", ceiling=1e3)]
    []
    >>> [line.get_ydata().tolist() for _, _, line in plot_theory(axes[0][0], curve, "var", ceiling=1e250)]
    [[1.0, 1e+200, nan]]
    >>> [(line.get_ydata().tolist(), line.get_marker()) for _, _, line in plot_theory(axes[0][0], curve, "var",
    ...                                                                              ceiling=1e3, points=True)]
    [([1.0, nan, nan], 'D')]
    """
    rows = prediction[prediction["metric"] == metric]
    if laws is not None:
        rows = rows[rows["law"].isin(list(laws))]
    if kinds is not None:
        rows = rows[rows["kind"].isin(list(kinds))]
    drawn = []
    for (law, kind), curve in rows.groupby(["law", "kind"], sort=True, observed=True):
        curve = curve.sort_values(x)
        values = curve["value"].to_numpy(float)
        if ceiling is not None:
            values = np.where(np.isfinite(values) & (values <= ceiling), values, np.nan)
        finite = np.count_nonzero(~np.isnan(values))
        if finite < 2 and not (points and finite):
            continue  # one point (e.g. the input layer alone) draws no line
        (line,) = ax.plot(curve[x].to_numpy(float), values, linestyle=LAW_LINESTYLE.get(kind, "-"), color=color,
                          linewidth=1.2, zorder=THEORY_ZORDER, label=f"{label_prefix}{law} ({kind})",
                          **({"marker": "D", "markersize": 4, "clip_on": False} if finite == 1 else {}))
        drawn.append((law, kind, line))
    return drawn


def annotate_blowup(ax, layer: int | None, *, color="crimson", label: str = "") -> None:
    """Mark the layer where the simulator hit inf/nan (nothing when ``layer`` is None).

    A dashed vertical line at the layer and a short boxed note near the top of the axes; each
    further note on the same axes goes one row lower, so notes never overlap. The note sits on the
    side of the line with more room (:func:`place_blowup_notes`; call it again once the axes' scale
    and limits are final).
    """
    if layer is None:
        return
    ax.axvline(layer, color=color, linestyle="--", linewidth=0.8)
    row = sum(1 for text in ax.texts if text.get_gid() == "blowup")
    words = f"{label.rstrip(': ')}:\nnumerical blow-up at layer {layer}" if label else \
        f"numerical blow-up at layer {layer}"
    text = ax.annotate(words, xy=(layer, 0.96 - 0.13 * row),
                       xycoords=("data", "axes fraction"), fontsize=MIN_FONTSIZE, color=color, va="top",
                       xytext=(3, 0), textcoords="offset points",
                       bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.85))
    text.set_gid("blowup")
    place_blowup_notes(ax)


def place_blowup_notes(ax) -> None:
    """Put each blow-up note of ``ax`` on the side of its line with more room, inside the axes as they are now."""
    low, high = ax.get_xlim()
    for text in [t for t in ax.texts if t.get_gid() == "blowup"]:
        layer = text.xy[0]
        where = ((math.log(max(layer, 1e-9)) - math.log(low)) / (math.log(high) - math.log(low))
                 if ax.get_xscale() == "log" and low > 0 else (layer - low) / ((high - low) or 1.0))
        text.set_horizontalalignment("right" if where > 0.5 else "left")
        text.xyann = (-3 if where > 0.5 else 3, 0)


def plot_sweep(ax, measured: pd.DataFrame, predicted: pd.DataFrame, *, label: str, color=None, laws=None):
    """Draw :func:`sweep` output: MC points with 95 % error bars, theory lines by kind.

    Returns
    -------
    (color, Line2D of the MC points, list of (law, kind, Line2D))
    """
    ok = measured.dropna(subset=["mean"])
    bars = ax.errorbar(ok["x"], ok["mean"], yerr=[ok["mean"] - ok["ci_low"], ok["ci_high"] - ok["mean"]],
                       fmt="o", markersize=3, capsize=2, color=color, label=f"{label} (MC)")
    color = bars.lines[0].get_color()
    rows = predicted if laws is None else predicted[predicted["law"].isin(list(laws))]
    drawn = []
    for marker, ((law, kind), curve) in zip(LAW_MARKERS, rows.groupby(["law", "kind"], sort=True, observed=True)):
        curve = curve.sort_values("x")
        marker = marker or ("D" if len(curve) < 2 else "")  # a law at one knob value only: a point, not a line
        (line,) = ax.plot(curve["x"], curve["value"], linestyle=LAW_LINESTYLE.get(kind, "-"), marker=marker,
                          markersize=4, color=color, linewidth=1.1, label=f"{label}: {law} ({kind})")
        drawn.append((law, kind, line))
    for k, r in enumerate(measured[measured["blowup"].notna()].itertuples(index=False)):
        ax.annotate(f"blow-up at layer {int(r.blowup)}", xy=(r.x, 0.05 + 0.3 * (k % 3)),
                    xycoords=("data", "axes fraction"), fontsize=MIN_FONTSIZE, color="crimson", rotation=90)
    return color, bars.lines[0], drawn
