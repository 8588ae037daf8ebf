"""The inference of a study's trends (simulate.claims.trends) on synthetic studies of the atlas's design: the
cell-means slope's coverage, the direction verdict's error rates per trend and per family, its power at the
detectable slope, also where the assumptions fail, with the old endpoint rule as the negative control.

A synthetic study has the atlas's shape: depths 4, 8, 16, 32 and 3 seeds per depth (2 where the tuning
seed is left out). A model's value is ``y = b log L + u_L + e``: a random cell effect ``u_L ~ N(0,
ratio^2)`` (what moves a whole cell off the line: its tuned rate, curvature, a shared seed effect) and
the seeds' noise ``e ~ N(0, 1)``; ``ratio`` is the cell-to-seed spread, 0, 1, 2 or 4. The bulk of each
check runs on :func:`cell_means_slope` over thousands of studies at once; a test first shows that
:func:`fit_trend` and :func:`direction_verdict` give exactly its numbers and verdicts, study by study.

Tolerances are Monte-Carlo standard errors: a coverage at least ``0.95 - 3 se``, an error rate at most
``nominal + 3 se`` and a power within ``3 se`` of 0.8 (``se`` the binomial standard error at the target over
the trials). Each failing assertion prints the statistic, its target and the trials. The misspecified
nulls: cells on a parabola in ``log L`` with no linear part, heavy-tailed (Student-t, 3 dof) cell effects.
The negative controls: the old rule (the last minus the first cell by Welch's test on the seeds where the
line's lack of fit is rejected), unadjusted p-values for a family, a per-block mean under the dilution
null, a share's slope without its blocks' binomial floor.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from simulate.claims.calibration import _endpoint_rule
from simulate.claims.judgement import Inference, Interval, detectable_slope
from simulate.claims.trends import (SignChange, Trend, cell_crossing, cell_means_slope, cell_shape,
                                    describe_crossing, describe_shape, direction_verdict, fit_trend)
from theory.verdicts import Verdict

DEPTHS = np.array([4.0, 8.0, 16.0, 32.0])  # the atlas's depth design
LOG_DEPTHS = np.log(DEPTHS)  # (4,)
CENTRED = LOG_DEPTHS - LOG_DEPTHS.mean()  # (4,)
RATIOS = (0.0, 1.0, 2.0, 4.0)  # cell-to-seed spread
SEED_COUNTS = (3, 2)  # seeds per cell: with the tuning seed, and without it
ALPHA = 0.05
T_QUANTILE = float(stats.t.ppf(0.975, DEPTHS.size - 2))  # the slope's t quantile on cells - 2 = 2 dof
STUDIES = 4000  # vectorised studies per case: binomial se 0.0034 at 0.05, 0.0063 at 0.8
LOOPED = 400  # studies judged one by one through fit_trend (about 1 ms each)
JUDGED = (Verdict.HOLDS, Verdict.VIOLATED)  # a direction verdict: false under a null


# -- Monte-Carlo assertions -----------------------------------------------------------------------------
def _binomial_se(target: float, trials: int) -> float:
    return math.sqrt(target * (1 - target) / trials)


def assert_coverage(hits, label: str, target: float = 0.95, limit: float = 3.0) -> float:
    """The share of hits at least ``target`` minus ``limit`` binomial standard errors."""
    hits = np.asarray(hits, dtype=bool)
    rate, se = float(hits.mean()), _binomial_se(target, hits.size)
    assert rate >= target - limit * se, (f"{label}: coverage {rate:.4f} < target {target} - {limit} x {se:.4f} "
                                         f"({hits.size} trials, shape {hits.shape})")
    print(f"{label}: coverage {rate:.4f} (target {target}, {hits.size} trials)")
    return rate


def assert_rate_at_most(events, label: str, level: float = ALPHA, limit: float = 3.0) -> float:
    """The share of events at most ``level`` plus ``limit`` binomial standard errors."""
    events = np.asarray(events, dtype=bool)
    rate, se = float(events.mean()), _binomial_se(level, events.size)
    assert rate <= level + limit * se, (f"{label}: rate {rate:.4f} > nominal {level} + {limit} x {se:.4f} "
                                        f"({events.size} trials, shape {events.shape})")
    print(f"{label}: rate {rate:.4f} (nominal {level}, {events.size} trials)")
    return rate


def assert_rate_near(events, label: str, target: float, limit: float = 3.0) -> float:
    """The share of events within ``limit`` binomial standard errors of ``target``."""
    events = np.asarray(events, dtype=bool)
    rate, se = float(events.mean()), _binomial_se(target, events.size)
    assert abs(rate - target) <= limit * se, (f"{label}: rate {rate:.4f} against target {target} +- {limit} x "
                                              f"{se:.4f} ({events.size} trials, shape {events.shape})")
    print(f"{label}: rate {rate:.4f} (target {target}, {events.size} trials)")
    return rate


# -- synthetic studies ----------------------------------------------------------------------------------
def _studies(rng, studies: int, seeds: int, ratio: float, slope: float = 0.0, effects: str = "normal",
             shape: tuple = ()) -> np.ndarray:
    """Values ``(*shape, studies, k, seeds)`` of synthetic studies on :data:`DEPTHS`: ``slope`` per e-fold, a cell
    effect of spread ``ratio`` (``normal``; ``t3``: Student's t on 3 dof scaled to variance ratio^2;
    ``parabola``: the cells on a parabola in log L with no linear part, of standard deviation ``ratio``
    across the cells), seed noise of sd 1."""
    size = (*shape, studies, DEPTHS.size)
    if effects == "normal":
        u = ratio * rng.standard_normal(size)
    elif effects == "t3":
        u = ratio * rng.standard_t(3, size) / math.sqrt(3.0)  # t_3 has variance 3
    else:
        bend = CENTRED**2 - (CENTRED**2).mean()  # (k,) no linear part: the design is symmetric in log L
        u = np.broadcast_to(ratio * bend / bend.std(), size)
    cells = slope * CENTRED + u  # (*shape, studies, k)
    return cells[..., None] + rng.standard_normal((*size, seeds))


def _models(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One study's models: axis values ``(k * seeds,)`` and values ``(k * seeds,)`` of ``values`` ``(k, seeds)``."""
    return np.repeat(DEPTHS, values.shape[-1]), values.reshape(-1)


