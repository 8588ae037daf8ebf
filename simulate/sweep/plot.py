"""A sweep's summary as a picture: a headline number against one swept field, a line per another.

:func:`seed_means` averages a summary column over seeds (mean and its standard error
across seeds, the Monte-Carlo error between independent runs) for each ``(by, x)``;
:func:`plot_summary` draws it on a matplotlib axis. ``paper_figs.sweep_growth`` and
notebook 07 use both.

>>> import pandas as pd
>>> summary = pd.DataFrame({"scheme": ["pre"] * 4, "depth": [8, 8, 16, 16], "seed": [0, 1, 0, 1],
...                         "status": PointStatus.OK, "final_var": [1.0, 3.0, 2.0, 2.0]})
>>> means = seed_means(summary, "final_var", x="depth", by="scheme")
>>> means[["scheme", "depth", "mean", "sem", "n"]].round(12).values.tolist()
[['pre', 8, 2.0, 1.0, 2], ['pre', 16, 2.0, 0.0, 2]]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulate.engine import Z_CONFIDENCE
from theory.verdicts import PointStatus

__all__ = ["seed_means", "plot_summary"]


def seed_means(summary: pd.DataFrame, y: str, *, x: str, by: str | None = None) -> pd.DataFrame:
    """Mean of ``y`` over the finished (``status == "ok"``) points of each ``(by, x)``: columns
    ``by, x, mean, sem, n`` (sem = std over seeds / sqrt(n), NaN for one seed), in first-seen order."""
    if y not in summary:
        raise ValueError(f"y={y!r} is not a column of the summary: choose from {', '.join(summary.columns)}")
    keys = [k for k in (by, x) if k is not None]
    for key in keys:
        if key not in summary:
            raise ValueError(f"{key!r} is not a column of the summary: choose from {', '.join(summary.columns)}")
    rows = summary[summary.status == PointStatus.OK]
    grouped = rows.groupby(keys, sort=False)[y]
    table = grouped.agg(mean="mean", std="std", n="count").reset_index()  # one row per (by, x)
    table["sem"] = table["std"] / np.sqrt(table["n"])
    return table[keys + ["mean", "sem", "n"]]


def plot_summary(ax, summary: pd.DataFrame, y: str = "growth_exponent", *, x: str = "depth", by: str = "scheme",
                 logx: bool = True, logy: bool = False, colors=None) -> pd.DataFrame:
    """Draw ``y`` (mean over seeds, bars of +- Z_CONFIDENCE sem) against ``x``, one line per value of ``by``.

    Returns the plotted table (:func:`seed_means`). Failed and pending points are left out.
    """
    table = seed_means(summary, y, x=x, by=by)
    for i, (value, rows) in enumerate(table.groupby(by, sort=False)):
        rows = rows.sort_values(x)
        color = None if colors is None else colors[i % len(colors)]
        ax.errorbar(rows[x], rows["mean"], yerr=Z_CONFIDENCE * rows["sem"].fillna(0.0), marker="o", ms=3, lw=1.2,
                    capsize=2, color=color, label=f"{by}={value}")
    if logx:
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        ax.set_xscale("log")
        ax.set_xticks(sorted(table[x].unique()))  # a tick at each swept value, written plainly
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    return table
