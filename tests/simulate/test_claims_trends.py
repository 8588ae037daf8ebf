"""The inference of a study's trends on synthetic studies: coverage and error rates, also where the assumptions
fail, each with a negative control that the method the atlas used before fails.

A synthetic study has the depth study's shape (five axis values, three seeds each). Each check
runs many synthetic studies with a known truth: the share of 95 % intervals holding the true value
must be within 4 binomial standard errors of 0.95 (``assert_coverage``; a method that is
conservative by construction must reach at least 0.95 - 4 se, ``at_least=True``), an error rate
at most its nominal level plus 4 standard errors. The misspecifications: a curved trend (a cell
effect about the line), unequal variances between cells, a statistic diluted as 1/L, a curve that
approaches 0 without crossing it, shares of blocks whose seeds agree. The negative controls are
the old methods, written here: the least-squares line through every model with a t interval on
``n - 2`` degrees of freedom, the zero of that line with Fieller's interval, a t interval over
seeds of a share, unadjusted p-values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from simulate.claims.intervals import share_interval, t_interval
from simulate.claims.inference import Inference
from simulate.claims.trends import cell_crossing, describe_crossing, direction_verdict, fit_trend, holm

REPLICATES = 2000
DEPTHS = np.array([4.0, 8.0, 16.0, 32.0, 64.0])
SEEDS = 3
AXIS = np.repeat(DEPTHS, SEEDS)  # (15,) five axis values, three seeds: the depth study's shape


def assert_coverage(hits, name: str, target: float = 0.95, at_least: bool = False, limit: float = 4.0) -> float:
    """The share of hits against ``target`` within ``limit`` binomial standard errors (or above it)."""
    hits = np.asarray(hits, dtype=bool)
    share = float(hits.mean())
    z = (share - target) / math.sqrt(target * (1 - target) / hits.size)
    ok = z >= -limit if at_least else abs(z) <= limit
    assert ok, f"{name}: coverage {share:.4f} against {target} (z = {z:.2f}, n = {hits.size})"
    print(f"coverage {name}: {share:.4f} (nominal {target})")
    return share


def assert_error_rate(errors, name: str, level: float, limit: float = 4.0) -> float:
    """The share of errors at most ``level`` plus ``limit`` binomial standard errors."""
    errors = np.asarray(errors, dtype=bool)
    rate = float(errors.mean())
    ceiling = level + limit * math.sqrt(level * (1 - level) / errors.size)
    assert rate <= ceiling, f"{name}: error rate {rate:.4f} above {level} (+ 4 se = {ceiling:.4f}, n = {errors.size})"
    print(f"error rate {name}: {rate:.4f} (nominal {level})")
    return rate


def _old_line(x, y):
    """The old trend: least squares through every model, t interval on n - 2 dof; (slope, low, high, a, cov, t)."""
    log_x = np.log(x)
    design = np.stack([np.ones(x.size), log_x], axis=1)  # (n, 2)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ coef
    cov = float(residual @ residual) / (x.size - 2) * np.linalg.inv(design.T @ design)  # (2, 2)
    quantile = float(stats.t.ppf(0.975, x.size - 2))
    half = quantile * math.sqrt(cov[1, 1])
    return coef[1], coef[1] - half, coef[1] + half, coef[0], cov, quantile


def _old_crossing(x, y):
    """The old crossing: the zero of the model-level line with Fieller's interval (theta = log x)."""
    slope, _, _, intercept, cov, quantile = _old_line(x, y)
    t2 = quantile**2
    qa = slope**2 - t2 * cov[1, 1]
    qb = 2.0 * (intercept * slope - t2 * cov[0, 1])
    qc = intercept**2 - t2 * cov[0, 0]
    disc = qb * qb - 4 * qa * qc
    estimate = math.exp(-intercept / slope)
    if qa > 0 and disc >= 0:
        return estimate, math.exp((-qb - math.sqrt(disc)) / (2 * qa)), math.exp((-qb + math.sqrt(disc)) / (2 * qa))
    return estimate, 0.0, math.inf


def _studies(mean_of, noise, cell_effect: float = 0.0, seed: int = 0):
    """Synthetic studies: ``y = mean_of(x) + u_cell + noise_cell * e``, ``u_cell ~ N(0, cell_effect^2)``."""
    rng = np.random.default_rng(seed)
    noise = np.broadcast_to(np.asarray(noise, dtype=float), DEPTHS.shape)  # (5,)
    for _ in range(REPLICATES):
        u = cell_effect * rng.standard_normal(DEPTHS.size)  # (5,)
        yield mean_of(AXIS) + np.repeat(u, SEEDS) + np.repeat(noise, SEEDS) * rng.standard_normal(AXIS.size)


