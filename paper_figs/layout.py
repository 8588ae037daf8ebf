"""Is a figure readable? Overlapping text, small fonts and legends over data, found on the rendered figure.

:func:`layout_problems` draws the figure (``fig.canvas.draw()``) and compares window
extents in display pixels:

- every text (titles, axis labels, tick labels, annotations, legend text, figure titles)
  is at least :data:`paper_figs.style.MIN_FONTSIZE` points *as shown*: a figure wider than
  :data:`DISPLAY_WIDTH_IN` (what a notebook's output area shows at 100 %) is shown shrunk to
  that width, and its text with it;
- no text or legend of one axes overlaps another axes' tight bounding box (the axes with
  all its labels, ``Axes.get_tightbbox``, taken piece by piece: frame, texts, legend), and no
  figure-level text or legend overlaps any;
- within one axes, its texts do not overlap each other (tick labels of one axis, title,
  labels, annotations, the legend box);
- a legend is at most :data:`MAX_LEGEND_ENTRIES` entries and no wider than its axes (a wider
  one squeezes the panel into a strip beside it); a legend inside its axes has at most
  :data:`MAX_INSIDE_ENTRIES` entries and covers no data point of a line.

>>> import matplotlib.pyplot as plt
>>> fig, ax = plt.subplots(figsize=(3, 2))
>>> _ = ax.plot([0, 1], [0, 1], label="a line")
>>> _ = ax.legend(fontsize=7, loc="lower right")
>>> layout_problems(fig)
[]
>>> _ = ax.set_title("tiny", fontsize=4)
>>> layout_problems(fig)
["axes 0 ('tiny'): text 'tiny' is 4 pt (< 7 pt)"]
>>> _ = ax.set_title("wide", fontsize=8)
>>> fig.set_size_inches(3 * DISPLAY_WIDTH_IN, 2)  # a notebook shows it shrunk: 8 pt reads as 3.4 pt
>>> [p.split(" (the")[0] for p in layout_problems(fig) if "text 'wide'" in p]
["axes 0 ('wide'): text 'wide' is 8 pt, 3.39 pt as shown"]
>>> plt.close(fig)
"""

from __future__ import annotations

import io
import itertools

import numpy as np
from matplotlib.text import Text

from paper_figs.style import MIN_FONTSIZE

__all__ = ["MAX_LEGEND_ENTRIES", "MAX_INSIDE_ENTRIES", "DISPLAY_WIDTH_IN", "layout_problems", "ink"]

MAX_LEGEND_ENTRIES = 12
MAX_INSIDE_ENTRIES = 4
# Inches (at the figures' 100 dpi) that a notebook's output area shows at 100 %: JupyterLab scales a wider image
# down to its width (953 px beside the prompt in a 1400 px window, measured with tools/explorer_in_jupyterlab.py),
# and its text with it.
DISPLAY_WIDTH_IN = 9.5
_TOLERANCE_PX = 1.0  # extents may touch