def _line(values: np.ndarray) -> tuple:
    """The cell-means line of every study at once (:func:`cell_means_slope`)."""
    return cell_means_slope(LOG_DEPTHS, values.mean(axis=-1))


CASES = [pytest.param(ratio, seeds, id=f"ratio{ratio:g}-seeds{seeds}") for seeds in SEED_COUNTS for ratio in RATIOS]


# -- the slope: at the level of the design ----------------------------------------------------------------
def test_fit_trend_and_its_verdict_are_the_vectorised_cell_means_line():
    """Study by study, fit_trend's slope, standard error, interval and p, and the direction verdict, equal
    cell_means_slope's on the whole batch (so the vectorised checks below judge the code a study runs)."""
    rng = np.random.default_rng(1)
    for ratio, seeds in [(0.0, 3), (2.0, 3), (4.0, 2)]:
        values = _studies(rng, 60, seeds, ratio, slope=0.5 * (ratio + 1) / 2)  # some verdicts reached
        slope, se, p, residual_var = _line(values)
        for i, study in enumerate(values):
            trend = fit_trend(*_models(study))
            # the same sums in another order: equal to rounding (1e-12 relative, far below any decision)
            assert trend.slope.estimate == pytest.approx(slope[i], rel=1e-12, abs=1e-12)
            assert trend.slope.se == pytest.approx(se[i], rel=1e-12)
            assert trend.p_value == pytest.approx(p[i], rel=1e-9, abs=1e-15)
            assert trend.residual_var == pytest.approx(residual_var[i], rel=1e-12)
            assert trend.slope.high - trend.slope.estimate == pytest.approx(T_QUANTILE * se[i], rel=1e-12)
            assert (trend.dof, trend.cells, trend.n) == (2, 4, 4 * seeds)
            expected = Verdict.INCONCLUSIVE if p[i] >= ALPHA else (Verdict.HOLDS if slope[i] > 0 else Verdict.VIOLATED)
            assert direction_verdict(trend, +1) is expected, (i, ratio, seeds, trend)


@pytest.mark.parametrize("ratio, seeds", CASES)
def test_the_slope_interval_covers_a_zero_slope_under_a_cell_effect(ratio, seeds):
    """(a) The cells are the units: the slope's t interval on cells - 2 dof covers at 95 % whatever the cell
    effect (the seeds are replicates of a cell, never of the line)."""
    slope, se, _, _ = _line(_studies(np.random.default_rng(10 + int(ratio) + 7 * seeds), STUDIES, seeds, ratio))
    assert_coverage(np.abs(slope) <= T_QUANTILE * se, f"slope interval, ratio {ratio:g}, {seeds} seeds")


@pytest.mark.parametrize("ratio, seeds", CASES)
def test_the_false_direction_verdict_rate_is_nominal_per_trend(ratio, seeds):
    """(b) No true slope: a direction verdict (holds or violated) in at most 5 % of the studies, the chain of
    fit_trend and direction_verdict checked on the first studies of the same draw."""
    values = _studies(np.random.default_rng(20 + int(ratio) + 7 * seeds), STUDIES, seeds, ratio)
    slope, _, p, _ = _line(values)
    for i in range(100):  # the chain itself: the same verdicts
        verdict = direction_verdict(fit_trend(*_models(values[i])), -1)
        assert (verdict in JUDGED) == (p[i] < ALPHA), (i, verdict, p[i])
    assert_rate_at_most(p < ALPHA, f"false direction verdicts, ratio {ratio:g}, {seeds} seeds")


