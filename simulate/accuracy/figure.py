"""The accuracy map at a glance: where each law is exact, a good approximation, or fails.

Top: one row per curve (law : metric), one column per block; the colour is the share of that
block's resolved cells (schemes x widths x lengths x causality; grey: none resolved) where the curve
is within noise or within 1 % (a law) or holds (a bound), with ``resolved/cells`` under it. Below: the
``var`` law of every cell, one row per scheme, one column per block and variation from the star's
centre, coloured by its class (:data:`simulate.accuracy.measure.ACCURACY_CLASSES`, keyed below it).
The two maps are stacked so the figure is at most :data:`FIGURE_WIDTH_IN` wide: a notebook shows it at
its own size, every text at least 7 pt.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulate.accuracy.measure import ACCURACY_CLASSES, is_paper
from theory.files import atomic_write
from theory.verdicts import AccuracyClass

__all__ = ["CLASS_COLOURS", "FIGURE_WIDTH_IN", "good_share", "plot_map"]

FIGURE_WIDTH_IN = 9.2  # as saved (tight), under the width a notebook shows at 100 % (953 px at 100 dpi)
_FONT = 7.0

CLASS_COLOURS = {AccuracyClass.WITHIN_NOISE: "#1a9850", AccuracyClass.WITHIN_1: "#91cf60",
                 AccuracyClass.WITHIN_5: "#fee08b", AccuracyClass.WORSE: "#d73027", AccuracyClass.UNRESOLVED: "#bdbdbd",
                 AccuracyClass.BOUND_HOLDS: "#4575b4", AccuracyClass.BOUND_CROSSED: "#762a83",
                 AccuracyClass.NOT_MEASURED: "#ffffff"}
_GOOD = (AccuracyClass.WITHIN_NOISE, AccuracyClass.WITHIN_1, AccuracyClass.BOUND_HOLDS)
assert set(CLASS_COLOURS) == set(ACCURACY_CLASSES)


def good_share(table: pd.DataFrame) -> pd.DataFrame:
    """Per (curve, block): of the cells that resolve it, the share where it is within noise, within 1 % or a
    holding bound (NaN where none resolves it); ``resolved`` and ``cells`` count them.

    >>> classes = [AccuracyClass.WORSE, AccuracyClass.WITHIN_1, AccuracyClass.UNRESOLVED]
    >>> t = pd.DataFrame({"law": "l", "metric": "var", "block": "mlp", "accuracy": classes})
    >>> good_share(t).round(2).to_dict("records")
    [{'curve': 'l : var', 'block': 'mlp', 'share': 0.5, 'resolved': 2, 'cells': 3}]
    """
    curve = table["law"].astype(str) + " : " + table["metric"].astype(str)
    resolved = table["accuracy"].map(lambda c: c.resolved).astype(bool)
    good = table["accuracy"].map(lambda c: c in _GOOD).astype(float).where(resolved)  # NaN: left out of the share
    keys = [curve.rename("curve"), table["block"]]
    return pd.DataFrame({"share": good.groupby(keys, sort=True).mean(),  # one group per (curve, block)
                         "resolved": resolved.groupby(keys, sort=True).sum(),
                         "cells": resolved.groupby(keys, sort=True).size()}).reset_index()


def _variation(table: pd.DataFrame) -> pd.Series:
    """Each row's place in the star: ``centre``, ``d=16``, ``T=64``, ``acausal`` (from the most common values)."""
    width0, tokens0 = table["width"].mode().iloc[0], table["tokens"].mode().iloc[0]
    causal0 = table["causal"].mode().iloc[0]
    words = np.where(table["width"] != width0, "d=" + table["width"].astype(str),
                     np.where(table["tokens"] != tokens0, "T=" + table["tokens"].astype(str),
                              np.where(table["causal"] != causal0, np.where(table["causal"], "causal", "acausal"),
                                       "centre")))
    return pd.Series(words, index=table.index)