def _visible_text(text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _overlap(a, b) -> bool:
    """Whether two display bboxes share an area wider and taller than the tolerance."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > _TOLERANCE_PX) and (min(a.y1, b.y1) - max(a.y0, b.y0) > _TOLERANCE_PX)


def _extent(text, renderer):
    """The text's own box (an annotation's arrow is left out: its bounding box says little)."""
    return Text.get_window_extent(text, renderer)


def _tick_labels(axis) -> list:
    ticks = axis._update_ticks()  # the ticks matplotlib draws (inside the view limits)
    return [label for tick in ticks for label in (tick.label1, tick.label2) if _visible_text(label)]


def _axes_items(ax, renderer) -> dict:
    """Named display extents of everything textual an axes draws: {group: [(name, text, bbox)]}."""
    groups = {"x ticks": [(t.get_text(), t, _extent(t, renderer)) for t in _tick_labels(ax.xaxis)],
              "y ticks": [(t.get_text(), t, _extent(t, renderer)) for t in _tick_labels(ax.yaxis)]}
    others = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label,
              ax.xaxis.get_offset_text(), ax.yaxis.get_offset_text(), *ax.texts]
    groups["texts"] = [(t.get_text(), t, _extent(t, renderer)) for t in others if _visible_text(t)]
    legend = ax.get_legend()
    groups["legend"] = [("legend", legend, legend.get_window_extent(renderer))] if legend is not None else []
    return groups


def _area(ax, items: dict, renderer) -> list:
    """The pieces of an axes' tight bounding box: its frame, each text and its legend.

    ``Axes.get_tightbbox`` is their enclosing rectangle; taken as one rectangle it would claim
    the empty corners (between a y label longer than the axes and a wide title, say).
    Direct labels' leader lines are left out (a thin line, not text).
    """
    return [ax.get_window_extent(renderer)] + [bbox for entries in items.values() for _, _, bbox in entries]


def _legend_problems(where: str, legend, ax, renderer) -> list[str]:
    problems = []
    texts = [t for t in legend.get_texts() if _visible_text(t)]
    if len(texts) > MAX_LEGEND_ENTRIES:
        problems.append(f"{where}: legend has {len(texts)} entries (> {MAX_LEGEND_ENTRIES}); split the panel "
                        "or label the lines directly")
    if ax is None:
        return problems
    box, frame = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    if box.width > frame.width + _TOLERANCE_PX:
        problems.append(f"{where}: legend is {box.width:.0f} px wide, wider than its axes ({frame.width:.0f} px); "
                        "put it below the figure or shorten its entries")
    if not _overlap(box, frame):
        return problems
    if len(texts) > MAX_INSIDE_ENTRIES:
        problems.append(f"{where}: legend inside the axes with {len(texts)} entries (> {MAX_INSIDE_ENTRIES})")
    covered = 0
    for line in ax.get_lines():
        xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))  # (n, 2) pixels
        xy = xy[np.isfinite(xy).all(axis=1)]
        covered += int(((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)).sum())
    if covered:
        problems.append(f"{where}: legend inside the axes covers {covered} data points")
    return problems


def layout_problems(fig) -> list[str]:
    """Readability problems of ``fig`` as rendered, one line each (empty: none found).

    Returns
    -------
    list of str
        Each names the axes (its index in ``fig.axes`` and title) and what overlaps or is too small.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    names = {ax: f"axes {i}" + (f" ({ax.get_title()[:40]!r})" if ax.get_title() else "") for i, ax in enumerate(axes)}
    items = {ax: _axes_items(ax, renderer) for ax in axes}
    areas = {ax: _area(ax, items[ax], renderer) for ax in axes}
    problems = []
    every_text = [(names[ax], t) for ax in axes for group in items[ax].values() for _, t, _ in group
                  if t is not ax.get_legend()]
    every_text += [(names[ax], t) for ax in axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    figure_texts = [t for t in fig.texts if _visible_text(t)] + [t for t in (fig._suptitle, fig._supxlabel,
                                                                           fig._supylabel) if t is not None
                                                                  and _visible_text(t)]
    every_text += [("figure", t) for t in figure_texts]
    every_text += [("figure legend", t) for legend in fig.legends for t in legend.get_texts()]
    width = fig.get_tightbbox(renderer).width  # inches, as saved (bbox_inches="tight") and shown
    shrink = min(1.0, DISPLAY_WIDTH_IN / width)
    for where, text in every_text:
        shown = text.get_fontsize() * shrink
        if _visible_text(text) and shown < MIN_FONTSIZE - 1e-6:
            size = f"{text.get_fontsize():g} pt" + (f", {shown:.3g} pt as shown (the figure is {width:.3g} in wide, "
                                                    f"shown at {DISPLAY_WIDTH_IN:g} in)" if shrink < 1 else "")
            problems.append(f"{where}: text {text.get_text()[:40]!r} is {size} (< {MIN_FONTSIZE:g} pt)")
    for ax in axes:
        flat = [(group, name, bbox) for group, entries in items[ax].items() for name, _, bbox in entries]
        for other in axes:
            if other is ax:
                continue
            for group, name, bbox in flat:
                if any(_overlap(bbox, area) for area in areas[other]):
                    problems.append(f"{names[ax]}: {group} {name[:40]!r} overlaps {names[other]}")
        for (g1, n1, b1), (g2, n2, b2) in itertools.combinations(flat, 2):
            if _overlap(b1, b2):
                problems.append(f"{names[ax]}: {g1} {n1[:40]!r} overlaps {g2} {n2[:40]!r}")
        if ax.get_legend() is not None:
            problems += _legend_problems(names[ax], ax.get_legend(), ax, renderer)
    for label, box in [(t.get_text()[:40], _extent(t, renderer)) for t in figure_texts] + \
                      [("figure legend", legend.get_window_extent(renderer)) for legend in fig.legends]:
        for ax in axes:
            if any(_overlap(box, area) for area in areas[ax]):
                problems.append(f"figure: {label!r} overlaps {names[ax]}")
    problems += [p for legend in fig.legends for p in _legend_problems("figure legend", legend, None, renderer)]
    return list(dict.fromkeys(problems))


def ink(png: bytes, box=(0.12, 0.25, 0.65, 0.85)) -> dict:
    """What a rendered plot holds: its size and the share of drawn and of coloured pixels inside ``box``.

    ``box`` is ``(left, top, right, bottom)`` as fractions of the image's width and height (the
    default: inside the axes of the explorer's plot, below its two-line title and left of its
    legend). A pixel is drawn when it is not white, coloured when its channels differ (lines and
    bands, not the black frame, grid or text). The PNG must decode: a truncated file raises.

    >>> from paper_figs.style import figure_png, new_figure
    >>> fig, axes = new_figure()
    >>> blank = ink(figure_png(fig))
    >>> _ = axes[0][0].fill_between([0, 1], [0, 0], [1, 1], color="C0")
    >>> blank["coloured"], ink(figure_png(fig))["coloured"] > 0.5
    (0.0, True)
    """
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    image.load()
    pixels = np.asarray(image.convert("RGB"), dtype=int)  # (h, w, 3)
    height, width = pixels.shape[:2]
    left, top, right, bottom = box
    area = pixels[int(top * height):int(bottom * height), int(left * width):int(right * width)]
    return {"bytes": len(png), "width": width, "height": height,
            "drawn": round(float((np.abs(area - 255).sum(-1) > 60).mean()), 4),
            "coloured": round(float((area.max(-1) - area.min(-1) > 60).mean()), 4)}
