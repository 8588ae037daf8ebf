"""A report's direction verdicts calibrated on its own design: synthetic studies judged by the same code.

A verdict is a chain (the fit of the cell means, the rate's levels where the cells changed rate, the test,
the family's adjustment, the interval both questions read). Its error rates on the design that ran are
measured here by simulation (Talts et al. 2018's simulation-based calibration, applied to the verdicts):
for every trend of a report's family, studies with its cells (axis values, models per cell, rates, a share's
binomial floor) are drawn with a cell effect of the spread the data show beyond the seeds
(``tau^2 = max(0, s^2 - w^2 mean(1/n))``, ``s^2`` the cell means' scatter about the line, ``w^2`` the seeds'
pooled variance), judged by :func:`~simulate.claims.trends.cell_means_slope` and
:func:`~simulate.claims.trends.direction_verdict`, the family adjusted by the report's
:class:`~simulate.claims.judgement.Inference`. Each row gives two rates: ``rate``, direction verdicts
(``holds`` or ``violated``: false under a null, the power under the papers' effect), and ``size_rate``, the
papers' size rejected by the interval the verdict reads (false under the papers' effect, the power to say
"smaller than the papers say" under a null). Scenarios (:data:`SCENARIOS`), each able to fail:

``no trend``
    normal cell effects and seeds;
``heavy-tailed cells, no trend``
    cell effects from Student's t with 3 degrees of freedom (the same spread): misspecified;
``heavy-tailed seeds, no trend``
    the seeds' noise from Student's t with 3 degrees of freedom (the same spread): misspecified;
``rate step, no trend``
    a cell effect correlated with the axis: the cells' rate changes where the line's did (at the middle of the
    axis where it did not, as LNS's tuned rate did between L = 4 and 8) and moves every cell after it by a step
    four times the larger spread; the rule holds each rate's level apart (:func:`~simulate.claims.trends.fit_trend`);
``papers' effect``
    the slope the papers report (:class:`~simulate.claims.definitions.Reference`): the power, and the size
    question's false rate;
``endpoint rule (old), no trend`` and ``rate step, rate ignored (old)``
    negative controls: the rules this one replaced, on the null (the last minus the first cell by Welch's test
    where the line's lack of fit is rejected; one slope across the rate's step): they fail.

A share of blocks has each cell mean's variance floored at its blocks' binomial variance, in the drawn
studies as in the report. Each study is drawn from one seeded generator: the table is the same on every
machine.

>>> from types import SimpleNamespace as Trend
>>> from simulate.claims.definitions import CLAIMS
>>> from simulate.claims.judgement import TrendDesign
>>> design = TrendDesign((4.0, 8.0, 16.0, 32.0, 64.0), (3, 3, 3, 3, 3), 1.0, 2.0)
>>> trend = Trend(claim=CLAIMS["p2-depth-jac"], axis="depth", direction=-1, design=design, line=RateLine.TRAINED)
>>> table = calibrate([trend], Inference(), studies=200)
>>> rates = table[table["claim"] == "p2-depth-jac"].set_index("scenario")["rate"]
>>> rates.round(3).to_dict()  # the old rules' false verdicts: a cell effect 1.3 times the seeds' spread, a step
{'no trend': 0.045, 'heavy-tailed cells, no trend': 0.055, 'heavy-tailed seeds, no trend': 0.04, \
'rate step, no trend': 0.02, 'endpoint rule (old), no trend': 0.21, 'rate step, rate ignored (old)': 0.275}
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from simulate.claims.judgement import Inference, Interval, detectable_slope, size_verdict
from simulate.claims.trends import Trend, cell_means_slope, direction_verdict
from theory.verdicts import RateLine, Size, Verdict

__all__ = ["SCENARIOS", "CALIBRATION_COLUMNS", "calibrate"]

SCENARIOS = ("no trend", "heavy-tailed cells, no trend", "heavy-tailed seeds, no trend", "rate step, no trend",
             "papers' effect", "endpoint rule (old), no trend", "rate step, rate ignored (old)")
CALIBRATION_COLUMNS = ("scenario", "claim", "statistic", "line", "cells", "seeds", "cell_to_seed", "rates", "rate",
                       "rate_se", "size_rate", "size_rate_se", "detectable", "reference", "studies")
_JUDGED = (Verdict.HOLDS, Verdict.VIOLATED)
_STEP = 4.0  # the rate step, in the larger of the cell and the seed spread


def _spreads(design) -> tuple[float, float]:
    """(cell effect sd, seed sd) of a design (module docstring)."""
    counts = np.asarray(design.counts, dtype=float)
    seed_var = design.within_var if math.isfinite(design.within_var) else 0.0
    cell_var = max(design.residual_var - seed_var * float(np.mean(1.0 / counts)), 0.0)
    return math.sqrt(cell_var), math.sqrt(seed_var)


def _scenario_rates(design, scenario: str) -> tuple:
    """The cells' rate labels a scenario draws: a step scenario's (the design's own, or a change at the middle of
    the axis where the line kept one rate), else the design's (empty: one rate)."""
    if scenario.startswith("rate step") and not design.rates:
        k = len(design.x)
        return tuple(int(i >= k // 2) for i in range(k))
    return tuple(design.rates)


def _draw(rng, design, scenario: str, slope: float, studies: int) -> list[np.ndarray]:
    """``studies`` synthetic studies of ``design`` at once: per cell, the models' values ``(studies, n_i)``."""
    x = np.asarray(design.x, dtype=float)  # (k,)
    cell_sd, seed_sd = _spreads(design)
    centred = np.log(x) - np.log(x).mean()  # (k,)
    if scenario.startswith("heavy-tailed cells"):
        effects = cell_sd * rng.standard_t(3, (studies, x.size)) / math.sqrt(3.0)  # t_3 has variance 3
    else:
        effects = cell_sd * rng.standard_normal((studies, x.size))
    if scenario.startswith("rate step"):
        labels = _scenario_rates(design, scenario)
        step = np.array([float(label != labels[0]) for label in labels])  # (k,) 1 after the rate changed
        effects = effects + _STEP * max(cell_sd, seed_sd) * step
    means = slope * centred + effects  # (studies, k)

    def noise(n: int) -> np.ndarray:
        if scenario.startswith("heavy-tailed seeds"):
            return seed_sd * rng.standard_t(3, (studies, n)) / math.sqrt(3.0)
        return seed_sd * rng.standard_normal((studies, n))

    return [means[:, [i]] + noise(n) for i, n in enumerate(design.counts)]


def _welch_p(last: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Welch's two-sided p of ``last - first`` per study (rows ``(studies, n)``); NaN where a cell has one model."""
    if last.shape[1] < 2 or first.shape[1] < 2:
        return np.full(last.shape[0], math.nan)
    va, vb = last.var(axis=1, ddof=1) / last.shape[1], first.var(axis=1, ddof=1) / first.shape[1]  # (studies,)
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):  # seeds without noise: p 0 or NaN, as the old rule had it
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
    with np.errstate(divide="ignore", invalid="ignore"):
        rejected = stats.f.sf((lack / (k - 2)) / (pure / (n - k)), k - 2, n - k) < 0.05  # (studies,)
    contrast = means[:, -1] - means[:, 0]
    return np.where(rejected, contrast, slope), np.where(rejected, _welch_p(cells[-1], cells[0]), p_line)


def _reference(trend) -> float:
    """The papers' slope per e-fold of the axis of ``trend`` (a trend judgement), 0 where they give none."""
    return trend.claim.reference_trend(trend.axis) or 0.0


def _rule(cells: list[np.ndarray], design, scenario: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(estimate, se, p, dof)`` per study of the scenario's rule: the old rules for the negative controls, else
    the report's (the cell means' slope with the design's floor and the scenario's rates in the model)."""
    log_x = np.log(np.asarray(design.x, dtype=float))
    means = np.stack([c.mean(axis=1) for c in cells], axis=1)  # (studies, k)
    if scenario.startswith("endpoint"):
        estimate, p = _endpoint_rule(cells, log_x)
        return estimate, np.full_like(estimate, math.nan), p, log_x.size - 2
    rates = None if scenario.endswith("rate ignored (old)") else (_scenario_rates(design, scenario) or None)
    floor = np.asarray(design.floor, dtype=float) if len(design.floor) else None
    estimate, se, p, _ = cell_means_slope(log_x, means, floor, rates)
    dof = log_x.size - 2 - (len(set(rates)) - 1 if rates else 0)
    return estimate, se, p, dof


def _family_rates(rng, trends, inference: Inference, scenario: str, studies: int) -> tuple:
    """Per trend, the share of studies with a direction verdict and the share whose interval (at the family's level)
    rejects the papers' size; and the share of studies with any direction verdict in the family: every study judged
    by :func:`~simulate.claims.trends.direction_verdict` on the adjusted p of its family."""
    fits = []
    for trend in trends:
        slope = _reference(trend) if scenario == "papers' effect" else 0.0
        fits.append(_rule(_draw(rng, trend.design, scenario, slope, studies), trend.design, scenario))
    estimates, ses, p_values = (np.stack([f[i] for f in fits], axis=1) for i in range(3))  # (studies, m) each
    m = len(trends)
    adjusted = np.stack([inference.adjust(row) for row in p_values])  # (studies, m)
    levels = np.vectorize(lambda p, a: inference.family_level(p, a, m))(p_values, adjusted)  # (studies, m)
    dofs = np.array([max(f[3], 1) for f in fits], dtype=float)  # (m,)
    with np.errstate(invalid="ignore"):
        half = stats.t.ppf(0.5 + levels / 2, dofs) * ses  # (studies, m) the family interval's half-width
    judged = np.zeros(p_values.shape, dtype=bool)
    size_rejected = np.zeros(p_values.shape, dtype=bool)
    for study in range(studies):
        for j, member in enumerate(trends):
            design, estimate, dof = member.design, float(estimates[study, j]), fits[j][3]
            trend = Trend(Interval(estimate), float(adjusted[study, j]), dof, math.nan, len(design.x),
                          int(sum(design.counts)), None)
            judged[study, j] = direction_verdict(trend, member.direction, confidence=inference.confidence) in _JUDGED
            reference, width = _reference(member), float(half[study, j])
            if reference and math.isfinite(width) and dof >= 1:
                interval = Interval(estimate, estimate - width, estimate + width, float(levels[study, j]))
                size = size_verdict(interval, reference, member.claim.reference.at_least)
                size_rejected[study, j] = size not in (Size.AS_LARGE, Size.CANNOT_TELL, Size.LARGER)
    return judged.mean(axis=0), size_rejected.mean(axis=0), float(judged.any(axis=1).mean())


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
        rates, size_rates, family = _family_rates(rng, trends, inference, scenario, studies)
        for trend, rate, size_rate in zip(trends, rates, size_rates):
            claim, design = trend.claim, trend.design
            if scenario == "papers' effect" and not _reference(trend):
                continue
            cell_sd, seed_sd = _spreads(design)
            centred = np.log(design.x) - np.log(design.x).mean()
            se = math.sqrt(design.residual_var / float((centred**2).sum()))
            has_size = bool(_reference(trend))
            rows.append({"scenario": scenario, "claim": claim.id, "statistic": claim.statistic, "line": trend.line,
                         "cells": len(design.x), "seeds": float(np.mean(design.counts)),
                         "cell_to_seed": cell_sd / seed_sd if seed_sd > 0 else math.nan,
                         "rates": max(len(set(_scenario_rates(design, scenario))), 1), "rate": float(rate),
                         "rate_se": math.sqrt(rate * (1 - rate) / studies),
                         "size_rate": float(size_rate) if has_size else math.nan,
                         "size_rate_se": math.sqrt(size_rate * (1 - size_rate) / studies) if has_size else math.nan,
                         "detectable": detectable_slope(se, len(design.x) - 2, inference.alpha / m),
                         "reference": _reference(trend) or math.nan, "studies": studies})
        if scenario != "papers' effect":
            rows.append({"scenario": scenario, "claim": "family", "statistic": f"any of {len(trends)}", "line": "",
                         "cells": math.nan, "seeds": math.nan, "cell_to_seed": math.nan, "rates": math.nan,
                         "rate": family, "rate_se": math.sqrt(family * (1 - family) / studies), "size_rate": math.nan,
                         "size_rate_se": math.nan, "detectable": math.nan, "reference": math.nan, "studies": studies})
    return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))
