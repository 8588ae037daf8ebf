"""``python -m simulate bench --train --quick``: the row is written with its columns (smoke test, no timing)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from simulate.bench.cli import main as bench_main
from simulate.bench.training import BENCH_COLUMNS, STUDY_LOG_EVERY


def test_bench_train_quick_writes_its_row(tmp_path, capsys):
    assert bench_main(["--train", "--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "bench_train.csv")
    assert list(table.columns) == BENCH_COLUMNS and len(table) == 1
    row = table.iloc[0]
    assert row.device == "cpu" and row.plain_tokens_per_s > 0 and row.trainer_tokens_per_s > 0
    assert math.isfinite(row.overhead) and row.probe_s >= 0
    assert "bench_train.csv" in capsys.readouterr().out
    assert row.hf_tokens_per_s > 0 and row.study_rate_tokens_per_s > 0  # transformers is in the dev extra
    assert row.trainer_vs_hf == pytest.approx(row.trainer_tokens_per_s / row.hf_tokens_per_s, rel=1e-9)
    # the study rate is an unlogged step plus a study's share of a probe and a checkpoint (4 x 16 tokens a step)
    step_seconds = 64 / row.unlogged_tokens_per_s + (row.probe_wall_s + row.checkpoint_wall_s) / STUDY_LOG_EVERY
    assert row.study_rate_tokens_per_s == pytest.approx(64 / step_seconds, rel=1e-9)


def test_the_study_rate_is_the_studies_logging_rate():
    from simulate.study.train.point import STUDY_DEFAULTS

    assert STUDY_LOG_EVERY == STUDY_DEFAULTS["log_every"]
