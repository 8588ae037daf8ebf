"""A run is continued or kept only when it was made by this request and these versions
(:mod:`simulate.training.identity`): ``train --resume`` refuses another one in one line, ``train_into`` trains it
again, and the run records what made it."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from safetensors.torch import load_file

from simulate.runtime.keys import key_inputs
from simulate.training.cli import main
from simulate.training.data import corpus_digest
from simulate.training.identity import TRAINER, run_key
from simulate.training.loop import TrainConfig
from simulate.training.run_directory import train_into
from theory.setting import Setting

TINY = ["--preset", "llama", "--depth", "2", "--width", "16", "--heads", "2", "--tokens", "8", "--batch", "4",
        "--steps", "6", "--log-every", "2", "--seed", "3", "--no-progress"]
SETTING = Setting.preset("llama", depth=2, width=16, heads=2, tokens=8)
CONFIG = TrainConfig(steps=4, batch=2, log_every=2, seed=1)


def _other_code(monkeypatch) -> None:
    """The trainer's sources as if edited: another code version for the trainer's closure."""
    from simulate.runtime import versions

    real = versions.closure_version
    monkeypatch.setattr("simulate.training.identity.closure_version",
                        lambda *entries, **kw: "e" * 16 if entries == (TRAINER,) else real(*entries, **kw))


def test_a_run_records_its_key_and_what_made_it(tmp_path):
    train_into(tmp_path / "run", SETTING, CONFIG, torch.device("cpu"))
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["key"] == run_key(SETTING, CONFIG)
    assert config["versions"] == key_inputs(config["code"], corpus_digest("docs"))
    assert config["data"]["digest"] == corpus_digest("docs")


@pytest.mark.parametrize("change, words", [("code", "code="), ("python", "python="), ("setting", "width=")])
def test_resume_of_a_run_made_otherwise_exits_2_and_changes_nothing(tmp_path, capsys, monkeypatch, change, words):
    out = tmp_path / "stopped"
    assert main([*TINY, "--out", str(out), "--stop-at", "3"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    extra = []
    if change == "code":
        _other_code(monkeypatch)
    elif change == "python":
        monkeypatch.setattr("platform.python_version", lambda: "3.99.0")
    else:
        extra = ["--width", "32"]
    with pytest.raises(SystemExit) as stop:
        main([*TINY, *extra, "--resume", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1 and words in lines[0], lines
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_train_into_keeps_its_own_run_and_trains_one_made_otherwise_again(tmp_path, monkeypatch, caplog):
    run = tmp_path / "run"
    train_into(run, SETTING, CONFIG, torch.device("cpu"))
    model = load_file(run / "model.safetensors")
    monkeypatch.setattr("simulate.training.loop.Trainer.run", lambda self: pytest.fail("trained a kept run"))
    train_into(run, SETTING, CONFIG, torch.device("cpu"))  # the same run: kept as it is
    monkeypatch.undo()
    _other_code(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="simulate.training"):
        train_into(run, SETTING, CONFIG, torch.device("cpu"))
    assert len(caplog.records) == 1 and "trained again" in caplog.text and "code=" in caplog.text, caplog.text
    config = json.loads((run / "config.json").read_text())
    assert config["versions"]["code"] == config["code"] == "e" * 16 and config["status"] == "done"
    again = load_file(run / "model.safetensors")  # the same numbers, from a run of its own
    assert again.keys() == model.keys() and all(torch.equal(again[name], model[name]) for name in model)


def test_a_run_that_recorded_no_versions_is_trained_again(tmp_path, caplog):
    run = tmp_path / "run"
    train_into(run, SETTING, CONFIG, torch.device("cpu"))
    config = json.loads((run / "config.json").read_text())
    del config["versions"]  # as the trainer wrote it before the versions were recorded
    (run / "config.json").write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING, logger="simulate.training"):
        train_into(run, SETTING, CONFIG, torch.device("cpu"))
    assert "not recorded there" in caplog.text, caplog.text
    assert "versions" in json.loads((run / "config.json").read_text())
