"""The pair recursion (variance, mean token covariance): limits, the fixed-point tail, the frozen tail."""

import numpy as np
import pytest

from theory.architecture import input_moments
from theory.meanfield import pair_recursion
from theory.meanfield.pair_recursion import token_recursion
from theory.meanfield.plan import build_plan
from theory.setting import Setting


def _run(setting):
    plan = build_plan(setting)
    return plan, token_recursion(plan, *input_moments(setting))


def test_identical_tokens_stay_identical():
    setting = Setting.preset("llama", scheme="pre", depth=30, width=64, heads=4, tokens=16, input_cos=0.999999)
    _, out = _run(setting)
    assert np.all(out["c"] / out["v"] > 0.999999 - 1e-9)


def test_single_token_has_no_mixing():
    setting = Setting.preset("llama", scheme="pre", block="attention", depth=5, width=64, heads=4, tokens=1)
    plan, out = _run(setting)
    alpha = setting.alpha
    np.testing.assert_allclose(out["branch"], alpha**2, rtol=1e-12)  # sum_j a_j^2 = 1


def test_rank_collapse_and_input_std():
    """Tokens correlate with depth, much faster from a small input (llama init)."""
    base = Setting.preset("llama", scheme="pre", depth=50, width=256, tokens=64)
    small = _run(base.replace(input_std=0.02))[1]
    large = _run(base)[1]
    cos_small = small["c"][1::2] / small["v"][1::2]  # after each block (SwiGLU lowers it a little)
    cos_large = large["c"][1::2] / large["v"][1::2]
    assert np.all(np.diff(cos_small) > 0) and cos_small[-1] > 0.9
    assert cos_large[-1] < cos_small[-1]
    assert small["branch"][::2][10] > 5 * small["branch"][0]  # attention increments grow with the cosine


@pytest.mark.parametrize("scheme,block", [("lns", "transformer"), ("sandwich", "moe"), ("pre", "linear")])
def test_fixed_point_tail_matches_sequential(scheme, block):
    setting = Setting.preset("llama", scheme=scheme, block=block, depth=600, width=64, heads=4, tokens=16,
                             input_std=0.02)
    plan = build_plan(setting)
    v0, c0 = input_moments(setting)
    fast, slow = token_recursion(plan, v0, c0, prefix=50), token_recursion(plan, v0, c0, prefix=10**6)
    for key in ("v", "c", "branch", "jac2", "cos"):
        np.testing.assert_allclose(fast[key], slow[key], rtol=1e-10)


def test_frozen_post_tail_matches_full_iteration():
    setting = Setting(preset=None, scheme="post", block="mlp", activation="relu", depth=3000, width=64)
    plan = build_plan(setting)
    v0, c0 = input_moments(setting)
    frozen = token_recursion(plan, v0, c0)
    full = {key: np.empty(plan.size) for key in pair_recursion._KEYS}
    pair_recursion._sequential(plan, 0, plan.size, v0, c0, full, pair_recursion.static_moments(plan), freeze_tol=0.0)
    for key in pair_recursion._KEYS:
        np.testing.assert_allclose(frozen[key], full[key], rtol=1e-9, atol=1e-9)
