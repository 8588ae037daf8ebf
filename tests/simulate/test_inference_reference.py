"""The inference's building blocks against independent references (statsmodels, scipy), on generated inputs:
the family's adjustment (Inference.adjust, Bonferroni, Holm and Benjamini-Hochberg, NaNs left out), Wilson's score part
of share_interval, the cell-means slope (cell_means_slope: OLS of the cell means on log x), Welch's and the
paired interval, and a law across depth's prediction interval for a mean of as many models as each cell has.

Tolerances: the same quantity computed by another route, equal to rounding; ``rtol=1e-12`` where the
arithmetic is the same steps, ``1e-9`` where a reference takes another route (a matrix inverse, a t quantile
by another algorithm), far below any decision the reports make.
"""

from __future__ import annotations

import gc
import math
from unittest import mock

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("statsmodels")
hypothesis = pytest.importorskip("hypothesis")
import statsmodels.api as sm  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from statsmodels.stats.multitest import multipletests  # noqa: E402
from statsmodels.stats.proportion import proportion_confint  # noqa: E402

from simulate.claims.depth_laws import fit_depth_law, law_regressor  # noqa: E402
from simulate.claims.judgement import (Inference, difference_interval, share_interval, t_interval,  # noqa: E402
                                       welch_interval)
from simulate.claims.trends import cell_means_slope  # noqa: E402

# fixed examples (derandomized), no deadline: the machine is shared
PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(0, 2**32 - 1)
CONFIDENCES = st.sampled_from([0.8, 0.9, 0.95, 0.99])

P_VALUES = st.lists(st.one_of(st.floats(0.0, 1.0), st.just(math.nan), st.sampled_from([0.0, 1.0, 0.01, 0.05])),
                    min_size=0, max_size=30)


# -- the family's adjustment -------------------------------------------------------------------------------------
@PROPERTY
@given(p=P_VALUES, method=st.sampled_from([("bonferroni", "bonferroni"), ("holm", "holm"), ("bh", "fdr_bh")]))
def test_adjust_equals_statsmodels_multipletests_with_nans_left_out(p, method):
    ours, theirs = method
    p = np.asarray(p, dtype=float)
    adjusted = Inference(multiplicity=ours).adjust(p)
    finite = np.isfinite(p)
    assert adjusted.shape == p.shape and np.isnan(adjusted[~finite]).all()
    if finite.any():
        with mock.patch.object(gc, "collect", lambda *args: 0):  # multipletests' Holm collects garbage: 0.1 s a call
            rejected, expected, *_ = multipletests(p[finite], alpha=0.05, method=theirs)
        np.testing.assert_allclose(adjusted[finite], expected, rtol=1e-12, atol=1e-300, err_msg=f"{ours} of {p}")
        np.testing.assert_array_equal(adjusted[finite] <= 0.05, rejected)


def test_adjust_of_nothing_is_nothing():
    assert Inference().adjust([]).shape == (0,) and np.isnan(Inference().adjust([math.nan, math.nan])).all()


# -- intervals over seeds and blocks --------------------------------------------------------------------------------
@PROPERTY
@given(blocks=st.integers(1, 64), data=st.data(), models=st.integers(1, 5), confidence=CONFIDENCES)
def test_shares_that_agree_get_exactly_wilson_s_interval(blocks, data, models, confidence):
    """Every seed counts the same ``counted`` of ``blocks`` blocks: the t part has zero width and the interval is
    Wilson's score interval of the ``models x blocks`` pooled blocks."""
    counted = data.draw(st.integers(0, blocks))
    shares, totals = [counted / blocks] * models, [blocks] * models
    interval = share_interval(shares, totals, confidence)
    over_seeds = t_interval(shares, confidence)
    assert not over_seeds.bounded or over_seeds.high - over_seeds.low < 1e-12  # no spread between seeds (rounding)
    low, high = proportion_confint(counted * models, blocks * models, alpha=1 - confidence, method="wilson")
    assert (interval.low, interval.high) == pytest.approx((max(low, 0.0), min(high, 1.0)), rel=1e-12, abs=1e-15)
    assert interval.estimate == pytest.approx(counted / blocks, rel=1e-12, abs=1e-15)
    assert interval.high > interval.low and interval.confidence == confidence


@PROPERTY
@given(seed=SEEDS, blocks=st.integers(2, 64), models=st.integers(2, 5), confidence=CONFIDENCES)
def test_a_share_interval_holds_both_the_t_and_the_wilson_interval(seed, blocks, models, confidence):
    counts = np.random.default_rng(seed).binomial(blocks, 0.7, models)  # (models,)
    interval = share_interval(counts / blocks, [blocks] * models, confidence)
    low, high = proportion_confint(counts.sum(), blocks * models, alpha=1 - confidence, method="wilson")
    over_seeds = t_interval(counts / blocks, confidence)
    assert interval.low == pytest.approx(max(min(low, over_seeds.low), 0.0), rel=1e-12, abs=1e-15)
    assert interval.high == pytest.approx(min(max(high, over_seeds.high), 1.0), rel=1e-12, abs=1e-15)


@PROPERTY
@given(seed=SEEDS, n=st.integers(2, 8), confidence=CONFIDENCES)
def test_t_interval_equals_scipy(seed, n, confidence):
    values = np.random.default_rng(seed).normal(1.0, 2.0, n)
    interval = t_interval(values, confidence)
    low, high = stats.t.interval(confidence, n - 1, loc=values.mean(), scale=stats.sem(values))
    assert (interval.low, interval.high) == pytest.approx((low, high), rel=1e-9)
    assert interval.se == pytest.approx(stats.sem(values), rel=1e-12)


