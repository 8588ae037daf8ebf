"""The study judge's rules (simulate.claims.along_axes): growth across depth against P1's bounds at their
boundaries (growth_verdict, EXPONENT_TOLERANCE), the stability word of a change between two lengths
(stability_verdict: two one-sided tests against a declared margin) and its error rates at the margin and when
nothing changes, and what a design would need to
detect the papers' effect (needs), checked by recomputing the detectable slope at the counts it returns and
by simulating studies of that design.

Tolerances: an error rate at most ``nominal + 3`` binomial standard errors, a power at least ``0.8 - 3`` of them;
failing assertions print the statistic, the target and the trials.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from simulate.claims.along_axes import _change, describe_needs, needs
from simulate.claims.definitions import CLAIMS
from simulate.claims.growth import growth_verdict
from simulate.claims.growth import EXPONENT_TOLERANCE
from simulate.claims.judgement import NO_INTERVAL, Interval, stability_verdict, t_interval
from simulate.claims.judgement import detectable_slope
from simulate.claims.trends import cell_means_slope, fit_trend
from theory.verdicts import Stability, Verdict

LEMMA = CLAIMS["p1-lemma-3.2-growth"]  # p in [1, inf): at least linear
LNS = CLAIMS["p1-lns-growth"]  # p in [1, 2)
ALPHA = 0.05


def _binomial_se(target: float, trials: int) -> float:
    return math.sqrt(target * (1 - target) / trials)


# -- growth across depth -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("claim, low, high, verdict", [
    (LEMMA, 1.0 - EXPONENT_TOLERANCE, 1.6, Verdict.HOLDS),  # touching 1 within the tolerance: on the bound
    (LEMMA, 0.9499, 1.6, Verdict.INCONCLUSIVE),  # just beyond the tolerance
    (LEMMA, 0.8, 1.0 - EXPONENT_TOLERANCE, Verdict.INCONCLUSIVE),  # the upper end on the tolerated bound
    (LEMMA, 0.8, 0.9499, Verdict.VIOLATED),  # wholly below, tolerance included
    (LEMMA, 1.2, 40.0, Verdict.HOLDS),  # no upper bound
    (LNS, 0.96, 1.99, Verdict.HOLDS),
    (LNS, 1.5, 2.0, Verdict.INCONCLUSIVE),  # 2 is excluded: an interval reaching it may be quadratic
    (LNS, 1.9, 2.1, Verdict.INCONCLUSIVE),  # crossing 2
    (LNS, 2.0, 2.6, Verdict.VIOLATED),  # at least quadratic
    (LNS, 0.3, 0.8, Verdict.VIOLATED),  # sub-linear (the doctest)
    (LNS, 0.8, 2.2, Verdict.INCONCLUSIVE),  # both bounds inside the interval
])
def test_growth_verdict_at_the_bounds(claim, low, high, verdict):
    assert growth_verdict(claim, Interval((low + high) / 2, low, high, 0.95)) is verdict


def test_growth_verdict_without_an_interval_is_inconclusive():
    assert growth_verdict(LEMMA, Interval(1.4)) is Verdict.INCONCLUSIVE
    assert growth_verdict(LNS, NO_INTERVAL) is Verdict.INCONCLUSIVE


def test_growth_verdict_of_an_open_upper_end_under_an_unbounded_rule_holds():
    assert growth_verdict(LEMMA, Interval(1.5, 1.2, math.inf, 0.95)) is Verdict.HOLDS


# -- stability ----------------------------------------------------------------------------------------------------
MARGIN = 0.5


@pytest.mark.parametrize("change, word", [
    ((-0.2, 0.4), Stability.STABLE),  # inside the margin on both sides
    ((0.1, 0.45), Stability.STABLE),  # a change that excludes 0 but lies inside the margin: stable
    ((0.0, 0.0), Stability.STABLE),  # an exact 0 (every seed the same at both lengths): stable, not unresolved
    ((-0.2, 0.6), Stability.CANNOT_TELL),  # reaching past the margin: not shown small, not shown to move
    ((0.3, 1.0), Stability.CANNOT_TELL),  # resolved, but not beyond the margin
    ((0.6, 1.0), Stability.MOVES),
    ((-1.0, -0.6), Stability.MOVES),
])
def test_stability_words(change, word):
    low, high = change
    assert stability_verdict(Interval((low + high) / 2, low, high, 0.95), MARGIN) is word


def test_the_margin_is_declared_not_taken_from_the_estimate():
    """The same change reads the same word whatever the full-length effect: the margin comes from the claim."""
    claim = CLAIMS["p1-lns-loss"]
    assert claim.margin.level == 0.005 and claim.margin.reason
    change = Interval(0.002, -0.001, 0.004, 0.95)
    assert stability_verdict(change, claim.margin.level) is Stability.STABLE


def test_no_stability_without_a_change():
    assert stability_verdict(NO_INTERVAL, MARGIN) is None
    assert stability_verdict(Interval(0.1), MARGIN) is None  # one seed: no interval


def _stability_words(rng, seeds: int, change: float, studies: int, sd: float = 0.5) -> list:
    """The stability word of ``studies`` cells whose ``seeds`` seeds each have a value at the shorter and the full
    length: a seed's own value (sd 1), the full length moved by ``change`` and a training's noise (``sd``); the
    change's interval at ``1 - 2 alpha`` (two one-sided tests at ``alpha``)."""
    words = []
    cell, partner = (4, 1600), (4, 800)
    for _ in range(studies):
        before = rng.standard_normal(seeds)  # (seeds,)
        now = before + change + sd * rng.standard_normal(seeds)  # paired by seed
        by_cell = {cell: dict(enumerate(now)), partner: dict(enumerate(before))}
        words.append(stability_verdict(_change(by_cell, cell, partner, 1 - 2 * ALPHA), MARGIN))
    return words


