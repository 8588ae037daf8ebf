"""P2 after training: usefulness and causal scores against each sparsity knob.

For each knob (weight decay, sequence length, GQA, MoE) the dense Pre-LN reference beside
the sparser setting, with the mean over blocks of ``log(L_lin / L)`` (usefulness; 0 = every
block replaceable by an affine map) and of the causal score. A point is the mean over seeds.

What a point's uncertainty is, and how it is drawn:

- two or more seeds: an error bar, the 95 % t interval over the seeds;
- one seed: no interval over seeds exists. The point gets a shaded band of
  ``± Z_CONFIDENCE`` standard errors of its own measurement over the held-out sequences
  (:func:`block_means`: an upper bound of the block mean's standard error). It says how far
  the scores move with the held-out sample, not how far they move with the seed;
- no standard error either (the scores carry none): a band of :data:`RELATIVE_NOISE_FLOOR`
  times the largest ``|value|`` of the panel.

The bars and bands are part of each panel's data limits, so no y axis is zoomed onto
differences smaller than that noise; y ticks are plain numbers without an offset or a
``1e-5`` multiplier above the axes. The figure's title says which of the two was drawn.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from paper_figs import trained_runs as tr
from paper_figs.style import METRIC_LABELS, new_figure, save_figure
from simulate.engine import Z_CONFIDENCE

__all__ = ["KNOBS", "SCORE_LABELS", "RELATIVE_NOISE_FLOOR", "block_means", "point_interval", "sparsity_figure",
           "trained_sparsity"]

KNOBS = {"weight_decay": "weight decay 0.1 -> 1", "tokens": "sequence length x2", "gqa": "GQA, G = heads",
         "moe": "MoE, top-1 of 4"}
# Each sparse run as its tick names it (the Pre-LN reference with that one knob changed).
_SHORT = {"weight_decay": "wd 1", "tokens": "2x tokens", "gqa": "GQA", "moe": "MoE top-1"}
SCORE_LABELS = {"usefulness": f"block mean {METRIC_LABELS['usefulness_log']}", "causal": "block mean causal score"}
RELATIVE_NOISE_FLOOR = 1e-3  # half-width of a band when a point has neither seeds nor a standard error


def block_means(scores: pd.DataFrame) -> dict:
    """Mean over blocks of ``log(usefulness)`` and of the causal score, each with a bound on its standard error.

    NaN rows are left out. ``NAME_sem`` is the mean of the blocks' standard errors (over held-out
    sequences; ``sem(u) / u`` for ``log u``): the blocks are scored on the same sequences, so
    their errors may be correlated, and the mean of the sems bounds the standard error of the
    block mean whatever the correlation. NaN when the scores carry no ``sem``.

    >>> scores = pd.DataFrame({"score": ["usefulness"] * 2 + ["causal"] * 2, "value": [1.0, 1.0, 0.1, 0.3],
    ...                        "sem": [0.02, 0.04, 0.01, np.nan]})
    >>> {k: round(v, 4) for k, v in block_means(scores).items()}
    {'usefulness': 0.0, 'usefulness_sem': 0.03, 'causal': 0.2, 'causal_sem': 0.01}
    """
    out = {}
    for score, log in (("usefulness", True), ("causal", False)):
        rows = scores[scores["score"] == score]
        values = rows["value"].to_numpy(float)  # (blocks,)
        sems = rows["sem"].to_numpy(float) if "sem" in rows else np.full(values.shape, np.nan)  # (blocks,)
        if log:
            values, sems = np.log(values), sems / values
        finite = np.isfinite(values)
        out[score] = float(np.mean(values[finite])) if finite.any() else math.nan
        sems = sems[finite & np.isfinite(sems)]
        out[f"{score}_sem"] = float(np.mean(sems)) if sems.size else math.nan
    return out


def point_interval(values, sems) -> tuple[float, float, str]:
    """``(mean, half-width, kind)`` of one point from its seeds' values and standard errors.

    ``kind`` is ``"seeds"`` (95 % t interval over two or more seeds), ``"sem"`` (one seed:
    ``Z_CONFIDENCE`` times its standard error) or ``"none"`` (NaN half-width: no error known).

    >>> point_interval([1.0, 2.0, 3.0], [0.1] * 3)[2], point_interval([1.0], [0.1])[2], point_interval([1.0], [np.nan])
    ('seeds', 'sem', (1.0, nan, 'none'))
    """
    from simulate.claims import t_interval

    interval = t_interval(values)
    mean, high = interval.estimate, interval.high
    if np.isfinite(high):
        return mean, high - mean, "seeds"
    sems = np.asarray(sems, dtype=float)
    sems = sems[np.isfinite(sems)]
    if sems.size:
        return mean, Z_CONFIDENCE * float(sems.mean()), "sem"
    return mean, math.nan, "none"


def _panel(ax, points, colors) -> set:
    """Draw one panel's points (``[(values, sems)]`` at x = 0, 1, ...) with their bars or bands; the kinds drawn."""
    intervals = [point_interval(values, sems) for values, sems in points]
    floor = RELATIVE_NOISE_FLOOR * max([abs(m) for m, _, _ in intervals if np.isfinite(m)], default=0.0)
    for x, ((mean, half, kind), color) in enumerate(zip(intervals, colors)):
        if kind == "seeds":
            ax.errorbar([x], [mean], yerr=[[half], [half]], fmt="o", capsize=3, color=color)
            continue
        half = half if kind == "sem" else floor
        ax.fill_between([x - 0.25, x + 0.25], mean - half, mean + half, color=color, alpha=0.25, lw=0)
        ax.plot([x], [mean], "o", color=color)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    return {kind for _, _, kind in intervals}