@PROPERTY
@given(seed=SEEDS, sizes=st.tuples(st.integers(2, 7), st.integers(2, 7)), confidence=CONFIDENCES)
def test_welch_interval_equals_scipy_ttest_ind(seed, sizes, confidence):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(1.0, 1.0, sizes[0]), rng.normal(0.0, 3.0, sizes[1])  # unequal variances
    interval = welch_interval(a, b, confidence)
    reference = stats.ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
    assert interval.estimate == pytest.approx(a.mean() - b.mean(), rel=1e-12, abs=1e-15)
    assert (interval.low, interval.high) == pytest.approx((reference.low, reference.high), rel=1e-9)
    assert interval.method == "Welch" and interval.confidence == confidence


@PROPERTY
@given(seed=SEEDS, n=st.integers(2, 6), confidence=CONFIDENCES)
def test_a_difference_over_the_same_seeds_is_paired_as_scipy_ttest_rel(seed, n, confidence):
    rng = np.random.default_rng(seed)
    first, second = rng.normal(1.0, 1.0, n), rng.normal(0.0, 1.0, n)
    difference = difference_interval(dict(enumerate(first)), dict(enumerate(second)), confidence)
    reference = stats.ttest_rel(first, second).confidence_interval(confidence)
    assert difference.n == n and difference.estimate.method == "paired by seed"
    assert (difference.estimate.low, difference.estimate.high) == pytest.approx((reference.low, reference.high),
                                                                                rel=1e-9)
    welch = difference_interval(dict(enumerate(first)), {i + 100: v for i, v in enumerate(second)}, confidence)
    assert welch.n == 2 * n and welch.estimate == welch_interval(first, second, confidence)  # other seeds: Welch


# -- the cell-means slope ----------------------------------------------------------------------------------------
def _axis(rng, k: int) -> np.ndarray:
    """``k`` distinct positive axis values, ascending."""
    return np.sort(rng.choice(np.arange(1, 200), size=k, replace=False)).astype(float)


@PROPERTY
@given(seed=SEEDS, k=st.integers(3, 8))
def test_cell_means_slope_equals_statsmodels_ols(seed, k):
    rng = np.random.default_rng(seed)
    x = _axis(rng, k)
    means = rng.normal(0.0, 1.0, (5, k)) + 0.3 * np.log(x)  # five studies at once
    slope, se, p, residual_var = cell_means_slope(np.log(x), means)
    for i, row in enumerate(means):
        fit = sm.OLS(row, sm.add_constant(np.log(x))).fit()
        assert slope[i] == pytest.approx(fit.params[1], rel=1e-9, abs=1e-12)
        assert se[i] == pytest.approx(fit.bse[1], rel=1e-9)
        assert p[i] == pytest.approx(fit.pvalues[1], rel=1e-7, abs=1e-14)
        assert residual_var[i] == pytest.approx(fit.scale, rel=1e-9)


@PROPERTY
@given(seed=SEEDS, k=st.integers(3, 8))
def test_the_floor_raises_the_standard_error_to_that_of_the_cells_least_variance(seed, k):
    rng = np.random.default_rng(seed)
    x = _axis(rng, k)
    means = rng.normal(0.0, 0.1, k)[None, :]
    floor = rng.uniform(0.0, 0.05, k)  # (k,)
    centred = np.log(x) - np.log(x).mean()
    weights = centred / (centred @ centred)
    fit = sm.OLS(means[0], sm.add_constant(np.log(x))).fit()
    _, se, p, _ = cell_means_slope(np.log(x), means, floor)
    expected = max(fit.bse[1], math.sqrt(float(weights**2 @ floor)))
    assert se[0] == pytest.approx(expected, rel=1e-9)
    assert p[0] == pytest.approx(2 * stats.t.sf(abs(fit.params[1]) / expected, k - 2), rel=1e-7, abs=1e-14)


# -- a law across depth: prediction of a new cell --------------------------------------------------------------------
@PROPERTY
@given(seed=SEEDS, law=st.sampled_from(["power", "exponential in L"]), seeds=st.integers(1, 4),
       depths=st.sampled_from([(4.0, 8.0, 16.0, 32.0), (4.0, 8.0, 16.0), (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)]),
       target=st.sampled_from([2.0, 12.0, 64.0]), confidence=CONFIDENCES)
def test_the_law_s_prediction_of_a_cell_like_the_fitted_ones_is_ols_s_prediction_interval(seed, law, seeds, depths,
                                                                                            target, confidence):
    """For a mean of as many models as every fitted cell has, the seed correction is 0 and the interval is OLS's
    interval for a new observation of the cell means (statsmodels' obs_ci)."""
    rng = np.random.default_rng(seed)
    f = law_regressor(law, depths)
    cells = 0.5 + 0.2 * f + rng.normal(0.0, 0.3, len(depths))  # (k,) a cell effect
    values = cells[:, None] + rng.normal(0.0, 0.5, (len(depths), seeds))  # (k, seeds)
    fitted = fit_depth_law(np.repeat(depths, seeds), values.ravel(), law, confidence)
    interval = fitted.predict(target, models=seeds)
    ols = sm.OLS(values.mean(axis=1), sm.add_constant(f)).fit()
    exog = np.array([[1.0, float(law_regressor(law, [target])[0])]])
    frame = ols.get_prediction(exog).summary_frame(alpha=1 - confidence)
    assert interval.estimate == pytest.approx(frame["mean"].iloc[0], rel=1e-9, abs=1e-9)
    assert (interval.low, interval.high) == pytest.approx((frame["obs_ci_lower"].iloc[0], frame["obs_ci_upper"].iloc[0]),
                                                          rel=1e-9, abs=1e-9)
    assert fitted.slope.low == pytest.approx(ols.conf_int(alpha=1 - confidence)[1][0], rel=1e-9, abs=1e-9)
