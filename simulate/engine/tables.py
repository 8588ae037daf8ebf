"""Statistics tables: per-sample values to mean, sem and confidence interval, in one place.

Every table of measured curves (the simulator, the naive reference, the weight-decay
process, the trainer's probes) has the columns :data:`COLUMNS`; the mean, its standard
error and the two-sided normal interval at :data:`CONFIDENCE` are computed here only.

>>> import numpy as np
>>> table = table_from_stats(np.array([[[1.0, 3.0]]]), ("var",))
>>> table[["layer", "metric", "mean", "sem"]].round(12).to_dict("records")
[{'layer': 0, 'metric': 'var', 'mean': 2.0, 'sem': 1.0}]
>>> [round(bound, 12) for bound in confidence_interval(2.0, 1.0)]
[0.04, 3.96]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["COLUMNS", "CONFIDENCE", "Z_CONFIDENCE", "confidence_interval", "interval_z", "summarise",
           "table_from_stats"]

COLUMNS = ["layer", "metric", "mean", "sem", "ci_low", "ci_high", "n"]
CONFIDENCE = 0.95
Z_CONFIDENCE = 1.96  # two-sided normal quantile of CONFIDENCE, as every table of the workbench reports it


def confidence_interval(mean, sem):
    """``(mean - z sem, mean + z sem)``, ``z = Z_CONFIDENCE`` (scalars or arrays)."""
    return mean - Z_CONFIDENCE * sem, mean + Z_CONFIDENCE * sem


def interval_z(mean: float, low: float, high: float, target: float = 0.0) -> float:
    """``(mean - target) / se`` with ``se = (high - low) / (2 Z_CONFIDENCE)``: how far ``target`` lies from
    ``mean`` in standard errors of a CONFIDENCE interval read as normal (NaN for a non-finite or empty one).

    >>> interval_z(3.0, 1.04, 4.96, target=1.0)
    2.0
    """
    if not (np.isfinite(low) and np.isfinite(high) and high > low):
        return float("nan")
    return float((mean - target) / ((high - low) / (2 * Z_CONFIDENCE)))


def summarise(sample: np.ndarray) -> tuple[float, float, float, float, int]:
    """``(mean, sem, ci_low, ci_high, n)`` of the finite entries of a 1-d sample (sem NaN when n = 1).

    sem = std(ddof=1)/sqrt(n). Values are scaled by their largest magnitude first, so that
    squares of values near a blow-up do not overflow.

    >>> [round(value, 12) for value in summarise(np.array([1.0, 3.0, np.nan]))]
    [2.0, 1.0, 0.04, 3.96, 2]
    """
    sample = np.asarray(sample, dtype=float)
    sample = sample[np.isfinite(sample)]  # (n,)
    n = int(sample.size)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), float("nan"), 0
    scale = float(np.abs(sample).max()) or 1.0
    mean = scale * float((sample / scale).mean())
    sem = scale * float((sample / scale).std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return (mean, sem, *confidence_interval(mean, sem), n)


def table_from_stats(values: np.ndarray, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Long table from per-sample values (n_layers, n_metrics, S); entries that are NaN for all samples are left out.

    Rows are ordered by metric (as given), then layer; statistics from :func:`summarise`.
    """
    rows = []
    for m, name in enumerate(metrics):
        block = values[:, m, :]  # (n_layers, S)
        counts = np.isfinite(block).sum(-1)  # (n_layers,)
        for layer in np.nonzero(counts)[0]:
            rows.append((int(layer), name, *summarise(block[layer])))
    return pd.DataFrame(rows, columns=COLUMNS)