def _title(seed_counts, kinds: set) -> str:
    low, high = min(seed_counts), max(seed_counts)
    seeds = f"{low} seed{'s' * (high > 1)} each" if low == high else f"{low}-{high} seeds"
    what = []
    if "seeds" in kinds:
        what.append("bars: 95 % t intervals over seeds")
    if "sem" in kinds:
        what.append(f"shaded: ±{Z_CONFIDENCE:g} sem over held-out sequences (one seed: no interval over seeds)")
    if "none" in kinds:
        what.append(f"shaded: {RELATIVE_NOISE_FLOOR:g} x the largest |value| (no error known)")
    return f"P2's knobs after training ({seeds})\n" + "; ".join(what)


def sparsity_figure(reference: list[dict], sparse: dict[str, list[dict]]):
    """The figure from block means: ``reference`` (one :func:`block_means` per seed) and ``{knob: [...]}``.

    >>> one = block_means(pd.DataFrame({"score": ["usefulness", "causal"], "value": [1.0, 0.1], "sem": [1e-3, 1e-2]}))
    >>> fig = sparsity_figure([one], {knob: [one] for knob in KNOBS})
    >>> fig.get_suptitle().splitlines()[0], "t intervals" in fig.get_suptitle()
    ("P2's knobs after training (1 seed each)", False)
    """
    fig, axes = new_figure(ncols=len(KNOBS), nrows=2, width=2.2, height=2.2)
    kinds = set()
    for col, (knob, label) in enumerate(KNOBS.items()):
        for row, (score, ylabel) in enumerate(SCORE_LABELS.items()):
            ax = axes[row, col]
            points = [([v[score] for v in runs], [v[f"{score}_sem"] for v in runs])
                      for runs in (reference, sparse[knob])]  # [(seed values, seed sems)] per point
            kinds |= _panel(ax, points, ("C0", "C1"))
            ax.set_xticks([0, 1], ["Pre-LN", _SHORT[knob]], fontsize=7)
            ax.set_xlim(-0.5, 1.5)
            ax.set_ylabel(ylabel, fontsize=7)
            if row == 0:
                ax.set_title(label, fontsize=7)
    fig.suptitle(_title([len(runs) for runs in (reference, *sparse.values())], kinds), fontsize=8)
    return fig


def trained_sparsity(out_dir, quick: bool = False):
    """Usefulness and causal score of the trained blocks against each sparsity knob (P2), CIs over seeds."""
    groups = tr.runs(quick, ("pre", *KNOBS))
    means = {name: [block_means(scores) for scores, _ in tr.run_scores(paths, quick)] for name, paths in groups.items()}
    fig = sparsity_figure(means["pre"], {knob: means[knob] for knob in KNOBS})
    return save_figure(fig, out_dir, "trained_sparsity")
