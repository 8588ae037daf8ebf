"""A width study's prediction at a width no model trained (simulate.study.judge.across_width, ``--predict width=D``):
bad input refused in one line with nothing written, the file checked against a least-squares fit made here, and
its judgement as first committed (simulate.study.judge.preregistration) at a width left out of the fit.

The study is the shipped atlas's models at lr 3e-3 and 4000 steps, Pre-LN and LNS at d = 16, 32, 64 and L = 8, 16,
32, seeds 0 and 1 (an untuned spec of them, read from results/atlas; the d = 64 ones are the depth study's): seed 0
trained every rate of the tuning grid, seed 1 only where its cell chose 3e-3, so the other seed-1 models are
pending, as in a study still training.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulate.claims.width_laws import WidthLawForm
from simulate.study.atlas import ATLAS_DIR
from simulate.study.cli import main as study_main
from simulate.study.judge import across_width
from simulate.study.judge.across_depth import PredictionError
from simulate.study.judge.across_width import width_prediction_table
from simulate.study.judge.preregistration import (PROVENANCE_COLUMNS, judge_prediction, judged_summary,
                                                  read_judgements, read_prediction, write_judgements,
                                                  write_prediction)
from simulate.study.plan.spec import load_study
from simulate.study.read.point_table import last_step_layers
from simulate.sweep.store import encode_point, read_point, write_point
from theory.verdicts import BlindTest

SPEC = """
name = "width"
seeds = 2

[setting]
preset = "llama"
tokens = 64
lr = 3e-3
weight_decay = 0.1
input_std = 0.02

[axes]
scheme = ["pre", "lns"]
depth = [8, 16, 32]

[[zip]]
width = {widths}
heads = {heads}

[options]
steps = 4000
batch = 16
log_every = 100
clip = 1.0
data = "stdlib"
scores = "all"
sequences = 64
pairs = "all"

