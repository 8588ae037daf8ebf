"""One cell of the accuracy map: every curve ``theory.predict`` draws for a setting, beside the Monte-Carlo.

The cell's sample count is sized from a pilot run so that ``var`` at the last layer has the grid's
relative standard error (``n = pilot * (rel_sem / target)^2``, rounded up to a multiple of the pilot,
capped at :meth:`MapGrid.sample_cap`); the stream metrics (``var``, the branch variances, ``angular``,
``token_cos``) are measured at that count, the tangent metrics (``jac_dev``, ``e2e_gain``) at
:meth:`MapGrid.tangent_samples`. Every
simulation goes through the cache (:func:`simulate.cache.cached_simulate`), so an interrupted map
goes on from the last cell. Each (law, metric) curve becomes one row: its kind(s), its worst relative
error and that layer, its mean and worst ``z``, the resolution (relative sem at the last layer), and an
accuracy class (:data:`ACCURACY_CLASSES`, docs/accuracy.md#classes).

>>> str(accuracy_class("exact", z=np.array([1.0, -3.0]), rel=np.array([0.001, 0.004])))
'within noise'
>>> str(accuracy_class("approx", z=np.array([9.0, 2.0]), rel=np.array([0.02, 0.001])))
'within 5 %'
>>> str(accuracy_class("exact", z=np.array([1.0, 3.0]), rel=np.array([0.02, 0.03])))  # noise above 1 %
'unresolved'
>>> str(accuracy_class("exact", z=np.array([0.5, -1.0]), rel=np.array([np.inf, np.inf])))  # a law of value 0
'within noise'
>>> str(accuracy_class("exact", z=np.array([0.5, 9.0]), rel=np.array([np.inf, np.inf])))
'worse'
>>> str(accuracy_class("upper", z=np.array([-5.0, 1.0]), rel=np.array([0.5, 0.1])))
'bound holds'
>>> str(accuracy_class("approx", z=np.array([1.0, 3.0]), rel=np.array([0.004, 0.008]), resolution=0.02, known_error=0.015))
'unresolved'
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from simulate.accuracy.grid import MapGrid
from simulate.compare import Z_LIMIT, layer_errors, run_monte_carlo
from theory.accuracy import measured_bound
from theory.meanfield.finite_width import resolve_width_law
from theory.setting import Setting
from theory.verdicts import AccuracyClass

__all__ = ["ACCURACY_CLASSES", "MAP_COLUMNS", "TANGENT_METRICS", "accuracy_class", "cell_samples", "is_paper",
           "measure_cell"]

# The classes of a curve (theory.verdicts.AccuracyClass), best first: within noise (|z| <= Z_LIMIT at every layer,
# relative error <= 1 %), then by its worst relative error; unresolved when it is within noise only because the
# noise is above 1 %, or because the cell resolves no error as small as the one the shipped map measured for it.
ACCURACY_CLASSES = tuple(AccuracyClass)
TANGENT_METRICS = ("jac_dev", "e2e_gain")
MAP_COLUMNS = ("scheme", "block", "width", "tokens", "causal", "depth", "width_law", "law", "metric", "kind",
               "accuracy", "layers", "samples", "rel_sem", "worst_rel_error", "worst_rel_layer", "mean_z", "worst_z",
               "worst_z_layer", "last_rel_error", "blow_up_layer")
_RESOLVED = 0.01


def accuracy_class(kind: str, *, z: np.ndarray, rel: np.ndarray, resolution: float = 0.0,
                   known_error: float = 0.0) -> AccuracyClass:
    """The class (:data:`ACCURACY_CLASSES`) of one curve from its per-layer ``z`` and relative errors.

    A bound (``kind`` upper or lower) holds when it is nowhere crossed by more than ``Z_LIMIT`` sem, as
    :func:`simulate.compare.classify` rules; a law is ``within noise`` when ``|z| <= Z_LIMIT`` at every
    layer and its relative error stays within 1 %, else classed by its worst relative error. Layers where
    the law's value is 0 (``token_cos`` of independent tokens) count by ``z`` alone. A curve within noise is
    ``unresolved`` when its ``resolution`` (the smallest relative error the cell tells from 0, ``Z_LIMIT``
    relative sem) exceeds ``known_error``, the error the shipped map measured for it (0: none known).
    """
    if len(z) == 0:
        return AccuracyClass.NOT_MEASURED
    if kind in ("upper", "lower"):
        excess = z if kind == "upper" else -z
        return AccuracyClass.BOUND_HOLDS if np.all(excess <= Z_LIMIT) else AccuracyClass.BOUND_CROSSED
    within = np.abs(z) <= Z_LIMIT
    rel = np.where(np.isfinite(rel), rel, np.where(within, 0.0, np.inf))  # value 0: z alone rules there
    worst = float(np.nanmax(rel))
    if np.all(within):
        resolved = worst <= _RESOLVED and not 0 < known_error < resolution
        return AccuracyClass.WITHIN_NOISE if resolved else AccuracyClass.UNRESOLVED
    if worst <= 0.01:
        return AccuracyClass.WITHIN_1
    return AccuracyClass.WITHIN_5 if worst <= 0.05 else AccuracyClass.WORSE


def cell_samples(pilot_rel_sem: float, grid: MapGrid, tokens: int) -> int:
    """Samples that bring the pilot's relative sem of ``var`` down to ``grid.target_sem`` (a multiple of the
    pilot, at most ``grid.sample_cap(tokens)``).

    >>> cell_samples(0.004, MapGrid(pilot_samples=256, target_sem=0.002), tokens=16)
    1024
    >>> cell_samples(0.1, MapGrid(pilot_samples=256, target_sem=0.002), tokens=16)
    2048
    """
    if not math.isfinite(pilot_rel_sem):
        return grid.pilot_samples
    blocks = math.ceil((pilot_rel_sem / grid.target_sem) ** 2)
    return int(min(grid.sample_cap(tokens), max(1, blocks) * grid.pilot_samples))


def is_paper(law: str) -> bool:
    """Whether ``law`` is one of the papers' statements (not a law derived here).

    >>> is_paper("p2-thm-1"), is_paper("preln-init")
    (True, False)
    """
    import theory

    return theory.LEMMAS[law].kind == "paper"


def _relative(sem: float, mean: float) -> float:
    """``sem/|mean|``, NaN for a mean of 0 (a curve of zeros has no relative resolution)."""
    return float(sem / abs(mean)) if mean else math.nan


def _last_rel_sem(measured: pd.DataFrame) -> float:
    var = measured[measured["metric"] == "var"]
    if var.empty:
        return math.nan
    last = var.loc[var["layer"].idxmax()]
    return _relative(last["sem"], last["mean"])


def _largest(values: np.ndarray) -> int | None:
    """Index of the largest value, NaN left out; None when there is none."""
    return None if np.isnan(values).all() else int(np.nanargmax(values))


def _kind_word(kinds) -> str:
    """The kinds of a curve over its compared layers: one kind, or ``exact+approx`` where they change."""
    return "+".join(sorted(set(kinds), key=["exact", "approx", "upper", "lower"].index))


def _known_error(bound) -> float:
    """The median relative error the shipped map measured for a curve that it found off somewhere, else 0."""
    if bound is None or bound.within_noise == bound.cells:
        return 0.0
    return bound.median_rel_error


def measure_cell(setting: Setting, grid: MapGrid) -> pd.DataFrame:
    """The map's rows (:data:`MAP_COLUMNS`) of one cell: every (law, metric) curve of ``theory.predict``.

    The worst kind of a mixed curve decides its class (an ``exact+approx`` curve is held to the rules of
    ``approx``); ``blow_up_layer`` is the layer of a numerical blow-up (the curves are compared below it).
    """
    import theory

    prediction = theory.predict(setting, width_law=grid.width_law)
    metrics = sorted(set(prediction["metric"]))
    stream = tuple(m for m in metrics if m not in TANGENT_METRICS)
    tangent = tuple(m for m in metrics if m in TANGENT_METRICS)
    measured, blowup = run_monte_carlo(setting, samples=grid.pilot_samples, seed=grid.seed, metrics=stream)
    samples = grid.pilot_samples
    if blowup is None:
        samples = cell_samples(_last_rel_sem(measured), grid, setting.tokens)
        if samples > grid.pilot_samples:
            measured, blowup = run_monte_carlo(setting, samples=samples, seed=grid.seed, metrics=stream)
    tables, tangent_samples = [measured], grid.tangent_samples(setting.tokens, samples)
    if tangent:
        tangent_table, tangent_blowup = run_monte_carlo(setting, samples=tangent_samples, seed=grid.seed,
                                                        metrics=tangent)
        tables.append(tangent_table)
        blowup = blowup if tangent_blowup is None else min(tangent_blowup, blowup or tangent_blowup)
    measured = pd.concat(tables, ignore_index=True)
    cell = dict(scheme=setting.scheme, block=setting.preset or setting.block, width=setting.width,
                tokens=setting.tokens, causal=setting.causal, depth=setting.depth,
                width_law=resolve_width_law(grid.width_law, setting.width, setting.tokens))
    rows = []
    for (law, metric), curve in prediction.groupby(["law", "metric"], sort=True, observed=True):
        if not (curve["layer"] >= 1).any():
            continue  # a value for the input only
        both = layer_errors(measured, curve)  # (layers compared, columns)
        z, rel = both["z"].to_numpy(float), both["rel_error"].to_numpy(float)
        kind = _kind_word(both["kind"].astype(str)) if len(both) else _kind_word(curve["kind"].astype(str))
        ruling_kind = "approx" if kind == "exact+approx" else kind
        worst_rel, worst_z = _largest(np.where(np.isfinite(rel), rel, np.nan)), _largest(np.abs(z))
        rel_sem = _relative(both["sem"].iloc[-1], both["mean"].iloc[-1]) if len(both) else math.nan
        known = measured_bound(law, metric, cell["block"], setting.scheme, width_law=cell["width_law"])
        rows.append({**cell, "law": law, "metric": metric, "kind": kind,
                     "accuracy": accuracy_class(ruling_kind, z=z, rel=rel, resolution=Z_LIMIT * rel_sem,
                                                known_error=_known_error(known)), "layers": len(both),
                     "samples": tangent_samples if metric in TANGENT_METRICS else samples, "rel_sem": rel_sem,
                     "worst_rel_error": float(rel[worst_rel]) if worst_rel is not None else math.nan,
                     "worst_rel_layer": int(both["layer"].iloc[worst_rel]) if worst_rel is not None else -1,
                     "mean_z": float(np.mean(z[np.isfinite(z)])) if np.isfinite(z).any() else math.nan,
                     "worst_z": float(z[worst_z]) if worst_z is not None else math.nan,
                     "worst_z_layer": int(both["layer"].iloc[worst_z]) if worst_z is not None else -1,
                     "last_rel_error": float(rel[-1]) if len(both) else math.nan,
                     "blow_up_layer": -1 if blowup is None else int(blowup)})
    return pd.DataFrame(rows, columns=list(MAP_COLUMNS))
