"""The statistics of a study's trends on synthetic data: interval coverage, verdicts, the zero crossing.

Coverage is checked by Monte Carlo over many synthetic studies with a known line: the share
of 95 % intervals holding the true value must be within 4 binomial standard errors of 0.95;
each check has a negative control (a biased estimate, or an interval too narrow) that must
fail the same test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulate.claims.trends import Crossing, describe_crossing, direction_verdict, fit_trend, zero_crossing

REPLICATES = 2000
AXIS = np.repeat([4.0, 8.0, 16.0, 32.0, 64.0], 3)  # five axis values, three seeds: the depth study's shape


def _coverage_z(hits: np.ndarray, target: float = 0.95) -> float:
    """z of the observed coverage against ``target`` (binomial standard error)."""
    share = hits.mean()
    return (share - target) / math.sqrt(target * (1 - target) / hits.size)


def assert_coverage(hits: np.ndarray, name: str, limit: float = 4.0) -> None:
    z = _coverage_z(hits)
    assert abs(z) <= limit, f"{name}: coverage {hits.mean():.4f} against 0.95 (z = {z:.2f}, n = {hits.size})"


def _replicates(slope: float, intercept: float, noise: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(REPLICATES):
        y = intercept + slope * np.log(AXIS) + noise * rng.standard_normal(AXIS.size)  # (n,)
        yield fit_trend(AXIS, y)


def test_the_slope_interval_covers_the_true_slope_95_percent_of_the_time():
    trends = list(_replicates(slope=-0.2, intercept=0.5, noise=0.1))
    assert_coverage(np.array([t.low <= -0.2 <= t.high for t in trends]), "slope interval")
    assert np.mean([t.slope for t in trends]) == pytest.approx(-0.2, abs=4 * 0.1 / math.sqrt(REPLICATES))


def test_negative_control_a_halved_interval_fails_the_coverage_check():
    trends = list(_replicates(slope=-0.2, intercept=0.5, noise=0.1))
    hits = np.array([abs(t.slope + 0.2) <= (t.high - t.low) / 4 for t in trends])
    with pytest.raises(AssertionError, match="coverage"):
        assert_coverage(hits, "halved interval")


def test_fieller_interval_covers_the_true_crossing():
    crossing = math.exp(2.5)  # 0.2 (log x - 2.5) = 0 at x = e^2.5 ~ 12.2, inside the axis
    hits = []
    for trend in _replicates(slope=0.2, intercept=-0.5, noise=0.1, seed=1):
        found = zero_crossing(trend, AXIS.min(), AXIS.max())
        hits.append(found.low <= crossing <= found.high)
    assert_coverage(np.array(hits), "Fieller interval")


def test_negative_control_the_crossing_of_a_shifted_line_is_not_covered():
    hits = []
    for trend in _replicates(slope=0.2, intercept=-0.5 + 0.15, noise=0.1, seed=1):  # the line moved up by 0.15
        found = zero_crossing(trend, AXIS.min(), AXIS.max())
        hits.append(found.low <= math.exp(2.5) <= found.high)
    with pytest.raises(AssertionError, match="coverage"):
        assert_coverage(np.array(hits), "shifted line")


@pytest.mark.parametrize("slope, direction, verdict", [
    (0.3, 1, "holds"), (0.3, -1, "violated"), (-0.3, -1, "holds"), (-0.3, 1, "violated"),
    (0.0, 1, "inconclusive"), (0.3, None, "no direction claimed")])
def test_direction_verdicts(slope, direction, verdict):
    rng = np.random.default_rng(2)
    y = slope * np.log(AXIS) + 0.02 * rng.standard_normal(AXIS.size)
    assert direction_verdict(fit_trend(AXIS, y), direction) == verdict


def test_a_crossing_outside_the_axis_is_none_in_range():
    y = 1.0 + 0.2 * np.log(AXIS) + 0.01 * np.random.default_rng(3).standard_normal(AXIS.size)
    found = zero_crossing(fit_trend(AXIS, y), AXIS.min(), AXIS.max())
    assert not found.in_range and found.estimate < AXIS.min()
    assert describe_crossing(found, "depth") == f"none in range (the line, extrapolated, crosses 0 at depth = " \
        f"{found.estimate:.3g})", "a zero of the line outside the axis is no crossing and gets no interval"


def test_crossing_bounds_beyond_the_axis_are_not_printed_as_numbers():
    y = -0.25 + 0.08 * np.log(AXIS) + 0.15 * np.random.default_rng(7).standard_normal(AXIS.size)
    found = zero_crossing(fit_trend(AXIS, y), AXIS.min(), AXIS.max())
    assert found.in_range and found.low > 0 and found.high > AXIS.max(), found
    text = describe_crossing(found, "depth")
    assert text.endswith(f", > {AXIS.max():.3g} (beyond the range)]") and f"{found.high:.3g}" not in text, text


def test_a_noisy_line_has_an_unbounded_crossing_interval():
    y = -0.25 + 0.08 * np.log(AXIS) + 0.1 * np.random.default_rng(6).standard_normal(AXIS.size)
    found = zero_crossing(fit_trend(AXIS, y), AXIS.min(), AXIS.max())
    assert found.in_range and found.high == math.inf and found.low == 0.0, found
    assert describe_crossing(found, "depth").endswith(", interval unbounded: slope not significant")


def test_too_few_models_give_no_trend():
    trend = fit_trend([4.0, 8.0], [0.1, 0.2])
    assert trend.n == 2 and math.isnan(trend.slope) and direction_verdict(trend, 1) == "inconclusive"
    assert zero_crossing(trend, 4.0, 8.0) == Crossing(math.nan, math.nan, math.nan, False, "no trend")
    assert math.isnan(fit_trend([4.0, 4.0, 4.0], [0.1, 0.2, 0.3]).slope)  # one axis value
