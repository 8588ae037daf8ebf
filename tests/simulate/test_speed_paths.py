"""The speed techniques change time, not results: prefetch, shared factors, precision, sync-free Cholesky.

Statistical checks state their tolerance in Monte-Carlo standard errors (4 sem) and fix their seeds.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from simulate.engine import stack
from simulate import simulate
from simulate.engine.metrics import StatsBuffer
from simulate.engine.noise import NoiseSource
from simulate.engine.weights import WeightSampler
from theory.setting import Setting

ROOT = Path(__file__).resolve().parents[2]
Z_LIMIT = 4.0
SMALL = Setting.preset("llama", width=32, heads=4, kv_heads=2, tokens=6, depth=4)


@pytest.mark.parametrize("setting, metrics", [
    (SMALL, "all"),
    (SMALL.replace(mask_density=0.5, scheme="lns"), "var,var_attn,jac_dev,e2e_gain"),
    (Setting(block="moe", width=16, heads=2, tokens=4, depth=3, experts=3, top_k=2), "var,angular"),
])
def test_prefetch_gives_the_same_numbers(setting, metrics):
    ahead = simulate(setting, samples=3, seed=4, metrics=metrics, device="cpu", prefetch=True)
    plain = simulate(setting, samples=3, seed=4, metrics=metrics, device="cpu", prefetch=False)
    pd.testing.assert_frame_equal(ahead, plain)


def test_prefetch_serves_draws_and_stops_its_thread():
    sampler = WeightSampler(0, 2, "cpu", torch.float32, "auto", prefetch=True)
    buffer = StatsBuffer(SMALL.depth, ("var",), 2, torch.device("cpu"))
    with torch.inference_mode():
        stack.run_stack(SMALL, sampler, buffer)
    sampler.close()
    assert sampler.noise.prefetched > 0 and sampler.noise._executor is None


def test_noise_source_drops_draws_a_block_did_not_make():
    """A block that draws other parts than the previous one still gets the keyed numbers."""
    ahead, plain = NoiseSource(3, "cpu", prefetch=True), NoiseSource(3, "cpu", prefetch=False)
    ahead.begin_layer(1, 4)
    ahead.normal((1, 10), (2, 5))
    for layer in (2, 3):
        ahead.begin_layer(layer, 4)
        assert torch.equal(ahead.uniform((layer, 60), (3,)), plain.uniform((layer, 60), (3,)))
        assert torch.equal(ahead.normal((layer, 10), (2, 6)), plain.normal((layer, 10), (2, 6)))
    ahead.close()


def test_shared_factors_give_the_same_numbers():
    shared = simulate(SMALL, samples=3, seed=2, metrics="var,angular", device="cpu", weights="implicit")
    unshared = simulate(SMALL, samples=3, seed=2, metrics="var,angular", device="cpu", weights="implicit",
                        share_factors=False)
    pd.testing.assert_frame_equal(shared, unshared)


def _second_moments(outputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample (m x m) moments y_i y_j^T / d_out for all pairs (i, j): mean and sem over samples."""
    blocks = [torch.einsum("sad,sbd->sab", a, b) / a.shape[-1] for a in outputs for b in outputs]  # (S, m, m)
    stacked = torch.stack(blocks, 1)  # (S, n*n, m, m)
    return stacked.mean(0), stacked.std(0) / math.sqrt(stacked.shape[0])


@pytest.mark.parametrize("mode", ["implicit", "dense"])
def test_shared_factor_keeps_the_exact_law(mode):
    """E[y_i y_j^T]/d_out = s_i^2 X X^T for i = j and 0 otherwise, for weights applied through one factor."""
    samples, stds = 20_000, (0.5, 1.5)
    rows = torch.randn(3, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(5))  # (m, d)
    sampler = WeightSampler(9, samples, "cpu", torch.float64, mode)
    outputs = sampler.apply_many(rows.expand(samples, 3, 7), [(1, 10), (1, 11)], (4, 4), stds)  # (S, m, 4) x2
    mean, sem = _second_moments(outputs)  # (4, m, m) each
    gram = rows @ rows.T  # (m, m)
    target = torch.stack([stds[0] ** 2 * gram, torch.zeros_like(gram), torch.zeros_like(gram), stds[1] ** 2 * gram])
    z = ((mean - target) / sem).abs().max().item()
    assert z < Z_LIMIT, f"{mode}: second moments off by {z:.2f} sem (limit {Z_LIMIT}, shape {tuple(mean.shape)})"