def test_the_false_direction_verdict_rate_through_fit_trend():
    """(b) The same rate with every study judged by fit_trend and direction_verdict (the atlas's 3 seeds, a cell
    effect twice the seeds' spread; fewer studies: a looser bound)."""
    values = _studies(np.random.default_rng(25), LOOPED, 3, 2.0)
    verdicts = [direction_verdict(fit_trend(*_models(study)), +1) for study in values]
    assert set(verdicts) <= {Verdict.HOLDS, Verdict.VIOLATED, Verdict.INCONCLUSIVE}
    assert_rate_at_most([v in JUDGED for v in verdicts], "false verdicts through fit_trend, ratio 2, 3 seeds")


FAMILY = 28  # independent null trends in one report's family


def _family_false(p_values: np.ndarray, slopes: np.ndarray, inference: Inference | None) -> np.ndarray:
    """Per study (rows of ``(studies, FAMILY)``): whether any member gets a direction verdict, each judged by
    direction_verdict on its adjusted p (the raw p without ``inference``)."""
    out = np.zeros(p_values.shape[0], dtype=bool)
    for study, (p_row, slope_row) in enumerate(zip(p_values, slopes)):
        adjusted = inference.adjust(p_row) if inference else p_row
        j = int(np.argmin(adjusted))  # the verdict is monotone in p: the smallest decides the family
        trend = Trend(Interval(float(slope_row[j])), float(p_row[j]), 2, math.nan, DEPTHS.size, 12, None)
        out[study] = direction_verdict(trend, +1, float(adjusted[j])) in JUDGED
    return out


@pytest.mark.parametrize("ratio, seeds", [c for c in CASES if c.values[0] < 4])
@pytest.mark.parametrize("method", ["bonferroni", "holm"])
def test_the_family_s_adjustment_keeps_the_family_wise_error_of_28_null_trends(ratio, seeds, method):
    """(c) 28 independent null trends (a report's family), Bonferroni's adjustment (the default) or Holm's: any false
    direction verdict in at most 5 % of the reports."""
    values = _studies(np.random.default_rng(30 + int(ratio) + 7 * seeds), 2000, seeds, ratio, shape=(FAMILY,))
    slope, _, p, _ = _line(values)  # (FAMILY, studies) each
    false = _family_false(p.T, slope.T, Inference(multiplicity=method))
    assert_rate_at_most(false, f"family-wise error, {method}, {FAMILY} null trends, ratio {ratio:g}, {seeds} seeds")


def test_negative_control_unadjusted_p_values_inflate_the_family_wise_error():
    values = _studies(np.random.default_rng(31), 2000, 3, 1.0, shape=(FAMILY,))
    slope, _, p, _ = _line(values)
    false = _family_false(p.T, slope.T, None)
    with pytest.raises(AssertionError, match="family-wise error, unadjusted"):
        assert_rate_at_most(false, f"family-wise error, unadjusted, {FAMILY} null trends")
    assert false.mean() > 0.5, false.mean()  # 1 - 0.95^28 = 0.76


def test_benjamini_hochberg_keeps_the_false_discovery_rate():
    """Inference(multiplicity="bh"): the expected share of false verdicts among the verdicts at most 5 % (16
    independent trends, 6 with a true slope of 3 seed sds per e-fold; ratio 1)."""
    rng = np.random.default_rng(32)
    slopes = np.r_[np.full(6, 3.0), np.zeros(10)]  # (16,)
    values = np.stack([_studies(rng, 1500, 3, 1.0, slope=s) for s in slopes])  # (16, studies, k, seeds)
    _, _, p, _ = _line(values)  # (16, studies)
    bh = Inference(multiplicity="bh")
    proportions = []
    for row in p.T:
        rejected = bh.adjust(row) < ALPHA
        proportions.append((rejected & (slopes == 0)).sum() / max(1, rejected.sum()))
    proportions = np.asarray(proportions)
    se = float(proportions.std(ddof=1)) / math.sqrt(proportions.size)
    rate = float(proportions.mean())
    assert rate <= ALPHA + 3 * se, f"BH false discovery rate {rate:.4f} > {ALPHA} + 3 x {se:.4f} ({p.shape[1]} trials)"
    print(f"Benjamini-Hochberg false discovery rate: {rate:.4f} (nominal {ALPHA}, {proportions.size} trials)")