def _line(x):
    return 0.5 - 0.2 * np.log(x)


# -- the slope: at the level of the design --------------------------------------------------------------
def test_the_cell_means_slope_covers_the_line_under_a_cell_effect():
    """Cells scatter about the line (a curved trend's residuals, seen as random): the seeds are replicates of a
    cell, not of the line, and the slope's error is the cells' scatter."""
    trends = [fit_trend(AXIS, y) for y in _studies(_line, 0.05, cell_effect=0.08)]
    assert_coverage([t.slope.low <= -0.2 <= t.slope.high for t in trends], "cell-means slope, cell effect")


def test_negative_control_the_model_level_line_fails_under_a_cell_effect():
    hits = [low <= -0.2 <= high for _, low, high, *_ in (_old_line(AXIS, y) for y in
                                                        _studies(_line, 0.05, cell_effect=0.08))]
    with pytest.raises(AssertionError, match="coverage"):
        assert_coverage(hits, "model-level line, cell effect")


def test_the_cell_means_slope_covers_the_line_with_unequal_variances():
    """A ten-fold spread of the seeds' noise between cells (the atlas: sd 0.006 at L=64, 0.05 at L=32)."""
    trends = [fit_trend(AXIS, y) for y in _studies(_line, [0.01, 0.05, 0.1, 0.05, 0.01])]
    assert_coverage([t.slope.low <= -0.2 <= t.slope.high for t in trends], "cell-means slope, unequal variances",
                    at_least=True)


# -- the line's lack of fit and the verdict that needs no line --------------------------------------------
def test_the_lack_of_fit_test_rejects_a_true_line_at_its_level():
    trends = [fit_trend(AXIS, y) for y in _studies(_line, 0.05, seed=1)]
    assert_error_rate([t.lack_of_fit < 0.05 for t in trends], "lack of fit of a true line", 0.05)


def _plateau(x):
    """Rises to L = 16, then flat: a monotone curve the line misdescribes (true last minus first: 0.6)."""
    return 0.3 * np.log2(np.minimum(x, 16.0) / 4.0)


def test_the_endpoint_contrast_covers_the_curve_s_rise_with_unequal_variances():
    trends = [fit_trend(AXIS, y) for y in _studies(_plateau, [0.02, 0.05, 0.1, 0.05, 0.02], seed=2)]
    assert_coverage([t.contrast.low <= 0.6 <= t.contrast.high for t in trends], "last minus first cell")


def test_a_rejected_line_hands_the_verdict_to_the_endpoints():
    y = _plateau(AXIS) + 0.01 * np.random.default_rng(3).standard_normal(AXIS.size)
    trend = fit_trend(AXIS, y)
    assert trend.lack_of_fit < 0.05 and trend.method == "endpoints" and trend.estimate == trend.contrast.estimate
    assert direction_verdict(trend, +1) == "holds" and direction_verdict(trend, -1) == "violated"


# -- a statistic diluted as 1/L ------------------------------------------------------------------------
def _diluted_studies(seed: int):
    """A constant total of 2.0 shared equally over L blocks: per-block means 2/L, totals 2 (noise 5 %)."""
    rng = np.random.default_rng(seed)
    for _ in range(REPLICATES):
        total = 2.0 * (1 + 0.05 * rng.standard_normal(AXIS.size))  # (15,)
        yield total / AXIS, total


def test_a_total_over_the_blocks_does_not_fall_under_the_dilution_null():
    """"Falls with depth" judged on the total: a false 'holds' at most at the test's 2.5 % one-sided level."""
    errors = [direction_verdict(fit_trend(AXIS, total), -1) == "holds" for _, total in _diluted_studies(4)]
    assert_error_rate(errors, "total, dilution null", 0.025)


def test_negative_control_a_per_block_mean_falls_under_the_dilution_null():
    errors = [direction_verdict(fit_trend(AXIS, mean), -1) == "holds" for mean, _ in _diluted_studies(4)]
    with pytest.raises(AssertionError, match="error rate"):
        assert_error_rate(errors, "per-block mean, dilution null", 0.025)


