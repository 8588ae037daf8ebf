"""A report's verdicts calibrated on its own design (simulate.claims.calibration.calibrate): on the atlas's design
(depths 4, 8, 16, 32; 3 seeds, or 2) the null scenarios (heavy tails of cells and seeds, a rate step correlated
with depth) keep the false-verdict rate per trend and per family at most nominal, the old rules (the endpoint
rule, one slope across a rate's step: the negative controls) do not, the papers' effect is detected at the
analytic noncentral-t power of the design and its size is rejected at most at the nominal rate, a share's
binomial floor is in the drawn studies, and the table is the same for the same seed.

Tolerances: Monte-Carlo standard errors of the calibration's own studies (a rate at most ``nominal + 3 se``,
a power within ``3 se`` of its analytic value, ``se`` binomial at the target); failing assertions print the
statistic, the target and the trials.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulate.claims.calibration import CALIBRATION_COLUMNS, SCENARIOS, _draw, calibrate
from simulate.claims.definitions import CLAIMS
from simulate.claims.judgement import NO_INTERVAL, Inference, TrendDesign, TrendJudgement
from simulate.claims.judgement import detectable_slope
from simulate.claims.trends import cell_means_slope
from theory.verdicts import Verdict

DEPTHS = (4.0, 8.0, 16.0, 32.0)  # the atlas's depth design
CENTRED = np.log(DEPTHS) - np.log(DEPTHS).mean()  # (4,)
SXX = float(CENTRED @ CENTRED)
ALPHA = 0.05
STUDIES = 2000  # binomial se 0.0049 at 0.05
NULLS = ("no trend", "heavy-tailed cells, no trend", "heavy-tailed seeds, no trend", "rate step, no trend")


def _design(ratio: float, seeds: int = 3, seed_var: float = 1.0, x=DEPTHS) -> TrendDesign:
    """A design whose cell effect is ``ratio`` times the seeds' spread: the cell means' residual variance is the
    cell effect's plus a mean of ``seeds`` seeds'."""
    return TrendDesign(tuple(x), (seeds,) * len(x), seed_var, ratio**2 * seed_var + seed_var / seeds)


def _trend(claim_id: str, design: TrendDesign, line: str = "tuned") -> TrendJudgement:
    """A full-length trend along depth of the report's family, as judge_trends makes it (its numbers unused)."""
    claim = CLAIMS[claim_id]
    return TrendJudgement(claim, claim.statistic, "depth", {}, line, sum(design.counts), 0, 0, len(design.x),
                          NO_INTERVAL, math.nan, math.nan, math.nan, claim.direction("depth"), Verdict.INCONCLUSIVE,
                          design=design, in_family=True)


def _rates(table: pd.DataFrame, scenario: str) -> pd.Series:
    rows = table[table["scenario"] == scenario]
    return rows.set_index("claim")["rate"]


def assert_rate_at_most(rate: float, trials: int, label: str, level: float = ALPHA, limit: float = 3.0) -> None:
    se = math.sqrt(level * (1 - level) / trials)
    assert rate <= level + limit * se, f"{label}: rate {rate:.4f} > nominal {level} + {limit} x {se:.4f} ({trials} trials)"
    print(f"{label}: rate {rate:.4f} (nominal {level}, {trials} trials)")


def assert_rate_near(rate: float, target: float, trials: int, label: str, limit: float = 3.0) -> None:
    se = math.sqrt(target * (1 - target) / trials)
    assert abs(rate - target) <= limit * se, (f"{label}: rate {rate:.4f} against target {target:.4f} +- {limit} x "
                                              f"{se:.4f} ({trials} trials)")
    print(f"{label}: rate {rate:.4f} (target {target:.4f}, {trials} trials)")