# -- the negative control: the old endpoint rule ------------------------------------------------------------
def _old_rule(x: np.ndarray, y: np.ndarray) -> float:
    """The rule the new one replaced, written here: the p of the cell-means line, or, where the line's lack of
    fit is rejected at 0.05, Welch's p of the last minus the first cell (the seeds as replicates)."""
    trend = fit_trend(x, y)
    if trend.lack_of_fit < 0.05:
        return float(stats.ttest_ind(y[x == x.max()], y[x == x.min()], equal_var=False).pvalue)
    return trend.p_value


def test_the_calibration_s_endpoint_rule_is_the_old_rule():
    """simulate.claims.calibration._endpoint_rule, vectorised, gives the old rule's p study by study."""
    values = _studies(np.random.default_rng(40), 200, 3, 2.0)  # (studies, k, seeds)
    _, p = _endpoint_rule([values[:, i, :] for i in range(DEPTHS.size)], LOG_DEPTHS)
    written = np.array([_old_rule(*_models(study)) for study in values])
    np.testing.assert_allclose(p, written, rtol=1e-9, atol=1e-15)  # the same statistics to rounding
    assert 0.2 < float(np.mean(written < ALPHA)) < 0.6  # the control is switched on in these studies


@pytest.mark.parametrize("ratio, seeds, above", [(2.0, 3, 0.25), (4.0, 3, 0.25), (2.0, 2, ALPHA)])
def test_negative_control_the_endpoint_rule_gives_false_verdicts_under_a_cell_effect(ratio, seeds, above):
    """(d) The old rule on the same nulls: the lack-of-fit test sees the cell effect and hands the verdict to
    the endpoints, whose Welch test takes the seeds for replicates of the trend. It must fail: more than
    ``above`` false verdicts per trend, far above nominal."""
    values = _studies(np.random.default_rng(41 + int(ratio) + 7 * seeds), STUDIES, seeds, ratio)
    _, p = _endpoint_rule([values[:, i, :] for i in range(DEPTHS.size)], LOG_DEPTHS)
    label = f"endpoint rule, ratio {ratio:g}, {seeds} seeds"
    with pytest.raises(AssertionError, match="endpoint rule"):
        assert_rate_at_most(p < ALPHA, label)
    rate = float(np.mean(p < ALPHA))
    bound = above + 3 * _binomial_se(above, p.size)
    assert rate > bound, f"{label}: rate {rate:.4f} <= {bound:.4f}: the negative control does not fail"
    print(f"{label}: false verdicts {rate:.4f} ({p.size} trials)")


# -- misspecified nulls ---------------------------------------------------------------------------------
@pytest.mark.parametrize("effects", ["parabola", "t3"])
@pytest.mark.parametrize("ratio", [1.0, 2.0, 4.0])
def test_misspecified_nulls_keep_the_false_verdict_rate(effects, ratio):
    """(e) No linear part but cells on a parabola in log L (a curve the line cannot follow), and heavy-tailed cell
    effects: the false direction verdicts stay at most nominal."""
    values = _studies(np.random.default_rng(50 + int(ratio)), STUDIES, 3, ratio, effects=effects)
    slope, _, p, _ = _line(values)
    if effects == "parabola":  # the truth has no slope: the null is a null
        truth = cell_means_slope(LOG_DEPTHS, (CENTRED**2)[None, :])[0]
        assert abs(float(truth[0])) < 1e-12, truth
    assert_rate_at_most(p < ALPHA, f"false verdicts, {effects} cells, ratio {ratio:g}")


# -- power at the detectable slope -----------------------------------------------------------------------
@pytest.mark.parametrize("dof, alpha, power", [(4, ALPHA, 0.8), (10, ALPHA, 0.8), (5, ALPHA, 0.9),
                                               (8, ALPHA / 28, 0.8)])
def test_detectable_slope_is_the_noncentral_t_power(dof, alpha, power):
    """(f) detectable_slope(se, dof, alpha) is the noncentrality at which the two-sided t test has ``power``:
    scipy's noncentral t (finite at these dof and levels; NaN at fewer dof or a smaller alpha) gives that power
    back (1e-6: the quadrature's and the root's tolerances are far smaller)."""
    multiple = detectable_slope(1.0, dof, alpha, power)
    critical = stats.t.ppf(1 - alpha / 2, dof)
    reached = stats.nct.sf(critical, dof, multiple) + stats.nct.cdf(-critical, dof, multiple)
    assert math.isfinite(reached) and reached == pytest.approx(power, abs=1e-6), (dof, alpha, multiple, reached)
    assert detectable_slope(0.25, dof, alpha, power) == pytest.approx(0.25 * multiple, rel=1e-12)  # scales with se


def test_detectable_slope_without_a_test_is_nan():
    for se, dof in [(0.0, 2), (math.nan, 2), (math.inf, 2), (1.0, 0)]:
        assert math.isnan(detectable_slope(se, dof, ALPHA)), (se, dof)


