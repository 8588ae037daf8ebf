"""``python -m simulate bench --train --quick``: the row is written with its columns (smoke test, no timing)."""

from __future__ import annotations

import math

import pandas as pd

from simulate.bench import main as bench_main
from simulate.training.speed import BENCH_COLUMNS


def test_bench_train_quick_writes_its_row(tmp_path, capsys):
    assert bench_main(["--train", "--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "bench_train.csv")
    assert list(table.columns) == BENCH_COLUMNS and len(table) == 1
    row = table.iloc[0]
    assert row.device == "cpu" and row.plain_tokens_per_s > 0 and row.trainer_tokens_per_s > 0
    assert math.isfinite(row.overhead) and row.probe_s >= 0
    assert "bench_train.csv" in capsys.readouterr().out