@pytest.mark.parametrize("ratio, seeds", [(0.0, 3), (1.0, 3), (2.0, 3), (4.0, 3), (2.0, 2)])
def test_a_trend_alone_keeps_its_null_rates_at_nominal(ratio, seeds):
    """A family of one (no adjustment): every null (heavy tails, a rate step) gives a false direction verdict in at
    most 5 % of the studies; the table says the design's cell-to-seed ratio."""
    table = calibrate([_trend("p2-depth-jac", _design(ratio, seeds))], Inference(), studies=STUDIES, seed=1)
    trend = table[table["claim"] == "p2-depth-jac"]
    assert trend["cell_to_seed"].to_numpy() == pytest.approx(ratio, abs=1e-12)
    assert (trend["seeds"] == seeds).all() and (trend["cells"] == 4).all() and (trend["studies"] == STUDIES).all()
    for scenario in NULLS:
        rate = _rates(table, scenario)
        assert rate["p2-depth-jac"] == rate["family"]  # a family of one
        assert_rate_at_most(rate["p2-depth-jac"], STUDIES, f"{scenario}, ratio {ratio:g}, {seeds} seeds")


FAMILY = {"p2-depth-jac": _design(0.0), "p2-depth-causal": _design(1.0), "p1-lns-loss": _design(2.0, 2),
          "p2-depth-var-last": _design(2.0), "p1-thm-3.3-prune": _design(4.0), "p2-depth-permutation": _design(1.0, 2)}


def test_a_family_keeps_its_family_wise_error_at_nominal():
    """Six trends of different designs, Bonferroni's adjustment (and Holm's): per trend and for the family (any
    false verdict) at most 5 % under every null scenario."""
    table = calibrate([_trend(c, d) for c, d in FAMILY.items()], Inference(), studies=STUDIES, seed=2)
    holm = calibrate([_trend(c, d) for c, d in FAMILY.items()], Inference(multiplicity="holm"), studies=500, seed=2)
    assert_rate_at_most(_rates(holm, "no trend")["family"], 500, "Holm, family")
    for scenario in NULLS:
        rates = _rates(table, scenario)
        assert set(rates.index) == {*FAMILY, "family"}
        for claim, rate in rates.items():
            assert_rate_at_most(rate, STUDIES, f"{scenario}, {claim}")
        assert rates["family"] >= rates.drop("family").max()  # any of them
    assert table.loc[table["claim"] == "family", "statistic"].eq(f"any of {len(FAMILY)}").all()


def test_negative_control_the_endpoint_rule_fails_at_a_cell_to_seed_ratio_of_2():
    """The old rule on the same null studies: above nominal per trend (alone, and in the family after Holm) and for
    the family."""
    alone = calibrate([_trend("p2-depth-jac", _design(2.0))], Inference(), studies=STUDIES, seed=3)
    rate = _rates(alone, "endpoint rule (old), no trend")["p2-depth-jac"]
    with pytest.raises(AssertionError, match="endpoint"):
        assert_rate_at_most(rate, STUDIES, "endpoint rule alone, ratio 2")
    assert rate > 0.25, f"endpoint rule alone, ratio 2: rate {rate:.4f} <= 0.25 ({STUDIES} trials)"
    family = calibrate([_trend(c, d) for c, d in FAMILY.items()], Inference(), studies=STUDIES, seed=3)
    rates = _rates(family, "endpoint rule (old), no trend")
    for claim in ("p2-depth-var-last", "family"):  # the ratio-2 member, and the whole family
        with pytest.raises(AssertionError, match="endpoint"):
            assert_rate_at_most(rates[claim], STUDIES, f"endpoint rule, {claim}")
    print(f"endpoint rule: alone {rate:.4f}; in the family {rates['p2-depth-var-last']:.4f}, "
          f"family {rates['family']:.4f} ({STUDIES} trials)")


@pytest.mark.parametrize("claim_id, noncentrality", [("p2-depth-var-last", 4.0), ("p2-depth-var-last", 6.0),
                                                     ("p1-lns-loss", 5.0)])
