"""Laws across depth (simulate.claims.depth_laws): the fit, its prediction interval's coverage on the atlas's
design with cell effects, and the negative control that ignores the cells."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from simulate.claims.depth_laws import MIN_LAW_DEPTHS, fit_depth_law, law_regressor

DEPTHS = np.array([4.0, 8.0, 16.0, 32.0])  # the atlas's design: four depths, three seeds
SEEDS = 3
TARGET = 64.0
STUDIES = 1000
SLOPE = 1.4


def assert_coverage(hits: int, trials: int, nominal: float, label: str) -> None:
    """Coverage at least nominal within 3 Monte-Carlo standard errors (the binomial's), named on failure."""
    rate = hits / trials
    se = math.sqrt(nominal * (1 - nominal) / trials)
    assert rate >= nominal - 3 * se, f"{label}: coverage {rate:.4f} < {nominal} - 3 x {se:.4f} ({trials} studies)"


def _study(rng, law: str, cell_sd: float):
    """One synthetic depth study of the law with a cell effect of sd ``cell_sd`` (seeds' sd 1), and a new cell at
    the target depth: (depths per model, values, the new cell's effect)."""
    f = law_regressor(law, DEPTHS)
    cells = 1.0 + SLOPE * f + rng.normal(0.0, cell_sd, DEPTHS.size)  # (k,)
    values = cells[:, None] + rng.normal(0.0, 1.0, (DEPTHS.size, SEEDS))  # (k, S)
    return np.repeat(DEPTHS, SEEDS), values.ravel(), rng.normal(0.0, cell_sd)


@pytest.mark.parametrize("law", ["power", "exponential in L"])
@pytest.mark.parametrize("cell_sd", [0.0, 2.0])
def test_prediction_interval_covers_a_new_cell_with_cell_effects(law, cell_sd):
    rng = np.random.default_rng(7)
    hits = {1: 0, SEEDS: 0}
    slope_hits = 0
    for _ in range(STUDIES):
        depths, values, new_effect = _study(rng, law, cell_sd)
        fit = fit_depth_law(depths, values, law)
        slope_hits += fit.slope.low <= SLOPE <= fit.slope.high
        truth = 1.0 + SLOPE * float(law_regressor(law, [TARGET])[0]) + new_effect
        for models in hits:
            new = truth + rng.normal(0.0, 1.0, models).mean()
            interval = fit.predict(TARGET, models)
            hits[models] += interval.low <= new <= interval.high
    for models, count in hits.items():
        assert_coverage(count, STUDIES, 0.95, f"{law}, cell sd {cell_sd}, prediction of {models} model(s)")
    assert_coverage(slope_hits, STUDIES, 0.95, f"{law}, cell sd {cell_sd}, slope")


def test_negative_control_a_line_through_every_model_undercovers_with_cell_effects():
    """The seeds taken as replicates of the law (a line through the 12 models, n - 2 dof) misses a new cell."""
    rng = np.random.default_rng(8)
    hits = 0
    for _ in range(STUDIES):
        depths, values, new_effect = _study(rng, "power", 2.0)
        x = np.log(depths)
        design = np.stack([np.ones_like(x), x], axis=1)  # (n, 2)
        coef, *_ = np.linalg.lstsq(design, values, rcond=None)
        residual = values - design @ coef  # (n,)
        s2 = float(residual @ residual) / (x.size - 2)
        x0 = np.array([1.0, math.log(TARGET)])
        half = stats.t.ppf(0.975, x.size - 2) * math.sqrt(s2 * (1 + x0 @ np.linalg.inv(design.T @ design) @ x0))
        truth = 1.0 + SLOPE * math.log(TARGET) + new_effect + rng.normal(0.0, 1.0)
        hits += abs(truth - x0 @ coef) <= half
    assert hits / STUDIES < 0.85, f"the model-level line covers {hits / STUDIES:.3f}: the control does not fail"


def test_fit_recovers_an_exact_law_and_its_value():
    depths = np.repeat([4.0, 8.0, 16.0], 2)
    values = 0.5 + 0.1 * depths + np.tile([-0.01, 0.01], 3)
    fit = fit_depth_law(depths, values, "exponential in L")
    assert fit.slope.estimate == pytest.approx(0.1, rel=1e-12)
    assert fit.value(64) == pytest.approx(0.5 + 6.4, rel=1e-12)
    assert fit.residual_var == pytest.approx(0.0, abs=1e-24)
    assert fit.within_var == pytest.approx(2e-4, rel=1e-9)  # each cell: 2 x 0.01^2 on 1 dof, pooled over 3
    interval = fit.predict(64, models=1)  # no cell scatter: only the seeds' spread remains
    half = stats.t.ppf(0.975, 1) * math.sqrt(fit.within_var * (1 - 1 / 2))
    assert interval.high - interval.estimate == pytest.approx(half, rel=1e-9)


def test_two_depths_give_a_slope_without_an_interval_and_one_gives_nothing():
    fit = fit_depth_law([4.0, 4.0, 8.0, 8.0], [1.0, 1.2, 2.0, 2.2], "power")
    assert fit.cells == 2 < MIN_LAW_DEPTHS and not fit.slope.bounded and not fit.predict(64).bounded
    assert fit_depth_law([4.0, 4.0], [1.0, 1.1], "power") is None


def test_unknown_law_names_the_allowed_ones():
    with pytest.raises(ValueError, match="law='cubic' is not allowed: one of power, exponential"):
        law_regressor("cubic", [4.0])
