"""``python -m simulate train``: files and columns, resume exactness, bad input, data errors, the nan stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from safetensors.torch import load_file

from simulate.training.cli import main
from simulate.training.probes import LAYER_METRICS
from simulate.training.report import FILES

ROOT = Path(__file__).resolve().parents[3]
TINY = ["--preset", "llama", "--depth", "2", "--width", "16", "--heads", "2", "--tokens", "8", "--batch", "4",
        "--steps", "6", "--log-every", "2", "--seed", "3", "--no-progress"]
BLOCK_METRICS = {"var_attn", "var_mlp", "angular", "jac_dev", "align_a", "align_b"}  # blocks 1..L only


def train(capsys, *args) -> tuple[int, str]:
    """Run ``main`` in-process; (exit code, stderr)."""
    try:
        code = main(list(args))
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "full"
    assert main([*TINY, "--out", str(out)]) == 0
    return out


def test_files_and_every_metric_at_every_logged_step_and_layer(full_run):
    for name, columns in FILES.items():
        assert list(pd.read_csv(full_run / name).columns) == columns, name
    assert (full_run / "model.safetensors").stat().st_size > 0
    config = json.loads((full_run / "config.json").read_text())
    assert config["status"] == "done" and config["setting"]["depth"] == 2 and config["train"]["steps"] == 6
    layers = pd.read_csv(full_run / "train_layers.csv")
    assert sorted(layers.step.unique()) == [0, 2, 4, 6]
    for metric in LAYER_METRICS:
        expected = {1, 2} if metric in BLOCK_METRICS else {0, 1, 2}
        for step in (0, 2, 4, 6):
            rows = layers[(layers.metric == metric) & (layers.step == step)]
            assert set(rows.layer) == expected, (metric, step, sorted(rows.layer))
            assert rows["mean"].notna().all(), (metric, step)
    probe_rows = layers[~layers.metric.isin(["grad_norm", "param_norm"])]
    assert (probe_rows.n == 4).all() and probe_rows["sem"].notna().all()
    loss = pd.read_csv(full_run / "loss.csv")
    assert sorted(loss[loss.split == "train"].step) == list(range(7))
    assert sorted(loss[loss.split == "val"].step) == [0, 2, 4, 6]
    batch = pd.read_csv(full_run / "train_batch_layers.csv")
    assert sorted(batch.step.unique()) == [0, 2, 4, 6] and "var" in set(batch.metric)
    growth = pd.read_csv(full_run / "growth.csv")
    assert list(growth.step) == [0, 2, 4, 6] and (growth.bridge_identity_error < 1e-9).all()


def test_resume_logs_exactly_what_an_uninterrupted_run_logs(full_run, tmp_path, capsys):
    out = tmp_path / "resumed"
    code, _ = train(capsys, *TINY, "--out", str(out), "--stop-at", "3", "--checkpoint-every", "2")
    assert code == 0 and json.loads((out / "config.json").read_text())["status"] == "stopped"
    code, err = train(capsys, *TINY, "--resume", str(out), "--log-every", "3")
    assert code == 2 and "log_every" in err  # another flag than the stopped run's: refused
    code, err = train(capsys, *TINY, "--resume", str(out), "--stop-at", "3", "--checkpoint-every", "2")
    assert code == 2 and "stop_at" in err
    code, _ = train(capsys, *TINY, "--resume", str(out), "--device", "cpu")  # checkpoint_every resolves to 2 too
    assert code == 0
    for name in FILES:
        assert (out / name).read_text() == (full_run / name).read_text(), name
    resumed, uninterrupted = load_file(out / "model.safetensors"), load_file(full_run / "model.safetensors")
    assert resumed.keys() == uninterrupted.keys()
    assert all((resumed[k] == uninterrupted[k]).all() for k in resumed)


def test_resume_from_another_setting_exits_2_and_changes_nothing(full_run, capsys):
    before = {p.name: p.read_bytes() for p in full_run.iterdir()}
    code, err = train(capsys, *TINY, "--width", "32", "--resume", str(full_run))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "width" in err
    assert {p.name: p.read_bytes() for p in full_run.iterdir()} == before


@pytest.mark.parametrize("extra, field", [
    (["--scheme", "nope"], "scheme"),
    (["--steps", "0"], "steps"),
    (["--warmup", "6"], "warmup"),
    (["--batch", "1000000000"], "batch"),
    (["--causal", "false"], "causal"),
    (["--input-cos", "0.3"], "input_cos"),
    (["--precision", "tf32"], "tf32"),
    (["--log-every", "0"], "log_every"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, extra, field):
    out = tmp_path / "run"
    code, err = train(capsys, *TINY, *extra, "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and field in err, err
    assert not out.exists()


@pytest.mark.parametrize("content, words", [
    (None, "no such file"), (b"", "empty"), (b"text\x00more" * 100, "binary"),
    (b"\xff\xfe bad" * 200, "not UTF-8"), ("short text".encode(), "too short"),
])
def test_data_errors_exit_2(tmp_path, capsys, content, words):
    path = tmp_path / "corpus.txt"
    if content is not None:
        path.write_bytes(content)
    out = tmp_path / "run"
    code, err = train(capsys, *TINY, "--data", str(path), "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err and "data=" in err, err
    assert not out.exists()


def test_user_text_file_trains(tmp_path, capsys):
    path = tmp_path / "corpus.txt"
    path.write_text("Ein kleiner Text, café und naïve Wörter. " * 40, encoding="utf-8")
    code, _ = train(capsys, *TINY, "--steps", "2", "--data", str(path), "--out", str(tmp_path / "run"))
    assert code == 0 and json.loads((tmp_path / "run" / "config.json").read_text())["data"]["name"] == str(path)


def test_nan_loss_stops_at_its_step_keeps_the_logs_and_exits_1(tmp_path, capsys):
    out = tmp_path / "run"
    code, err = train(capsys, *TINY, "--lr", "1e30", "--weight-decay", "1e-31", "--out", str(out))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "at step" in err, err
    config = json.loads((out / "config.json").read_text())
    loss = pd.read_csv(out / "loss.csv")
    step = config["nan_step"]
    assert config["status"] == "nan" and f"at step {step}" in err and 1 <= step <= 6
    last = loss[loss.split == "train"].iloc[-1]
    assert last.step == step and pd.isna(last.loss)
    assert (loss[loss.split == "train"].step.max()) == step


def test_cli_smoke_in_a_subprocess(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEPTH_WORKBENCH_THREADS": "1"}
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "simulate", "train", *TINY, "--steps", "2", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "train loss" in done.stdout and "tokens/s" in done.stdout and done.stderr == ""
    assert (out / "train_layers.csv").exists()