@pytest.mark.parametrize("ratio, seeds, alpha", [(0.0, 3, ALPHA), (2.0, 3, ALPHA), (2.0, 2, ALPHA),
                                                 (1.0, 3, ALPHA / FAMILY)])
def test_power_at_the_detectable_slope_is_80_percent(ratio, seeds, alpha):
    """(f) The atlas's 2 residual dof, where scipy's noncentral t is not trusted: a true slope equal to the
    detectable slope of the true standard error is detected (p < alpha) in 80 % of the studies."""
    se = math.sqrt((ratio**2 + 1.0 / seeds) / float(CENTRED @ CENTRED))  # the cell mean's variance / Sxx
    slope = detectable_slope(se, DEPTHS.size - 2, alpha)
    values = _studies(np.random.default_rng(60 + int(ratio) + 7 * seeds), STUDIES, seeds, ratio, slope=slope)
    estimate, _, p, _ = _line(values)
    assert_rate_near(p < alpha, f"power at the detectable slope {slope:.3g}, ratio {ratio:g}, {seeds} seeds, "
                                f"alpha {alpha:.3g}", 0.8)
    assert np.mean((p < alpha) & (estimate < 0)) < 0.001  # practically never the wrong sign


def test_detectable_slope_reaches_the_normal_limit_for_many_degrees_of_freedom():
    """At 400 degrees of freedom the t test is nearly the z test: 1.96 + 0.84 = 2.80 standard errors (scipy's
    noncentral t is finite there; the chi-square integral it falls back on would miss the mass far from 0)."""
    multiple = detectable_slope(1.0, 400, ALPHA)
    normal = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)  # 2.80: the normal limit, t on 400 dof is close
    assert multiple == pytest.approx(normal, rel=0.01), multiple


# -- verdicts ---------------------------------------------------------------------------------------------
AXIS = np.repeat(DEPTHS, 3)  # (12,) the atlas's models


@pytest.mark.parametrize("slope, direction, verdict", [
    (0.3, 1, Verdict.HOLDS), (0.3, -1, Verdict.VIOLATED), (-0.3, -1, Verdict.HOLDS), (-0.3, 1, Verdict.VIOLATED),
    (0.0, 1, Verdict.INCONCLUSIVE), (0.3, None, Verdict.NO_DIRECTION)])
def test_direction_verdicts(slope, direction, verdict):
    y = slope * np.log(AXIS) + 0.02 * np.random.default_rng(2).standard_normal(AXIS.size)
    assert direction_verdict(fit_trend(AXIS, y), direction) is verdict


def test_a_verdict_not_reached_is_unresolvable_only_where_the_design_cannot_detect_the_papers_effect():
    trend = fit_trend(AXIS, 0.05 * np.random.default_rng(3).standard_normal(AXIS.size))
    assert trend.p_value >= ALPHA, trend
    detectable = detectable_slope(trend.slope.se, trend.dof, ALPHA)
    assert direction_verdict(trend, -1, detectable=detectable, reference=-detectable * 1.01) is Verdict.INCONCLUSIVE
    assert direction_verdict(trend, -1, detectable=detectable, reference=-detectable * 0.99) is Verdict.UNRESOLVABLE
    assert direction_verdict(trend, -1, detectable=math.nan, reference=-1.0) is Verdict.UNRESOLVABLE  # none
    assert direction_verdict(trend, -1, detectable=detectable) is Verdict.INCONCLUSIVE  # no reference
    assert direction_verdict(trend, None, detectable=detectable, reference=-1e-9) is Verdict.NO_DIRECTION


def test_the_adjusted_p_decides_and_a_lower_confidence_matches_its_level():
    y = 0.02 * np.log(AXIS) + 0.05 * np.random.default_rng(2).standard_normal(AXIS.size)
    wide, narrow = fit_trend(AXIS, y, 0.95), fit_trend(AXIS, y, 0.8)
    assert narrow.slope.low > wide.slope.low and narrow.slope.high < wide.slope.high, (wide.slope, narrow.slope)
    assert narrow.slope.confidence == 0.8 and wide.slope.label == "95 % cell means, t on cells - 2"
    assert 0.05 < wide.p_value < 0.2, wide.p_value  # significant at the 80 % level, not at 95 %
    assert direction_verdict(wide, +1, confidence=0.8) is Verdict.HOLDS
    assert direction_verdict(wide, +1, confidence=0.95) is Verdict.INCONCLUSIVE
    assert direction_verdict(wide, +1, p_adjusted=0.01) is Verdict.HOLDS  # the family's p, not the trend's
    strong = fit_trend(AXIS, 0.3 * np.log(AXIS) + 0.01 * np.random.default_rng(8).standard_normal(AXIS.size))
    assert direction_verdict(strong, +1, p_adjusted=0.3) is Verdict.INCONCLUSIVE


