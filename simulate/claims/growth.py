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

A growth claim's :class:`~simulate.claims.definitions.GrowthRule` gives its bounds; a claim
holds when the whole 95 % interval satisfies them, is violated when none of it does, and is
inconclusive otherwise; exponents within :data:`EXPONENT_TOLERANCE` of a bound count as on it.

``var_growth``
    polynomial: ``p`` in ``[min_exponent, max_exponent)``; exponential: the rate's interval
    above 0 holds where the rule allows exponential growth (P1 Lemma 3.2's ``Theta(exp L)``
    upper bound) and violates it where it does not (P1's LNS bound ``Theta(L^(2 - eps))``).
``var_step`` (rules with ``per_layer_factor``)
    the per-layer factor ``1 + c/sigma_l``: violated when the interval of ``q`` leaves out 1;
    holds when it contains 1 and leaves out 2 (random init's constant increments).

>>> import numpy as np
>>> summary = growth_summary(1.0 + 0.5 * np.arange(17.0)[None, :])
>>> str(summary.label), round(summary.exponent.estimate, 6), round(summary.step.estimate, 6)
('polynomial', 1.0, 2.0)
>>> describe_growth(summary)[:37]
'polynomial, exponent 1.00 [1.00, 1.00'
>>> from simulate.claims.definitions import CLAIMS
>>> [str(j.verdict) for j in judge_growth(CLAIMS["p1-lemma-3.2-growth"], summary)]
['holds', 'violated']
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from simulate.claims.definitions import Claim
from simulate.claims.judgement import Interval, Judgement, level_label, t_interval
from simulate.engine import CONFIDENCE
from theory.meanfield.bridge import loglog_slope, var_growth
from theory.verdicts import GrowthClass, Verdict

__all__ = ["EXPONENT_TOLERANCE", "FLAT_GROWTH", "GrowthSummary", "growth_summary", "describe_growth", "growth_verdict",
           "judge_growth"]

# Exponents this close to a claimed boundary count as on it (linear growth measured as p = 0.97 is linear).
EXPONENT_TOLERANCE = 0.05
# A profile whose var_L / var_0 stays below 1 + this has no growth class to speak of.
FLAT_GROWTH = 0.05
_SMALLEST_EXPONENT = 0.0201  # theory.meanfield.bridge.fit_growth profiles p over [0.02, 8]


class GrowthSummary(NamedTuple):
    """Growth of variance profiles over depth (one or several seeds).

    ``exponent``, ``rate`` and ``step`` are :class:`~simulate.claims.judgement.Interval`: the
    exponent p of ``var_l - var_0 ~ l^p``, the rate r of ``~ e^(r l)`` and the exponent q of
    the per-layer factor ``1 + c sigma^(-q)`` (fitted on blocks 2..L; ``step_dropped`` counts
    the blocks whose factor is not positive, left out of the log-log fit); ``constant`` is
    ``c``. ``preference`` is ``log(RSS polynomial / RSS exponential)`` (above 0: the exponential
    fits better), with its t interval over seeds. ``label`` is the class: over several seeds,
    the class whose fit is better in the whole interval of ``preference`` (a test with a 2.5 %
    error rate on each side), ``undetermined`` where the interval holds 0; for one curve (no
    seeds to test with) the fit with the smaller residuals. ``undetermined`` also with too few
    usable layers or a profile that grows by less than :data:`FLAT_GROWTH` over the stack. An
    exponential fit counts only if it e-folds over the stack (``r L >= 1``): with ``r L << 1``
    ``c0 + c1 e^(r l)`` is a straight line and says nothing the polynomial fit does not.
    """

    label: GrowthClass
    exponent: Interval
    rate: Interval
    step: Interval
    constant: float
    rss_polynomial: float
    rss_exponential: float
    seeds: int
    layers: int
    growth: float = math.nan  # var_L / var_0, mean over seeds
    at_bound: int = 0  # seeds whose fit of the better class ended at its range's end (GrowthFit.at_bound)
    preference: Interval = Interval(math.nan)
    step_dropped: int = 0


def _step_fit(var: np.ndarray, confidence: float):
    """Fit ``var_l/var_{l-1} - 1 = c sigma_{l-1}^(-q)`` over blocks ``l = 2..L``: ``(Interval of q, c, blocks
    left out)`` (log-log slope of the factor). Block 1 is left out: its factor is the lift from the embedding's
    scale to the stream's (6 to 43 in the atlas's trained models), not a block acting on a stream; blocks whose
    factor is not positive have no logarithm and are counted."""
    sigma = np.sqrt(var[1:-1])  # (L-1,) sigma_1 .. sigma_{L-1}
    factor = var[2:] / var[1:-1] - 1.0  # (L-1,) blocks 2..L
    keep = np.isfinite(factor) & (factor > 0)
    dropped = int((np.isfinite(factor) & (factor <= 0)).sum())
    fit = loglog_slope(sigma, factor, confidence)
    constant = math.nan
    if np.isfinite(fit.slope) and keep.any():
        constant = float(np.exp(np.mean(np.log(factor[keep]) - fit.slope * np.log(sigma[keep]))))
    return Interval(-fit.slope, -fit.ci_high, -fit.ci_low, confidence), constant, dropped


def growth_summary(curves, confidence: float = CONFIDENCE, intervals: bool = True) -> GrowthSummary:
    """Fit every profile of ``curves`` (``(S, L+1)`` or ``(L+1,)``, layer 0 first) and pool over seeds (t intervals
    at ``confidence``; one curve keeps its fit's own interval at ``confidence``). ``intervals=False``: one curve's
    exponent and rate without their intervals (NaN), the class and everything else as with them."""
    curves = np.atleast_2d(np.asarray(curves, dtype=float))  # (S, L+1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a flat or zero layer: NaN, left out
        fits = [var_growth(curve, confidence, intervals) for curve in curves]
        steps = [_step_fit(curve, confidence) for curve in curves]
    if len(curves) == 1:  # the fit's own interval (NaN at a bound, open ends 0 and inf)
        poly, expo = fits[0][GrowthClass.POLYNOMIAL], fits[0][GrowthClass.EXPONENTIAL]
        exponent = Interval(poly.slope, poly.ci_low, poly.ci_high, confidence)
        rate = Interval(expo.slope, expo.ci_low, expo.ci_high, confidence)
        step = steps[0][0]
    else:
        exponent = t_interval([f[GrowthClass.POLYNOMIAL].slope for f in fits], confidence)
        rate = t_interval([f[GrowthClass.EXPONENTIAL].slope for f in fits], confidence)
        step = t_interval([s[0].estimate for s in steps], confidence)
    rss_poly = float(np.sum([f[GrowthClass.POLYNOMIAL].rss for f in fits]))
    rss_exp = float(np.sum([f[GrowthClass.EXPONENTIAL].rss for f in fits]))
    depth = curves.shape[1] - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = curves[:, -1] / curves[:, 0]  # (S,)
        preferences = np.log([f[GrowthClass.POLYNOMIAL].rss / f[GrowthClass.EXPONENTIAL].rss for f in fits])  # (S,)
    growth = float(ratios[np.isfinite(ratios)].mean()) if np.isfinite(ratios).any() else math.nan
    preference = t_interval(preferences, confidence) if len(curves) > 1 else Interval(float(preferences[0]))
    folds = rate.estimate * depth >= 1.0  # an exponential that does not e-fold is its own linearisation
    if not (np.isfinite(rss_poly) and np.isfinite(rss_exp)) or growth < 1.0 + FLAT_GROWTH:
        label = GrowthClass.UNDETERMINED  # too few layers, or a profile too flat to have a class
    elif len(curves) == 1:
        label = GrowthClass.EXPONENTIAL if rss_exp < rss_poly and folds else GrowthClass.POLYNOMIAL
    elif preference.low > 0:
        label = GrowthClass.EXPONENTIAL if folds else GrowthClass.POLYNOMIAL
    elif preference.high < 0 or not folds:
        label = GrowthClass.POLYNOMIAL
    else:
        label = GrowthClass.UNDETERMINED  # the seeds cannot tell the two fits apart
    constants = np.array([s[1] for s in steps], dtype=float)  # (S,)
    constant = float(constants[np.isfinite(constants)].mean()) if np.isfinite(constants).any() else math.nan
    fit = GrowthClass.EXPONENTIAL if label is GrowthClass.EXPONENTIAL else GrowthClass.POLYNOMIAL
    at_bound = sum(f[fit].at_bound for f in fits)
    return GrowthSummary(label, exponent, rate, step, constant, rss_poly, rss_exp, len(curves), depth, growth,
                         at_bound, preference, sum(s[2] for s in steps))


def describe_growth(summary: GrowthSummary) -> str:
    """One line a reader understands: the class, its exponent or rate with CI, and the residuals."""
    if summary.label is GrowthClass.UNDETERMINED:
        if summary.growth < 1.0 + FLAT_GROWTH:
            return f"undetermined: the variance barely grows over depth (var_L/var_0 = {summary.growth:.3g})"
        if summary.preference.bounded:
            return (f"undetermined: the seeds cannot tell the fits apart, log(RSS polynomial / RSS exponential) = "
                    f"{summary.preference.format('.2f')} over {summary.seeds} seeds")
        return f"undetermined: too few usable layers of {summary.layers} for the fits"
    main = (f"polynomial, exponent {summary.exponent.format('.2f')}" if summary.label is GrowthClass.POLYNOMIAL
            else f"exponential, rate {summary.rate.format('.2f')} per block")
    if summary.label is GrowthClass.POLYNOMIAL and summary.exponent.estimate <= _SMALLEST_EXPONENT:
        main += " (at the fit's smallest exponent: logarithmic or bounded growth)"
    if summary.at_bound:
        main += (" at the bound of the fitted range, no interval" if summary.seeds == 1 else
                 f" ({summary.at_bound} of {summary.seeds} seeds at the bound of the fitted range)")
    test = (f"log(RSS polynomial / exponential) {summary.preference.format('.2f')} over {summary.seeds} seeds"
            if summary.seeds > 1 else "one curve: the smaller residual decides, untested")
    return (f"{main} (relative RSS: polynomial {summary.rss_polynomial:.3g}, exponential "
            f"{summary.rss_exponential:.3g}; {test}; {summary.layers} blocks, "
            f"{level_label(summary.exponent.confidence)} intervals)")


def _interval_verdict(estimate: Interval, inside, outside) -> Verdict:
    """``violated`` when the interval contradicts the claim (``outside``), ``holds`` when all of it satisfies the
    claim (``inside``), else ``inconclusive`` (also without bounds; an infinite bound is an open end)."""
    if not estimate.bounded:
        return Verdict.INCONCLUSIVE
    if outside(estimate.low, estimate.high):
        return Verdict.VIOLATED
    return Verdict.HOLDS if inside(estimate.low, estimate.high) else Verdict.INCONCLUSIVE


_WORDS = {Verdict.HOLDS: "holds", Verdict.VIOLATED: "fails",
          Verdict.INCONCLUSIVE: "is undecided (the interval is too wide)"}


def _class_judgement(claim: Claim, summary: GrowthSummary) -> tuple[Verdict, Interval, float]:
    """The verdict on the growth class, the estimate it rests on (exponent or rate) and that estimate's target."""
    rule = claim.growth
    if summary.label is GrowthClass.EXPONENTIAL:
        if rule.exponential:
            return _interval_verdict(summary.rate, lambda lo, hi: lo > 0, lambda lo, hi: hi <= 0), summary.rate, 0.0
        against = summary.rate.bounded and math.isfinite(summary.rate.low) and summary.rate.low > 0
        return (Verdict.VIOLATED if against else Verdict.INCONCLUSIVE), summary.rate, 0.0
    if summary.label is GrowthClass.UNDETERMINED:
        return Verdict.INCONCLUSIVE, summary.exponent, rule.min_exponent
    return growth_verdict(claim, summary.exponent), summary.exponent, rule.min_exponent


def growth_verdict(claim: Claim, exponent: Interval) -> Verdict:
    """P1's growth bounds on ``var_L ~ L^p`` across depth (the claim's :class:`GrowthRule`): ``holds`` when the
    exponent's interval lies within ``[min_exponent, max_exponent)`` (within :data:`EXPONENT_TOLERANCE` of the
    lower bound counts as on it), ``violated`` when it lies wholly outside, ``inconclusive`` otherwise.

    >>> from simulate.claims.definitions import CLAIMS
    >>> growth_verdict(CLAIMS["p1-lns-growth"], Interval(0.54, 0.3, 0.8, 0.95)).value
    'violated'
    >>> growth_verdict(CLAIMS["p1-lemma-3.2-growth"], Interval(1.4, 1.2, 1.6, 0.95)).value
    'holds'
    """
    rule = claim.growth
    if not exponent.bounded:
        return Verdict.INCONCLUSIVE
    least = rule.min_exponent - EXPONENT_TOLERANCE
    if exponent.high < least or exponent.low >= rule.max_exponent:
        return Verdict.VIOLATED
    if exponent.low >= least and (math.isinf(rule.max_exponent) or exponent.high < rule.max_exponent):
        return Verdict.HOLDS
    return Verdict.INCONCLUSIVE


def judge_growth(claim: Claim, summary: GrowthSummary) -> list[Judgement]:
    """The verdicts of growth claim ``claim`` (its :attr:`~simulate.claims.definitions.Claim.growth` rule) on a
    growth summary: ``var_growth``, and ``var_step`` where the rule judges P1's per-layer factor."""
    rule = claim.growth
    if rule is None:
        raise ValueError(f"claim {claim.id!r} is not allowed here: it is not a growth claim")
    text = describe_growth(summary)
    verdict, estimate, target = _class_judgement(claim, summary)
    if rule.exponential:
        reach = "reached" if summary.label is GrowthClass.EXPONENTIAL else "not reached"
        words = f"Theta(L) lower bound {_WORDS[verdict]}; the Theta(exp L) upper bound is {reach}"
    else:
        words = f"P1's Theta(L) <= var <= Theta(L^({rule.max_exponent:g}-eps)) {_WORDS[verdict]}"
    judgements = [Judgement(claim, "var_growth", estimate, verdict, summary.seeds, target, f"{text}: {words}",
                            summary.label)]
    if rule.per_layer_factor:  # consistent with q = 1 and not with q = 2 (constant increments, as at init)
        verdict = _interval_verdict(summary.step, lambda lo, hi: hi < 2 - EXPONENT_TOLERANCE,
                                    lambda lo, hi: lo > 1 + EXPONENT_TOLERANCE or hi < 1 - EXPONENT_TOLERANCE)
        judgements.append(Judgement(
            claim, "var_step", summary.step, verdict, summary.seeds, 1.0,
            f"per-layer factor 1 + c sigma^-q fitted on blocks 2..L: q = {summary.step.format('.2f')}, c = "
            f"{summary.constant:.3g}" + (f" ({summary.step_dropped} block factors not positive, left out)"
                                         if summary.step_dropped else "") + "; "
            f"P1's reading 1 + c/sigma (q = 1, growth L^2 for any c) {_WORDS[verdict]} (q = 2: constant increments, "
            "linear growth as at init)", summary.label))
    return judgements
