"""Smoke tests of ``python -m simulate run`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--preset", "llama", "--depth", "3", "--width", "16", "--heads", "2", "--tokens", "4", "--samples", "2"]


def run_cli(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEPTH_WORKBENCH_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "simulate", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def test_run_writes_config_and_layers(tmp_path):
    out = tmp_path / "run"
    done = run_cli("run", *SMALL, "--metrics", "var,jac_dev", "--dtype", "float64", "--out", str(out), "--plot")
    assert done.returncode == 0, done.stderr
    assert "final var" in done.stdout and "layer-samples/s" in done.stdout
    table = pd.read_csv(out / "layers.csv")
    assert list(table.columns) == ["layer", "metric", "mean", "sem", "ci_low", "ci_high", "n"]
    assert set(table.metric) == {"var", "jac_dev"} and table.layer.max() == 3
    config = json.loads((out / "config.json").read_text())
    assert config["setting"]["preset"] == "llama" and config["mc"]["samples"] == 2
    assert (out / "metrics.png").stat().st_size > 0


@pytest.mark.parametrize("args", [
    ["run", *SMALL, "--depth", "0"],
    ["run", *SMALL, "--no-such-flag", "1"],
    ["run", *SMALL, "--metrics", "var,nope"],
    ["run", *SMALL, "--samples", "0"],
    ["run", *SMALL, "--device", "tpu"],
    ["frobnicate"],
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args):
    out = tmp_path / "run"
    done = run_cli(*args, "--out", str(out))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists()


def test_blow_up_exits_1_naming_the_layer_and_keeps_the_table(tmp_path):
    out = tmp_path / "run"
    done = run_cli("run", "--scheme", "none", "--block", "linear", "--depth", "80", "--width",
                   "16", "--tokens", "2", "--samples", "2", "--init-std", "3", "--out", str(out))
    assert done.returncode == 1
    assert "after block" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    config = json.loads((out / "config.json").read_text())
    assert config["blow_up_layer"] is not None
    assert pd.read_csv(out / "layers.csv").layer.max() == config["blow_up_layer"] - 1


def test_unavailable_cuda_exits_2(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available")
    done = run_cli("run", *SMALL, "--device", "cuda", "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and "CUDA" in done.stderr and not (tmp_path / "run").exists()