# -- verdicts: too few axis values, the family ----------------------------------------------------------
@pytest.mark.parametrize("slope, direction, verdict", [
    (0.3, 1, "holds"), (0.3, -1, "violated"), (-0.3, -1, "holds"), (-0.3, 1, "violated"),
    (0.0, 1, "inconclusive"), (0.3, None, "no direction claimed")])
def test_direction_verdicts(slope, direction, verdict):
    rng = np.random.default_rng(2)
    y = slope * np.log(AXIS) + 0.02 * rng.standard_normal(AXIS.size)
    assert direction_verdict(fit_trend(AXIS, y), direction) == verdict


def test_two_axis_values_give_no_direction_verdict_but_their_difference():
    x, y = np.repeat([8.0, 32.0], 3), np.array([0.10, 0.11, 0.12, 0.50, 0.52, 0.51])
    trend = fit_trend(x, y)
    assert trend.method == "too few axis values" and direction_verdict(trend, +1) == "too few axis values"
    assert trend.contrast.estimate == pytest.approx(0.4) and trend.contrast.low > 0, trend.contrast
    assert fit_trend([4.0, 4.0, 4.0], [0.1, 0.2, 0.3]).method == "no data"


def _family_p_values(seed: int, tests: int = 16):
    """``tests`` independent trends under the global null (no trend anywhere): their raw p-values."""
    rng = np.random.default_rng(seed)
    for _ in range(REPLICATES):
        yield [fit_trend(AXIS, 0.05 * rng.standard_normal(AXIS.size)).p_value for _ in range(tests)]


def test_holm_keeps_the_family_wise_error_at_its_level():
    errors = [bool((holm(p) < 0.05).any()) for p in _family_p_values(5)]
    assert_error_rate(errors, "Holm, 16 null trends", 0.05)


def _mixed_family(seed: int, tests: int = 16, effects: int = 6, replicates: int = 300):
    """``tests`` independent trends, the first ``effects`` with a true slope: raw p-values and which are null."""
    rng = np.random.default_rng(seed)
    slopes = np.r_[np.full(effects, 0.03), np.zeros(tests - effects)]  # (tests,)
    for _ in range(replicates):
        yield [fit_trend(AXIS, slope * np.log(AXIS) + 0.05 * rng.standard_normal(AXIS.size)).p_value
               for slope in slopes], slopes == 0


def _false_discovery_proportion(adjusted, null) -> float:
    rejected = np.asarray(adjusted) < 0.05
    return float((rejected & null).sum() / max(1, rejected.sum()))


def assert_mean_rate(proportions, name: str, level: float, limit: float = 4.0) -> float:
    """The mean of per-family ``proportions`` at most ``level`` plus ``limit`` of its standard errors."""
    proportions = np.asarray(proportions, dtype=float)
    rate = float(proportions.mean())
    ceiling = level + limit * float(proportions.std(ddof=1)) / math.sqrt(proportions.size)
    assert rate <= ceiling, f"{name}: rate {rate:.4f} above {level} (+ 4 se = {ceiling:.4f}, n = {proportions.size})"
    print(f"rate {name}: {rate:.4f} (nominal {level})")
    return rate


def test_benjamini_hochberg_keeps_the_false_discovery_rate_at_its_level():
    """BH (Inference(multiplicity="bh")) controls the expected share of false verdicts among the verdicts."""
    bh = Inference(multiplicity="bh")
    proportions = [_false_discovery_proportion(bh.adjust(p), null) for p, null in _mixed_family(6)]
    assert_mean_rate(proportions, "Benjamini-Hochberg false discovery rate, 6 of 16 trends real", 0.05)


def test_negative_control_unadjusted_p_values_inflate_the_false_discovery_rate():
    proportions = [_false_discovery_proportion(p, null) for p, null in _mixed_family(6, effects=1)]
    with pytest.raises(AssertionError, match="rate"):
        assert_mean_rate(proportions, "unadjusted false discovery rate, 1 of 16 trends real", 0.05)


def test_a_lower_confidence_gives_narrower_intervals_and_a_level_to_match():
    x, y = AXIS, 0.02 * np.log(AXIS) + 0.05 * np.random.default_rng(8).standard_normal(AXIS.size)
    wide, narrow = fit_trend(x, y, 0.95).slope, fit_trend(x, y, 0.8).slope
    assert narrow.low > wide.low and narrow.high < wide.high, (wide, narrow)
    assert direction_verdict(fit_trend(x, y), +1, 0.1, confidence=0.8) != "inconclusive"
    assert direction_verdict(fit_trend(x, y), +1, 0.1, confidence=0.95) == "inconclusive"


