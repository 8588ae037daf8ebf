"""The growth class of a variance profile, judged against P1's statements with fitted constants.

P1 Lemma 3.2 and P1's LNS bounds hide their constants (``Theta(...)``, a per-layer factor
``1 + c/sigma``), so a comparison with ``c = 1`` says nothing about them. Here the
measured profile ``var_l`` (layers 0..L; the simulator's curve at init, a trained run's
``train_layers.csv``) is fitted instead, reusing :func:`theory.meanfield.bridge.var_growth`
(``var_l ~ c0 + c1 l^p``, polynomial, against ``c0 + c1 e^(r l)``, exponential, weighted least
squares on relative residuals with profile intervals; the class is the fit with the smaller
residuals, both having three parameters) and :func:`theory.meanfield.bridge.loglog_slope`
for the per-layer factor:
``var_l / var_{l-1} - 1 = c sigma_{l-1}^(-q)`` (P1's reading ``q = 1``; random init gives
``q = 2``, a constant increment). Over several seeds the slopes are averaged and the
interval is a t interval over seeds.

Verdicts (rows of the verify table, ``kind = "growth"``): a claim holds when the whole 95 %
interval satisfies it, is violated when none of it does, and is inconclusive otherwise;
exponents within :data:`EXPONENT_TOLERANCE` of a boundary count as on it.

``p1-lemma-3.2`` / ``var_growth``
    ``Theta(L) <= sigma_L^2 <= Theta(exp L)``: polynomial with exponent ``p >= 1``, or
    exponential with rate ``r > 0``.
``p1-lemma-3.2`` / ``var_step``
    the per-layer factor ``1 + c/sigma_l``: violated when the interval of ``q`` leaves out 1;
    holds when it contains 1 and leaves out 2 (random init's constant increments).
``p1-lns`` / ``var_growth``
    ``Theta(L) <= sigma_L^2 <= Theta(L^(2 - eps))``: polynomial with ``1 <= p < 2``; an
    exponential class violates it when the interval of its rate leaves out 0 (the row then
    shows the rate), and is inconclusive otherwise.

>>> import numpy as np
>>> summary = growth_summary(1.0 + 0.5 * np.arange(17.0)[None, :])
>>> summary.label, round(summary.exponent[0], 6), round(summary.step[0], 6)
('polynomial', 1.0, 2.0)
>>> describe_growth(summary)[:37]
'polynomial, exponent 1.00 [1.00, 1.00'
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from simulate.engine import CONFIDENCE, interval_z
from theory.meanfield.bridge import loglog_slope, var_growth

__all__ = ["GROWTH_LEMMAS", "EXPONENT_TOLERANCE", "FLAT_GROWTH", "GrowthSummary", "t_interval", "growth_summary",
           "describe_growth", "growth_rows", "format_estimate"]

GROWTH_LEMMAS = ("p1-lemma-3.2", "p1-lns")
# Exponents this close to a claimed boundary count as on it (linear growth measured as p = 0.97 is linear).
EXPONENT_TOLERANCE = 0.05
# A profile whose var_L / var_0 stays below 1 + this has no growth class to speak of.
FLAT_GROWTH = 0.05
_SMALLEST_EXPONENT = 0.0201  # theory.meanfield.bridge.fit_growth profiles p over [0.02, 8]


class GrowthSummary(NamedTuple):
    """Growth of variance profiles over depth (one or several seeds).

    ``exponent``, ``rate`` and ``step`` are ``(estimate, ci_low, ci_high)``: the exponent p of
    ``var_l - var_0 ~ l^p``, the rate r of ``~ e^(r l)`` and the exponent q of the per-layer
    factor ``1 + c sigma^(-q)``; ``constant`` is ``c``. ``label`` is the better-fitting class
    (``polynomial``, ``exponential``, or ``undetermined`` with too few usable layers or a
    profile that grows by less than :data:`FLAT_GROWTH` over the stack); an
    exponential fit counts only if it e-folds over the stack (``r L >= 1``): with ``r L << 1``
    ``c0 + c1 e^(r l)`` is a straight line and says nothing the polynomial fit does not.
    """

    label: str
    exponent: tuple
    rate: tuple
    step: tuple
    constant: float
    rss_polynomial: float
    rss_exponential: float
    seeds: int
    layers: int
    growth: float = math.nan  # var_L / var_0, mean over seeds
    at_bound: int = 0  # seeds whose fit of the better class ended at its range's end (GrowthFit.at_bound)


def t_interval(values, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` and its t interval over them (NaN bounds for one value).

    >>> [round(v, 4) for v in t_interval([1.0, 2.0, 3.0])]
    [2.0, -0.4841, 4.4841]
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]  # (n,)
    if values.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.mean())
    if values.size == 1:
        return mean, math.nan, math.nan
    quantile = float(stats.t.ppf(0.5 + confidence / 2, values.size - 1))
    half = quantile * float(values.std(ddof=1)) / math.sqrt(values.size)
    return mean, mean - half, mean + half


def _step_fit(var: np.ndarray):
    """Fit ``var_l/var_{l-1} - 1 = c sigma_{l-1}^(-q)``: ``(q, q_low, q_high, c)`` (log-log slope of the factor)."""
    sigma = np.sqrt(var[:-1])  # (L,)
    factor = var[1:] / var[:-1] - 1.0  # (L,)
    fit = loglog_slope(sigma, factor)
    keep = np.isfinite(factor) & (factor > 0)
    constant = math.nan
    if np.isfinite(fit.slope) and keep.any():
        constant = float(np.exp(np.mean(np.log(factor[keep]) - fit.slope * np.log(sigma[keep]))))
    return -fit.slope, -fit.ci_high, -fit.ci_low, constant


def growth_summary(curves) -> GrowthSummary:
    """Fit every profile of ``curves`` (``(S, L+1)`` or ``(L+1,)``, layer 0 first) and pool over seeds."""
    curves = np.atleast_2d(np.asarray(curves, dtype=float))  # (S, L+1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a flat or zero layer: NaN, left out
        fits = [var_growth(curve) for curve in curves]
        steps = [_step_fit(curve) for curve in curves]
    if len(curves) == 1:  # the fit's own interval (NaN at a bound, open ends 0 and inf)
        poly, expo = fits[0]["polynomial"], fits[0]["exponential"]
        exponent, rate = (poly.slope, poly.ci_low, poly.ci_high), (expo.slope, expo.ci_low, expo.ci_high)
        step = steps[0][:3]
    else:
        exponent = t_interval([f["polynomial"].slope for f in fits])
        rate = t_interval([f["exponential"].slope for f in fits])
        step = t_interval([s[0] for s in steps])
    rss_poly = float(np.sum([f["polynomial"].rss for f in fits]))
    rss_exp = float(np.sum([f["exponential"].rss for f in fits]))
    depth = curves.shape[1] - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = curves[:, -1] / curves[:, 0]  # (S,)
    growth = float(ratios[np.isfinite(ratios)].mean()) if np.isfinite(ratios).any() else math.nan
    if not (np.isfinite(rss_poly) and np.isfinite(rss_exp)) or growth < 1.0 + FLAT_GROWTH:
        label = "undetermined"  # too few layers, or a profile too flat to have a class
    else:  # an exponential that does not e-fold over the stack is its own linearisation: not a class of its own
        label = "exponential" if rss_exp < rss_poly and rate[0] * depth >= 1.0 else "polynomial"
    constants = np.array([s[3] for s in steps], dtype=float)  # (S,)
    constant = float(constants[np.isfinite(constants)].mean()) if np.isfinite(constants).any() else math.nan
    at_bound = sum(f["exponential" if label == "exponential" else "polynomial"].at_bound for f in fits)
    return GrowthSummary(label, exponent, rate, step, constant, rss_poly, rss_exp, len(curves), depth, growth,
                         at_bound)


def format_estimate(estimate, spec: str = ".2f") -> str:
    """``mean [low, high]`` of an ``(estimate, low, high)``; an open end reads 0 or inf; no interval: the mean alone.

    >>> format_estimate((1.5, 0.0, math.inf)), format_estimate((0.02, math.nan, math.nan), ".3f")
    ('1.50 [0.00, inf]', '0.020')
    """
    mean, low, high = estimate
    return f"{mean:{spec}}" if np.isnan(low) or np.isnan(high) else f"{mean:{spec}} [{low:{spec}}, {high:{spec}}]"


def describe_growth(summary: GrowthSummary) -> str:
    """One line a reader understands: the class, its exponent or rate with CI, and the residuals."""
    if summary.label == "undetermined":
        if summary.growth < 1.0 + FLAT_GROWTH:
            return f"undetermined: the variance barely grows over depth (var_L/var_0 = {summary.growth:.3g})"
        return f"undetermined: too few usable layers of {summary.layers} for the fits"
    main = (f"polynomial, exponent {format_estimate(summary.exponent)}" if summary.label == "polynomial"
            else f"exponential, rate {format_estimate(summary.rate)} per block")
    if summary.label == "polynomial" and summary.exponent[0] <= _SMALLEST_EXPONENT:
        main += " (at the fit's smallest exponent: logarithmic or bounded growth)"
    if summary.at_bound:
        main += (" at the bound of the fitted range, no interval" if summary.seeds == 1 else
                 f" ({summary.at_bound} of {summary.seeds} seeds at the bound of the fitted range)")
    over = f"{summary.seeds} seeds" if summary.seeds > 1 else "one curve"
    return (f"{main} (relative RSS: polynomial {summary.rss_polynomial:.3g}, exponential "
            f"{summary.rss_exponential:.3g}; {summary.layers} blocks, {over}, 95% CI)")


def _row(lemma_id, label, metric, verdict, estimate, target, comment, layers) -> dict:
    from simulate.compare import verdict_row

    mean, low, high = estimate
    return verdict_row(lemma_id, label, metric, kind="growth", layer=int(layers), predicted=float(target),
                       measured=float(mean), ci_low=float(low), ci_high=float(high),
                       z=interval_z(mean, low, high, target), verdict=verdict,
                       comment=comment)


def _interval_verdict(low: float, high: float, inside, outside, positive: str = "holds as a bound") -> str:
    """``violated`` when the interval contradicts the claim (``outside``), else ``positive`` when all of it
    satisfies the claim (``inside``), else ``inconclusive``."""
    if np.isnan(low) or np.isnan(high):  # no interval (one seed, or a fit at its range's end); inf is an open end
        return "inconclusive"
    if outside(low, high):
        return "violated"
    return positive if inside(low, high) else "inconclusive"


def growth_rows(lemma_id: str, label: str, summary: GrowthSummary) -> list[dict]:
    """Verify rows judging ``lemma_id`` (:data:`GROWTH_LEMMAS`) on a growth summary (module docstring)."""
    text = describe_growth(summary)
    _, p_low, p_high = summary.exponent
    if lemma_id == "p1-lemma-3.2":
        if summary.label == "undetermined":
            verdict, estimate, target = "inconclusive", summary.exponent, 1.0
        elif summary.label == "exponential":
            _, r_low, r_high = summary.rate
            verdict = _interval_verdict(r_low, r_high, lambda lo, hi: lo > 0, lambda lo, hi: hi <= 0)
            estimate, target = summary.rate, 0.0
        else:
            verdict = _interval_verdict(p_low, p_high, lambda lo, hi: lo >= 1 - EXPONENT_TOLERANCE,
                                        lambda lo, hi: hi < 1 - EXPONENT_TOLERANCE)
            estimate, target = summary.exponent, 1.0
        reach = "reached" if summary.label == "exponential" else "not reached"
        rows = [_row(lemma_id, label, "var_growth", verdict, estimate, target,
                     f"{text}: Theta(L) lower bound {_WORDS[verdict]}; the Theta(exp L) upper bound is {reach}",
                     summary.layers)]
        _, q_low, q_high = summary.step
        # consistent with q = 1 and not with q = 2 (constant increments, as at init)
        verdict = _interval_verdict(q_low, q_high, lambda lo, hi: hi < 2 - EXPONENT_TOLERANCE,
                                    lambda lo, hi: lo > 1 + EXPONENT_TOLERANCE or hi < 1 - EXPONENT_TOLERANCE,
                                    positive="holds")
        rows.append(_row(lemma_id, label, "var_step", verdict, summary.step, 1.0,
                         f"per-layer factor 1 + c sigma^-q fitted: q = {format_estimate(summary.step)}, c = "
                         f"{summary.constant:.3g}; P1's reading 1 + c/sigma (q = 1, growth L^2 for any c) "
                         f"{_WORDS[verdict]} (q = 2: constant increments, linear growth as at init)", summary.layers))
        return rows
    if lemma_id == "p1-lns":
        estimate, target = summary.exponent, 1.0
        if summary.label == "polynomial":
            verdict = _interval_verdict(p_low, p_high, lambda lo, hi: lo >= 1 - EXPONENT_TOLERANCE and hi < 2,
                                        lambda lo, hi: hi < 1 - EXPONENT_TOLERANCE or lo >= 2)
        elif summary.label == "exponential":  # against the claim only when the rate's interval leaves out 0
            _, r_low, r_high = summary.rate
            verdict = "violated" if np.isfinite(r_low) and r_low > 0 else "inconclusive"
            estimate, target = summary.rate, 0.0
        else:
            verdict = "inconclusive"
        return [_row(lemma_id, label, "var_growth", verdict, estimate, target,
                     f"{text}: P1's Theta(L) <= var <= Theta(L^(2-eps)) {_WORDS[verdict]}", summary.layers)]
    raise ValueError(f"lemma_id={lemma_id!r} is not allowed: one of {', '.join(GROWTH_LEMMAS)}")


_WORDS = {"holds": "holds", "holds as a bound": "holds", "violated": "fails", "inconclusive": "is undecided (the "
          "interval is too wide)"}
