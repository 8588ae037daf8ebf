"""The one key builder (:mod:`simulate.runtime.keys`): every key that names a result moves with the code, the
corpus, the Python and the torch that make it, and a study's point keeps the key its models are stored under.

The keys: a training run's (:func:`simulate.training.identity.run_key`, the cached trainings), the scores'
(:func:`simulate.scores.runs.scores_key`, cached scores and a study point's reused scores), the simulator
cache's (:func:`simulate.cache.cache_key`) and a versioned sweep point's (:attr:`simulate.sweep.spec.Point.key`).
"""

from __future__ import annotations

import json

import pytest

import simulate.study.train.point  # noqa: F401 (registers the task "study")
from simulate.cache import cache_key
from simulate.runtime.keys import KEY_LENGTH, config_hash, key_inputs, result_key
from simulate.scores.runs import scores_key
from simulate.study.atlas import ATLAS_DIR, EARLY_ATLAS_DIR
from simulate.sweep.spec import Point, parse_spec
from simulate.sweep.store import decode_point, read_record
from simulate.training.identity import run_key
from simulate.training.loop import TrainConfig
from theory.setting import Setting

SETTING = Setting.preset("llama", depth=2, width=16, heads=2, tokens=8)
TEXT = "The quick brown fox jumps over the lazy dog, again and again. " * 40


@pytest.fixture
def corpus(tmp_path):
    """A user's text file (the data of the keys below) and a run directory that trained on it (its config)."""
    path = tmp_path / "text.txt"
    path.write_text(TEXT)
    run = tmp_path / "run"
    run.mkdir()
    config = TrainConfig(steps=4, batch=2, data=str(path))
    (run / "config.json").write_text(json.dumps({"setting": SETTING.to_dict(), "train": config.to_dict()}))
    return path, run, config


def _keys(run, config) -> dict[str, str]:
    """Every kind of key for one request that reads the corpus of ``config``."""
    sweep = parse_spec({"task": "train", "setting": {"preset": "llama", "depth": 2, "width": 16, "heads": 2,
                                                     "tokens": 8}, "options": {"steps": 4, "data": config.data}})
    return {"training": run_key(SETTING, config), "scores": scores_key(run, at_init=True),
            "sweep point": sweep.points[0].key, "simulator cache": cache_key(SETTING, {"samples": 2})}


def test_the_corpus_and_the_python_are_in_every_key(corpus, monkeypatch):
    path, run, config = corpus
    before = _keys(run, config)
    assert all(len(key) == KEY_LENGTH for key in before.values()) and _keys(run, config) == before
    path.write_text(TEXT.replace("fox", "cat"))  # another corpus, the same name and length
    other_data = _keys(run, config)
    moved = {name for name in before if other_data[name] != before[name]}
    assert moved == {"training", "scores", "sweep point"}, moved  # the simulator reads no corpus
    monkeypatch.setattr("platform.python_version", lambda: "3.99.0")
    other_python = _keys(run, config)
    assert all(other_python[name] != other_data[name] for name in before), other_python


def test_a_key_is_its_request_and_the_versions_a_record_keeps():
    versions = key_inputs("c0de", "d1g3")
    assert result_key({"depth": 2}, versions) == config_hash({"what": {"depth": 2}, **versions})
    for name in versions:
        assert result_key({"depth": 2}, {**versions, name: "other"}) != result_key({"depth": 2}, versions), name
    with pytest.raises(ValueError, match="key_inputs"):
        result_key({"depth": 2}, {"code": "c0de"})


def test_a_versioned_point_carries_its_versions_to_a_worker():
    point = parse_spec({"task": "run", "setting": {"depth": 2, "width": 8}}).points[0]
    assert point.versions == key_inputs(point.code) and point.versions["data"] == ""
    again = Point.from_dict(json.loads(json.dumps(point.to_dict())))
    assert again == point and again.key == point.key


@pytest.mark.parametrize("folder", [ATLAS_DIR, EARLY_ATLAS_DIR], ids=["atlas", "atlas-400-steps"])
def test_the_shipped_study_points_keep_their_keys(folder):
    """A study's key is its config alone (the versions left out): every shipped model is found where it is."""
    files = sorted((folder / "points").glob("*.parquet"))
    assert files
    for path in files:
        record = read_record(path)
        config = record["config"]
        point = Point(0, config["task"], Setting.from_dict(config["setting"]), config["seed"], config["options"],
                      {}, config["code"])
        assert config["task"] == "study" and config["code"] == "" and point.key == path.stem == record["point"]


def test_a_worker_of_another_python_fails_a_versioned_point_without_running_it(monkeypatch):
    from simulate.sweep import engines

    point = parse_spec({"task": "run", "setting": {"depth": 2, "width": 8}}).points[0]
    monkeypatch.setattr("platform.python_version", lambda: "3.99.0")
    record, data = engines.execute_point(point.to_dict())
    assert record["status"] == "failed" and record["point"] == point.key, record
    assert decode_point(data)[1].empty and record["headline"] == {}  # nothing measured
    assert "python=" in record["error"] and record["versions"] == point.versions, record["error"]