def test_the_papers_effect_is_detected_at_the_analytic_power(claim_id, noncentrality):
    """A family of one (Holm changes nothing): at the papers' slope the verdict is reached at the power of a
    two-sided t test on 2 dof with noncentrality ``reference / se`` (scipy's noncentral t, finite here)."""
    reference = CLAIMS[claim_id].reference_trend("depth")
    residual_var = SXX * (reference / noncentrality) ** 2  # the slope's se is reference / noncentrality
    seed_var = residual_var  # the seeds' part of it a third, the cell effect's two thirds
    design = TrendDesign(DEPTHS, (3,) * 4, seed_var, residual_var)
    table = calibrate([_trend(claim_id, design)], Inference(), studies=STUDIES, seed=4)
    row = table[(table["scenario"] == "papers' effect")].set_index("claim").loc[claim_id]
    critical = stats.t.ppf(1 - ALPHA / 2, 2)
    power = float(stats.nct.sf(critical, 2, noncentrality) + stats.nct.cdf(-critical, 2, noncentrality))
    assert math.isfinite(power), power
    assert_rate_near(row["rate"], power, STUDIES, f"power at the papers' effect, {claim_id}, noncentrality "
                                                  f"{noncentrality:g}")
    se = math.sqrt(residual_var / SXX)
    assert row["detectable"] == pytest.approx(detectable_slope(se, 2, ALPHA), rel=1e-12)
    assert row["reference"] == reference


def test_the_detectable_column_is_at_holm_s_first_step_and_only_claims_with_a_reference_show_power():
    trends = [_trend(c, d) for c, d in FAMILY.items()]
    table = calibrate(trends, Inference(), studies=200, seed=5)
    assert list(table.columns) == list(CALIBRATION_COLUMNS)
    assert list(dict.fromkeys(table["scenario"])) == list(SCENARIOS)
    power = table[table["scenario"] == "papers' effect"]
    assert set(power["claim"]) == {"p1-lns-loss", "p2-depth-var-last"}  # the claims the papers give a slope (here)
    null = table[table["scenario"] == "no trend"].set_index("claim")
    for claim, design in FAMILY.items():
        se = math.sqrt(design.residual_var / SXX)
        assert null.loc[claim, "detectable"] == pytest.approx(detectable_slope(se, 2, ALPHA / len(FAMILY)), rel=1e-12)
        rate = null.loc[claim, "rate"]
        assert null.loc[claim, "rate_se"] == pytest.approx(math.sqrt(rate * (1 - rate) / 200), rel=1e-12, abs=1e-15)
    assert math.isnan(null.loc["p2-depth-jac", "reference"])
    assert null.loc["p1-lns-loss", "reference"] == CLAIMS["p1-lns-loss"].reference_trend("depth")
    alone = calibrate([_trend("p2-depth-jac", _design(1.0))], Inference(), studies=50)
    assert "papers' effect" not in set(alone["scenario"])  # nobody to show it for


def test_a_cell_scatter_below_the_seeds_gives_no_cell_effect():
    """s^2 below w^2 mean(1/n) (possible with 2 residual dof): the cell effect is floored at 0, not negative."""
    design = TrendDesign(DEPTHS, (3,) * 4, 1.0, 0.2)  # 0.2 < 1/3
    table = calibrate([_trend("p2-depth-jac", design)], Inference(), studies=50)
    assert (table.loc[table["claim"] == "p2-depth-jac", "cell_to_seed"] == 0.0).all()


def test_the_table_is_the_same_for_the_same_seed():
    trends = [_trend(c, d) for c, d in list(FAMILY.items())[:3]]
    first, again = (calibrate(trends, Inference(), studies=300, seed=7) for _ in range(2))
    pd.testing.assert_frame_equal(first, again)  # bit for bit
    other = calibrate(trends, Inference(), studies=300, seed=8)
    assert not first["rate"].equals(other["rate"]), "another seed draws other studies"


