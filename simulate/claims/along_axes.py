"""The study's judge: each claim per cell of a study's axes (its level) and along each axis (its trend).

A study's models are judged here from their :class:`~simulate.claims.statistics.ModelStatistics`
(any object with ``status``, ``scheme``, ``seed``, ``cell(fields)``, ``stats`` and
``profiles``: :class:`simulate.study.analysis.Model`).

``levels``
    One row per claim and *cell* (one value of each swept field but the scheme): the
    statistic's mean over seeds with its 95 % t interval (a claim on two schemes: the
    first scheme minus the second, :func:`~simulate.claims.intervals.difference_interval`, paired
    by seed where the two schemes have the same seeds in the cell) and, for a claimed sign,
    its verdict (the interval at the report's :class:`~simulate.claims.inference.Inference` confidence).
    Growth claims give :func:`simulate.claims.growth.judge_growth`'s rows pooled
    over seeds, with the ``growth_class``; ``every_step`` gives the growth class at every
    logged step in its ``detail``.
``trends``
    One row per claim, study axis and group (the values of the swept fields that stay fixed
    along the axis), at the level of the design (:mod:`simulate.claims.trends`): the slope of
    the cell means against log(axis) with its lack-of-fit p, the difference between the last
    and the first cell, the method of the direction verdict with its raw and adjusted p (Holm's
    or Benjamini-Hochberg's, :class:`~simulate.claims.inference.Inference`; the family: every
    direction verdict of the table), the claimed direction and its verdict,
    and where a signed claim's cell means change sign.

Verdict of the every-step claim at a cell: ``holds`` when the pooled growth class is
exponential with a rate interval above 0 at every logged step after step 0, ``violated``
when it is polynomial at every one, ``inconclusive`` otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from simulate.claims.definitions import CLAIMS, Claim, Kind
from simulate.claims.growth import growth_summary, judge_growth
from simulate.claims.inference import Inference
from simulate.claims.intervals import Interval, NO_INTERVAL, difference_interval, share_interval, t_interval
from simulate.claims.statistics import SHARE_STATISTICS
from simulate.claims.trends import cell_crossing, describe_crossing, direction_verdict, fit_trend
from simulate.claims.verdicts import Verdict

__all__ = ["LEVEL_COLUMNS", "TREND_COLUMNS", "claim_samples", "level_rows", "trend_rows"]

LEVEL_COLUMNS = ("claim", "source", "statistic", "scheme", "n", "mean", "low", "high", "verdict", "growth_class",
                 "detail")  # the cell's fields come after "scheme"
TREND_COLUMNS = ("claim", "source", "statistic", "scheme", "axis", "group", "n", "failed", "pending", "cells", "slope",
                 "low", "high", "lack_of_fit_p", "contrast", "contrast_low", "contrast_high", "method", "p_value",
                 "p_adjusted", "direction", "verdict", "crossing", "crossing_low", "crossing_high", "crossing_note")


def claim_samples(claim: Claim, models, fields) -> list[tuple[tuple, float]]:
    """``(cell, value)`` per seed of the claim's statistic among ``models`` (ok ones): one scheme's values,
    or the first scheme's minus the second's, paired by cell and seed."""
    ok = [m for m in models if m.status == "ok"]
    if not claim.paired:
        return [(m.cell(fields), m.stats.value(claim.statistic)) for m in ok if m.scheme == claim.schemes[0]]
    first, second = ({(m.cell(fields), m.seed): m.stats.value(claim.statistic) for m in ok if m.scheme == scheme}
                     for scheme in claim.schemes)
    return [(cell, value - second[(cell, seed)]) for (cell, seed), value in first.items() if (cell, seed) in second]


def _level_row(claim: Claim, fields, cell, statistic: str, estimate: Interval, n: int, verdict, detail: str = "",
               label: str = "") -> dict:
    return {"claim": claim.id, "source": claim.source, "statistic": statistic, "scheme": "-".join(claim.schemes),
            **dict(zip(fields, cell)), "n": n, "mean": estimate.estimate, "low": estimate.low, "high": estimate.high,
            "verdict": str(verdict), "growth_class": label, "detail": detail}


def _growth_levels(claim: Claim, fields, cell, members, confidence: float) -> list[dict]:
    curves = [m.profiles[max(m.profiles)] for m in members if m.status == "ok" and m.scheme == claim.schemes[0]]
    if not curves:
        return []
    return [_level_row(claim, fields, cell, j.statistic, j.estimate, len(curves), j.verdict, j.comment,
                       j.growth_class)
            for j in judge_growth(claim, growth_summary(np.stack(curves), confidence))]  # curves: (S, L+1)


def _every_step_levels(claim: Claim, fields, cell, members, confidence: float) -> list[dict]:
    ok = [m for m in members if m.status == "ok" and m.scheme == claim.schemes[0]]
    if not ok:
        return []
    steps = sorted(set.intersection(*(set(m.profiles) for m in ok)) - {0})
    labels = []
    for step in steps:
        summary = growth_summary(np.stack([m.profiles[step] for m in ok]), confidence)  # (S, L+1)
        exponential = summary.label == "exponential" and summary.rate.low > 0
        labels.append("exponential" if exponential else summary.label)
    count = sum(label == "exponential" for label in labels)
    if steps and count == len(steps):
        verdict = Verdict.HOLDS
    elif steps and all(label == "polynomial" for label in labels):
        verdict = Verdict.VIOLATED
    else:
        verdict = Verdict.INCONCLUSIVE
    classes = ", ".join(f"{step}: {label[:3]}" for step, label in zip(steps, labels))
    share = Interval(count / len(steps)) if steps else NO_INTERVAL
    return [_level_row(claim, fields, cell, "exponential_step_share", share, len(ok), verdict,
                       f"exponential at {count} of {len(steps)} logged steps after step 0 ({classes})")]


def _level(claim: Claim, members, confidence: float) -> tuple[Interval, int]:
    """The statistic's mean over the cell's seeds with its t interval, or for two schemes their difference
    (:func:`simulate.claims.intervals.difference_interval`, as ``verify --trained`` compares two groups)."""
    ok = [m for m in members if m.status == "ok"]
    by_seed = [{m.seed: m.stats.value(claim.statistic) for m in ok if m.scheme == scheme} for scheme in claim.schemes]
    if claim.paired:
        if not (by_seed[0] and by_seed[1]):
            return NO_INTERVAL, 0
        return difference_interval(*by_seed, confidence=confidence)[:2]
    values = list(by_seed[0].values())
    if claim.statistic in SHARE_STATISTICS:  # a share of blocks: never a zero-width interval
        blocks = [m.stats.blocks for m in ok if m.scheme == claim.schemes[0]]
        return share_interval(values, blocks, confidence), int(np.isfinite(values).sum())
    return t_interval(values, confidence), int(np.isfinite(values).sum())


def level_rows(claim_ids, models, fields, inference: Inference = Inference()) -> pd.DataFrame:
    """The levels table (module docstring) of ``claim_ids`` over ``models``, cells over ``fields``."""
    rows = []
    cells = sorted({m.cell(fields) for m in models})
    for claim in (CLAIMS[name] for name in claim_ids):
        for cell in cells:
            members = [m for m in models if m.cell(fields) == cell]
            if claim.kind is Kind.GROWTH:
                rows += _growth_levels(claim, fields, cell, members, inference.confidence)
            elif claim.kind is Kind.EVERY_STEP:
                rows += _every_step_levels(claim, fields, cell, members, inference.confidence)
            else:
                estimate, n = _level(claim, members, inference.confidence)
                verdict = "" if claim.sign is None else (
                    Verdict.NOT_MEASURED if math.isnan(estimate.estimate) else estimate.signed_verdict(claim.sign))
                rows.append(_level_row(claim, fields, cell, claim.statistic, estimate, n, verdict))
    columns = [*LEVEL_COLUMNS[:4], *fields, *LEVEL_COLUMNS[4:]]
    return pd.DataFrame(rows, columns=columns)


def _trend_row(claim: Claim, axis: str, group: dict, members, confidence: float) -> tuple[dict, object]:
    """One row of the trends table and its :class:`~simulate.claims.trends.Trend` (the verdict comes later,
    from the family's adjusted p-values)."""
    samples = claim_samples(claim, members, (axis,))
    x = np.array([cell[0] for cell, _ in samples], dtype=float)  # (n,)
    y = np.array([value for _, value in samples], dtype=float)  # (n,)
    blocks = None
    if claim.statistic in SHARE_STATISTICS:  # the same models, in claim_samples' order
        blocks = np.array([m.stats.blocks for m in members if m.status == "ok" and m.scheme == claim.schemes[0]])
    trend = fit_trend(x, y, confidence, blocks=blocks)
    direction = claim.direction(axis)
    failed = sum(m.status == "failed" for m in members if m.scheme in claim.schemes)
    pending = sum(m.status == "pending" for m in members if m.scheme in claim.schemes)
    row = {"claim": claim.id, "source": claim.source, "statistic": claim.statistic,
           "scheme": "-".join(claim.schemes), "axis": axis, **group,
           "group": ", ".join(f"{k}={v}" for k, v in group.items()) or "all", "n": trend.n, "failed": failed,
           "pending": pending, "cells": trend.cells, "slope": trend.slope.estimate, "low": trend.slope.low,
           "high": trend.slope.high, "lack_of_fit_p": trend.lack_of_fit, "contrast": trend.contrast.estimate,
           "contrast_low": trend.contrast.low, "contrast_high": trend.contrast.high, "method": trend.method,
           "p_value": trend.p_value if direction is not None else math.nan, "p_adjusted": math.nan,
           "direction": {1: "rises", -1: "falls", None: ""}[direction], "verdict": "", "crossing": math.nan,
           "crossing_low": math.nan, "crossing_high": math.nan, "crossing_note": ""}
    if claim.sign is not None:
        crossing = cell_crossing(x, y, confidence)
        row.update(crossing=crossing.estimate, crossing_low=crossing.low, crossing_high=crossing.high,
                   crossing_note=describe_crossing(crossing, axis))
    return row, trend


def trend_rows(claim_ids, models, axes, group_fields, inference: Inference = Inference()) -> pd.DataFrame:
    """The trends table (module docstring): per claim of ``claim_ids``, axis of ``axes`` and group of the fields
    ``group_fields(axis)`` that stay fixed along it."""
    rows, trends = [], []
    for claim in (CLAIMS[name] for name in claim_ids):
        for axis in axes:
            fields = group_fields(axis)
            for group in sorted({m.cell(fields) for m in models}):
                members = [m for m in models if m.cell(fields) == group]
                row, trend = _trend_row(claim, axis, dict(zip(fields, group)), members, inference.confidence)
                rows.append(row)
                trends.append((trend, claim.direction(axis)))
    adjusted = inference.adjust([row["p_value"] for row in rows])  # the family: every direction verdict
    for row, (trend, direction), p in zip(rows, trends, adjusted):
        row.update(p_adjusted=p, verdict=str(direction_verdict(trend, direction, p, inference.confidence)))
    return pd.DataFrame(rows, columns=None if rows else list(TREND_COLUMNS))