@pytest.mark.parametrize("seeds", [2, 3])
@pytest.mark.parametrize("change", [MARGIN, -MARGIN])
def test_a_change_at_the_margin_is_rarely_stable(seeds, change):
    """The true change sits on the margin: "stable" (both one-sided tests reject) in at most 5 % of the cells."""
    words = _stability_words(np.random.default_rng(seeds + 10 * int(change > 0)), seeds, change, 4000)
    rate = float(np.mean([w is Stability.STABLE for w in words]))
    ceiling = ALPHA + 3 * _binomial_se(ALPHA, len(words))
    assert rate <= ceiling, f"stable at the margin, {seeds} seeds: rate {rate:.4f} > {ceiling:.4f} ({len(words)} cells)"
    print(f"stable at the margin {change:+g}, {seeds} seeds: {rate:.4f} (nominal {ALPHA}, {len(words)} cells)")


@pytest.mark.parametrize("seeds", [2, 3])
def test_no_true_change_never_moves(seeds):
    """Nothing changes between the lengths: "moves" (the interval wholly beyond the margin) in at most 5 % of cells."""
    words = _stability_words(np.random.default_rng(seeds), seeds, 0.0, 2000)
    rate = float(np.mean([w is Stability.MOVES for w in words]))
    ceiling = ALPHA + 3 * _binomial_se(ALPHA, len(words))
    assert rate <= ceiling, f"moves without a change, {seeds} seeds: rate {rate:.4f} > {ceiling:.4f}"
    assert None not in words


def test_a_large_change_moves_and_a_precise_null_is_stable():
    moves = _stability_words(np.random.default_rng(5), 3, 3.0, 400)
    assert np.mean([w is Stability.MOVES for w in moves]) > 0.8
    still = _stability_words(np.random.default_rng(6), 3, 0.0, 400, sd=0.05)
    assert np.mean([w is Stability.STABLE for w in still]) > 0.8


# -- what the design would need ------------------------------------------------------------------------------------
DEPTHS = np.array([4.0, 8.0, 16.0, 32.0])
AXIS = np.repeat(DEPTHS, 3)  # (12,)
NEEDS = re.compile(r"^(?:(?P<seeds>\d+) seeds per cell|more seeds alone cannot \(the cells spread about the line "
                   r"beyond their seeds\)); or (?:about (?P<cells>\d+) cells \(to (?P<to>[\d.e+]+)\) at 3 seeds|more "
                   r"than (?P<most>\d+) cells)$")


def _detectable(x: np.ndarray, variance: float, alpha: float) -> float:
    """The detectable slope of cells at ``x`` whose means have ``variance`` each (k - 2 dof)."""
    centred = np.log(x) - np.log(x).mean()
    return detectable_slope(math.sqrt(variance / float(centred @ centred)), x.size - 2, alpha)


def _extended(cells: int) -> np.ndarray:
    return 4.0 * 2.0 ** np.arange(cells)  # the axis continued at its spacing


def _unresolvable(seed: int, cell_sd: float, reference: float, alpha: float):
    """A trend whose design cannot detect ``reference`` (needs' precondition) and its variance components."""
    rng = np.random.default_rng(seed)
    y = np.repeat(cell_sd * rng.standard_normal(4), 3) + rng.standard_normal(12)  # (12,)
    trend = fit_trend(AXIS, y)
    assert detectable_slope(trend.slope.se, trend.dof, alpha) > abs(reference), "the design resolves it already"
    cell_var = max(trend.residual_var - trend.within_var / 3, 0.0)
    return trend, cell_var, trend.within_var


@pytest.mark.parametrize("seed, cell_sd, reference, alpha", [(0, 0.0, 1.0, ALPHA), (1, 0.3, 1.0, ALPHA),
                                                              (2, 0.0, 2.0, ALPHA / 28), (3, 1.5, 2.0, ALPHA),
                                                              (4, 0.2, 0.25, ALPHA)])