[study]
axes = ["width", "depth"]
"""


def _study(tmp_path: Path, widths: list[int]):
    """The spec at ``widths`` and a study directory holding the shipped points it names."""
    spec = tmp_path / "width.toml"
    spec.write_text(SPEC.format(widths=widths, heads=[w // 16 for w in widths]))
    study = load_study(spec)
    out = tmp_path / "out"
    (out / "points").mkdir(parents=True)
    shipped = [p for p in study.sweep.points if (ATLAS_DIR / "points" / f"{p.key}.parquet").is_file()]
    missing = [p.key for p in study.sweep.points if p.seed == 0 and p not in shipped]
    assert not missing, f"results/atlas lacks seed-0 models at lr 3e-3 the test reads: {missing}"
    for point in shipped:
        shutil.copy(ATLAS_DIR / "points" / f"{point.key}.parquet", out / "points")
    return spec, study, out


def test_predict_refuses_a_width_inside_the_trained_ones_mixed_axes_and_bad_words(tmp_path, capsys):
    spec, _, out = _study(tmp_path, [16, 32, 64])
    for values, words in ((["width=32"], "--predict width=32 is not allowed: it lies inside the trained widths "
                                         "16..64"),
                          (["width=128", "64"], "depths or widths, not both in one file"),
                          (["heads=8"], "--predict heads=8 is not allowed: a depth (64 or depth=64) or a width"),
                          (["width=0"], "a whole number >= 1")):
        with pytest.raises(SystemExit) as stop:
            study_main([str(spec), "--out", str(out), "--predict", *values])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1 and words in err[0], err
    assert not list(out.glob("prediction-*")), "nothing written"
    two = tmp_path / "two"
    two.mkdir()
    _, study, out_two = _study(two, [32, 64])
    with pytest.raises(PredictionError, match="at least 3 trained widths"):
        width_prediction_table(study, out_two, [128])


def test_the_width_prediction_is_the_least_squares_law_with_its_null_beside_it(tmp_path, capsys):
    spec, study, out = _study(tmp_path, [16, 32, 64])
    assert study_main([str(spec), "--out", str(out), "--predict", "width=128"]) == 0
    printed = capsys.readouterr().out
    assert "prediction-d128.csv" in printed and "prediction-d128-fitted.csv" in printed, printed
    assert (out / "prediction-d128-fitted.csv").is_file()
    table = read_prediction(out / "prediction-d128.csv")
    assert (out / "prediction-d128.md").is_file()
    assert table[list(PROVENANCE_COLUMNS)].notna().all().all() and table["code"].nunique() == 1
    assert set(table["width"]) == {128} and set(table["depth"]) == {8, 16, 32}
    assert set(table["law"]) == set(WidthLawForm)
    assert {"var_last", "var_growth", "val_loss"} <= set(table["statistic"])
    assert set(table["fitted_widths"]) == {"16 32 64"} and set(table["fitted_depths"]) == {"8 16 32"}
    _, fitted = width_prediction_table(study, out, [128])
    for (statistic, scheme), rows in table[table["models"] == 1].groupby(["statistic", "scheme"]):
        values = fitted[(fitted["statistic"] == statistic) & (fitted["scheme"] == scheme)]
        means = values.groupby(["depth", "width"])["value"].mean().reset_index()  # (9,): the law fits cell means
        assert len(means) == 9, (statistic, scheme, len(means))
        design = np.stack([np.ones(9), np.log(means["depth"]), np.log(means["width"].astype(float))], axis=1)
        coefficients = np.linalg.lstsq(design, means["value"].to_numpy(float), rcond=None)[0]  # (3,)
        for row in rows[rows["law"] == WidthLawForm.ADDITIVE].itertuples():
            expected = coefficients @ [1.0, math.log(row.depth), math.log(128.0)]
            assert row.estimate == pytest.approx(expected, rel=1e-9, abs=1e-12), (statistic, scheme, row.depth)
            assert row.width_term == pytest.approx(coefficients[2], rel=1e-9, abs=1e-12)
            at_64 = values.loc[(values["width"] == 64) & (values["depth"] == row.depth), "value"].mean()
            assert row.no_change == pytest.approx(at_64, rel=1e-12)
            assert row.no_change_inside == (row.low <= at_64 <= row.high)
        null = rows[rows["law"] == WidthLawForm.NO_WIDTH_TERM]
        assert null["width_term_low"].isna().all()
        # the null predicts the same value at every width: a line in log L through the nine cell means
        slope, intercept = np.polyfit(np.log(means["depth"].to_numpy(float)), means["value"].to_numpy(float), 1)
        for row in null.itertuples():
            assert row.estimate == pytest.approx(intercept + slope * math.log(row.depth), rel=1e-9, abs=1e-12)


@pytest.fixture(scope="module")
def predicted_16(tmp_path_factory):
    """A width prediction at d = 16 fitted on d = 32 and 64 alone, committed in a fresh repository before the d = 16
    models join the study directory (as shipped: they started before the commit). The atlas ships three widths, so
    the test fits two (``MIN_LAW_WIDTHS`` lowered to 2 for it) to leave one to judge."""
    base = tmp_path_factory.mktemp("width-judged")
    (base / "fitted").mkdir()
    (base / "all").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(across_width, "MIN_LAW_WIDTHS", 2)
        spec, study, out = _study(base / "fitted", [32, 64])
        path = write_prediction(study, out, [16], "test", axis="width")
    subprocess.run(["git", "init", "-q", str(out)], check=True)
    subprocess.run(["git", "-C", str(out), "add", path.name, f"{path.stem}-fitted.csv"], check=True)
    subprocess.run(["git", "-C", str(out), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "prediction"],
                   check=True)
    _, study3, _ = _study(base / "all", [16, 32, 64])
    for point in study3.sweep.points:  # the new width's models join the study directory
        if point.setting.width == 16 and (ATLAS_DIR / "points" / f"{point.key}.parquet").is_file():
            shutil.copy(ATLAS_DIR / "points" / f"{point.key}.parquet", out / "points")
    return study3, out, path


def test_width_models_that_started_before_the_commit_make_no_pre_registration(predicted_16):
    study3, out, path = predicted_16
    judged = judge_prediction(path, study3, out)
    assert "a model at a predicted width started" in judged.problem and "before the file's first commit" in \
        judged.problem, judged.problem
    assert judged.rows["blind_test"].isna().all()


def test_a_width_prediction_is_judged_on_the_committed_file_at_its_width(predicted_16, monkeypatch):
    """Each row on the d = 16 model of its depth and seed; uninformative exactly where its interval holds the widest
    fitted cell's value or the nearest of the two rival laws' predictions; refitted, the committed numbers again."""
    study3, out, path = predicted_16
    monkeypatch.setattr(across_width, "MIN_LAW_WIDTHS", 2)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    for point in (p for p in study3.sweep.points if p.setting.width == 16):
        if (out / "points" / f"{point.key}.parquet").is_file():
            record, table = read_point(out, point.key)
            record["started_at"] = later.strftime("%Y-%m-%dT%H:%M:%S%z")
            write_point(out, point.key, encode_point(record, table))
    (judged,) = write_judgements([study3], out)  # the width study judges prediction-d*, the depth study none here
    assert not judged.problem, judged.problem
    assert (out / "prediction-d16-judged.md").is_file() and judged.name == path.stem
    (read,) = read_judgements(out)  # the judged file names its study; its words read back as the same members
    assert (read.name, read.study) == (judged.name, judged.study) == (path.stem, "width"), read
    assert read.rows["blind_test"].tolist() == judged.rows["blind_test"].tolist()
    rows = judged.rows
    assert set(rows["width"]) == {16} and set(rows["depth"]) == {8, 16, 32}
    judged_rows = rows[rows["blind_test"] != BlindTest.PENDING]
    assert len(judged_rows) and set(judged_rows["blind_test"]) <= {
        BlindTest.PASSES, BlindTest.PASSES_UNINFORMATIVE, BlindTest.FAILS}
    for _, row in judged_rows.iterrows():
        others = rows[(rows["statistic"] == row["statistic"]) & (rows["scheme"] == row["scheme"])
                      & (rows["line"] == row["line"]) & (rows["steps"] == row["steps"])
                      & (rows["depth"] == row["depth"]) & (rows["judged_on"] == row["judged_on"])
                      & (rows["law"] != row["law"])]["estimate"].to_numpy(float)  # (2,): the rival laws
        assert len(others) == 2 and row["rival"] == others[np.argmin(np.abs(others - row["estimate"]))], row.to_dict()
        if row["blind_test"] != BlindTest.FAILS:
            could_not_fail = any(row["low"] <= v <= row["high"] for v in (row["nearest_fitted"], *others))
            assert (row["blind_test"] == BlindTest.PASSES_UNINFORMATIVE) == could_not_fail, row.to_dict()
    # the committed -fitted.csv holds every value the laws were fitted on: the same models, read again
    assert rows["refit_data"].all() and rows["refit"].notna().all(), rows[["refit", "refit_data"]]
    np.testing.assert_allclose(rows["refit"], rows["estimate"], rtol=1e-9, atol=1e-12)
    one = rows[(rows["statistic"] == "var_last") & (rows["scheme"] == "pre") & (rows["law"] == WidthLawForm.ADDITIVE)
               & (rows["models"] == 1) & (rows["depth"] == 8)].iloc[0]
    seed0 = next(p.key for p in study3.sweep.points if p.setting.width == 16 and p.setting.depth == 8
                 and p.setting.scheme == "pre" and p.seed == 0)
    expected = math.log(last_step_layers(read_point(out, seed0)[1])["var"].iloc[-1])  # log var_L of seed 0
    assert one["n"] == 1 and one["measured"] == pytest.approx(expected, rel=1e-12), one.to_dict()
    nearest = [p.key for p in study3.sweep.points if p.setting.width == 32 and p.setting.depth == 8
               and p.setting.scheme == "pre" and (out / "points" / f"{p.key}.parquet").is_file()]  # d = 32: every seed
    no_change = np.mean([math.log(last_step_layers(read_point(out, key)[1])["var"].iloc[-1]) for key in nearest])
    assert one["nearest_fitted"] == pytest.approx(no_change, rel=1e-12), (one.to_dict(), nearest)
    summary = "\n".join(judged_summary([judged]))
    assert "## Pre-registered prediction `prediction-d16` against the models trained after it" in summary, summary
    assert "- d = 16: " in summary and "nearest fitted width" in summary, summary
    assert "| width | depth | statistic | scheme | law |" in summary, summary
