"""Runner behaviour: determinism, bad input, blow-up, flat memory, cache, Jacobians."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import simulate as sim
from simulate import NumericalBlowUp, block_jacobian, cached_simulate, simulate
from simulate.engine.metrics import StatsBuffer, parse_metrics
from simulate.engine.stack import block_context, block_step, initial_stream, run_stack
from simulate.engine.weights import WeightSampler
from theory.setting import Setting


def make(**fields) -> Setting:
    return Setting(**fields)


SMALL = dict(block="transformer", depth=3, width=16, heads=2, tokens=4)


def test_public_api():
    assert set(sim.__all__) == {"simulate", "cached_simulate", "NumericalBlowUp", "weight_decay_process",
                                "block_jacobian", "METRICS"}
    assert sim.METRICS == ("var", "var_attn", "var_mlp", "angular", "jac_dev", "e2e_gain", "kurtosis", "token_cos",
                           "attn_entropy")


@pytest.mark.parametrize("weights", ["dense", "auto"])
def test_same_seed_same_numbers_other_seed_other_numbers(weights):
    setting = make(**SMALL)
    first = simulate(setting, samples=3, seed=7, metrics="all", weights=weights)
    again = simulate(setting, samples=3, seed=7, metrics="all", weights=weights)
    other = simulate(setting, samples=3, seed=8, metrics="all", weights=weights)
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["mean"], other["mean"])


def test_samples_are_independent_stacks():
    """Sample s of a batch of 2 differs from sample s' (own weights, own input)."""
    setting = make(**SMALL)
    table = simulate(setting, samples=2, seed=1)
    assert (table[table.layer == 3]["sem"] > 0).all()


@pytest.mark.parametrize("kwargs,field", [
    (dict(samples=0), "samples"), (dict(seed=-1), "seed"), (dict(metrics="var,nope"), "metrics"),
    (dict(metrics=""), "metrics"), (dict(device="tpu"), "device"), (dict(dtype="float16"), "dtype"),
    (dict(weights="sparse"), "weights"),
])
def test_bad_inputs_raise_value_errors_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        simulate(make(**SMALL), **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_without_cuda_is_a_value_error():
    with pytest.raises(ValueError, match="CUDA is not available"):
        simulate(make(**SMALL), device="cuda")


def test_blow_up_names_the_layer_and_keeps_the_table():
    setting = make(scheme="none", block="linear", depth=60, width=16, tokens=2, init_std=3.0)
    with pytest.raises(NumericalBlowUp, match="after block") as caught:
        simulate(setting, samples=2, seed=0)
    layer = caught.value.layer
    assert 5 < layer < 60
    table = caught.value.table
    assert table.layer.max() == layer - 1 and np.isfinite(table["mean"]).all()
    assert str(layer) in str(caught.value)


def test_memory_is_flat_in_depth():
    """Structural: the number of live tensors does not grow with the layer index."""
    setting = make(**{**SMALL, "depth": 40})
    sampler = WeightSampler(0, 2, "cpu", torch.float32, "dense")
    buffer = StatsBuffer(setting.depth, parse_metrics("all"), 2, torch.device("cpu"))
    counts = {}

    def count(layer):
        if layer in (5, 20, 40):
            gc.collect()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                counts[layer] = sum(1 for obj in gc.get_objects() if isinstance(obj, torch.Tensor))

    with torch.inference_mode():
        assert run_stack(setting, sampler, buffer, on_layer=count) is None
    assert counts[5] == counts[20] == counts[40], counts


def test_cached_simulate_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTH_WORKBENCH_CACHE", str(tmp_path))
    setting = make(**SMALL)
    fresh = cached_simulate(setting, samples=2, seed=3, metrics="var,angular", dtype="float64")
    entries = list(tmp_path.iterdir())
    assert len(entries) == 1 and {p.name for p in entries[0].iterdir()} == {"config.json", "layers.csv"}
    cached = cached_simulate(setting, samples=2, seed=3, metrics="var,angular", dtype="float64")
    pd.testing.assert_frame_equal(fresh, cached, check_exact=False, rtol=1e-15)
    cached_simulate(setting, samples=2, seed=4, metrics="var,angular", dtype="float64")
    assert len(list(tmp_path.iterdir())) == 2
    assert not list(tmp_path.rglob("*.tmp"))


def primal_block(setting, layer, x_last, stream, sampler):
    """Block ``layer`` on ``stream`` with its last token replaced by x_last (primal only)."""
    full = stream.clone()
    full[0, 0, -1] = x_last
    out, _ = block_step(full, block_context(setting, sampler, layer), None, None, None)
    return out[0, 0, -1]


@pytest.mark.parametrize("scheme", ["pre", "post", "lns"])
def test_block_jacobian_matches_finite_differences(scheme):
    setting = make(scheme=scheme, block="transformer", depth=3, width=8, heads=2, tokens=4)
    jac = block_jacobian(setting, 2, seed=5)
    sampler = WeightSampler(5, 1, "cpu", torch.float64, "dense")
    with torch.inference_mode():
        stream = initial_stream(setting, sampler, False, False)
        stream, _ = block_step(stream, block_context(setting, sampler, 1), None, None, None)
        base = stream[0, 0, -1].clone()
        eps, columns = 1e-6, []
        for j in range(8):
            step = torch.zeros(8, dtype=torch.float64)
            step[j] = eps
            columns.append((primal_block(setting, 2, base + step, stream, sampler)
                            - primal_block(setting, 2, base - step, stream, sampler)) / (2 * eps))
    np.testing.assert_allclose(jac, torch.stack(columns, 1).numpy(), atol=1e-7)


def test_block_jacobian_rejects_bad_layers():
    with pytest.raises(ValueError, match="layer"):
        block_jacobian(make(**SMALL), 0)


@pytest.mark.gpu
def test_cuda_run_keeps_the_masked_linear_law():
    setting = make(block="linear", scheme="none", depth=4, width=64, tokens=4, mask_density=0.5)
    table = simulate(setting, samples=2000, seed=1, device="cuda", dtype="float64", metrics="all")
    rows = table[table.metric == "var"].sort_values("layer")
    target = 1.5 ** rows.layer.to_numpy()
    assert (abs(rows["mean"].to_numpy() - target) <= 4 * rows["sem"].to_numpy()).all()
    again = simulate(setting, samples=2000, seed=1, device="cuda", dtype="float64", metrics="all")
    pd.testing.assert_frame_equal(table, again)