@pytest.mark.parametrize("kwargs, needle", [
    (dict(matmul_precision="fp8"), "matmul_precision='fp8'"),
    (dict(matmul_precision="tf32"), "TF32 needs CUDA"),
    (dict(matmul_precision="bf16", dtype="float64"), "dtype float64"),
])
def test_precision_flag_is_validated(kwargs, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        simulate(SMALL, samples=2, device="cpu", **kwargs)


def test_bf16_products_stay_close_to_fp32():
    """bf16 weight products (same draws) move the final var by far less than its Monte-Carlo spread."""
    full = simulate(SMALL, samples=4, seed=1, device="cpu")
    half = simulate(SMALL, samples=4, seed=1, device="cpu", matmul_precision="bf16")
    last = lambda table: table[table.layer == SMALL.depth].iloc[0]
    assert abs(last(half)["mean"] - last(full)["mean"]) < 0.05 * last(full)["mean"]


def test_precision_flag_on_the_command_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEPTH_WORKBENCH_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "simulate", "run", "--preset", "llama", "--width", "16",
                           "--heads", "2", "--depth", "2", "--tokens", "4", "--samples", "2", "--device", "cpu",
                           "--precision", "tf32", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 2 and "matmul_precision='tf32'" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_sync_free_cholesky_counts_failures():
    rows = torch.zeros(2, 3, 5)  # (S, m, d): zero rows, singular Gram
    sampler = WeightSampler(0, 2, "cpu", torch.float32, "implicit", sync_free=True)
    sampler.apply(rows, (1, 10), 4, 1.0)
    assert sampler.factor_failed()


def test_failed_sync_free_run_is_redone_with_qr(monkeypatch):
    """A Cholesky failure flagged on the device redoes the run with QR factors (a law-exact run)."""
    made = []

    class FailingOnce(WeightSampler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self.factor)

        def factor_failed(self) -> bool:
            return self.factor == "cholesky"

    monkeypatch.setattr(stack, "WeightSampler", FailingOnce)
    redone = simulate(SMALL, samples=2, seed=3, device="cpu", weights="implicit")
    monkeypatch.setattr(stack, "WeightSampler", functools.partial(WeightSampler, factor="qr"))
    with_qr = simulate(SMALL, samples=2, seed=3, device="cpu", weights="implicit")
    assert made == ["cholesky", "qr"]
    pd.testing.assert_frame_equal(redone, with_qr)


def test_correlated_tokens_keep_the_dense_law(monkeypatch):
    """P1's input std 0.02 with nearly collinear tokens (float32 Grams singular): implicit = dense in law.

    Every (layer, metric) of the implicit run within 4 combined sem of a dense run (own
    seeds, 256 samples), and the float64 refactor path (simulate.engine.implicit.refactor_rows)
    did run, so the check covers it.
    """
    from simulate.engine import implicit

    refactored = []
    original = implicit.refactor_rows
    monkeypatch.setattr(implicit, "refactor_rows", lambda x: refactored.append(x.shape[0]) or original(x))
    setting = Setting.preset("llama", width=32, heads=4, tokens=8, depth=10, input_std=0.02, input_cos=0.999)
    metrics = "var,jac_dev,angular,e2e_gain,token_cos"
    implicit_run = simulate(setting, samples=256, seed=1, metrics=metrics, device="cpu", weights="implicit")
    assert sum(refactored) > 0, "no float32 Cholesky failed: the setting does not exercise the refactor"
    dense_run = simulate(setting, samples=256, seed=2, metrics=metrics, device="cpu", weights="dense")
    joined = implicit_run.merge(dense_run, on=["layer", "metric"], suffixes=("_implicit", "_dense"))
    z = (joined.mean_implicit - joined.mean_dense) / (joined.sem_implicit**2 + joined.sem_dense**2) ** 0.5
    worst = joined.loc[z.abs().idxmax()]
    assert z.abs().max() < Z_LIMIT, (f"{worst.metric} at layer {worst.layer}: implicit {worst.mean_implicit:.6g} "
                                     f"vs dense {worst.mean_dense:.6g}, |z| = {z.abs().max():.2f} > {Z_LIMIT} "
                                     f"(256 samples, {sum(refactored)} refactored sample-products)")
    assert set(joined.metric) == set(metrics.split(",")) and len(joined) == len(implicit_run)


def test_scaling_table(tmp_path):
    from simulate.bench.cli import main
    from simulate.scaling import SCALING_COLUMNS

    assert main(["--quick", "--no-ablate", "--scaling", "--device", "cpu", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "scaling.csv")
    assert list(table.columns) == SCALING_COLUMNS and set(table.axis) == {"depth", "width", "tokens", "samples"}
    assert (table.wall_s > 0).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_reduced_precision_on_gpu_keeps_the_law(precision):
    setting = SMALL.replace(depth=3)
    full = simulate(setting, samples=256, seed=1, device="cuda")
    fast = simulate(setting, samples=256, seed=2, device="cuda", matmul_precision=precision)
    joined = full.merge(fast, on=["layer", "metric"], suffixes=("_full", "_fast"))
    z = ((joined.mean_full - joined.mean_fast) / (joined.sem_full**2 + joined.sem_fast**2) ** 0.5).abs().max()
    assert z < Z_LIMIT, f"{precision}: max |z| = {z:.2f} against highest precision"
