"""A study's judgement tables on disk (simulate.study.judge.tables): hand-made level and trend judgements laid out by
level_frame and trend_frame, written by write_tables and read back by read_study with every word column
parsed into its enum (Verdict, GrowthClass, Stability; None for an empty cell); a word no enum knows is
refused naming the file and the column. And Interval.z, the z every report prints: its own standard error,
else the half-width read at its own confidence.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from simulate.claims.along_axes import DesignNeeds
from simulate.claims.definitions import CLAIMS
from simulate.claims.judgement import (NO_INTERVAL, Interval, Judgement, TrendDesign, TrendJudgement, normal_quantile,
                                       t_interval)
from simulate.claims.trends import cell_shape
from simulate.study.judge.tables import REPORT_FILES
from simulate.study.judge.tables import (LEVEL_COLUMNS, TREND_COLUMNS, StudyJudgement, at_full_length, level_frame,
                                         read_study, read_verdicts, trend_frame, write_tables)
from theory.verdicts import GrowthClass, PointStatus, RateLine, Stability, Verdict

LEVEL_FIELDS = ["depth", "steps"]
TREND_FIELDS = ["width", "steps"]
NAME = "tiny"


def _levels() -> list[Judgement]:
    loss, growth, share = CLAIMS["p1-lns-loss"], CLAIMS["p1-lemma-3.2-growth"], CLAIMS["p2-depth-usefulness"]
    return [
        Judgement(loss, "val_loss", Interval(-0.02, -0.03, -0.01, 0.95, "paired by seed", 0.004), Verdict.HOLDS, 3,
                  cell={"depth": 4, "steps": 1600}, detectable=0.012, stability=Stability.STABLE,
                  change=Interval(0.001, -0.002, 0.004, 0.95, "t over seeds", 0.0007)),
        Judgement(loss, "val_loss", Interval(-0.01, -0.05, 0.03, 0.95), Verdict.UNRESOLVABLE, 2,
                  cell={"depth": 8, "steps": 800}, detectable=0.09, stability=Stability.MOVES),
        Judgement(growth, "growth_exponent", Interval(1.2, 0.9, 1.5, 0.95), Verdict.NO_DIRECTION, 3,
                  comment="8 blocks cannot identify a class", growth_class=GrowthClass.NOT_IDENTIFIABLE,
                  cell={"depth": 8, "steps": 1600}, stability=Stability.CANNOT_TELL),
        Judgement(growth, "growth_rate", Interval(0.1, 0.05, 0.15, 0.95), Verdict.NO_DIRECTION, 3,
                  growth_class=GrowthClass.EXPONENTIAL, cell={"depth": 32, "steps": 1600}),
        Judgement(share, "useful_share", NO_INTERVAL, Verdict.NOT_MEASURED, 0, cell={"depth": 16, "steps": 1600}),
    ]


def _trends() -> list[TrendJudgement]:
    loss, jac, growth = CLAIMS["p1-lns-loss"], CLAIMS["p2-depth-jac"], CLAIMS["p1-lns-growth"]
    design = TrendDesign((4.0, 8.0, 16.0, 32.0), (3, 3, 3, 3), 1e-4, 3e-4)
    slope = Interval(-0.03, -0.05, -0.01, 0.95, "cell means, t on cells - 2", 0.0046)
    return [
        TrendJudgement(loss, "val_loss", "depth", {"width": 64, "steps": 1600}, RateLine.TUNED, 12, 0, 0, 4, slope, 0.2,
                       0.04, 0.08, -1, Verdict.HOLDS, shape=cell_shape(design.x, (4, 3, 2, 1)), detectable=0.02,
                       stability=Stability.STABLE, change=Interval(0.002, -0.001, 0.005, 0.95), design=design,
                       in_family=True),
        TrendJudgement(jac, "jac_dev_total", "depth", {"width": 64, "steps": 1600}, RateLine.FIXED, 12, 1, 0, 4,
                       Interval(0.1, -0.4, 0.6, 0.95), 0.01, 0.6, 1.0, -1, Verdict.UNRESOLVABLE,
                       shape=cell_shape(design.x, (1, 3, 2, 1)), needs=DesignNeeds(6, 6, 128.0, 3.0, 12),
                       stability=Stability.MOVES, design=design, in_family=True),
        TrendJudgement(loss, "val_loss", "lr", {"width": 64, "steps": 1600}, RateLine.TUNED, 9, 0, 2, 3,
                       Interval(0.5, 0.1, 0.9, 0.95), math.nan, math.nan, math.nan, None, Verdict.NO_DIRECTION),
        TrendJudgement(loss, "val_loss", "width", {"steps": 800}, RateLine.TUNED, 6, 0, 0, 2, Interval(0.01), math.nan,
                       math.nan, math.nan, -1, Verdict.TOO_FEW_AXIS_VALUES, stability=Stability.CANNOT_TELL),
        TrendJudgement(growth, "var_last", "depth", {}, RateLine.TRAINED, 12, 0, 0, 4, Interval(2.3, 2.1, 2.5, 0.95),
                       0.3, math.nan, math.nan, None, Verdict.VIOLATED),
    ]


def _calibration() -> pd.DataFrame:
    return pd.DataFrame([{"scenario": "no trend", "claim": "p1-lns-loss", "statistic": "val_loss",
                          "line": RateLine.TUNED, "cells": 4, "seeds": 3.0, "cell_to_seed": 1.3, "rate": 0.045, "rate_se": 0.0066,
                          "detectable": 0.02, "reference": -0.032, "studies": 1000}])


def _write(out, levels=None, trends=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A study's report folder with the tables of the hand-made judgements and minimal other report files."""
    folder = out / NAME
    folder.mkdir(parents=True, exist_ok=True)
    levels = level_frame(_levels(), LEVEL_FIELDS) if levels is None else levels
    trends = trend_frame(_trends(), TREND_FIELDS) if trends is None else trends
    points = pd.DataFrame({"key": ["a1b2"], "status": [PointStatus.OK], "depth": [4]})
    write_tables(folder, StudyJudgement(NAME, points, levels, trends, _calibration()))
    (folder / "study.md").write_text("# tiny\n")
    assert sorted(p.name for p in folder.iterdir()) == sorted(REPORT_FILES)
    return levels, trends


