"""``python -m theory predict``: the layers it keeps (``--layers``), the size line, Parquet, bad input."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from theory.__main__ import DEFAULT_LOG_LAYERS, predict_main
from theory.cli import estimated_size
from theory.meanfield.prediction import predict
from theory.setting import Setting

LINEAR = ["--block", "linear", "--width", "8"]  # the cheapest recursion


def _predict(tmp_path, capsys, *args, out="p.csv"):
    """Run predict_main in-process; (exit code, stdout, stderr lines, output path)."""
    path = tmp_path / out
    try:
        code = predict_main([*LINEAR, *args, "--out", str(path)])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines(), path


def _size_line(stderr: list[str], path) -> tuple[int, str]:
    """The rows and the estimated size the size line announces for ``path``."""
    lines = [line for line in stderr if "writing" in line and line.endswith(f"to {path}")]
    assert len(lines) == 1, stderr
    match = re.search(r"writing ([\d,]+) rows \(~([\d.]+ k?M?G?B)\)", lines[0])
    assert match, lines[0]
    return int(match.group(1).replace(",", "")), match.group(2)


def test_default_thins_a_deep_stack_to_log_spaced_layers(tmp_path, capsys):
    code, out, err, path = _predict(tmp_path, capsys, "--depth", "1000000")
    assert code == 0, err
    layers = np.unique(pd.read_csv(path).layer)
    assert len(layers) == DEFAULT_LOG_LAYERS and layers[0] == 0 and layers[-1] == 1_000_000
    assert np.array_equal(layers[:50], np.arange(50))  # one by one while log steps are under one layer
    # geometric above: equal log steps (~0.0102), rounding moves each by <= 1/layer = 1e-4 (1 %) above 10^4
    log_steps = np.diff(np.log(layers[layers >= 10_000]))
    assert np.all(np.abs(log_steps / np.median(log_steps) - 1) < 0.02), (log_steps.min(), log_steps.max())
    assert path.stat().st_size < 1_000_000  # the full table is 576 MB for llama, 8e6 rows here
    note = [line for line in err if "note:" in line]
    assert len(note) == 1 and "1,000 of 1,000,001 layers" in note[0] and "--layers all" in note[0]
    rows, _ = _size_line(err, path)
    assert rows == len(pd.read_csv(path)) and f"{rows} rows (1000 of 1000001 layers" in out


def test_default_keeps_every_layer_up_to_ten_thousand(tmp_path, capsys):
    code, _, err, path = _predict(tmp_path, capsys, "--depth", "10000")
    assert code == 0, err
    assert np.array_equal(np.unique(pd.read_csv(path).layer), np.arange(10_001))
    assert not [line for line in err if "note:" in line]


@pytest.mark.parametrize("spec, expected", [
    ("every:30", [0, 30, 60, 90, 100]),
    ("every:100", [0, 100]),
    ("every:500", [0, 100]),
    ("log:5", [0, 1, 5, 22, 100]),  # geometric 1..100 in 4 steps: 1, 4.6, 21.5, 100
    ("log:500", list(range(101))),  # more than there are: all of them
    ("100,0,10,10", [0, 10, 100]),
    ("7", [7]),
    ("all", list(range(101))),
])
def test_layer_forms(tmp_path, capsys, spec, expected):
    code, _, err, path = _predict(tmp_path, capsys, "--depth", "100", "--layers", spec)
    assert code == 0, err
    table = pd.read_csv(path)
    assert np.unique(table.layer).tolist() == expected
    full = predict(Setting(preset=None, block="linear", width=8, depth=100))
    assert len(table) == full.layer.isin(expected).sum()  # every row of a kept layer, none other


@pytest.mark.parametrize("count", [2, 3, 50, 1000])
def test_log_form_keeps_exactly_n_distinct_layers(tmp_path, capsys, count):
    code, _, err, path = _predict(tmp_path, capsys, "--depth", "20000", "--layers", f"log:{count}")
    assert code == 0, err
    layers = np.unique(pd.read_csv(path).layer)
    assert len(layers) == count and layers[0] == 0 and layers[-1] == 20_000


def test_parquet_has_the_rows_of_the_csv(tmp_path, capsys):
    args = ("--depth", "300", "--layers", "log:40")
    assert _predict(tmp_path, capsys, *args, out="p.csv")[0] == 0
    code, _, err, parquet = _predict(tmp_path, capsys, *args, out="p.parquet")
    assert code == 0, err
    with open(parquet, "rb") as stream:
        assert stream.read(4) == b"PAR1"
    from_parquet = pd.read_parquet(parquet)
    from_csv = pd.read_csv(tmp_path / "p.csv")
    assert list(from_parquet.columns) == ["layer", "metric", "law", "kind", "value"]
    # CSV keeps the floats' digits (write_csv), to one unit in the last place: pyarrow's CSV writer at the lowest
    # version the package allows writes 1.9999999999999998 as 2 (seen in CI's lowest-versions step)
    pd.testing.assert_frame_equal(from_parquet.astype({c: str for c in ("metric", "law", "kind")}), from_csv,
                                  check_exact=False, rtol=1e-15)
    rows, _ = _size_line(err, parquet)
    assert rows == len(from_parquet)


@pytest.mark.parametrize("spec", ["garbage", "every:0", "every:", "every:-2", "log:1", "log:x", "1.5", "0,,3",
                                  "-1", "0,-5", "0,101", "", "every:٣"])
def test_bad_layers_exit_2_naming_the_flag_and_nothing_written(tmp_path, capsys, spec):
    code, out, err, path = _predict(tmp_path, capsys, "--depth", "100", f"--layers={spec}")
    assert code == 2 and out == ""
    assert len(err) == 1 and "--layers" in err[0] and "every:K" in err[0] and "log:N" in err[0], err
    assert not list(tmp_path.iterdir())


def test_size_line_estimate_is_close_for_csv(tmp_path, capsys):
    code, _, err, path = _predict(tmp_path, capsys, "--depth", "100")
    assert code == 0, err
    _, size = _size_line(err, path)
    value, unit = size.split()
    announced = float(value) * {"B": 1, "kB": 1e3, "MB": 1e6}[unit]
    assert abs(announced - path.stat().st_size) <= 0.005 * path.stat().st_size  # 3 significant digits


@pytest.mark.parametrize("fmt, low, high", [("csv", 0.98, 1.02), ("parquet", 0.9, 2.0)])
def test_estimated_size_from_a_sample(fmt, low, high):
    """Above ``sample_rows`` the size is scaled from a sample: CSV to ~1 %, Parquet errs high (compression)."""
    import io

    from theory.cli import write_table
    table = predict(Setting(preset=None, block="linear", width=8, depth=20_000))  # 160,004 rows
    stream = io.BytesIO()
    write_table(table, stream, fmt)
    ratio = estimated_size(table, fmt, sample_rows=2000) / stream.getbuffer().nbytes
    assert low < ratio < high, ratio