def test_two_axis_values_give_a_slope_but_no_direction_verdict_and_one_gives_none():
    x, y = np.repeat([8.0, 32.0], 3), np.array([0.10, 0.11, 0.12, 0.50, 0.52, 0.51])
    trend = fit_trend(x, y)
    assert direction_verdict(trend, +1) is Verdict.TOO_FEW_AXIS_VALUES
    assert trend.slope.estimate == pytest.approx(0.4 / math.log(4.0), rel=1e-12) and not trend.slope.bounded, trend
    assert trend.slope.method == "two cells" and trend.dof == 0 and math.isnan(trend.p_value)
    one = fit_trend([4.0, 4.0, 4.0], [0.1, 0.2, 0.3])
    assert one.cells == 1 and one.n == 3 and math.isnan(one.slope.estimate) and direction_verdict(one, +1) is \
        Verdict.TOO_FEW_AXIS_VALUES


def _plateau(x):
    """Rises to L = 8, then flat: a monotone curve the line misdescribes (cells 0, 0.3, 0.3, 0.3)."""
    return 0.3 * np.log2(np.minimum(x, 8.0) / 4.0)


def test_a_rejected_line_changes_nothing_the_verdict_reads_the_cell_means_slope():
    """The lack of fit is reported, not acted on: the cells' departures from the line are the slope's error, and
    no switch to the last minus the first cell by seeds (which says p < 0.001) replaces the verdict."""
    y = _plateau(AXIS) + 0.01 * np.random.default_rng(3).standard_normal(AXIS.size)
    trend = fit_trend(AXIS, y)
    assert trend.lack_of_fit < 1e-6, trend.lack_of_fit
    slope, se, p, _ = (float(v) for v in cell_means_slope(LOG_DEPTHS, y.reshape(4, 3).mean(axis=1)))
    assert (trend.slope.estimate, trend.slope.se, trend.p_value) == pytest.approx((slope, se, p), rel=1e-12)
    assert trend.p_value > ALPHA and _old_rule(AXIS, y) < 1e-3, (trend.p_value, _old_rule(AXIS, y))
    assert direction_verdict(trend, +1) is Verdict.INCONCLUSIVE
    assert not hasattr(trend, "contrast") and not hasattr(trend, "method")


def test_the_lack_of_fit_test_rejects_a_true_line_at_its_level():
    rng = np.random.default_rng(4)
    rejected = [fit_trend(*_models(study)).lack_of_fit < ALPHA for study in _studies(rng, LOOPED, 3, 0.0, 0.5)]
    assert_rate_at_most(rejected, "lack of fit of a true line")


# -- the shape of the cells ---------------------------------------------------------------------------------
@pytest.mark.parametrize("means, shape", [
    ([6.0, 7.7, 7.4, 7.3], "not monotone: rises 4..8, falls 8..32"),
    ([1.0, 2.0, 2.0, 3.0], "rises monotonically"),
    ([3.0, 3.0, 2.0, 1.0], "falls monotonically"),
    ([1.0, 1.0, 1.0, 1.0], "flat"),
    ([1.0, 3.0, 2.0, 4.0], "not monotone: rises 4..8, falls 8..16, rises 16..32"),
    ([1.0, 2.0, 2.0, 1.0], "not monotone: rises 4..8, flat 8..16, falls 16..32"),
    ([2.0, 1.0, 1.0, 3.0], "not monotone: falls 4..8, flat 8..16, rises 16..32")])
def test_describe_shape_names_where_the_cell_means_turn(means, shape):
    """(g) Monotone (ties allowed) in one word; otherwise every run, its direction and the cells it spans."""
    assert describe_shape(cell_shape(DEPTHS, means)) == shape
    y = np.repeat(means, 3) + np.tile([-0.01, 0.0, 0.01], 4)  # seeds about each cell mean
    assert describe_shape(fit_trend(AXIS, y).shape) == shape  # a trend describes its cell means, not its models


def test_describe_shape_of_one_cell_is_flat():
    assert describe_shape(cell_shape([4.0], [1.0])) == "flat" == describe_shape(cell_shape([4.0, 8.0], [1.0, 1.0]))
    assert describe_shape(fit_trend([4.0, 4.0], [1.0, 2.0]).shape) == ""  # one cell: no trend, no shape


# -- crossings: between the cells, never from a line ---------------------------------------------------------
def _kinked(x):
    """Crosses 0 at L = e^2.5 ~ 12.2 (between the cells 8 and 16) and bends at L = 16 (a cell: the cells'
    interpolant is exact where it crosses); cells -0.33, -0.13, 0.08, 0.15."""
    theta = np.log(x)
    return 0.3 * (theta - 2.5) - 0.2 * np.maximum(0.0, theta - math.log(16.0))