def test_the_frames_hold_the_enum_members_and_the_declared_columns():
    levels, trends = level_frame(_levels(), LEVEL_FIELDS), trend_frame(_trends(), TREND_FIELDS)
    assert list(levels.columns) == [*LEVEL_COLUMNS[:4], *LEVEL_FIELDS, *LEVEL_COLUMNS[4:]]
    assert list(trends.columns) == [*TREND_COLUMNS[:5], *TREND_FIELDS, *TREND_COLUMNS[5:]]
    assert [v for v in levels["verdict"]] == [j.verdict for j in _levels()]
    assert levels["verdict"].iloc[0] is Verdict.HOLDS and levels["stability"].iloc[3] is None
    assert trends["direction"].tolist() == ["falls", "falls", "", "falls", ""]
    assert trends["group"].tolist()[2:] == ["width=64, steps=1600", "steps=800", "all"]
    assert trends["reference"].iloc[0] == CLAIMS["p1-lns-loss"].reference_trend("depth")
    assert math.isnan(trends["reference"].iloc[1])


def test_written_tables_read_back_with_every_word_parsed_into_its_enum(tmp_path):
    written_levels, written_trends = _write(tmp_path)
    study = read_study(tmp_path, NAME)
    assert study.name == NAME and study.tuning is None and study.points["key"].tolist() == ["a1b2"]
    for written, read in ((written_levels, study.levels), (written_trends, study.trends)):
        assert list(read.columns) == list(written.columns)
        for column, kind in (("verdict", Verdict), ("growth_class", GrowthClass), ("stability", Stability)):
            if column not in written:
                continue
            for before, after in zip(written[column], read[column]):
                assert after is before, (column, before, after)  # the same member, or None for an empty cell
                assert after is None or isinstance(after, kind)
    levels = study.levels
    assert levels["growth_class"].tolist()[2:4] == [GrowthClass.NOT_IDENTIFIABLE, GrowthClass.EXPONENTIAL]
    assert levels["verdict"].iloc[1] is Verdict.UNRESOLVABLE  # "design cannot resolve": a word with spaces
    # the numbers and the other words come back as they were (a CSV of 17 significant digits: exact)
    np.testing.assert_array_equal(levels[["mean", "low", "high", "confidence", "change", "change_low"]].to_numpy(float),
                                  written_levels[["mean", "low", "high", "confidence", "change",
                                                  "change_low"]].to_numpy(float))
    assert levels["method"].iloc[0] == "paired by seed" and levels["depth"].tolist() == [4, 8, 8, 32, 16]
    trends = study.trends
    assert trends["in_family"].tolist() == [True, True, False, False, False]
    assert trends["p_adjusted"].iloc[0] == 0.08 and math.isnan(trends["p_value"].iloc[2])
    assert trends["needs"].iloc[1].startswith("6 seeds per cell") and trends["verdict"].iloc[3] is \
        Verdict.TOO_FEW_AXIS_VALUES
    assert study.calibration["rate"].tolist() == [0.045]


