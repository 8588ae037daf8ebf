"""P2 after training: usefulness and causal scores against each sparsity knob.

For each knob (weight decay, sequence length, GQA, MoE) the dense Pre-LN reference beside
the sparser setting, with the mean over blocks of ``log(L_lin / L)`` (usefulness; 0 = every
block replaceable by an affine map) and of the causal score, 95 % t intervals over seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_figs import trained_runs as tr
from paper_figs.style import new_figure, save_figure

__all__ = ["KNOBS", "block_means", "trained_sparsity"]

KNOBS = {"weight_decay": "weight decay 0.1 -> 1", "tokens": "sequence length x2", "gqa": "GQA, G = heads",
         "moe": "MoE, top-1 of 4"}


def block_means(scores: pd.DataFrame) -> dict:
    """Mean over blocks of ``log(usefulness)`` and of the causal score (NaN rows left out)."""
    useful = scores[scores["score"] == "usefulness"]["value"].to_numpy(float)
    causal = scores[scores["score"] == "causal"]["value"].to_numpy(float)
    return {"usefulness": float(np.nanmean(np.log(useful))), "causal": float(np.nanmean(causal))}


def trained_sparsity(out_dir, quick: bool = False):
    """Usefulness and causal score of the trained blocks against each sparsity knob (P2), CIs over seeds."""
    from simulate.scores.growth_claims import t_interval

    groups = tr.runs(quick, ("pre", *KNOBS))
    reference = [block_means(s) for s, _ in tr.run_scores(groups["pre"], quick)]
    fig, axes = new_figure(ncols=len(KNOBS), nrows=2, width=2.2, height=2.2)
    for col, (knob, label) in enumerate(KNOBS.items()):
        sparse = [block_means(s) for s, _ in tr.run_scores(groups[knob], quick)]
        for row, score in enumerate(("usefulness", "causal")):
            ax = axes[row, col]
            for x, (name, values) in enumerate((("reference", reference), (knob, sparse))):
                mean, low, high = t_interval([v[score] for v in values])
                low, high = (mean, mean) if not np.isfinite(low) else (low, high)
                ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=3, color=f"C{x}")
            ax.set_xticks([0, 1], ["Pre-LN", knob], fontsize=7)
            ax.set_xlim(-0.5, 1.5)
            ax.set_ylabel("mean log(L_lin/L)" if score == "usefulness" else "mean causal score", fontsize=7)
            if row == 0:
                ax.set_title(label, fontsize=7)
    fig.suptitle(f"P2's knobs after training ({len(reference)} seed(s) each, 95% t intervals)", fontsize=8)
    return save_figure(fig, out_dir, "trained_sparsity")
