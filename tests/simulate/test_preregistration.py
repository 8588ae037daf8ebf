"""A prediction written before its models (simulate.study.judge.across_depth, simulate.study.judge.preregistration, the
``--predict`` flag): bad input, the file and what made it, and the judgement of a committed file without refitting.

The study is the shipped atlas's Pre-LN models at lr 3e-3 and 4000 steps (an untuned spec of them: 12 models at
L = 4..32, read from results/atlas); the prediction is for L = 32 made from L = 4..16, so that its "new" models
exist: their records are rewritten to start after the commit (a positive test) or left as shipped (they
started before it: no pre-registration).
"""

from __future__ import annotations

import math
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from simulate.claims.depth_laws import DepthLawForm
from simulate.study.atlas import ATLAS_DIR
from simulate.study.cli import main as study_main
from simulate.study.judge.across_depth import PredictionError, prediction_table
from simulate.study.judge.preregistration import (PROVENANCE_COLUMNS, first_commit, judge_prediction, judged_summary,
                                                  model_start, read_judgements, read_prediction, write_prediction)
from simulate.study.plan.spec import load_study
from simulate.study.read.point_table import last_step_layers
from simulate.sweep.store import encode_point, read_point, write_point
from theory.verdicts import BlindTest, RateLine

SPEC = """
name = "depth"
seeds = 3

[setting]
preset = "llama"
width = 64
heads = 4
tokens = 64
lr = 3e-3
weight_decay = 0.1
input_std = 0.02

[axes]
scheme = ["pre"]
depth = {depths}

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
axes = ["depth"]
"""


def _study(tmp_path: Path, depths: str):
    """The spec at ``depths`` and a study directory holding the shipped points it names."""
    spec = tmp_path / "depth.toml"
    spec.write_text(SPEC.format(depths=depths))
    study = load_study(spec)
    out = tmp_path / "out"
    (out / "points").mkdir(parents=True)
    for point in study.sweep.points:
        shutil.copy(ATLAS_DIR / "points" / f"{point.key}.parquet", out / "points")
    return spec, study, out


def test_predict_refuses_a_depth_inside_the_trained_ones_and_too_few_depths(tmp_path, capsys):
    spec, _, out = _study(tmp_path, "[4, 8, 16]")
    for argv, words in (([str(spec), "--out", str(out), "--predict", "8"], "--predict 8 is not allowed: it lies "
                                                                               "inside the trained depths 4..16"),
                        ([str(spec), "--out", str(out), "--predict", "0"], "a whole number >= 1")):
        with pytest.raises(SystemExit) as stop:
            study_main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1 and words in err[0], err
    assert not list(out.glob("prediction-*")), "nothing written"
    two = tmp_path / "two"
    two.mkdir()
    _, study, out_two = _study(two, "[4, 8]")
    with pytest.raises(PredictionError, match="at least 3 trained depths"):
        prediction_table(study, out_two, [32])


@pytest.fixture(scope="module")
def predicted(tmp_path_factory):
    """The prediction of L = 32 from L = 4..16, committed in a git repository of its own."""
    tmp_path = tmp_path_factory.mktemp("prereg")
    spec, study, out = _study(tmp_path, "[4, 8, 16]")
    path = write_prediction(study, out, [32, 2], "test")
    subprocess.run(["git", "init", "-q", str(out)], check=True)
    subprocess.run(["git", "-C", str(out), "add", path.name], check=True)
    subprocess.run(["git", "-C", str(out), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "prediction"],
                   check=True)
    deeper = tmp_path / "deeper"
    deeper.mkdir()
    _, study32, _ = _study(deeper, "[4, 8, 16, 32]")
    for point in study32.sweep.points:  # the new depth's models join the study directory
        shutil.copy(ATLAS_DIR / "points" / f"{point.key}.parquet", out / "points")
    return study32, out, path


def test_the_prediction_file_says_what_made_it(predicted):
    _, out, path = predicted
    table = read_prediction(path)
    assert set(table["depth"]) == {32, 2} and set(table["line"]) == {RateLine.TRAINED}
    assert table[list(PROVENANCE_COLUMNS)].notna().all().all() and table["code"].nunique() == 1
    assert (table["low"] < table["estimate"]).all() and (table["estimate"] < table["high"]).all()
    assert set(table["fitted_depths"]) == {"4 8 16"} and "var_last" in set(table["statistic"])
    assert (out / "prediction-L32.md").is_file()


def test_models_that_started_before_the_commit_make_no_pre_registration(predicted):
    study32, out, path = predicted
    judged = judge_prediction(path, study32, out)
    assert "before the file's first commit" in judged.problem and judged.rows["blind_test"].isna().all()