def test_negative_control_unadjusted_p_values_inflate_the_family_wise_error():
    errors = [bool((np.asarray(p) < 0.05).any()) for p in _family_p_values(5)]
    with pytest.raises(AssertionError, match="error rate"):
        assert_error_rate(errors, "unadjusted, 16 null trends", 0.05)


# -- crossings: between the cells, never from a line ----------------------------------------------------
def _kinked(x):
    """Crosses 0 at L = e^2.5 ~ 12.2 and bends at L = 32 (a grid point: the cells' interpolant is exact)."""
    theta = np.log(x)
    return 0.2 * (theta - 2.5) - 0.3 * np.maximum(0.0, theta - math.log(32.0))


def test_the_cell_crossing_interval_covers_the_true_crossing():
    crossings = [cell_crossing(AXIS, y) for y in _studies(_kinked, 0.05, seed=6)]
    assert_coverage([c.low <= math.exp(2.5) <= c.high for c in crossings], "cell crossing", at_least=True)


def test_negative_control_the_line_s_zero_misses_a_bent_curve_s_crossing():
    hits = [low <= math.exp(2.5) <= high for _, low, high in (_old_crossing(AXIS, y) for y in
                                                              _studies(_kinked, 0.05, seed=6))]
    with pytest.raises(AssertionError, match="coverage"):
        assert_coverage(hits, "Fieller on a bent curve")


def _approaching(x):
    """Negative everywhere and approaching 0 (the atlas's deep-minus-shallow pruning drop): no crossing."""
    return -0.5 / x


def test_a_curve_that_approaches_zero_has_no_significant_crossing():
    errors = [cell_crossing(AXIS, y).note == "crossing in range" for y in _studies(_approaching, 0.01, seed=7)]
    assert_error_rate(errors, "significant crossing of a curve that never crosses", 0.025)


def test_negative_control_the_line_crosses_a_curve_that_never_does():
    errors = []
    for y in _studies(_approaching, 0.01, seed=7):
        estimate, low, high = _old_crossing(AXIS, y)
        errors.append(DEPTHS[0] <= estimate <= DEPTHS[-1] and high < math.inf)  # "crossing at L = ... [..]"
    with pytest.raises(AssertionError, match="error rate"):
        assert_error_rate(errors, "Fieller crossing of a curve that never crosses", 0.025)


def test_cell_means_of_one_sign_have_no_crossing():
    y = 1.0 + 0.2 * np.log(AXIS) + 0.01 * np.random.default_rng(3).standard_normal(AXIS.size)
    crossing = cell_crossing(AXIS, y)
    assert math.isnan(crossing.estimate) and describe_crossing(crossing, "depth").startswith("none in range"), crossing


# -- shares of blocks ----------------------------------------------------------------------------------
def _share_studies(seed: int, blocks: int = 16, p: float = 0.9):
    rng = np.random.default_rng(seed)
    for _ in range(REPLICATES):
        yield rng.binomial(blocks, p, SEEDS) / blocks  # (3,) shares of three seeds


def test_the_share_interval_covers_and_is_never_of_zero_width():
    intervals = [share_interval(shares, [16] * SEEDS) for shares in _share_studies(8)]
    assert all(i.high > i.low for i in intervals)
    assert_coverage([i.low <= 0.9 <= i.high for i in intervals], "share of blocks", at_least=True)


def test_negative_control_a_t_interval_over_seeds_of_a_share_undercovers():
    intervals = [t_interval(shares) for shares in _share_studies(8)]
    with pytest.raises(AssertionError, match="coverage"):
        assert_coverage([i.low <= 0.9 <= i.high for i in intervals], "t interval of a share", at_least=True)


