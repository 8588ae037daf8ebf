"""The growth fit's profile (:class:`theory.meanfield.bridge._ProfileRSS`): every grid row's least squares
at once, against ``np.linalg.lstsq`` solving each row on its own (the reference it replaced)."""

from __future__ import annotations

import numpy as np
import pytest

from theory.meanfield.bridge import _EXPONENTS, _RATES_TIMES_DEPTH, _ProfileRSS


def _rss_by_lstsq(values: np.ndarray, basis: np.ndarray) -> np.ndarray:
    weight = 1.0 / np.abs(values)
    rss = []
    for column in basis:
        design = np.stack([np.ones_like(column), column], -1) * weight[:, None]  # (n, 2)
        coef, *_ = np.linalg.lstsq(design, values * weight, rcond=None)
        rss.append(((design @ coef - values * weight) ** 2).sum())
    return np.array(rss)  # (K,)


@pytest.mark.parametrize("depth", [4, 16, 64])
@pytest.mark.parametrize("model", ["polynomial", "exponential"])
def test_the_batched_profile_is_lstsq_row_by_row(depth, model):
    rng = np.random.default_rng(depth)
    layers = np.arange(1, depth + 1, dtype=float)  # (n,)
    values = (0.5 + 0.3 * layers ** 1.4) * np.exp(rng.normal(0.0, 0.05, depth))  # a noisy polynomial profile
    basis = ((layers / depth) ** _EXPONENTS[:, None] if model == "polynomial"
             else np.exp((_RATES_TIMES_DEPTH / depth)[:, None] * (layers - depth)))  # (K, n)
    fast, reference = _ProfileRSS(values)(basis), _rss_by_lstsq(values, basis)
    assert fast.shape == reference.shape == (basis.shape[0],)
    np.testing.assert_allclose(fast, reference, rtol=1e-9, atol=1e-14 * reference.max(),
                               err_msg=f"{model} profile at depth {depth}")


def test_a_constant_column_is_rank_one_as_in_lstsq():
    """A basis row equal to the offset column: lstsq drops the second direction, and so does the batch."""
    layers = np.arange(1, 9, dtype=float)
    values = 1.0 + 0.2 * layers
    basis = np.stack([np.ones(8), layers / 8])  # (2, n): rank one, then rank two
    fast = _ProfileRSS(values)(basis)
    np.testing.assert_allclose(fast, _rss_by_lstsq(values, basis), rtol=1e-9, atol=1e-24)
    assert fast[0] > 1e-3 and fast[1] < 1e-20, fast  # the offset alone misses the slope; the line fits