def test_needs_names_the_fewest_seeds_and_cells_that_reach_the_reference(seed, cell_sd, reference, alpha):
    """Recomputed at the returned counts, the detectable slope reaches the reference, and one fewer does not;
    where more seeds cannot, not even 64 do (the cell effect stays); where more than 12 cells would be needed,
    12 do not reach it."""
    trend, cell_var, within = _unresolvable(seed, cell_sd, reference, alpha)
    text = describe_needs(needs(trend, reference, alpha))
    match = NEEDS.match(text)
    assert match, text
    if match["seeds"]:
        n = int(match["seeds"])
        assert _detectable(DEPTHS, cell_var + within / n, alpha) <= reference, text
        assert _detectable(DEPTHS, cell_var + within / (n - 1), alpha) > reference, text
    else:
        assert _detectable(DEPTHS, cell_var + within / 64, alpha) > reference, text
    if match["cells"]:
        k = int(match["cells"])
        assert float(match["to"]) == pytest.approx(_extended(k)[-1], rel=1e-3), text  # printed to 3 digits
        floored = max(trend.residual_var, trend.within_var / 3)  # a cell mean varies at least by its seeds
        assert _detectable(_extended(k), floored, alpha) <= reference, text
        assert _detectable(_extended(k - 1), floored, alpha) > reference, text
    else:
        floored = max(trend.residual_var, trend.within_var / 3)
        assert int(match["most"]) == 12 and _detectable(_extended(12), floored, alpha) > reference, text
    print(f"needs (reference {reference}, alpha {alpha:.3g}): {text}")


@pytest.mark.parametrize("seed, cell_sd, reference", [(0, 0.0, 1.0), (1, 0.3, 1.0)])
def test_the_design_needs_names_detects_the_reference_in_80_percent_of_studies(seed, cell_sd, reference):
    """Studies of the design needs() proposes (more seeds, or more cells), drawn with the variance components
    the trend estimated and a true slope equal to the reference: the slope is detected (p < alpha) in at least
    80 % of them."""
    trend, cell_var, within = _unresolvable(seed, cell_sd, reference, ALPHA)
    match = NEEDS.match(describe_needs(needs(trend, reference, ALPHA)))
    rng = np.random.default_rng(100 + seed)
    studies = 3000
    designs = []
    if match["seeds"]:
        designs.append(("seeds", DEPTHS, cell_var + within / int(match["seeds"])))
    if match["cells"]:
        designs.append(("cells", _extended(int(match["cells"])), max(trend.residual_var, trend.within_var / 3)))
    assert designs, match.string
    for kind, x, variance in designs:
        log_x = np.log(x)
        means = reference * (log_x - log_x.mean()) + math.sqrt(variance) * rng.standard_normal((studies, x.size))
        _, _, p, _ = cell_means_slope(log_x, means)
        power = float(np.mean(p < ALPHA))
        floor = 0.8 - 3 * _binomial_se(0.8, studies)
        assert power >= floor, (f"power of the design with more {kind} ({x.size} cells, cell-mean variance "
                                f"{variance:.3g}): {power:.4f} < {floor:.4f} ({studies} studies)")
        print(f"needs, more {kind}: power {power:.4f} at the reference {reference} ({studies} studies)")


def test_needs_without_a_line_says_nothing():
    assert needs(fit_trend(np.repeat([8.0, 32.0], 3), np.arange(6.0)), 1.0, ALPHA) is None  # two cells
    assert needs(fit_trend(DEPTHS, [0.1, 0.2, 0.0, 0.3]), 1.0, ALPHA) is not None  # one seed a cell: the line's scatter


def test_a_judgement_knows_the_versions_its_models_rest_on():
    """A cell whose seeds were trained by two code versions gives a level resting on both; one version, one."""
    from dataclasses import dataclass, field
    from types import SimpleNamespace

    from simulate.claims.along_axes import judge_levels
    from simulate.claims.judgement import Inference
    from simulate.claims.statistics import ModelStatistics
    from theory.verdicts import PointStatus, RateLine

    @dataclass(frozen=True)
    class Model:
        seed: int
        depth: int
        versions: tuple
        scheme: str = "pre"
        status: PointStatus = PointStatus.OK
        profiles: dict = field(default_factory=dict)

        @property
        def stats(self):
            return ModelStatistics(**{**ModelStatistics.missing().as_dict(), "prune_log_ratio": -1.0 - self.seed})

        def cell(self, fields):
            return (self.depth,)

    models = [Model(0, 4, ("a", "d", "3.11", "2.13")), Model(1, 4, ("b", "d", "3.11", "2.13")),
              Model(0, 8, ("a", "d", "3.11", "2.13")), Model(1, 8, ("a", "d", "3.11", "2.13"))]
    study = SimpleNamespace(claims=["p1-thm-3.3-prune"], cell_fields=lambda: ("depth",), inference=Inference(),
                            stability=None)
    rests = {j.cell["depth"]: len(j.rests_on) for j in judge_levels(study, {RateLine.TRAINED: models})}
    assert rests == {4: 2, 8: 1}, rests