def test_models_that_started_after_the_commit_are_judged_on_the_committed_file(predicted, tmp_path):
    study32, out, path = predicted
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    for point in (p for p in study32.sweep.points if p.setting.depth == 32):
        record, table = read_point(out, point.key)
        record["started_at"] = later.strftime("%Y-%m-%dT%H:%M:%S%z")
        write_point(out, point.key, encode_point(record, table))
        assert model_start(record) > datetime.now(timezone.utc)
    edited = pd.read_csv(path).assign(low=-1e9, high=1e9)  # an edit after the commit changes nothing
    edited.to_csv(path, index=False)
    judged = judge_prediction(path, study32, out)
    assert not judged.problem, judged.problem
    rows = judged.rows
    at_32 = rows[rows["depth"] == 32]
    assert set(at_32["blind_test"]) <= {BlindTest.PASSES, BlindTest.PASSES_UNINFORMATIVE,
                                        BlindTest.FAILS} and len(at_32)
    for _, row in at_32[at_32["blind_test"] != BlindTest.FAILS].iterrows():  # a pass that could not fail
        could_not_fail = any(row["low"] <= v <= row["high"] for v in (row["nearest_fitted"], row["rival"]))
        assert (row["blind_test"] == BlindTest.PASSES_UNINFORMATIVE) == could_not_fail, row.to_dict()
    assert set(rows.loc[rows["depth"] == 2, "blind_test"]) == {BlindTest.PENDING}
    # nothing at the fitted depths was retrained: the laws refit to the committed numbers, on the committed data
    assert rows["refit_data"].all() and rows["refit"].notna().all(), rows[["refit", "refit_data"]]
    committed = pd.read_csv(StringIO(first_commit(path).text))
    np.testing.assert_allclose(rows["refit"], committed["estimate"], rtol=1e-9, atol=1e-12)
    one = at_32[(at_32["statistic"] == "var_last") & (at_32["law"] == DepthLawForm.POWER) & (at_32["models"] == 1)].iloc[0]
    seed0 = next(p.key for p in study32.sweep.points if p.setting.depth == 32 and p.seed == 0)
    expected = math.log(last_step_layers(read_point(out, seed0)[1])["var"].iloc[-1])  # log var_L of seed 0
    assert one["n"] == 1 and one["measured"] == pytest.approx(expected, rel=1e-12), one
    assert one["high"] < 1e9, "judged on the committed interval, not the edited one"
    assert (one["blind_test"] != BlindTest.FAILS) == bool(one["low"] <= one["measured"] <= one["high"])


def test_the_readme_summary_counts_each_law_s_rows_and_says_when_nothing_was_judged(tmp_path):
    """``judged_summary``: passes, failures and pending rows per law at the file's level; a file whose rows carry
    no blind test (nothing could be judged) reads "Not judged"."""
    verdicts = [BlindTest.PASSES, BlindTest.FAILS, BlindTest.PENDING, BlindTest.FAILS]
    rows = pd.DataFrame({"depth": [64] * 4, "statistic": ["var_last"] * 4, "scheme": ["pre"] * 4,
                         "law": [DepthLawForm.POWER] * 4, "line": [RateLine.FIXED] * 3 + [RateLine.TUNED], "confidence": [0.9] * 4,
                         "steps": [4000] * 4, "judged_on": ["seed 0", "seed 1", "seed 2", "seed 1"],
                         "blind_test": verdicts})
    rows.to_csv(tmp_path / "prediction-L64-judged.csv", index=False)  # read back as the README's export would not
    rows.assign(blind_test=None).to_csv(tmp_path / "prediction-L128-judged.csv", index=False)
    judged = read_judgements(tmp_path)
    assert [j.name for j in judged] == ["prediction-L128", "prediction-L64"] and judged[0].problem
    assert judged[1].rows["blind_test"].tolist() == verdicts and not judged[1].problem
    text = "\n".join(judged_summary(judged))
    # the lines side by side, never summed: a tuned row on the fixed rate judges the fixed row's models again
    assert "| depth | statistic | scheme | law | fixed line | tuned line |" in text, text
    assert "| 64 | var_last | pre | power | passes 1; fails 1; pending 1 | passes 0; fails 1 |" in text, text
    assert "Each row a 90 % prediction interval" in text, text
    # two rows fail of three judged; seed 1's two rows share one draw (10 % each): 0.3 expected by chance
    assert "L = 64: 2 rows fail, 1 pass informatively, 0 pass uninformatively" in text, text
    assert "0.3 would fail by chance" in text, text
    not_judged = "## Pre-registered prediction `prediction-L128`\n\nNot judged: see `prediction-L128-judged.md`."
    assert not_judged in text, text


def test_a_fixed_rate_row_whose_cell_chose_another_rate_is_not_testable():
    """Where L = 2 chose 3e-3 and the fixed rate is 1e-2, only the tuning seed at the full length trains 1e-2:
    its row is tested, the mean over seeds and the shorter length never can be (not left "pending")."""
    from simulate.study.judge.preregistration import _never_trained

    point = lambda lr: SimpleNamespace(setting=SimpleNamespace(scheme="lns", lr=lr, depth=2))  # noqa: E731
    study = SimpleNamespace(stability=(2000, 4000), tune_seeds=(0,), sweep=SimpleNamespace(points=[point(3e-3)]))
    row = lambda judged_on, steps, line=RateLine.FIXED, lr=1e-2: SimpleNamespace(  # noqa: E731
        line=line, judged_on=judged_on, steps=steps, scheme="lns", lr=lr, lr_second=math.nan, depth=2)
    assert not _never_trained(row("seed 0", 4000), study)
    assert _never_trained(row("mean of 3 seeds", 4000), study) and _never_trained(row("seed 0", 2000), study)
    assert not _never_trained(row("mean of 3 seeds", 4000, lr=3e-3), study)  # the rate the cell chose
    assert not _never_trained(row("mean of 3 seeds", 4000, line=RateLine.TUNED), study)
    pending = SimpleNamespace(stability=(2000, 4000), tune_seeds=(0,), sweep=SimpleNamespace(points=[]))
    assert not _never_trained(row("mean of 3 seeds", 4000), pending), "a cell still tuning may yet choose it"
