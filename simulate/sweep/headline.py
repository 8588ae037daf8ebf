"""The headline numbers of a sweep point: final values and the growth exponent of var over depth.

Each point's row in ``summary.csv`` carries, besides its config and status, a few numbers
read off its per-layer table: ``final_<metric>`` (the value at the last layer, and its
``final_<metric>_sem`` where the table has one) and the growth exponent of ``var``: the
log-log slope of ``var_l`` against ``l`` over the last half of the layers
(``l >= L/2``), by the workbench's one log-log fit,
:func:`theory.meanfield.bridge.loglog_slope` (least squares with a t interval; derived
here, docs/trained.md). It is the local exponent ``d log var / d log l`` at depth ``L``: 0
for a stream whose variance stays put (Post-LN), near 1 for the linear growth of Pre-LN
at random init (P1 Sec. 3; a little under 1 at finite depth because of the offset
``var_0``), larger for faster growth.

>>> import pandas as pd
>>> table = pd.DataFrame({"layer": [0, 1, 2, 3, 4], "metric": "var", "mean": [1.0, 2.0, 4.0, 9.0, 16.0],
...                       "sem": 0.1})
>>> row = measured_headline(table, depth=4)
>>> row["final_var"], round(row["growth_exponent"], 6)
(16.0, 2.0)
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from theory.meanfield.bridge import loglog_slope

__all__ = ["TAIL", "var_growth_exponent", "measured_headline", "predicted_headline"]

TAIL = 0.5  # the fit uses the layers l >= (1 - TAIL) * L: the last half


def var_growth_exponent(layers, var) -> dict[str, float]:
    """``growth_exponent``, ``growth_ci_low``, ``growth_ci_high`` of ``var`` over the last half of ``layers``.

    NaN when fewer than three layers with a positive finite value are left (a shallow
    stack, a blow-up).

    >>> l = np.arange(0, 33)
    >>> {k: round(v, 6) for k, v in var_growth_exponent(l, 3.0 * l**1.5).items()}
    {'growth_exponent': 1.5, 'growth_ci_low': 1.5, 'growth_ci_high': 1.5}
    """
    layers = np.asarray(layers, dtype=float)  # (n,)
    var = np.asarray(var, dtype=float)  # (n,)
    if layers.size == 0:
        return {"growth_exponent": math.nan, "growth_ci_low": math.nan, "growth_ci_high": math.nan}
    tail = layers >= (1.0 - TAIL) * layers.max()
    fit = loglog_slope(layers[tail], var[tail])
    return {"growth_exponent": fit.slope, "growth_ci_low": fit.ci_low, "growth_ci_high": fit.ci_high}


def measured_headline(table: pd.DataFrame, depth: int) -> dict[str, float]:
    """Headline numbers of a measured table (columns layer, metric, mean, sem, ...).

    ``final_<metric>`` (and ``final_<metric>_sem``) at ``layer == depth`` (NaN when the run
    stopped earlier), and the growth exponent of ``var`` when ``var`` was measured.
    """
    row: dict[str, float] = {}
    for metric, rows in table.groupby("metric", sort=False, observed=True):
        last = rows[rows.layer == depth]
        row[f"final_{metric}"] = float(last["mean"].iloc[0]) if len(last) else math.nan
        if "sem" in rows:
            row[f"final_{metric}_sem"] = float(last["sem"].iloc[0]) if len(last) else math.nan
    var = table[table.metric == "var"].sort_values("layer")
    if len(var):
        row.update(var_growth_exponent(var.layer.to_numpy(), var["mean"].to_numpy()))
    return row


def predicted_headline(prediction: pd.DataFrame, depth: int) -> dict[str, float]:
    """Headline numbers of ``theory.predict``'s table (layer, metric, law, kind, value).

    Per metric, the curve of its first law of kind ``exact`` (else its first law), read
    as :func:`measured_headline` reads a measurement (no sem).

    >>> t = pd.DataFrame({"layer": [0, 1, 0, 1], "metric": "var", "law": ["b", "b", "a", "a"],
    ...                   "kind": ["upper", "upper", "exact", "exact"], "value": [1.0, 3.0, 1.0, 2.0]})
    >>> predicted_headline(t, depth=1)
    {'final_var': 2.0, 'growth_exponent': nan, 'growth_ci_low': nan, 'growth_ci_high': nan}
    """
    chosen = []
    for metric, rows in prediction.groupby("metric", sort=False, observed=True):
        exact = rows[rows.kind == "exact"]
        law = (exact if len(exact) else rows).law.iloc[0]
        chosen.append(rows[rows.law == law])
    if not chosen:
        return {}
    table = pd.concat(chosen).rename(columns={"value": "mean"})[["layer", "metric", "mean"]]
    return measured_headline(table, depth)
