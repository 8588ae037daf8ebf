"""Each norm scheme does what docs/design.md#schemes (theory/architecture.py) says it does."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulate import simulate
from theory.architecture import placement, weight_std
from theory.setting import SCHEMES, Setting


def make(**fields) -> Setting:
    return Setting(**fields)


def column(table, metric):
    rows = table[table.metric == metric].sort_values("layer")
    return rows.layer.to_numpy(), rows["mean"].to_numpy(), rows["sem"].to_numpy()


RELU = dict(block="mlp", activation="relu", width=48, ffn_width=64, tokens=6, init_std=0.15)
INCREMENT = 48 * 0.15**2 * 64 * 0.15**2 / 2  # alpha*d_ff*s^2/2 for RELU


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_runs_a_transformer_with_every_metric(scheme):
    setting = make(scheme=scheme, block="transformer", depth=4, width=16, heads=2, tokens=4)
    table = simulate(setting, samples=2, seed=0, metrics="all")
    assert np.isfinite(table["mean"]).all()
    assert set(table.metric) == {"var", "var_attn", "var_mlp", "angular", "jac_dev", "e2e_gain", "kurtosis",
                                 "token_cos", "attn_entropy"}
    assert table.layer.max() == 4


def exact_rows(setting, metric):
    """theory.predict's exact rows of ``metric`` (layer >= 1), sorted by layer."""
    import theory

    rows = theory.predict(setting)
    rows = rows[(rows.metric == metric) & (rows.kind == "exact") & (rows.layer >= 1)].sort_values("layer")
    assert not rows.empty, f"no exact {metric} rows for {setting}"
    return rows.layer.to_numpy(), rows.value.to_numpy()


@pytest.mark.parametrize("scheme", ["post", "deepnorm"])
def test_post_and_deepnorm_keep_the_normed_variance(mc_close, scheme):
    """After the final norm of each block ||x||^2 = d, so var is the exact law of theory.predict (about 1)."""
    setting = make(scheme=scheme, block="transformer", depth=6, width=64, heads=2, tokens=4, input_std=3.0)
    table = simulate(setting, samples=64, seed=1, dtype="float64")
    layers, mean, sem = column(table, "var")
    predicted_layers, predicted = exact_rows(setting, "var")
    assert set(predicted_layers) == set(layers[1:]), "an exact var row for every block"
    mc_close(f"{scheme} var", mean[1:], sem[1:], predicted)


def test_deepnorm_constants():
    setting = make(scheme="deepnorm", depth=6, width=64)
    assert placement(setting, 3).stream_scale == pytest.approx(12 ** 0.25)
    assert placement(setting, 3).norm_after_add and not placement(setting, 3).norm_input
    for role in ("v", "o", "up", "gate", "down", "linear"):
        assert weight_std(setting, 2, role) == pytest.approx(48 ** -0.25 / 8)
    for role in ("q", "k", "router"):
        assert weight_std(setting, 2, role) == pytest.approx(1 / 8)


def test_mix_is_post_then_pre():
    setting = make(scheme="mix", depth=8, mix_fraction=0.25)
    assert [placement(setting, layer).norm_after_add for layer in range(1, 9)] == [True] * 2 + [False] * 6


def test_skipinit_is_the_identity_at_init():
    table = simulate(make(scheme="skipinit", block="transformer", depth=3, width=16, heads=2, tokens=4),
                     samples=3, seed=2, metrics="var,angular,jac_dev,e2e_gain,var_mlp")
    _, var, _ = column(table, "var")
    np.testing.assert_allclose(var, var[0], rtol=1e-6)
    for metric, value in (("angular", 0.0), ("jac_dev", 0.0), ("e2e_gain", 1.0), ("var_mlp", 0.0)):
        np.testing.assert_allclose(column(table, metric)[1], value, atol=1e-6, err_msg=metric)


@pytest.mark.parametrize("scheme,factor", [
    ("pre", lambda l, L: 1.0), ("lns", lambda l, L: 1.0 / l), ("scaled-init", lambda l, L: 1.0 / (2 * L)),
    ("depth-scaled-init", lambda l, L: 1.0 / l**2), ("layerscale", lambda l, L: 0.1**2),
])
def test_relu_increment_per_scheme(mc_close, scheme, factor):
    """The MLP increment is alpha d_ff s^2/2 times the scheme's factor (exact at init)."""
    setting = make(scheme=scheme, depth=4, **RELU)
    table = simulate(setting, samples=300, seed=3, dtype="float64", metrics="var_mlp")
    layers, mean, sem = column(table, "var_mlp")
    mc_close(f"{scheme} relu increment", mean, sem, INCREMENT * np.array([factor(l, 4) for l in layers]))


@pytest.mark.parametrize("scheme", ["sandwich", "peri"])
def test_sandwich_and_peri_add_normed_branches(mc_close, scheme):
    """The branch is normed (var about 1 whatever the stream); peri also norms the input (var 1, not 25)."""
    setting = make(scheme=scheme, depth=3, input_std=5.0, **RELU)
    table = simulate(setting, samples=64, seed=4, dtype="float64", metrics="var,var_mlp")
    for metric in ("var_mlp", "var"):
        _, mean, sem = column(table, metric)
        _, predicted = exact_rows(setting, metric)
        mc_close(f"{scheme} {metric}", mean[-len(predicted):], sem[-len(predicted):], predicted)
    _, var, sem = column(table, "var")
    assert var[0] == pytest.approx(1.0 if scheme == "peri" else 25.0, abs=4 * sem[0] + 1e-12)


def test_none_is_the_plain_residual(mc_close):
    setting = make(scheme="none", block="linear", depth=3, width=32, tokens=4)
    table = simulate(setting, samples=800, seed=5, dtype="float64")
    layers, mean, sem = column(table, "var")
    mc_close("none linear var", mean, sem, 2.0**layers)


def test_lns_input_scale_is_one_over_sqrt_l():
    setting = make(scheme="lns", depth=9)
    assert [placement(setting, layer).input_scale for layer in (1, 4, 9)] == [1.0, 0.5, pytest.approx(1 / 3)]
    assert math.isclose(placement(make(scheme="layerscale", layerscale_init=0.3), 2).branch_scale, 0.3)
