"""LNS minus Pre-LN at P1's sizes by the laws across depth and width (issue 50, headline question 4), on the shipped
width study: every line, law and size answered; each row the law's own prediction there, read against P1's gain at
that size, in the README's words; the study's judgement holds the table (``paper_sizes``)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from simulate.claims.definitions import perplexity_gain
from simulate.claims.judgement import Interval, size_verdict
from simulate.claims.width_laws import WIDTH_LAWS, fit_width_law
from simulate.study.atlas import ATLAS_DIR, atlas_studies
from simulate.study.judge.across_depth import law_data
from simulate.study.judge.across_width import P1_SIZES, paper_size_table
from simulate.study.judge.tables import read_study
from simulate.study.plan.tuning import resolve_tuning
from simulate.study.read.models import candidate_models
from simulate.study.write.headline import headline_section


@pytest.fixture(scope="module")
def width_study():
    return resolve_tuning(atlas_studies()["width"], ATLAS_DIR)


@pytest.fixture(scope="module")
def models(width_study):
    return candidate_models(width_study, ATLAS_DIR)


@pytest.fixture(scope="module")
def table(width_study, models):
    return paper_size_table(width_study, models)


def test_the_shipped_judgement_holds_the_table(table):
    """``paper_sizes.csv`` read back into the width study's judgement is the table fitted on its models now."""
    shipped = read_study(ATLAS_DIR, "width").paper_sizes
    pd.testing.assert_frame_equal(shipped, table, check_dtype=False, check_exact=False, rtol=1e-12)


def test_every_line_law_and_size_is_answered_against_p1_s_gain_there(table):
    assert len(table) == 2 * len(WIDTH_LAWS) * len(P1_SIZES), table  # the tuned and the fixed line
    assert set(table["line"].map(str)) == {"tuned", "fixed"} and set(table["law"]) == set(WIDTH_LAWS)
    gains = {"LLaMA-130M": perplexity_gain(26.73, 25.76), "LLaMA-1B": perplexity_gain(17.02, 15.71)}  # P1 Sec. 5
    for row in table.itertuples():
        assert row.p1 == pytest.approx(gains[row.size], rel=1e-12), row
        interval = Interval(row.estimate, row.low, row.high, row.confidence)
        assert row.low < row.estimate < row.high and row.answer is size_verdict(interval, row.p1), row
        assert (row.depth, row.width) == {name: (depth, width) for name, depth, width in P1_SIZES}[row.size]


def test_each_row_is_its_law_fitted_on_the_full_length_of_its_line_for_one_model(width_study, models, table):
    """Refitted here from the study's loss pairs at the longest training of the row's line: the same prediction
    for one new model (P1 reports one run per size); the shorter twins' length is not used."""
    data, _, _ = law_data(width_study, models)
    losses = {(str(d.line), d.steps): d.samples for d in data
              if d.subject.statistic == "val_loss" and d.subject.schemes == ("lns", "pre")}
    full = max(steps for _, steps in losses)
    assert {steps for _, steps in losses} == {full // 2, full} and set(table["steps"]) == {full}
    for row in table.itertuples():
        samples = losses[(str(row.line), full)]
        fit = fit_width_law(samples["depth"], samples["width"], samples["value"], row.law, row.confidence)
        again = fit.predict(row.depth, row.width, models=1)
        assert (again.estimate, again.low, again.high) == (row.estimate, row.low, row.high), row
        widths = " ".join(f"{w:g}" for w in sorted(set(fit.widths)))
        assert row.fitted_widths == widths and row.fitted_models == fit.models, row


def test_the_readme_asks_the_question_only_of_a_study_along_width_and_depth(width_study, table):
    depth_study = resolve_tuning(atlas_studies()["depth"], ATLAS_DIR)
    assert paper_size_table(depth_study, []).empty  # one width: no law across width (its models are not read)
    assert read_study(ATLAS_DIR, "depth").paper_sizes is None
    judgement = dataclasses.replace(read_study(ATLAS_DIR, "width"), paper_sizes=table)
    text = "\n".join(headline_section(judgement, width_study))
    assert "### 4. What would LNS minus Pre-LN be at P1's sizes, by the laws across depth and width?" in text, text
    assert text.count("| LLaMA-130M (L = 12, d = 768) |") == len(table) // 2, text
    assert "- LLaMA-1B: " in text and "not a measurement of a 130M model" in text, text
    without = dataclasses.replace(judgement, paper_sizes=None)
    assert "P1's sizes" not in "\n".join(headline_section(without, width_study)), "without the table it is not asked"
