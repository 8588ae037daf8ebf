"""Verdicts that answer the papers' claims (docs/studies.md#verdicts): the size question beside the direction, the
interval printed beside a verdict is the one it reads, stability against declared margins, trends held apart from a
change of rate, pre-registered rows that could not have failed marked so, logs of unresolved drops said so.

Checked on rules (tables of cases, a property test of the family's interval) and on the shipped atlases' reports,
which are what a reader meets: every row there must obey the rules.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from simulate.claims.definitions import CLAIMS, MARGINS
from simulate.claims.judgement import Inference, Interval, size_verdict
from simulate.claims.trends import direction_verdict, fit_trend
from simulate.study.atlas import ATLAS_DIR, EARLY_ATLAS_DIR, atlas_studies
from simulate.study.judge.preregistration import chance_failures
from simulate.study.judge.rows import change_interval, verdict_interval
from simulate.study.judge.tables import read_study
from theory.verdicts import BlindTest, RateLine, Size, Stability, Verdict

ATLASES = {"atlas": ATLAS_DIR, "atlas-400-steps": EARLY_ATLAS_DIR}
LOSS = CLAIMS["p1-lns-loss"]


# -- the size question -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("interval, reference, at_least, word", [
    ((-0.05, -0.01), -0.031, False, Size.AS_LARGE),  # holds their value, excludes 0
    ((-0.02, -0.001), -0.031, False, Size.SMALLER),  # their direction, short of their value
    ((-0.007, 0.017), -0.031, False, Size.SMALLER_UNSIGNED),  # not different from 0 and smaller than theirs
    ((-0.09, -0.04), -0.031, False, Size.LARGER),
    ((0.002, 0.02), -0.031, False, Size.OPPOSITE),
    ((-0.05, 0.01), -0.031, False, Size.CANNOT_TELL),  # holds both 0 and their value
    ((1.2, 1.8), 1.0, True, Size.AS_LARGE),  # a bound reached
    ((0.3, 0.8), 1.0, True, Size.SMALLER),  # a bound missed
    ((0.8, 1.8), 1.0, True, Size.CANNOT_TELL),
])
def test_the_size_question_reads_the_interval_against_the_papers_value(interval, reference, at_least, word):
    low, high = interval
    assert size_verdict(Interval((low + high) / 2, low, high, 0.95), reference, at_least) is word


def test_a_claim_without_a_size_says_so_and_p1_s_loss_gain_names_what_moved():
    assert size_verdict(Interval(0.1, 0.0, 0.2, 0.95), None) is Size.NO_SIZE
    assert CLAIMS["p1-lns-angular"].reference is None
    assert LOSS.reference.confounded == "depth and width moved together"
    # the same change read along either axis: per e-fold of depth (12 -> 24 layers) or of width (768 -> 2048)
    assert LOSS.reference_trend("depth") * math.log(2) == pytest.approx(LOSS.reference_trend("width")
                                                                          * math.log(2048 / 768))
    assert CLAIMS["p2-depth-usefulness"].reference_trend("width") is None  # P2's Table 1 moved depth alone


# -- the interval a verdict reads --------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(p=st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=20), method=st.sampled_from(["bonferroni", "holm", "bh"]),
       dof=st.integers(1, 6))
def test_the_family_s_interval_excludes_0_exactly_where_the_adjusted_p_is_below_alpha(p, method, dof):
    """Each member's slope is built to have its p on ``dof`` degrees of freedom; its interval at the family's level
    (:meth:`Inference.family_interval`) excludes 0 exactly where its adjusted p is below alpha."""
    inference = Inference(multiplicity=method)
    adjusted = inference.adjust(p)
    for raw, adj in zip(p, adjusted):
        if abs(adj - inference.alpha) < 1e-9 or abs(raw * len(p) - inference.alpha) < 1e-9:
            continue  # on the boundary itself: either answer is right
        t = stats.t.isf(raw / 2, dof)  # |slope| / se of a two-sided p
        slope = Interval.from_t(t, 1.0, dof, inference.confidence)
        interval = inference.family_interval(slope, raw, adj, len(p))
        excludes = interval.low > 0 or interval.high < 0
        assert excludes == (adj < inference.alpha), (raw, adj, interval, method)


@pytest.mark.parametrize("atlas", ATLASES)
def test_no_page_prints_an_interval_that_contradicts_the_verdict_beside_it(atlas):
    """Every shipped trend and level: a direction verdict (holds / violated) exactly where the interval it prints
    excludes 0; a trend in the family prints the simultaneous interval, named by its level, and only a trend with
    a slope to test is in the family."""
    folder = ATLASES[atlas]
    for name, study in atlas_studies(folder).items():
        results = read_study(folder, name)
        for table in (results.trends, results.levels):
            judged = table[table["verdict"].isin([Verdict.HOLDS, Verdict.VIOLATED, Verdict.INCONCLUSIVE,
                                                  Verdict.UNRESOLVABLE])]
            growth = judged["claim"].map(lambda c: CLAIMS[c].growth is not None)
            for _, row in judged[~growth].iterrows():
                interval = verdict_interval(row)
                if not interval.bounded:
                    continue
                excludes = interval.low > 0 or interval.high < 0
                called = row["verdict"] in (Verdict.HOLDS, Verdict.VIOLATED)
                assert excludes == called, (f"{atlas}/{name} {row['claim']}: {row['verdict']} beside "
                                            f"{interval.format()} ({interval.confidence})")
        family = results.trends[results.trends["in_family"].astype(bool)]
        assert family["p_value"].notna().all(), f"{atlas}/{name}: a trend with no slope to test (confounded with " \
                                                "the rate) counted in the family"
        members = len(family)
        if members:
            expected = 1 - (1 - study.inference.confidence) / members  # Bonferroni, the default
            assert np.allclose(family["family_confidence"], expected), (atlas, name)


def test_the_readme_s_first_headline_answer_says_what_the_atlas_says_of_p1_s_size():
    readme = (ATLAS_DIR / "README.md").read_text()
    first = readme.split("### 1.")[1].split("### 2.")[0]
    assert "Against the papers' size" in first
    tuned = [line for line in first.splitlines() if line.startswith("- line `tuned`")]
    assert tuned and f"{LOSS.reference_trend('depth'):.3g}" in tuned[0], tuned
    assert "depth and width moved together" in tuned[0]
    results = read_study(ATLAS_DIR, "depth")
    row = results.trends[(results.trends["claim"] == "p1-lns-loss") & (results.trends["line"] == RateLine.TUNED)
                         & (results.trends["steps"] == results.trends["steps"].max())].iloc[0]
    assert str(row["size"]) in tuned[0]


# -- stability against declared margins --------------------------------------------------------------------------
@pytest.mark.parametrize("atlas", ATLASES)
def test_every_stability_word_reads_the_claim_s_declared_margin(atlas):
    """No "stable" rests on a margin taken from the estimate: each row's margin is its statistic's declared one, and
    its word is the two one-sided tests' on its change's interval."""
    folder = ATLASES[atlas]
    for name in atlas_studies(folder):
        results = read_study(folder, name)
        for kind, table in (("level", results.levels), ("trend", results.trends)):
            rows = table[table["stability"].notna()]
            for _, row in rows.iterrows():
                declared = getattr(MARGINS[row["statistic"]], kind)
                assert row["margin"] == pytest.approx(declared), (atlas, name, row["claim"], row["margin"], declared)
                change = change_interval(row)
                inside = -declared < change.low and change.high < declared
                beyond = change.low > declared or change.high < -declared
                word = Stability.STABLE if inside else Stability.MOVES if beyond else Stability.CANNOT_TELL
                assert row["stability"] is word, (atlas, name, row["claim"], change.format(), declared)


# -- trends across a change of rate --------------------------------------------------------------------------------
def test_a_trend_across_a_change_of_rate_is_fitted_within_runs_of_one_rate():
    x = np.repeat([2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 2)
    step = np.where(x >= 8, 3.0, 0.0)  # the rate changed between 4 and 8 and moved every later cell
    y = 0.5 * np.log(x) + step + np.tile([-0.01, 0.01], 6)
    rates = np.where(x >= 8, 0.01, 0.003)
    within = fit_trend(x, y, rates=list(rates))
    across = fit_trend(x, y)
    assert within.slope.estimate == pytest.approx(0.5, abs=1e-9) and within.dof == 3 and len(set(within.rates)) == 2
    assert across.slope.estimate > 1.0  # one slope across the switch takes the step for depth
    confounded = fit_trend(x[:6], y[:6], rates=list(rates[:6]))  # 3 cells, 2 rates: no degree of freedom left
    assert direction_verdict(confounded, +1) is Verdict.CONFOUNDED
    with pytest.raises(ValueError, match="mixes rates"):
        fit_trend(x, y, rates=[0.003, 0.01] * 6)


# -- the pre-registration record -----------------------------------------------------------------------------------
def test_every_shipped_pass_that_could_not_have_failed_is_marked_uninformative():
    blind_tests = {study: read_study(ATLAS_DIR, study).blind_tests for study in ("depth", "width")}
    assert [j.name for j in blind_tests["depth"]] == ["prediction-L64"], blind_tests  # each file with its study
    assert [j.name for j in blind_tests["width"]] == ["prediction-d128"], blind_tests
    (rows,) = [j.rows for j in blind_tests["depth"]]
    passed = rows[rows["blind_test"].isin([BlindTest.PASSES, BlindTest.PASSES_UNINFORMATIVE])]
    assert len(passed) > 0
    for _, row in passed.iterrows():
        could_not_fail = any(row["low"] <= v <= row["high"] for v in (row["nearest_fitted"], row["rival"]))
        assert (row["blind_test"] == BlindTest.PASSES_UNINFORMATIVE) == could_not_fail, row.to_dict()
    readme = (ATLAS_DIR / "README.md").read_text()
    assert "pass informatively" in readme and "pass uninformatively" in readme


def test_chance_failures_of_independent_rows_is_the_binomial_and_shared_rows_spread_wider():
    """Rows on different models fail independently: the simulated mean is sum(1 - confidence) and the 95th
    percentile the binomial's; the same rows all on one model share a draw, and their count spreads wider."""
    n = 40
    independent = pd.DataFrame({"depth": range(n), "steps": 4000, "statistic": "var_last", "scheme": "pre",
                                "judged_on": "seed 0", "confidence": 0.95, "blind_test": BlindTest.PASSES})
    expected, high, observed = chance_failures(independent, draws=20000)
    assert observed == 0
    assert expected == pytest.approx(0.05 * n, abs=4 * math.sqrt(0.05 * 0.95 * n / 20000))
    assert high == stats.binom.ppf(0.95, n, 0.05)
    shared = independent.assign(depth=64)  # every row judged on one model
    _, high_shared, _ = chance_failures(shared, draws=20000)
    assert high_shared > high