def _rewrite(path, column: str, row: int, word: str) -> None:
    """One cell of a written table replaced by ``word`` (as other code might have written it)."""
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    frame.loc[row, column] = word
    frame.to_csv(path, index=False)


@pytest.mark.parametrize("file, column, row, word, kind", [
    ("levels.csv", "verdict", 0, "hold", "Verdict"),
    ("levels.csv", "growth_class", 2, "polynomal", "GrowthClass"),
    ("trends.csv", "stability", 0, "stabel", "Stability"),
    ("trends.csv", "verdict", 4, "Holds", "Verdict")])
def test_an_unknown_word_is_refused_naming_the_file_and_the_column(tmp_path, file, column, row, word, kind):
    _write(tmp_path)
    _rewrite(tmp_path / NAME / file, column, row, word)
    with pytest.raises(ValueError, match=f"^{file}, column {column}: '{word}' is not a {kind} word: one of "):
        read_study(tmp_path, NAME)


def test_read_verdicts_parses_the_verdicts_and_refuses_an_unknown_one(tmp_path):
    _write(tmp_path)
    levels, trends = read_verdicts(tmp_path, NAME)
    assert levels["verdict"].iloc[0] is Verdict.HOLDS and trends["verdict"].iloc[1] is Verdict.UNRESOLVABLE
    assert levels["stability"].iloc[0] == "stable"  # every other word as it was written
    _rewrite(tmp_path / NAME / "trends.csv", "verdict", 0, "hold")
    with pytest.raises(ValueError, match="^trends.csv, column verdict: 'hold'"):
        read_verdicts(tmp_path, NAME)


@pytest.mark.parametrize("missing", REPORT_FILES)
def test_a_missing_report_file_is_named(tmp_path, missing):
    _write(tmp_path)
    (tmp_path / NAME / missing).unlink()
    with pytest.raises(FileNotFoundError, match=missing):
        read_study(tmp_path, NAME)


def test_at_full_length_keeps_the_longest_steps(tmp_path):
    _write(tmp_path)
    levels = read_study(tmp_path, NAME).levels
    assert at_full_length(levels)["steps"].unique().tolist() == [1600]
    no_steps = levels.drop(columns="steps")
    assert at_full_length(no_steps) is no_steps


# -- Interval.z -------------------------------------------------------------------------------------------------
def test_z_uses_the_interval_s_own_standard_error():
    interval = Interval(2.0, 0.0, 4.0, 0.95, "t over seeds", 0.5)  # a t interval: wider than 1.96 se
    assert interval.z() == 4.0 and interval.z(target=1.0) == 2.0
    assert t_interval([1.0, 2.0, 3.0], 0.9).z() == pytest.approx(t_interval([1.0, 2.0, 3.0], 0.99).z(), rel=1e-15)


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_without_a_standard_error_z_reads_the_half_width_at_its_own_confidence(confidence):
    """A normal interval of standard error 0.5 at any confidence: the same z (its half-width over its quantile)."""
    half = normal_quantile(confidence) * 0.5
    interval = Interval(2.0, 2.0 - half, 2.0 + half, confidence)
    assert interval.z() == pytest.approx(4.0, rel=1e-12)  # 1e-12: the quantile divided out again
    assert interval.z(target=3.0) == pytest.approx(-2.0, rel=1e-12)
    assert interval.label == f"{confidence:.0%}".replace("%", " %")


def test_z_is_nan_without_a_finite_interval_of_positive_width():
    for interval in (Interval(1.0), Interval(1.0, 0.0, math.inf, 0.95), Interval(1.0, 1.0, 1.0, 0.95), NO_INTERVAL,
                     Interval(1.0, 0.0, 2.0, 0.95, se=0.0)):
        assert math.isnan(interval.z()), interval