def _noisy(rng, curve, sd: float, studies: int) -> np.ndarray:
    return curve(AXIS)[None, :] + sd * rng.standard_normal((studies, AXIS.size))  # (studies, 12)


def test_a_significant_crossing_s_interval_covers_the_true_crossing():
    """(h) Where a crossing is significant its interval covers the true one; a sign change that is not
    significant has no point estimate, only the two cells it lies between."""
    crossings = [cell_crossing(AXIS, y) for y in _noisy(np.random.default_rng(6), _kinked, 0.05, 500)]
    significant = [c for c in crossings if c.state is SignChange.CROSSING]
    for c in crossings:
        if c.state is SignChange.CROSSING:
            assert c.low <= c.estimate <= c.high and c.low < c.high, c
        elif c.state is not SignChange.NONE_IN_RANGE:  # noise can hide the sign change altogether
            assert c.state is SignChange.NOT_SIGNIFICANT and math.isnan(c.estimate), c
            assert DEPTHS[0] <= c.low < c.high <= DEPTHS[-1] and c.high / c.low == 2.0, c  # adjacent cells
    assert len(significant) > 0.5 * len(crossings), f"{len(significant)} of {len(crossings)} significant"
    assert_coverage([c.low <= math.exp(2.5) <= c.high for c in significant], "significant cell crossing")


def test_a_curve_that_approaches_zero_has_no_significant_crossing():
    """Negative everywhere and approaching 0 (a deep-minus-shallow pruning drop): at most the one-sided 2.5 %."""
    crossings = [cell_crossing(AXIS, y) for y in _noisy(np.random.default_rng(7), lambda x: -0.05 / x, 0.01, 400)]
    assert_rate_at_most([c.state is SignChange.CROSSING for c in crossings],
                        "significant crossing of a curve that never crosses", 0.025)


def test_a_sign_change_that_is_not_significant_gets_no_point_estimate():
    y = np.array([-0.5, 0.3, 0.0, -0.4, 0.2, 0.1, 0.3, -0.2, 0.05, 0.5, -0.3, 0.1])  # means -0.07, -0.03, 0.05, 0.1
    crossing = cell_crossing(AXIS, y)
    assert math.isnan(crossing.estimate) and (crossing.low, crossing.high) == (8.0, 16.0), crossing
    assert describe_crossing(crossing, "depth") == ("sign change not significant (the cell means change sign "
                                                    "between depth = 8 and 16)")


def test_one_model_per_cell_leaves_a_sign_change_untested_and_one_sign_has_no_crossing():
    crossing = cell_crossing(DEPTHS, [-0.2, -0.1, 0.13, 0.2])
    assert math.isnan(crossing.estimate) and crossing.state is SignChange.UNTESTED, crossing
    y = 1.0 + 0.2 * np.log(AXIS) + 0.01 * np.random.default_rng(3).standard_normal(AXIS.size)
    crossing = cell_crossing(AXIS, y)
    assert math.isnan(crossing.estimate) and describe_crossing(crossing, "depth").startswith("none in range"), crossing


# -- shares of blocks: the binomial floor ----------------------------------------------------------------------
SHARE_DESIGNS = {"atlas": DEPTHS, "old tests": np.array([4.0, 8.0, 16.0, 32.0, 64.0])}  # 3 seeds each


def _share_studies(share_at, seed: int, depths: np.ndarray, studies: int = LOOPED):
    """Depth studies of a share of the model's blocks (L blocks at depth L, 3 seeds), each block counted with
    probability ``share_at(L)``: axis ``(3k,)``, shares ``(studies, 3k)`` and blocks ``(3k,)``."""
    axis = np.repeat(depths, 3)  # (3k,)
    blocks = axis.astype(int)
    counts = np.random.default_rng(seed).binomial(blocks, np.repeat(share_at(depths), 3), (studies, axis.size))
    return axis, counts / blocks, blocks


def _share_target(share_at, depths: np.ndarray) -> float:
    """The estimand: the least-squares slope of the true cell shares on log depth."""
    return float(cell_means_slope(np.log(depths), share_at(depths)[None, :])[0][0])


def _falling(depth):
    return 0.9 - 0.2 * np.log2(depth / 4)  # 0.9 at L = 4 to 0.1 at L = 64


def _nearly_all(depth):
    return 0.999 - 0.0005 * np.log2(depth / 4)  # almost every block counted: most cells agree on every seed


