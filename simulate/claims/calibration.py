"""A report's direction verdicts calibrated on its own design: synthetic studies judged by the same code.

A direction verdict is a chain (the fit of the cell means, the test, the family's adjustment). Its
error rate on the design that ran is measured here by simulation (Talts et al. 2018's
simulation-based calibration, applied to the verdicts): for every trend of a report's family, studies
with its cells (axis values, models per cell) are drawn with a cell effect of the spread the data
show beyond the seeds (``tau^2 = max(0, s^2 - w^2 mean(1/n))``, ``s^2`` the cell means' scatter
about the line, ``w^2`` the seeds' pooled variance), judged by :func:`~simulate.claims.trends.fit_trend`
and :func:`~simulate.claims.trends.direction_verdict`, the family adjusted by the report's
:class:`~simulate.claims.judgement.Inference`. Scenarios (:data:`SCENARIOS`):

``no trend``
    no trend, normal cell effects: the false-verdict rate (``holds`` or ``violated``) per claim and of the
    family (any false verdict), at most nominal;
``bent, no trend``
    no linear trend, the cells on a curve in ``log x`` (a parabola of the cell effect's spread, or
    the seeds' where the cells show none): a misspecified shape;
``heavy-tailed, no trend``
    no trend, cell effects from Student's t with 3 degrees of freedom (the same spread): misspecified;
``papers' effect``
    the slope the papers report (:class:`~simulate.claims.definitions.Reference`): the power;
``endpoint rule (old), no trend``
    the negative control: the rule this one replaced (the last minus the first cell by Welch's test, by
    seeds, wherever the line's lack of fit is rejected at 0.05, then the family's adjustment), on the null:
    it fails.

Each study is drawn from one seeded generator: the table is the same on every machine.

>>> from types import SimpleNamespace as Trend
>>> from simulate.claims.definitions import CLAIMS
>>> from simulate.claims.judgement import TrendDesign
>>> design = TrendDesign((4.0, 8.0, 16.0, 32.0), (3, 3, 3, 3), 1.0, 2.0)
>>> trend = Trend(claim=CLAIMS["p2-depth-jac"], axis="depth", direction=-1, design=design, line="trained")
>>> table = calibrate([trend], Inference(), studies=200)
>>> rates = table[table["claim"] == "p2-depth-jac"].set_index("scenario")["rate"]
>>> rates.round(3).to_dict()  # a cell effect 1.3 times the seeds' spread: the old rule's false verdicts
{'no trend': 0.045, 'bent, no trend': 0.0, 'heavy-tailed, no trend': 0.055, 'endpoint rule (old), no trend': 0.18}
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from simulate.claims.judgement import Inference, Interval, detectable_slope
from simulate.claims.trends import Trend, cell_means_slope, direction_verdict
from theory.verdicts import Verdict

__all__ = ["SCENARIOS", "CALIBRATION_COLUMNS", "calibrate"]

SCENARIOS = ("no trend", "bent, no trend", "heavy-tailed, no trend", "papers' effect", "endpoint rule (old), no trend")
CALIBRATION_COLUMNS = ("scenario", "claim", "statistic", "line", "cells", "seeds", "cell_to_seed", "rate", "rate_se",
                       "detectable", "reference", "studies")
_JUDGED = (Verdict.HOLDS, Verdict.VIOLATED)


def _spreads(design) -> tuple[float, float]:
    """(cell effect sd, seed sd) of a design (module docstring)."""
    counts = np.asarray(design.counts, dtype=float)
    seed_var = design.within_var if math.isfinite(design.within_var) else 0.0
    cell_var = max(design.residual_var - seed_var * float(np.mean(1.0 / counts)), 0.0)
    return math.sqrt(cell_var), math.sqrt(seed_var)


def _draw(rng, design, scenario: str, slope: float, studies: int) -> list[np.ndarray]:
    """``studies`` synthetic studies of ``design`` at once: per cell, the models' values ``(studies, n_i)``."""
    x = np.asarray(design.x, dtype=float)  # (k,)
    cell_sd, seed_sd = _spreads(design)
    centred = np.log(x) - np.log(x).mean()  # (k,)
    if scenario == "bent, no trend":
        square = centred**2 - (centred**2).mean()  # (k,)
        bend = square - (square @ centred) / (centred @ centred) * centred  # no linear part on any design
        spread = cell_sd if cell_sd > 0 else seed_sd / math.sqrt(float(np.mean(design.counts)))
        effects = np.broadcast_to(spread * bend / (bend.std() if bend.std() > 0 else 1.0), (studies, x.size))
    elif scenario == "heavy-tailed, no trend":
        effects = cell_sd * rng.standard_t(3, (studies, x.size)) / math.sqrt(3.0)  # t_3 has variance 3
    else:
        effects = cell_sd * rng.standard_normal((studies, x.size))
    means = slope * centred + effects  # (studies, k)
    return [means[:, [i]] + seed_sd * rng.standard_normal((studies, n)) for i, n in enumerate(design.counts)]


def _welch_p(last: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Welch's two-sided p of ``last - first`` per study (rows ``(studies, n)``); NaN where a cell has one model."""
    if last.shape[1] < 2 or first.shape[1] < 2:
        return np.full(last.shape[0], math.nan)
    va, vb = last.var(axis=1, ddof=1) / last.shape[1], first.var(axis=1, ddof=1) / first.shape[1]  # (studies,)
    se = np.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (last.shape[1] - 1) + vb**2 / (first.shape[1] - 1))
    return 2 * stats.t.sf(np.abs(last.mean(axis=1) - first.mean(axis=1)) / se, dof)