def test_a_log_of_a_pruning_drop_within_its_evaluation_error_is_said_to_be_unresolved():
    """LNS's deep-half pruning drop at L = 64 is a few ten-thousandths of a nat: the judged rows of its log ratio
    say where that drop lies within its evaluation error."""
    rows = pd.read_csv(ATLAS_DIR / "prediction-L64-judged.csv", keep_default_na=False, na_values=[""])
    notes = rows.loc[(rows["statistic"] == "prune_log_ratio") & (rows["scheme"] == "lns") & (rows["depth"] == 64),
                     "note"].fillna("")
    assert notes.str.contains("not resolved").any(), notes.tolist()
    assert not rows.loc[rows["statistic"] == "var_last", "note"].fillna("").astype(bool).any()


def test_notebook_08_s_trend_table_prints_the_interval_each_verdict_reads():
    """What notebook 08 prints beside a verdict (paper_figs.atlas_tables.trend_table) is the interval the verdict
    reads, named where it is the family's simultaneous one, never the unadjusted one beside an adjusted verdict."""
    from paper_figs.atlas_tables import trend_table

    trends = read_study(ATLAS_DIR, "depth").trends
    shown = trend_table(trends)["slope per e-fold"]
    family = trends["in_family"].astype(bool)
    assert family.any()
    for (_, row), text in zip(trends.iterrows(), shown):
        assert verdict_interval(row).format() in text, (row["claim"], text)
        assert ("simultaneous" in text) == bool(row["in_family"]), (row["claim"], text)