@pytest.mark.parametrize("design", SHARE_DESIGNS)
@pytest.mark.parametrize("share_at, name", [(_falling, "falling share"), (_nearly_all, "share near 1")])
def test_the_slope_of_a_share_covers_and_is_never_of_zero_width(share_at, name, design):
    """(i) The cell-means slope of a share floors each cell mean's variance at its blocks' binomial variance: it
    covers the true slope, also where the seeds of most cells count every block."""
    depths = SHARE_DESIGNS[design]
    target = _share_target(share_at, depths)
    axis, shares, blocks = _share_studies(share_at, 10, depths)
    slopes = [fit_trend(axis, y, blocks=blocks).slope for y in shares]
    widths = np.array([s.high - s.low for s in slopes])
    assert widths.min() > 0, f"{name}, {design}: {int((widths <= 0).sum())} intervals of zero width"
    assert_coverage([s.low <= target <= s.high for s in slopes], f"slope of a {name}, {design} design")


@pytest.mark.parametrize("design", SHARE_DESIGNS)
def test_negative_control_the_slope_of_a_share_without_its_blocks_undercovers_near_1(design):
    depths = SHARE_DESIGNS[design]
    target = _share_target(_nearly_all, depths)
    axis, shares, _ = _share_studies(_nearly_all, 10, depths)
    slopes = [fit_trend(axis, y).slope for y in shares]
    with pytest.raises(AssertionError, match="coverage"):
        assert_coverage([s.low <= target <= s.high for s in slopes], "slope of a share, no floor")


def test_seeds_that_agree_on_a_line_of_shares_leave_an_interval_of_nonzero_width():
    """Every seed counts 4/4, 7/8, 12/16, 20/32 blocks: cell means exactly on a line in log depth. The line's
    residual scatter is 0; the blocks' binomial variance (Agresti-Coull's share, pooled over the cell's
    seeds) is not: the interval's half-width is t(2) times the floor's standard error."""
    means = np.array([4 / 4, 7 / 8, 12 / 16, 20 / 32])  # (4,)
    shares = np.repeat(means, 3)  # (12,)
    floored, plain = fit_trend(AXIS, shares, blocks=AXIS), fit_trend(AXIS, shares)
    blocks = 3 * DEPTHS  # (4,) blocks per cell
    share = (means * blocks + 2) / (blocks + 4)  # (4,)
    weights = CENTRED / (CENTRED @ CENTRED)  # (4,)
    se = math.sqrt(float(weights**2 @ (share * (1 - share) / blocks)))
    assert floored.slope.se == pytest.approx(se, rel=1e-12), (floored.slope, se)
    assert floored.slope.high - floored.slope.estimate == pytest.approx(T_QUANTILE * se, rel=1e-12)
    assert floored.p_value == pytest.approx(2 * stats.t.sf(abs(floored.slope.estimate) / se, 2), rel=1e-9)
    assert plain.slope.high - plain.slope.low < 1e-12 and plain.p_value < 1e-12, plain  # 0 up to rounding


# -- a statistic diluted as 1/L --------------------------------------------------------------------------------
def _diluted(seed: int):
    """A constant total of 2.0 shared equally over L blocks: per-block means 2/L and totals 2 (noise 5 %)."""
    total = 2.0 * (1 + 0.05 * np.random.default_rng(seed).standard_normal((LOOPED, AXIS.size)))  # (studies, 12)
    return total / AXIS, total


def test_a_total_over_the_blocks_does_not_fall_under_the_dilution_null():
    """(j) "Falls with depth" judged on the total: a false "holds" at most at the test's one-sided 2.5 %."""
    _, totals = _diluted(4)
    holds = [direction_verdict(fit_trend(AXIS, total), -1) is Verdict.HOLDS for total in totals]
    assert_rate_at_most(holds, "total, dilution null", 0.025)


def test_negative_control_a_per_block_mean_falls_under_the_dilution_null():
    means, _ = _diluted(4)
    holds = [direction_verdict(fit_trend(AXIS, mean), -1) is Verdict.HOLDS for mean in means[:100]]
    with pytest.raises(AssertionError, match="error rate|rate"):
        assert_rate_at_most(holds, "per-block mean, dilution null", 0.025)
    assert np.mean(holds) > 0.5, np.mean(holds)  # 0.93: the line through 2/L falls significantly


# -- known faults of cell_crossing (simulate/claims/trends.py: ``accepted |= np.isclose(centre, 0.0)``) -----------
def test_one_model_per_cell_is_untested_also_where_the_zero_falls_on_the_grid():
    crossing = cell_crossing(DEPTHS, [-0.2, -0.1, 0.1, 0.2])
    assert math.isnan(crossing.estimate) and crossing.state is SignChange.UNTESTED, crossing


def test_a_crossing_does_not_depend_on_the_statistic_s_units():
    y = _kinked(AXIS) + 0.05 * np.random.default_rng(0).standard_normal(AXIS.size)
    crossing = cell_crossing(AXIS, y)
    assert crossing.state is SignChange.CROSSING, crossing
    scaled = cell_crossing(AXIS, 1e-9 * y)
    assert scaled.state is crossing.state and scaled.estimate == pytest.approx(crossing.estimate, rel=1e-9), scaled