def test_the_contrast_of_a_share_covers_and_never_has_p_zero():
    """Shares of 16 blocks at five depths, three seeds, each block removable with p = 0.9 at L = 4 and 0.1 at
    L = 64: the last-minus-first interval covers -0.8, and seeds that all count the same blocks give no p = 0
    (the old Welch test on the seeds alone said p = 0 for zero spread on both sides)."""
    rng = np.random.default_rng(9)
    p = np.repeat(np.linspace(0.9, 0.1, DEPTHS.size), SEEDS)  # (15,)
    blocks = np.full(AXIS.size, 16)
    trends = [fit_trend(AXIS, rng.binomial(16, p) / 16, blocks=blocks) for _ in range(REPLICATES)]
    assert_coverage([t.contrast.low <= -0.8 <= t.contrast.high for t in trends], "contrast of a share",
                    at_least=True)
    same = fit_trend(AXIS, np.repeat([10 / 16, 10 / 16, 2 / 16, 2 / 16, 2 / 16], SEEDS), blocks=blocks)
    assert same.method == "endpoints" and same.contrast.high > same.contrast.low and same.p_value > 1e-6, same


def _share_slope_studies(share_at, seed: int):
    """Depth studies of a share of the model's blocks (L blocks at depth L, three seeds), each block counted
    with probability ``share_at(L)``; yields (shares (15,), blocks (15,)) and returns nothing else."""
    rng = np.random.default_rng(seed)
    blocks = AXIS.astype(int)  # (15,)
    p = np.repeat(share_at(DEPTHS), SEEDS)  # (15,)
    for _ in range(REPLICATES):
        yield rng.binomial(blocks, p) / blocks, blocks


def _cell_means_slope(share_at) -> float:
    """The estimand: the least-squares slope of the true cell shares on log depth."""
    design = np.stack([np.ones(DEPTHS.size), np.log(DEPTHS)], axis=1)  # (5, 2)
    return float(np.linalg.lstsq(design, share_at(DEPTHS), rcond=None)[0][1])


def _nearly_all(depth):
    return 0.999 - 0.0005 * np.log2(depth / 4)  # almost every block counted: most cells agree on every seed


@pytest.mark.parametrize("share_at, name", [(lambda depth: 0.9 - 0.2 * np.log2(depth / 4), "falling share"),
                                            (_nearly_all, "share near 1")])
def test_the_slope_of_a_share_covers_and_is_never_of_zero_width(share_at, name):
    """The cell-means slope of a share floors its variance at the blocks' binomial variance: it covers the true
    slope, also where the seeds of most cells count every block (conservative: the floor and the scatter of the
    cell means each bound the same variance, the larger is used)."""
    target = _cell_means_slope(share_at)
    slopes = [fit_trend(AXIS, y, blocks=blocks).slope for y, blocks in _share_slope_studies(share_at, 10)]
    assert all(s.high > s.low for s in slopes)
    assert_coverage([s.low <= target <= s.high for s in slopes], f"slope of a {name}", at_least=True)


def test_negative_control_the_slope_of_a_share_without_its_blocks_undercovers_near_1():
    target = _cell_means_slope(_nearly_all)
    slopes = [fit_trend(AXIS, y).slope for y, _ in _share_slope_studies(_nearly_all, 10)]
    with pytest.raises(AssertionError, match="coverage"):
        assert_coverage([s.low <= target <= s.high for s in slopes], "slope of a share, no floor", at_least=True)


def test_seeds_that_agree_on_a_line_of_shares_leave_an_interval_of_nonzero_width():
    """Every seed counts 4/4, 7/8, 12/16, 20/32, 32/64 blocks: cell means exactly on a line in log depth. The
    line's residual scatter is 0; the blocks' binomial variance is not (without it: [b, b] and p = 0, up to
    rounding)."""
    shares = np.repeat([4 / 4, 7 / 8, 12 / 16, 20 / 32, 32 / 64], SEEDS)  # (15,)
    floored, plain = fit_trend(AXIS, shares, blocks=AXIS), fit_trend(AXIS, shares)
    blocks = SEEDS * DEPTHS  # (5,) blocks per cell
    share = (np.array([1, 7 / 8, 12 / 16, 20 / 32, 32 / 64]) * blocks + 2) / (blocks + 4)  # (5,) Agresti-Coull
    weights = (np.log(DEPTHS) - np.log(DEPTHS).mean()) / ((np.log(DEPTHS) - np.log(DEPTHS).mean()) ** 2).sum()
    half = stats.norm.ppf(0.975) * math.sqrt(float(weights**2 @ (share * (1 - share) / blocks)))
    assert floored.method == "line" and floored.p_value > 0, floored
    assert floored.slope.high - floored.slope.estimate == pytest.approx(half, rel=1e-9), (floored.slope, half)
    assert plain.slope.high - plain.slope.low < 1e-12 and plain.p_value < 1e-20, plain  # 0 up to rounding
