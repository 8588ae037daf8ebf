"""What the shipped accuracy map measured of a law: where it is within noise, and its worst error elsewhere.

The map (``python -m simulate verify --map``, docs/accuracy.md) compares every curve of
:func:`theory.predict` with the Monte-Carlo over a grid of settings at init and ships its table in
``results/accuracy-map/map.csv`` (:data:`MAP_PATH`). This module reads that table (pandas only, no
torch) for ``python -m theory show`` and for the comments of ``verify``: a curve of kind ``approx``
is then stated with its measured bound, the median and worst relative errors over the cells that
resolve it (without a numerical blow-up), and the cell where the worst was measured.

>>> print(measured_bound("preln-init", "var", "transformer", scheme="pre", width_law="finite-width").sentence())
the accuracy map (accuracy-map, finite-width law): within noise in 5 of 5 resolved pre transformer cells, median error 0.47%, worst 0.64% (pre d=64 T=16 acausal, layer 37)
>>> measured_bound("preln-init", "var", "transformer", width_law="mean-field") is None  # none since the rebuild
True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from theory.verdicts import AccuracyClass

__all__ = ["MAP_PATH", "MeasuredBound", "read_map", "shipped_map", "measured_bound", "law_accuracy"]

MAP_PATH = Path(__file__).resolve().parents[1] / "results" / "accuracy-map" / "map.csv"


@dataclass(frozen=True)
class MeasuredBound:
    """The relative errors of one curve over the map's resolved cells of one block (and scheme): their median,
    their worst and where."""

    law: str
    metric: str
    block: str
    scheme: str | None
    width_law: str | None
    cells: int
    within_noise: int
    median_rel_error: float
    worst_rel_error: float
    where: str

    def sentence(self) -> str:
        """One line for a reader: how many cells, how many within noise, the median and worst errors."""
        which = f"{self.scheme} {self.block}" if self.scheme else self.block
        law = f", {self.width_law} law" if self.width_law else ""
        return (f"the accuracy map ({MAP_PATH.parent.name}{law}): within noise in {self.within_noise} of {self.cells} "
                f"resolved {which} cells, median error {self.median_rel_error:.2%}, worst {self.worst_rel_error:.2%} "
                f"({self.where})")


def read_map(path) -> pd.DataFrame:
    """A map's ``map.csv`` (``python -m simulate verify --map`` writes it), its ``accuracy`` column parsed into
    :class:`~theory.verdicts.AccuracyClass` (ValueError naming an unknown word)."""
    table = pd.read_csv(path)
    return table.assign(accuracy=[AccuracyClass.parse(word) for word in table["accuracy"]])


@lru_cache(maxsize=1)
def shipped_map() -> pd.DataFrame | None:
    """The shipped map's table (:func:`read_map`), or None when this installation has none."""
    return read_map(MAP_PATH) if MAP_PATH.is_file() else None


def _where(row) -> str:
    causal = "causal" if row["causal"] else "acausal"
    return f"{row['scheme']} d={row['width']} T={row['tokens']} {causal}, layer {row['worst_rel_layer']}"


def measured_bound(law: str, metric: str, block: str, scheme: str | None = None,
                   width_law: str | None = None) -> MeasuredBound | None:
    """The map's errors of curve ``(law, metric)`` on ``block`` (``llama`` for the preset), of one ``scheme`` or
    of all, and of one ``width_law`` (the law of the token covariance the map's cells used) or of all, over the
    resolved cells without a numerical blow-up; None when there is none."""
    table = shipped_map()
    if table is None:
        return None
    rows = table[(table["law"] == law) & (table["metric"] == metric) & (table["block"] == block)
                 & table["accuracy"].map(lambda c: c.resolved).astype(bool) & (table["blow_up_layer"] < 0)
                 & table["worst_rel_error"].notna()]
    if scheme is not None:
        rows = rows[rows["scheme"] == scheme]
    if width_law is not None:
        rows = rows[rows["width_law"] == width_law]
    if rows.empty:
        return None
    worst = rows.loc[rows["worst_rel_error"].idxmax()]
    return MeasuredBound(law, metric, block, scheme, width_law, len(rows),
                         int(sum(c is AccuracyClass.WITHIN_NOISE for c in rows["accuracy"])),
                         float(rows["worst_rel_error"].median()), float(worst["worst_rel_error"]), _where(worst))


def law_accuracy(law: str) -> pd.DataFrame:
    """Per metric, block and scheme of ``law``: its kinds there, the resolved cells, how many within noise, the
    median and worst relative errors and the worst's cell (empty without a shipped map): the map's errors per
    scheme and block, never pooled over schemes.

    >>> table = law_accuracy("preln-init")
    >>> row = table[(table.metric == "var") & (table.block == "transformer") & (table.scheme == "pre")].iloc[0]
    >>> row["kind"], int(row["cells"]) >= 1
    ('approx', True)
    """
    table = shipped_map()
    columns = ["metric", "block", "scheme", "width_law", "kind", "cells", "within_noise", "median_rel_error",
               "worst_rel_error", "where"]
    if table is None:
        return pd.DataFrame(columns=columns)
    rows = []
    keys = ["metric", "block", "scheme", "width_law"]
    for (metric, block, scheme, width_law), group in table[table["law"] == law].groupby(keys, sort=True):
        bound = measured_bound(law, metric, block, scheme, width_law)
        found = dict(cells=0, within_noise=0, median_rel_error=float("nan"), worst_rel_error=float("nan"),
                     where="no resolved cell") if bound is None else \
            dict(cells=bound.cells, within_noise=bound.within_noise, median_rel_error=bound.median_rel_error,
                 worst_rel_error=bound.worst_rel_error, where=bound.where)
        rows.append({"metric": metric, "block": block, "scheme": scheme, "width_law": width_law,
                     "kind": "/".join(sorted(set(group["kind"]))), **found})
    return pd.DataFrame(rows, columns=columns)