def _endpoint_rule(cells: list[np.ndarray], log_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The old rule (negative control): ``(estimate, p)`` per study: the line's slope, or the last minus the
    first cell by Welch's test where the line's pure-error lack of fit is rejected at 0.05 (the test of
    :func:`~simulate.claims.trends.lack_of_fit_p`, here over every study at once)."""
    means = np.stack([c.mean(axis=1) for c in cells], axis=1)  # (studies, k)
    counts = np.array([c.shape[1] for c in cells])  # (k,)
    k, n = counts.size, int(counts.sum())
    slope, _, p_line, _ = cell_means_slope(log_x, means)
    x_models = np.repeat(log_x, counts)  # (n,) the line through every model
    y = np.concatenate(cells, axis=1)  # (studies, n)
    centred = x_models - x_models.mean()
    fit_slope = y @ centred / (centred**2).sum()  # (studies,)
    fitted = y.mean(axis=1, keepdims=True) + fit_slope[:, None] * centred  # (studies, n)
    cell_mean = np.repeat(means, counts, axis=1)  # (studies, n)
    pure = ((y - cell_mean) ** 2).sum(axis=1)  # (studies,)
    lack = ((cell_mean - fitted) ** 2).sum(axis=1)  # (studies,)
    rejected = stats.f.sf((lack / (k - 2)) / (pure / (n - k)), k - 2, n - k) < 0.05  # (studies,)
    contrast = means[:, -1] - means[:, 0]
    return np.where(rejected, contrast, slope), np.where(rejected, _welch_p(cells[-1], cells[0]), p_line)


def _reference(trend) -> float:
    """The papers' slope per e-fold of the axis of ``trend`` (a trend judgement), 0 where they give none."""
    return trend.claim.reference_trend(trend.axis) or 0.0


def _family_rates(rng, trends, inference: Inference, scenario: str, studies: int) -> tuple[np.ndarray, float]:
    """Per trend, the share of studies with a direction verdict (false under a null, power under an effect), and
    the share of studies with any such verdict in the family: every study judged by
    :func:`~simulate.claims.trends.direction_verdict` on the adjusted p of its family."""
    estimates, p_values = [], []
    for trend in trends:
        design = trend.design
        slope = _reference(trend) if scenario == "papers' effect" else 0.0
        cells = _draw(rng, design, scenario, slope, studies)
        log_x = np.log(np.asarray(design.x, dtype=float))
        if scenario.startswith("endpoint"):
            estimate, p = _endpoint_rule(cells, log_x)
        else:
            estimate, _, p, _ = cell_means_slope(log_x, np.stack([c.mean(axis=1) for c in cells], axis=1))
        estimates.append(estimate)
        p_values.append(p)
    estimates, p_values = np.stack(estimates, axis=1), np.stack(p_values, axis=1)  # (studies, m) each
    judged = np.zeros(p_values.shape, dtype=bool)
    for study, (row, p_row) in enumerate(zip(estimates, p_values)):
        adjusted = inference.adjust(p_row)
        for j, member in enumerate(trends):
            design = member.design
            trend = Trend(Interval(float(row[j])), float(adjusted[j]), len(design.x) - 2, math.nan, len(design.x),
                          int(sum(design.counts)), "")
            judged[study, j] = direction_verdict(trend, member.direction, confidence=inference.confidence) in _JUDGED
    return judged.mean(axis=0), float(judged.any(axis=1).mean())


def calibrate(trends, inference: Inference = Inference(), studies: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The calibration table (module docstring) of a family ``trends`` (each with ``claim``, ``axis``,
    ``direction``, ``design`` and ``line``: a :class:`~simulate.claims.judgement.TrendJudgement`); one row per
    scenario and trend, and a ``family`` row per scenario (any false verdict). Under ``papers' effect`` the claims
    with a reference along their axis are drawn at it, the others at 0, and only the former are shown."""
    rng = np.random.default_rng(seed)
    rows = []
    if not trends:  # no direction verdict to calibrate (two axis values, or no claimed direction)
        return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))
    m = max(len(trends), 1)
    for scenario in SCENARIOS:
        if scenario == "papers' effect" and not any(_reference(t) for t in trends):
            continue
        rates, family = _family_rates(rng, trends, inference, scenario, studies)
        for trend, rate in zip(trends, rates):
            claim, design = trend.claim, trend.design
            if scenario == "papers' effect" and not _reference(trend):
                continue
            cell_sd, seed_sd = _spreads(design)
            centred = np.log(design.x) - np.log(design.x).mean()
            se = math.sqrt(design.residual_var / float((centred**2).sum()))
            rows.append({"scenario": scenario, "claim": claim.id, "statistic": claim.statistic, "line": trend.line,
                         "cells": len(design.x), "seeds": float(np.mean(design.counts)),
                         "cell_to_seed": cell_sd / seed_sd if seed_sd > 0 else math.nan, "rate": float(rate),
                         "rate_se": math.sqrt(rate * (1 - rate) / studies),
                         "detectable": detectable_slope(se, len(design.x) - 2, inference.alpha / m),
                         "reference": _reference(trend) or math.nan, "studies": studies})
        if scenario != "papers' effect":
            rows.append({"scenario": scenario, "claim": "family", "statistic": f"any of {len(trends)}", "line": "",
                         "cells": math.nan, "seeds": math.nan, "cell_to_seed": math.nan, "rate": family,
                         "rate_se": math.sqrt(family * (1 - family) / studies), "detectable": math.nan,
                         "reference": math.nan, "studies": studies})
    return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))