def plot_map(table: pd.DataFrame, path=None):
    """The map of ``table`` (rows of :data:`simulate.accuracy.measure.MAP_COLUMNS`) as a figure, returned; with
    ``path`` written there (PNG, whole) and closed."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    share = good_share(table)
    curves, blocks = sorted(share["curve"].unique()), list(dict.fromkeys(table["block"]))
    grid = share.pivot(index="curve", columns="block", values="share").reindex(index=curves, columns=blocks)
    counts = share.assign(words=share["resolved"].astype(str) + "/" + share["cells"].astype(str)).pivot(
        index="curve", columns="block", values="words").reindex(index=curves, columns=blocks)

    var = table[(table["metric"] == "var") & ~table["law"].astype(str).map(is_paper)]  # the random-init law
    var = var.assign(column=var["block"].astype(str) + " " + _variation(var))
    columns = list(dict.fromkeys(var.sort_values(["block", "width", "tokens"], key=_block_order(blocks))["column"]))
    schemes = list(dict.fromkeys(table["scheme"]))
    codes = var.pivot_table(index="scheme", columns="column", values="accuracy", aggfunc="first")
    codes = codes.reindex(index=schemes, columns=columns).map(
        lambda word: ACCURACY_CLASSES.index(word) if isinstance(word, AccuracyClass) else np.nan)

    height_top, height_low = 0.33 * len(curves) + 1.3, 0.22 * len(schemes) + 1.9  # inches: rows, labels, key
    fig, (top, low) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH_IN, height_top + height_low + 0.5), layout="constrained",
                                   gridspec_kw={"height_ratios": [height_top, height_low]})
    top.set_facecolor(CLASS_COLOURS[AccuracyClass.UNRESOLVED])  # no resolved cell: grey
    top.grid(False)
    image = top.imshow(grid.to_numpy(float), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    for (i, j), words in np.ndenumerate(counts.to_numpy(object)):
        if isinstance(words, str):
            share_word = "-" if np.isnan(grid.iat[i, j]) else f"{grid.iat[i, j]:.0%}"
            top.text(j, i, f"{share_word} ({words})", ha="center", va="center", fontsize=_FONT)
    top.set_xticks(range(len(blocks)), blocks, fontsize=_FONT)
    top.set_yticks(range(len(curves)), curves, fontsize=_FONT)
    top.set_title("per curve and block: of the resolved cells (k/n), the share within noise or 1 % (laws) or "
                  "holding (bounds)", fontsize=8)
    fig.colorbar(image, ax=top, fraction=0.04, label="share of the resolved cells")

    cmap = ListedColormap([CLASS_COLOURS[word] for word in ACCURACY_CLASSES])
    low.grid(False)
    low.imshow(codes.to_numpy(float), cmap=cmap, vmin=-0.5, vmax=len(ACCURACY_CLASSES) - 0.5, aspect="auto")
    low.set_xticks(range(len(columns)), columns, rotation=90, fontsize=_FONT)
    low.set_yticks(range(len(schemes)), schemes, fontsize=_FONT)
    low.set_title("the var law of every cell: scheme x (block, variation from the centre cell)", fontsize=8)
    fig.legend(handles=[Patch(facecolor=CLASS_COLOURS[w], edgecolor="0.6", linewidth=0.5, label=str(w))
                        for w in ACCURACY_CLASSES], fontsize=_FONT, loc="outside lower center",
               ncol=len(ACCURACY_CLASSES) // 2, frameon=False)
    depths = "/".join(str(d) for d in sorted(set(table["depth"])))
    fig.suptitle(f"Theory against Monte-Carlo at init, depth {depths} (docs/accuracy.md)", fontsize=9)
    if path is not None:
        atomic_write(path, lambda temp: fig.savefig(temp, format="png", dpi=130))
        plt.close(fig)
    return fig


def _block_order(blocks: list[str]):
    def key(column: pd.Series) -> pd.Series:
        return column.map(blocks.index) if column.name == "block" else column
    return key
