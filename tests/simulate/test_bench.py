"""``python -m simulate bench`` smoke test, its bad-input handling, and the naive simulator's fidelity."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from simulate import simulate as ours_simulate
from simulate.naive import naive_simulate
from theory.setting import Setting

Z_LIMIT = 4.0


def assert_tables_agree(name: str, ours: pd.DataFrame, naive: pd.DataFrame, limit: float = Z_LIMIT) -> None:
    """Every (layer, metric) mean of the two tables within ``limit`` combined standard errors."""
    joined = ours.merge(naive, on=["layer", "metric"], suffixes=("_ours", "_naive"))
    assert not joined.empty, f"{name}: no common (layer, metric) rows"
    spread = (joined.sem_ours**2 + joined.sem_naive**2) ** 0.5
    z = (joined.mean_ours - joined.mean_naive) / spread
    worst = z.abs().idxmax()
    if abs(z[worst]) > limit:
        row = joined.loc[worst]
        raise AssertionError(f"{name}: {row.metric} at layer {row.layer}: ours {row.mean_ours:.6g} vs naive "
                             f"{row.mean_naive:.6g} (z = {z[worst]:.2f}, limit {limit}, n = {row.n_ours})")


@pytest.mark.parametrize("scheme, kv_heads", [("pre", None), ("lns", 2), ("post", None)])
def test_naive_matches_simulate(scheme, kv_heads):
    """The naive nn.Module stack and the workbench simulator agree in law (64 samples, 4 sem)."""
    setting = Setting.preset("llama", scheme=scheme, width=32, heads=4, kv_heads=kv_heads, tokens=8, depth=3)
    metrics = ("var", "var_attn", "var_mlp", "angular", "token_cos")
    naive = naive_simulate(setting, samples=64, seed=1, metrics=metrics, dtype="float64")
    ours = ours_simulate(setting, samples=64, seed=2, metrics=metrics, device="cpu", dtype="float64")
    assert set(naive.metric) == set(metrics)
    assert_tables_agree(f"naive vs simulate [{scheme}, kv_heads={kv_heads}]", ours, naive)


def test_naive_rejects_what_it_does_not_model():
    with pytest.raises(ValueError, match="scheme='deepnorm'"):
        naive_simulate(Setting.preset("llama", scheme="deepnorm", width=16, heads=2, depth=1), samples=1)
    with pytest.raises(ValueError, match="metrics='jac_dev'"):
        naive_simulate(Setting.preset("llama", width=16, heads=2, depth=1), samples=1, metrics=("jac_dev",))


def test_bench_quick_writes_the_table(tmp_path, capsys):
    from simulate.bench.cli import main
    from simulate.bench.timing import CHECK_COLUMNS, COLUMNS

    code = main(["--quick", "--ablate", "--device", "cpu", "--out", str(tmp_path)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    bench = pd.read_csv(tmp_path / "bench.csv")
    assert list(bench.columns) == COLUMNS
    assert len(bench) >= 2 and (bench.ours_s > 0).all()
    pair = bench[bench.setting.str.contains(":input-std-")]  # independent vs correlated tokens
    assert len(pair) == 2 and (pair.layer_samples_per_s > 0).all(), list(bench.setting)
    assert f"{pair.setting.iloc[1]}: " in printed.out and "time ratio" in printed.out, printed.out[-500:]
    base = bench.iloc[0]
    assert math.isfinite(base.naive_s) and math.isfinite(base.speedup) and base.device == "cpu"
    checks = pd.read_csv(tmp_path / "bench_checks.csv")
    assert list(checks.columns) == CHECK_COLUMNS
    assert {"var", "angular"} <= set(checks.metric)
    assert not list(tmp_path.glob(".*.tmp")), "temporary files left behind"


@pytest.mark.parametrize("argv, needle", [
    (["--bogus"], "unrecognized arguments"),
    (["--device", "tpu"], "invalid choice"),
    (["--threads", "0"], "--threads: '0' is not allowed"),
    (["--law-noise"], "--law-noise is allowed only with --theory"),
])
def test_bench_bad_input_is_one_line_exit_2(argv, needle, tmp_path, capsys):
    from simulate.bench.cli import main

    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_theory_bench_rows(tmp_path, monkeypatch, capsys):
    """``bench --theory``: one row per case and law, the mean-field row the ratios' base, the file written."""
    import sys

    from simulate.bench import theory as theory_bench
    from simulate.bench.cli import main

    command = [sys.executable, "-m", "theory", "predict", "--block", "linear", "--depth", "3", "--width", "16"]
    monkeypatch.setattr(theory_bench, "speed_cases", lambda quick: [("process", command),
                                                                    ("in process", Setting(depth=2, width=16, tokens=4))])
    assert main(["--theory", "--quick", "--repeat", "1", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "bench_theory.csv")
    assert table.case.tolist() == ["process", "process", "in process", "in process"]
    assert table.law.tolist() == ["finite-width", "mean-field"] * 2
    assert (table[table.law == "mean-field"].ratio_to_mean_field == 1.0).all()
    assert (table.median_s > 0).all() and (table.cpu_s > 0).all()
    assert "bench_theory.csv" in capsys.readouterr().out


def test_importing_simulate_sets_the_wait_policy():
    """A library user's import of simulate (torch not loaded yet) gets OMP_WAIT_POLICY=PASSIVE; a set value stays."""
    import os
    import subprocess
    import sys

    code = "import os, simulate; print(os.environ.get('OMP_WAIT_POLICY'))"
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    for preset, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        run_env = env if preset is None else {**env, "OMP_WAIT_POLICY": preset}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=run_env, check=True)
        assert result.stdout.strip() == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_bench_cuda_without_cuda_fails_cleanly(tmp_path, capsys):
    from simulate.bench.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["--device", "cuda", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "CUDA is not available" in err and len(err.strip().splitlines()) == 1


def test_bench_out_must_be_a_directory(tmp_path, capsys):
    from simulate.bench.cli import main

    target = tmp_path / "file"
    target.write_text("keep")
    with pytest.raises(SystemExit) as stop:
        main(["--quick", "--device", "cpu", "--out", str(target)])
    assert stop.value.code == 2 and target.read_text() == "keep"


def test_compare_gives_z_of_the_last_layer():
    from simulate.bench.timing import compare

    row = dict(metric="var", sem=0.1, ci_low=0.0, ci_high=0.0, n=8)
    ours = pd.DataFrame([dict(row, layer=0, mean=1.0), dict(row, layer=2, mean=1.5)])
    reference = pd.DataFrame([dict(row, layer=0, mean=1.0), dict(row, layer=2, mean=1.2)])
    (check,) = compare("x", ours, reference, metrics=("var", "angular"))
    assert check["layer"] == 2 and math.isclose(check["z"], 0.3 / math.sqrt(0.02))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bench_quick_on_gpu(tmp_path):
    from simulate.bench.cli import main
    from simulate.bench.timing import COLUMNS

    assert main(["--quick", "--device", "cuda", "--out", str(tmp_path)]) == 0
    bench = pd.read_csv(tmp_path / "bench.csv")
    assert list(bench.columns) == COLUMNS and (bench.device == "cuda").all()
