"""Laws across depth and width (simulate.claims.width_laws): the prediction interval's coverage at d = 128 on the
width study's design (L = 8, 16, 32 x d = 16, 32, 64, 3 seeds), by simulation under the law, with a misspecified
law and a negative control (a law without a width term where width matters)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulate.claims.width_laws import WIDTH_LAWS, fit_width_law, width_law_design

DEPTHS, WIDTHS, SEEDS = (8.0, 16.0, 32.0), (16.0, 32.0, 64.0), 3
CONFIDENCE = 0.95
STUDIES = 2000


def _coverage(law: str, truth, cell_sd: float, seed_sd: float, models: int, seed: int) -> tuple[float, float]:
    """``(coverage, width)``: the share of ``STUDIES`` synthetic studies whose ``law`` interval at (L, d = 128)
    holds the mean of ``models`` new models of that cell, each cell's true mean ``truth(L, d)``, one target depth
    per study in turn, and the intervals' median width."""
    rng = np.random.default_rng(seed)
    depth = np.repeat(DEPTHS, len(WIDTHS) * SEEDS)  # (27,)
    width = np.tile(np.repeat(WIDTHS, SEEDS), len(DEPTHS))  # (27,)
    cells = len(DEPTHS) * len(WIDTHS)
    hits, widths = 0, []
    for study in range(STUDIES):
        effect = np.repeat(rng.normal(0.0, cell_sd, cells), SEEDS)  # (27,): one effect per cell
        y = truth(depth, width) + effect + rng.normal(0.0, seed_sd, depth.size)
        target = DEPTHS[study % len(DEPTHS)]
        fit = fit_width_law(depth, width, y, law, CONFIDENCE)
        new = truth(target, 128.0) + rng.normal(0.0, cell_sd) + rng.normal(0.0, seed_sd, models).mean()
        interval = fit.predict(target, 128.0, models)
        hits += interval.low <= new <= interval.high
        widths.append(interval.high - interval.low)
    return hits / STUDIES, float(np.median(widths))


def _additive(depth, width):
    return 0.3 + 1.5 * np.log(depth) - 0.4 * np.log(width)


def _assert_coverage(name: str, coverage: float, low: float, high: float) -> None:
    se = math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / STUDIES)
    print(f"{name}: coverage {coverage:.4f}, target [{low}, {high}], MC se {se:.4f}, {STUDIES} studies")
    assert low - 4 * se <= coverage <= high + 4 * se, f"{name}: coverage {coverage:.4f} not in [{low}, {high}]"


@pytest.mark.parametrize("cell_sd", [0.0, 0.05, 0.2])
def test_the_additive_law_covers_a_new_cell_mean_at_its_level(cell_sd):
    # a mean of the study's three seeds: s^2 estimates what a new cell mean varies by, the interval is exact
    _assert_coverage(f"additive, mean of 3, cell sd {cell_sd}",
                     _coverage("additive", _additive, cell_sd, 0.1, 3, seed=11)[0], CONFIDENCE, CONFIDENCE)


@pytest.mark.parametrize("cell_sd", [0.0, 0.2])
def test_one_new_model_is_covered_at_least_at_the_level(cell_sd):
    # one model: the seeds' term is added from the pooled within variance; not exact, at least the level
    _assert_coverage(f"additive, one model, cell sd {cell_sd}",
                     _coverage("additive", _additive, cell_sd, 0.1, 1, seed=12)[0], CONFIDENCE, 1.0)


def test_the_interaction_law_covers_where_the_depth_exponent_moves_with_width():
    def truth(depth, width):
        return _additive(depth, width) + 0.3 * np.log(depth) * np.log(width / 32.0)

    coverage, width = _coverage("interaction", truth, 0.05, 0.1, 3, seed=13)
    _assert_coverage("interaction under interaction", coverage, CONFIDENCE, CONFIDENCE)
    # The additive law misfits the nine cells; their residual variance absorbs the misfit, so its intervals keep
    # most of their coverage by growing wide: the misspecification shows as a wide, uninformative prediction.
    additive, additive_width = _coverage("additive", truth, 0.05, 0.1, 3, seed=13)
    print(f"additive under interaction: coverage {additive:.4f}, median width {additive_width:.3f} against "
          f"the interaction law's {width:.3f}")
    assert additive_width > 1.4 * width, (additive_width, width)


def test_a_law_without_a_width_term_is_wide_where_width_matters():
    # the negative control: the null law (width does nothing) against a width effect of -0.4 per e-fold; as above
    # its residual variance absorbs the width effect, so its intervals are wide and miss more often
    coverage, width = _coverage("no width term", _additive, 0.05, 0.1, 3, seed=14)
    right, right_width = _coverage("additive", _additive, 0.05, 0.1, 3, seed=14)
    print(f"no width term under a width effect: coverage {coverage:.4f}, median width {width:.3f}; the additive "
          f"law's {right:.4f}, {right_width:.3f}")
    assert width > 2.5 * right_width and coverage < CONFIDENCE - 0.02, (coverage, width, right_width)


def test_every_law_has_its_design_and_refuses_an_unknown_one():
    for law in WIDTH_LAWS:
        assert width_law_design(law, [8.0], [16.0]).shape[0] == 1
    with pytest.raises(ValueError, match="law='cubic' is not allowed: one of additive, interaction"):
        width_law_design("cubic", [8.0], [16.0])


def test_one_width_cannot_fit_a_width_term():
    depth = np.repeat(DEPTHS, 3)
    y = np.log(depth)
    assert fit_width_law(depth, np.full(depth.size, 64.0), y, "additive", CONFIDENCE) is None
    law = fit_width_law(depth, np.full(depth.size, 64.0), y + np.tile([0.0, 0.01, -0.01], 3), "no width term",
                        CONFIDENCE)
    assert law is not None and law.dof == 1 and not law.width_term.bounded
