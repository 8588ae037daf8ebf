"""``python -m simulate study``: spec checks, one training per distinct model, resume, failures, the reports.

The study under test trains 2 schemes x 2 depths x 2 seeds of tiny LLaMA models (d=16, a
dozen steps on the docs corpus: well under a second each); the statistics of the reports
are tested on synthetic data in tests/simulate/test_study_trends.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulate.claims import CLAIMS, Kind
from simulate.study import load_study, parse_study, read_study, run_studies, write_reports
from simulate.study.cli import main as study_main
from simulate.sweep import read_point, read_summary
from theory.verdicts import PointStatus

SPEC = """
name = "{name}"
seeds = 2

[setting]
preset = "llama"
width = 16
heads = 2
tokens = 16
lr = 3e-3
input_std = 0.02

[axes]
scheme = ["pre", "lns"]
depth = [{depths}]

[options]
steps = 12
log_every = 6
data = "{data}"
sequences = 4
pairs = 1

[study]
axes = ["depth"]
"""


def _spec(tmp_path: Path, name: str = "tiny", depths: str = "2, 4", data: str = "docs", **replace) -> Path:
    text = SPEC.format(name=name, depths=depths, data=data)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """The tiny study, run once with its reports: (study, out directory, sweep report)."""
    tmp = tmp_path_factory.mktemp("study")
    study = load_study(_spec(tmp))
    out = tmp / "out"
    report = run_studies([study], out, workers=1)
    write_reports(study, out)
    return study, out, report


def test_every_model_is_trained_once_and_scored(tiny_study):
    study, out, report = tiny_study
    assert (report.total, report.ran, report.failed) == (8, 8, 0)
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 8
    for run in runs:
        assert (run / "model.safetensors").is_file() and (run / "scores" / "scores.csv").is_file()
        assert not (run / "checkpoint.safetensors").exists(), "a finished training keeps no checkpoint"
        config = json.loads((run / "config.json").read_text())
        assert config["status"] == "done" and config["data"]["name"] == "docs" and config["data"]["epochs"] > 0


def test_a_models_record_says_what_made_it(tiny_study):
    from simulate.runtime.keys import environment
    from simulate.training.data import corpus_digest

    study, out, _ = tiny_study
    for point in study.sweep.points:
        record, _ = read_point(out, point.key)
        headline, config = record["headline"], json.loads((out / "runs" / point.key / "config.json").read_text())
        scored = json.loads((out / "runs" / point.key / "scores" / "config.json").read_text())
        assert headline["code_train"] == config["versions"]["code"]
        assert headline["code_scores"] == scored["versions"]["code"]
        assert headline["data"] == corpus_digest("docs") == scored["versions"]["data"]
        assert {k: headline[k] for k in ("python", "torch")} == environment()


def test_a_points_scores_are_reused_only_when_they_are_its_own(tiny_study, tmp_path, monkeypatch, caplog):
    """``run/scores`` made by other scores code is scored again (one warning line), its own is read back."""
    import logging

    from simulate.runtime import versions
    from simulate.scores import runs
    from simulate.study.train.point import _score

    study, out, _ = tiny_study
    point = study.sweep.points[0]
    run = tmp_path / "run"
    shutil.copytree(out / "runs" / point.key, run)
    calls, score_run = [], runs.score_run
    monkeypatch.setattr(runs, "score_run", lambda *a, **k: calls.append(1) or score_run(*a, **k))
    kept = _score(point, run, "cpu")
    assert not calls and kept[2] == json.loads((run / "scores" / "config.json").read_text())
    monkeypatch.setattr(runs, "closure_version", lambda *entries, **kw: "f" * 16 if entries == (runs.__name__,)
                        else versions.closure_version(*entries, **kw))  # the scores' sources, edited
    with caplog.at_level(logging.WARNING, logger="simulate.scores"):
        scores, _, record = _score(point, run, "cpu")
    assert calls == [1] and "code=" in caplog.text and len(caplog.records) == 1, caplog.text
    assert record["versions"]["code"] == "f" * 16 and record["key"] != kept[2]["key"]
    assert json.loads((run / "scores" / "config.json").read_text()) == record
    pd.testing.assert_frame_equal(scores, kept[0], check_exact=False)  # the same numbers, scored again
    assert _score(point, run, "cpu")[2] == record and calls == [1]  # now its own: read back


def test_the_reports_have_a_row_per_model_claim_and_cell(tiny_study):
    study, out, _ = tiny_study
    results = read_study(out, "tiny")
    assert len(results.points) == 8 and set(results.points["status"]) == {PointStatus.OK}
    assert results.points["val_loss"].between(0.5, 6.0).all()
    assert len(results.trends) == len(study.claims)  # one axis, one group
    signed = [c for c in study.claims if CLAIMS[c].kind is Kind.SIGNED]
    assert set(results.levels[results.levels["claim"].isin(signed)].groupby("claim").size()) == {2}  # 2 depths
    paired = results.levels[results.levels["claim"] == "p1-lns-loss"]
    assert (paired["n"] == 2).all(), "a difference of two schemes is paired over the two seeds"
    text = (out / "tiny" / "study.md").read_text()
    assert "## Trends" in text and "p2-depth-usefulness" in text and "Versions the models rest on" in text


def test_paired_difference_is_the_per_seed_difference(tiny_study):
    _, out, _ = tiny_study
    results = read_study(out, "tiny")
    points = results.points.set_index(["scheme", "depth", "seed"])
    differences = [points.loc[("lns", 4, s), "val_loss"] - points.loc[("pre", 4, s), "val_loss"] for s in (0, 1)]
    row = results.levels[(results.levels["claim"] == "p1-lns-loss") & (results.levels["depth"] == 4)].iloc[0]
    assert row["mean"] == pytest.approx(np.mean(differences), rel=1e-12)


def test_a_second_run_trains_nothing_and_rewrites_the_same_reports(tiny_study, tmp_path):
    study, out, _ = tiny_study
    before = {name: (out / "tiny" / name).read_bytes() for name in ("levels.csv", "trends.csv", "study.md")}
    report = run_studies([study], out, workers=1)
    assert (report.skipped, report.ran) == (8, 0)
    write_reports(study, out)
    assert {name: (out / "tiny" / name).read_bytes() for name in before} == before


def test_the_extrapolation_predicts_the_deepest_depth_that_has_finished(tiny_study, tmp_path):
    """While a deeper depth is untrained, the test holds out the deepest one with two models per scheme."""
    from simulate.study.judge.variance_laws import judge_variance_laws
    from simulate.study.write.extrapolation_report import extrapolation_markdown

    study, out, _ = tiny_study
    whole = judge_variance_laws([study], out)
    assert (whole.held_out, whole.planned) == (4, 4)
    assert "without depth L=4, which is predicted." in extrapolation_markdown(whole)
    deeper = judge_variance_laws([load_study(_spec(tmp_path, depths="2, 4, 8"))], out)
    assert (deeper.held_out, deeper.planned) == (4, 8)
    assert "without depth L=4, which is predicted (the deepest depth with two finished models of each scheme: " \
           "L=8 has fewer so far)." in extrapolation_markdown(deeper)


def test_a_study_whose_laws_cannot_be_fitted_holds_no_law_table(tiny_study):
    """Two depths leave the laws of one profile fewer rows than regressors: each law says why, the table is empty
    and the judgement read back holds none (the shipped atlas's table: tests/simulate/test_atlas.py)."""
    from simulate.study.judge.variance_laws import LAWS, judge_variance_laws
    from simulate.study.write.extrapolation_report import extrapolation_markdown

    study, out, _ = tiny_study
    laws = judge_variance_laws([study], out)
    assert [law.law for law in laws.laws] == [*LAWS] * 2 and all(law.test is None for law in laws.laws), laws
    assert laws.frame.empty and read_study(out, "tiny").variance_laws is None
    assert extrapolation_markdown(laws).count("No law: ") == 2 * len(LAWS)


def test_studies_that_share_models_train_them_once(tiny_study, tmp_path):
    study, out, _ = tiny_study
    deeper = load_study(_spec(tmp_path, name="deeper", depths="4, 8"))
    report = run_studies([study, deeper], out, workers=1)
    assert (report.total, report.skipped, report.ran) == (12, 8, 4)  # depth 4 is shared
    assert len(list((out / "runs").iterdir())) == 12
    assert len(read_summary(out)) == 12


def test_the_union_runs_longest_or_cheapest_first(tmp_path):
    from simulate.study.train.runner import point_cost, union_sweep

    study = load_study(_spec(tmp_path, depths="2, 4, 3"))
    longest = [point_cost(p) for p in union_sweep([study], tmp_path).points]
    cheapest = [point_cost(p) for p in union_sweep([study], tmp_path, "cheapest").points]
    assert longest == sorted(longest, reverse=True) and cheapest == sorted(longest) and longest[0] > longest[-1]
    with pytest.raises(ValueError, match="order must be one of longest, cheapest"):
        union_sweep([study], tmp_path, "random")
    points = union_sweep([study], tmp_path, "cheapest").points  # a tuned study's rounds: its tuning models first
    first = {points[-1].key, points[-2].key}
    ahead = union_sweep([study], tmp_path, "cheapest", first=first).points
    assert [p.key for p in ahead] == [points[-2].key, points[-1].key, *(p.key for p in points[:-2])]


def test_an_interrupted_training_resumes_to_the_same_model(tmp_path):
    """A point whose run stopped at a checkpoint resumes from it and ends as an uninterrupted run does."""
    from safetensors.torch import load_file

    from simulate.study.train.runner import union_sweep
    from simulate.training import Trainer, TrainConfig, load_corpus

    study = load_study(_spec(tmp_path, depths="2, 3"))
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    run_studies([study], whole, workers=1)
    point = union_sweep([study], resumed).points[0]
    config = TrainConfig(steps=12, batch=16, data="docs", seed=point.seed, log_every=6, clip=1.0)
    Trainer(point.setting, config, load_corpus("docs", 16), __import__("torch").device("cpu"),
            Path(point.workdir)).run(stop_at=6)
    run_studies([study], resumed, workers=1)
    a = load_file(str(whole / "runs" / point.key / "model.safetensors"))
    b = load_file(str(resumed / "runs" / point.key / "model.safetensors"))
    assert all(bool((a[name] == b[name]).all()) for name in a)


def test_a_failing_model_is_recorded_and_the_study_goes_on(tmp_path):
    path = _spec(tmp_path, name="hot", depths="2, 3", **{"lr = 3e-3": "weight_decay = 0.0",
                                                         "depth = [2, 3]": "depth = [2, 3]\nlr = [3e-3, 1e20]"})
    study = load_study(path)
    out = tmp_path / "out"
    report = run_studies([study], out, workers=1)
    assert report.failed == 8 and report.ran == 16
    written = write_reports(study, out)
    results = read_study(out, "hot")
    failed = results.points[results.points["status"] == PointStatus.FAILED]
    assert len(failed) == 8 and (failed["lr"] == 1e20).all()
    assert failed["error"].str.contains("loss is nan at step").all()
    row = results.trends[(results.trends["claim"] == "p1-lns-loss") & (results.trends["group"] == "lr=1e+20")]
    assert len(row) == 1 and (row["failed"] == 8).all() and (row["n"] == 0).all()
    assert written.warnings == 8 and "failed: the training loss is nan" in (out / "hot" / "study.md").read_text()


def test_a_point_that_sees_its_corpus_more_than_twice_is_warned_about(tmp_path):
    text_file = tmp_path / "small.txt"
    text_file.write_text("The quick brown fox jumps over the lazy dog. " * 30)  # 1350 bytes: 1215 to train
    study = load_study(_spec(tmp_path, name="small", depths="2, 3", data=str(text_file)))
    out = tmp_path / "out"
    run_studies([study], out, workers=1)
    written = write_reports(study, out)
    points = read_study(out, "small").points
    assert (points["epochs"] > 2).all() and written.warnings == len(points)
    assert "it may have overfitted" in (out / "small" / "study.md").read_text()


@pytest.mark.parametrize("edit, message", [
    ({'axes = ["depth"]': 'axes = ["widht"]'}, "'widht' is not a swept numeric field"),
    ({'axes = ["depth"]': 'axes = ["depth"]\nclaims = ["p9-nope"]'},
     "study.claims=['p9-nope'] is not allowed: a non-empty list of distinct values, each one of p1-"),
    ({"depth = [2, 4]": "depth = [2]"}, "'depth' has one value (2): a trend needs at least two"),
    ({"seeds = 2": "seeds = 1"}, "seeds=1 is not allowed: an integer >= 2 or a list of at least 2 distinct values"),
    ({"seeds = 2": "seeds = [3]"}, "seeds=[3] is not allowed: an integer >= 2 or a list of at least 2"),
    ({'scheme = ["pre", "lns"]': 'scheme = ["pre"]', 'axes = ["depth"]': 'axes = ["depth"]\nclaims = ["p1-lns-loss"]'},
     "'p1-lns-loss' needs scheme 'lns'"),
    ({'name = "tiny"': 'name = "tiny"\ntask = "train"'}, "unknown key 'task'"),
    ({"[study]\naxes": "[stud]\naxes"}, "unknown key 'stud'"),
    ({"steps = 12": "steps = 0"}, "steps=0 is not allowed"),
    ({"pairs = 1": "pairs = -1"}, "pairs=-1 is not allowed"),
    ({'data = "docs"': 'data = "no/such/file.txt"'}, "no such file"),
    ({'axes = ["depth"]': 'axes = ["depth"]\nconfidence = 1.5'}, "study.confidence=1.5 is not allowed: a real number in (0, 1)"),
    ({'axes = ["depth"]': 'axes = ["depth"]\nmultiplicity = "sidak"'},
     "study.multiplicity='sidak' is not allowed: one of bonferroni, holm, bh"),
    ({'axes = ["depth"]': 'axes = ["depth"]\nbootstrap = 50'}, "study.bootstrap=50 is not allowed: an integer >= 100"),
])
def test_bad_specs_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, edit, message):
    path = _spec(tmp_path, **edit)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as raised:
        study_main([str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert raised.value.code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_a_study_needs_its_own_name(tmp_path, capsys):
    path = _spec(tmp_path)
    with pytest.raises(SystemExit) as raised:
        study_main([str(path), str(path), "--out", str(tmp_path / "out")])
    assert raised.value.code == 2 and "two studies are named 'tiny'" in capsys.readouterr().err


def test_an_option_axis_moves_its_zipped_partners_and_groups_the_rest(tmp_path):
    study = parse_study({"setting": {"preset": "llama", "width": 16, "heads": 2, "tokens": 16, "depth": 2},
                         "axes": {"scheme": ["pre"], "lr": [1e-3, 3e-3]}, "zip": [{"steps": [4, 8],
                                                                               "log_every": [2, 4]}],
                         "seeds": 2, "options": {"data": "docs"}, "study": {"axes": ["steps", "lr"]}})
    assert {p.options["steps"]: p.options["log_every"] for p in study.sweep.points} == {4: 2, 8: 4}
    assert study.group_fields("steps") == ("lr",) and study.group_fields("lr") == ("steps", "log_every")


def test_the_gpu_specs_ask_ray_for_one_gpu_per_point_and_need_cuda_locally(tmp_path, capsys):
    from simulate.sweep.engines import _ray_options

    root = Path(__file__).resolve().parents[2] / "examples" / "studies" / "gpu"
    for spec in sorted(root.glob("*.toml")):
        study = load_study(spec)
        assert all(p.options["device"] == "cuda" and p.options["precision"] == "bf16" for p in study.sweep.points)
        assert {_ray_options(p, 0.0)["num_gpus"] for p in study.sweep.points} == {1}
        assert max(p.setting.width for p in study.sweep.points) <= 512
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as raised:
            study_main([str(root / "depth.toml"), "--out", str(tmp_path / "out")])
        assert raised.value.code == 2 and "CUDA is not available" in capsys.readouterr().err
        assert not (tmp_path / "out").exists()


@pytest.mark.gpu
def test_a_tiny_study_on_cuda_in_bf16(tmp_path):
    path = _spec(tmp_path, name="cuda", **{"pairs = 1": 'pairs = 1\ndevice = "cuda"\nprecision = "bf16"'})
    study = load_study(path)
    out = tmp_path / "out"
    report = run_studies([study], out, workers=1)
    assert report.failed == 0
    write_reports(study, out)
    points = read_study(out, "cuda").points
    assert points["val_loss"].between(0.5, 6.0).all()


def test_a_study_reads_the_stdlib_corpus_once_per_process(tmp_path):
    from simulate.training import data

    data._stdlib_parts.cache_clear()
    study = load_study(_spec(tmp_path, name="source", depths="2, 3", data="stdlib"))
    run_studies([study], tmp_path / "out", workers=1)
    info = data._stdlib_parts.cache_info()
    assert info.misses == 1 and info.hits >= 2 * len(study.sweep.points), info  # checks, trainings, scores


def test_an_export_keeps_what_the_reports_read_and_drops_the_weights(tiny_study, tmp_path):
    import pyarrow.parquet as pq

    study, out, _ = tiny_study
    dest = tmp_path / "shipped"
    assert study_main([str(out / "tiny" / "spec.toml"), "--out", str(out), "--report-only", "--export",
                       str(dest)]) == 0
    assert not (dest / "runs").exists() and (dest / "tiny" / "spec.toml").is_file()
    files = sorted((dest / "points").glob("*.parquet"))
    assert len(files) == 8 and pq.read_schema(files[0]).field("value").type == "float"  # float32
    assert sum(f.stat().st_size for f in files) < sum(f.stat().st_size for f in (out / "points").glob("*.parquet"))
    shipped, original = read_study(dest, "tiny").points, read_study(out, "tiny").points
    assert np.allclose(shipped["val_loss"], original["val_loss"], rtol=1e-6)
    readme = (dest / "README.md").read_text()
    assert "**8 of the 8 models** of the studies `tiny` are here (8 ok, 0 failed); the other 0" in readme
    assert f"--report-only --export {dest}" in readme and f"cp {dest}/points/*.parquet {out}/points/" in readme


def test_an_export_from_copied_points_alone_is_the_same(tiny_study, tmp_path):
    """A shipped results folder's "to go on": its points copied into a new folder, reported and exported again."""
    study, out, _ = tiny_study
    first, copied, again = tmp_path / "first", tmp_path / "copied", tmp_path / "again"
    spec = str(out / "tiny" / "spec.toml")
    assert study_main([spec, "--out", str(out), "--report-only", "--export", str(first)]) == 0
    shutil.copytree(first / "points", copied / "points")
    assert study_main([spec, "--out", str(copied), "--report-only", "--export", str(again)]) == 0
    assert (again / "tiny" / "spec.toml").read_text() == (first / "tiny" / "spec.toml").read_text()
    for file in ("levels.csv", "trends.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(again / "tiny" / file), pd.read_csv(first / "tiny" / file))
    # summary.csv is written from the points' records: "copied" has none, and a point gone from it reads pending
    pd.testing.assert_frame_equal(read_summary(again), read_summary(first))
    gone = study.sweep.points[0].key
    (copied / "points" / f"{gone}.parquet").unlink()
    assert study_main([spec, "--out", str(copied), "--report-only", "--export", str(tmp_path / "third")]) == 0
    status = read_summary(tmp_path / "third").set_index("point")["status"]
    assert status[gone] is PointStatus.PENDING and (status.drop(gone) == PointStatus.OK).all(), status


def test_a_results_readme_counts_what_is_pending(tiny_study, tmp_path):
    from simulate.study.write.provenance import results_readme

    study, out, _ = tiny_study
    shutil.copytree(out / "points", tmp_path / "points")
    removed = study.sweep.points[0]
    (tmp_path / "points" / f"{removed.key}.parquet").unlink()
    judgements = {"tiny": read_study(out, "tiny")}
    readme = results_readme([study], judgements, str(tmp_path), ["tiny.toml"], "mine", "the export command")
    assert "**7 of the 8 models**" in readme and "the other 1 are pending" in readme
    cell = "/".join(str(removed.axes[a]) for a in study.axes)
    assert f"{cell} {removed.setting.scheme}: 1/2" in readme, readme


def test_an_export_into_its_own_directory_is_refused(tiny_study, capsys):
    study, out, _ = tiny_study
    with pytest.raises(SystemExit) as raised:
        study_main([str(out / "tiny" / "spec.toml"), "--out", str(out), "--report-only", "--export", str(out)])
    assert raised.value.code == 2 and "--export" in capsys.readouterr().err


def test_a_spawned_worker_knows_the_study_task(tmp_path):
    """The sweep imports no study: the task "study" is registered by simulate.study.train.point, and a spawned worker
    of the local engine imports the home module of every registered task before its first point (the pool
    hands it a point at once). A worker that did not know the task would record its points as failed."""
    study = load_study(_spec(tmp_path, depths="2, 3"))
    report = run_studies([study], tmp_path / "out", workers=2)
    records = [read_point(tmp_path / "out", point.key)[0] for point in study.sweep.points]
    assert (report.total, report.failed) == (8, 0), report
    assert [r["status"] for r in records] == ["ok"] * 8, [(r["status"], r["error"]) for r in records]


def test_the_judgement_read_back_is_the_judgement_written(tiny_study):
    """One object from judge to page: the judgement write_reports formats and writes is the one read_study gives
    back, table for table (words as the same enum members, text '' where empty, numbers to the last bit: a CSV of
    17 significant digits), and its summary and headline read the same from either."""
    from simulate.study.write.headline import headline_section

    study, out, _ = tiny_study
    judged = write_reports(study, out).judgement
    read = read_study(out, "tiny")
    assert judged.frames().keys() == read.frames().keys() == {"points.parquet", "levels.csv", "trends.csv",
                                                              "calibration.csv"}
    for name, frame in judged.frames().items():
        pd.testing.assert_frame_equal(read.frames()[name], frame, check_dtype=False, obj=name)
    assert read.summary() == judged.summary()
    assert read.summary().startswith("Study tiny: 8 models (8 ok, 0 failed, 0 pending)"), read.summary()
    along = [line for line in read.summary(axis="depth").splitlines()[1:] if " along " in line]
    assert along and all(" along depth " in line for line in along), read.summary(axis="depth")
    assert not [line for line in read.summary(axis="width").splitlines() if " along " in line]
    assert headline_section(read, study) == headline_section(judged, study)