def test_the_rate_step_moves_the_cells_after_the_design_s_own_rate_change():
    """The step falls where the line's rate changed (LNS's tuned line: 3e-3 at L = 2, 4, then 1e-2), and at the
    middle of the axis where the line kept one rate; no seed or cell noise: the cells are the step itself."""
    x = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
    changed = TrendDesign(x, (2,) * 6, 1.0, 1.0, rates=((0.003,),) * 2 + ((0.01,),) * 4)
    one_rate = TrendDesign(x, (2,) * 6, 1.0, 1.0)
    for design, first_after in ((changed, 2), (one_rate, 3)):
        quiet = design._replace(within_var=0.0, residual_var=0.0)
        means = np.stack([c.mean(axis=1) for c in _draw(np.random.default_rng(0), quiet, "rate step, no trend", 0.0,
                                                         1)], axis=1)[0]  # (6,)
        assert np.all(means[:first_after] == 0.0) and np.all(means[first_after:] == means[-1]), means


def test_negative_control_one_slope_across_the_rate_s_step_fails():
    """LNS's tuned design: a step where its rate changed and no depth effect. Holding each rate's level apart keeps
    the false verdicts at nominal; one slope across the switch (the old rule) calls the step a trend."""
    design = TrendDesign((2.0, 4.0, 8.0, 16.0, 32.0, 64.0), (2,) * 6, 1.0, 1.5,
                         rates=((0.003,),) * 2 + ((0.01,),) * 4)
    table = calibrate([_trend("p2-depth-jac", design)], Inference(), studies=STUDIES, seed=9)
    assert_rate_at_most(_rates(table, "rate step, no trend")["p2-depth-jac"], STUDIES, "rate step, rate in the model")
    ignored = _rates(table, "rate step, rate ignored (old)")["p2-depth-jac"]
    with pytest.raises(AssertionError, match="ignored"):
        assert_rate_at_most(ignored, STUDIES, "rate step, rate ignored")
    assert (table.loc[table["claim"] == "p2-depth-jac", "rates"] == 2).all()


@pytest.mark.parametrize("members", [1, 6])
def test_the_papers_size_is_rejected_at_most_at_the_nominal_rate_where_it_is_true(members):
    """Drawn at the papers' slope, the interval the verdict reads (simultaneous over the family) rejects the papers'
    size in at most 5 % of studies; drawn at 0 with a precise design, it rejects it (the power to say smaller)."""
    reference = CLAIMS["p1-lns-loss"].reference_trend("depth")
    precise = TrendDesign(DEPTHS, (3,) * 4, 1e-6, 1e-6)
    family = [_trend("p1-lns-loss", precise)] + [_trend("p2-depth-jac", _design(1.0))] * (members - 1)
    table = calibrate(family, Inference(), studies=STUDIES, seed=10)
    row = table[(table["scenario"] == "papers' effect") & (table["claim"] == "p1-lns-loss")].iloc[0]
    assert_rate_at_most(row["size_rate"], STUDIES, f"size rejected at the papers' slope {reference:.3g}, "
                                                   f"family of {members}")
    null = table[(table["scenario"] == "no trend") & (table["claim"] == "p1-lns-loss")].iloc[0]
    assert null["size_rate"] > 0.99, f"the papers' size rejected at a slope of 0: {null['size_rate']:.3f}"


def test_a_share_s_binomial_floor_is_in_the_drawn_studies():
    """Seeds that all count the same blocks (no seed noise, cells scattered below their blocks' binomial variance):
    with the floor the slope's error is the blocks', and the false verdicts fall below the unfloored rule's."""
    floor = (0.01,) * 4
    design = TrendDesign(DEPTHS, (2,) * 4, 0.0, 0.002, floor=floor)
    with_floor = _rates(calibrate([_trend("p2-depth-usefulness", design)], Inference(), studies=STUDIES, seed=11),
                        "no trend")["p2-depth-usefulness"]
    without = _rates(calibrate([_trend("p2-depth-usefulness", design._replace(floor=()))], Inference(),
                               studies=STUDIES, seed=11), "no trend")["p2-depth-usefulness"]
    assert_rate_at_most(with_floor, STUDIES, "share with its floor")
    assert with_floor < without, f"floor {with_floor:.4f} against none {without:.4f} ({STUDIES} trials)"
