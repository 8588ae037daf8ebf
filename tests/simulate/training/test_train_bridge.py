"""The bridge of theory.meanfield.bridge on measured moments, and the growth fits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulate.training.model import CausalLM
from simulate.training.probes import probe
from simulate.training.report import bridge_table
from theory import Setting
from theory.verdicts import GrowthClass
from theory.meanfield.bridge import aligned_pseudo_values, aligned_strengths, fit_growth, loglog_slope


@pytest.mark.parametrize("scheme", ["pre", "post", "lns"])
def test_bridge_recursion_is_an_identity_of_the_measured_means(scheme):
    setting = Setting.preset("llama", scheme=scheme, depth=4, width=16, heads=2, tokens=8, init_std=0.3,
                             input_std=0.5)
    model = CausalLM(setting, seed=2)
    with torch.no_grad():  # a trained-looking stream: shift the embedding so tokens have a feature mean
        model.embed.weight.add_(0.3)
    tokens = torch.randint(0, 256, (6, 8), generator=torch.Generator().manual_seed(0))
    result = probe(model, tokens, tokens, seed=0, step=0, jacobian=False)
    var = result.table[result.table.metric == "var"].sort_values("layer")["mean"].to_numpy()
    bridge = bridge_table(0, result.moments, var)
    identity = np.abs(bridge.mean_square_bridge / bridge.mean_square - 1).max()
    assert identity < 1e-10, f"bridge mean-square identity off by {identity:.3g}"
    # the error against var is exactly the token-mean term
    residual = np.abs((bridge.var_bridge - bridge.token_mean_term) / bridge["var"] - 1).max()
    assert residual < 1e-6, f"var = var_bridge - token_mean_term off by {residual:.3g}"
    assert bridge.token_mean_term.iloc[0] > 0.01 * bridge["var"].iloc[0]  # the term is not negligible here
    # the table's align_a/align_b means are the pooled a_l, b_l the recursion used
    for name in ("align_a", "align_b"):
        table = result.table[result.table.metric == name].sort_values("layer")
        assert np.allclose(table["mean"].to_numpy(), bridge[name].to_numpy()[1:], rtol=1e-9), name


def test_pseudo_values_give_the_delta_method_sem():
    """Over repeated batches the spread of the pooled a matches the pseudo-values' sem (within 25%)."""
    rng = np.random.default_rng(0)
    estimates, sems = [], []
    for _ in range(400):
        m = rng.gamma(4.0, 0.5, 32)  # (S,) per-sequence moments with a shared structure
        p = 0.3 * m + rng.normal(0, 0.2, 32)
        q = p**2 / m + rng.gamma(2.0, 0.3, 32)
        a_s, _ = aligned_pseudo_values(m, p, q)
        estimates.append(aligned_strengths(m.mean(), p.mean(), q.mean())[0])
        sems.append(a_s.std(ddof=1) / np.sqrt(32))
    ratio = np.std(estimates) / np.mean(sems)
    assert 0.75 < ratio < 1.25, f"spread of pooled a / mean pseudo-value sem = {ratio:.3f}"


def test_growth_fits_recover_known_exponents_with_their_intervals():
    rng = np.random.default_rng(1)
    layers = np.arange(0, 33)
    covered = {"polynomial": 0, "exponential": 0, "loglog": 0}
    for _ in range(40):
        noise = np.exp(rng.normal(0, 0.01, layers.size))
        poly = fit_growth(layers, (1.0 + 0.05 * layers**1.5) * noise, GrowthClass.POLYNOMIAL)
        expo = fit_growth(layers, (0.5 + 0.2 * np.exp(0.12 * layers)) * noise, GrowthClass.EXPONENTIAL)
        loglog = loglog_slope(layers[1:], (2.0 * layers[1:] ** 0.7) * noise[1:])
        covered["polynomial"] += poly.ci_low <= 1.5 <= poly.ci_high
        covered["exponential"] += expo.ci_low <= 0.12 <= expo.ci_high
        covered["loglog"] += loglog.ci_low <= 0.7 <= loglog.ci_high
    for name, count in covered.items():  # nominal 95 %: 38 of 40; allow binomial slack
        assert count >= 33, f"{name}: the 95% interval covered the true value {count}/40 times"
