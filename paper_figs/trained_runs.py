"""The trained runs behind the ``trained_*`` figures: which runs, their scores, seed bands.

Quick builds use :data:`simulate.scores.training_cache.TINY` (one seed, 20 steps, seconds
per run); full builds :data:`~simulate.scores.training_cache.FULL` (three seeds, 300 steps
of a d=64, L=8 model). Runs and scores go through the workbench cache, so a second build
trains nothing.

>>> figure_options(True).sequences < figure_options(False).sequences
True
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["FIGURE_GROUPS", "training_size", "figure_options", "runs", "run_scores", "train_layers", "seed_band",
           "angular_matrix"]

FIGURE_GROUPS = ("prune", "angular", "causal", "usefulness")


def training_size(quick: bool):
    """:data:`TINY` for a quick build, :data:`FULL` otherwise."""
    from simulate.scores.training_cache import FULL, TINY

    return TINY if quick else FULL


def figure_options(quick: bool):
    """Score options of the figures: few held-out sequences when quick."""
    from simulate.scores.compute import ScoreOptions

    if quick:
        return ScoreOptions(sequences=8, batch_size=8, pairs=1, jac_sequences=2, probes=2, iterations=3)
    return ScoreOptions(sequences=64, batch_size=32, pairs=1)


def runs(quick: bool, names) -> dict:
    """``{name: [run directory per seed]}`` of the claim settings ``names`` (trained through the cache)."""
    from simulate.scores.training_cache import claim_runs

    return claim_runs(training_size(quick), names=names)


def run_scores(paths, quick: bool, at_init: bool = False) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """``[(scores, pairs)]`` per run of :data:`FIGURE_GROUPS`, at the end of training or at step 0."""
    from simulate.scores.training_cache import cached_scores

    return [cached_scores(p, at_init=at_init, groups=FIGURE_GROUPS, options=figure_options(quick)) for p in paths]


def train_layers(path) -> pd.DataFrame:
    """A run's ``train_layers.csv`` (:meth:`simulate.training.run_directory.RunDirectory.layers`)."""
    from simulate.training.run_directory import RunDirectory

    return RunDirectory(path).layers()


def seed_band(tables: list[pd.DataFrame], score: str) -> pd.DataFrame:
    """Per layer: mean over seeds of a score's value and its 95 % t band (``layer, mean, low, high``)."""
    from simulate.claims import t_interval

    values = pd.concat([t[t["score"] == score].set_index("layer")["value"].rename(i) for i, t in enumerate(tables)],
                       axis=1)  # (layers, seeds)
    intervals = [(layer, t_interval(row.to_numpy(float))) for layer, row in values.iterrows()]
    rows = [(layer, i.estimate, i.low, i.high) for layer, i in intervals]
    band = pd.DataFrame(rows, columns=["layer", "mean", "low", "high"])
    one_seed = band["low"].isna()
    band.loc[one_seed, "low"] = band.loc[one_seed, "mean"]
    band.loc[one_seed, "high"] = band.loc[one_seed, "mean"]
    return band


def angular_matrix(pairs_tables: list[pd.DataFrame], depth: int, score: str = "angular_last") -> np.ndarray:
    """``D[l, n] = d(x_l, x_{l+n})`` (mean over seeds) from pairs.csv tables; NaN where ``l + n > L``.

    >>> t = pd.DataFrame({"layer": [0], "other": [1], "score": ["angular_last"], "value": [0.25]})
    >>> float(angular_matrix([t], 1)[0, 1])
    0.25
    """
    out = np.full((depth + 1, depth + 1), np.nan)
    both = pd.concat(pairs_tables)
    rows = both[both["score"] == score].groupby(["layer", "other"])["value"].mean()
    for (layer, other), value in rows.items():
        out[int(layer), int(other) - int(layer)] = value
    return out
