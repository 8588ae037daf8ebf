"""The implicit Gaussian product has exactly the law of the dense one (float64 Monte Carlo).

Each check states its tolerance in Monte-Carlo standard errors (4 sem) and fixes its seed.
"""

from __future__ import annotations

import math

import pytest
import torch

from simulate.engine import implicit
from simulate.engine.implicit import (
    DEFAULT_COSTS,
    choose_method,
    factor_rows,
    gaussian_product,
    gaussian_products,
    method_costs,
    refactor_rows,
)

SAMPLES = 20_000  # Monte-Carlo samples (one weight each)
D_OUT = 8
STD = 0.7
Z_LIMIT = 4.0


def assert_within_sem(name: str, estimate: torch.Tensor, target: torch.Tensor, sem: torch.Tensor,
                      shape: tuple[int, ...], limit: float = Z_LIMIT) -> None:
    """Every entry of ``estimate`` within ``limit`` standard errors of ``target`` (named failure)."""
    slack = limit * sem + 1e-12 * (1.0 + target.abs())
    bad = (estimate - target).abs() > slack
    if bool(bad.any()):
        z = ((estimate - target) / sem.clamp_min(1e-300)).abs().max().item()
        raise AssertionError(f"{name}: statistic {estimate.tolist()} vs target {target.tolist()} "
                             f"(max |z| = {z:.2f} > {limit}, sem {sem.tolist()}, shape {shape})")


def mean_and_sem(per_sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard error over the leading (sample) dimension."""
    return per_sample.mean(dim=0), per_sample.std(dim=0) / math.sqrt(per_sample.shape[0])


def rows_fixture(kind: str) -> torch.Tensor:
    """A fixed X (m, d) in float64: m < d, m = d, rank deficient, m > d."""
    gen = torch.Generator().manual_seed(11)
    if kind == "m<d":
        return torch.randn(4, 10, generator=gen, dtype=torch.float64)
    if kind == "m=d":
        return torch.randn(5, 5, generator=gen, dtype=torch.float64)
    if kind == "rank-deficient":
        base = torch.randn(2, 10, generator=gen, dtype=torch.float64)
        return torch.stack([base[0], base[1], base[0] + 2 * base[1], torch.zeros(10, dtype=torch.float64)])
    if kind == "m>d":
        return torch.randn(6, 4, generator=gen, dtype=torch.float64)
    raise ValueError(kind)


def sample_products(x: torch.Tensor, method: str, seed: int) -> torch.Tensor:
    """SAMPLES independent draws of x W: (SAMPLES, m, D_OUT)."""
    batch = x.expand(SAMPLES, *x.shape)  # (S, m, d)
    return gaussian_product(batch, D_OUT, STD, torch.Generator().manual_seed(seed), method=method)


KINDS = ("m<d", "m=d", "rank-deficient", "m>d")


@pytest.mark.parametrize("method", ["qr", "cholesky", "auto"])
@pytest.mark.parametrize("kind", KINDS)
def test_row_gram_is_exact(kind, method):
    """E[(XW)(XW)^T] / d_out = s^2 X X^T entry by entry; distinct output columns uncorrelated."""
    x = rows_fixture(kind)
    product = sample_products(x, method, seed=1)  # (S, m, d_out)
    gram = product @ product.mT / D_OUT  # (S, m, m)
    estimate, sem = mean_and_sem(gram)  # (m, m)
    assert_within_sem(f"row gram [{kind}, {method}]", estimate, STD**2 * x @ x.T, sem, tuple(product.shape))
    shifted = product[..., :-1] @ product[..., 1:].mT / (D_OUT - 1)  # (S, m, m): columns a vs a+1
    estimate, sem = mean_and_sem(shifted)
    assert_within_sem(f"cross-column covariance [{kind}, {method}]", estimate, torch.zeros_like(estimate),
                      sem, tuple(product.shape))


@pytest.mark.parametrize("method", ["qr", "cholesky"])
@pytest.mark.parametrize("kind", KINDS)
def test_row_covariance_matches_dense(kind, method):
    """Two-sample check: the row cross-covariances of the implicit and the dense product agree."""
    x = rows_fixture(kind)
    implicit = sample_products(x, method, seed=2)  # (S, m, d_out)
    dense = sample_products(x, "dense", seed=3)  # (S, m, d_out)
    gram_implicit, sem_implicit = mean_and_sem(implicit @ implicit.mT / D_OUT)  # (m, m)
    gram_dense, sem_dense = mean_and_sem(dense @ dense.mT / D_OUT)  # (m, m)
    assert_within_sem(f"implicit vs dense row covariance [{kind}, {method}]", gram_implicit, gram_dense,
                      torch.sqrt(sem_implicit**2 + sem_dense**2), tuple(implicit.shape))


@pytest.mark.parametrize("method", ["qr", "cholesky"])
@pytest.mark.parametrize("kind", ("m<d", "rank-deficient"))
def test_nonlinear_statistics_match_dense(kind, method):
    """mean relu(XW)^2, mean (XW)^4 and mean (XW_0 . XW_1)^2 per row: implicit = dense = theory."""
    x = rows_fixture(kind)
    norms2 = (x * x).sum(dim=1)  # (m,) squared row norms
    row_var = STD**2 * norms2  # (m,) variance of each entry of row i
    inner01 = STD**2 * (x[0] @ x[1])
    targets = {
        "relu^2": row_var / 2,
        "fourth": 3 * row_var**2,
        "pair^2": (row_var[0] * row_var[1] + 2 * inner01**2).reshape(1),
    }
    draws = {"implicit": sample_products(x, method, seed=4), "dense": sample_products(x, "dense", seed=5)}
    stats = {}
    for name, y in draws.items():  # y: (S, m, d_out)
        stats[name] = {
            "relu^2": mean_and_sem(torch.relu(y).pow(2).mean(dim=-1)),  # (m,)
            "fourth": mean_and_sem(y.pow(4).mean(dim=-1)),  # (m,)
            "pair^2": mean_and_sem((y[:, 0] * y[:, 1]).pow(2).mean(dim=-1, keepdim=True)),  # (1,)
        }
    for statistic, target in targets.items():
        (mean_i, sem_i), (mean_d, sem_d) = stats["implicit"][statistic], stats["dense"][statistic]
        shape = tuple(draws["implicit"].shape)
        assert_within_sem(f"{statistic} implicit vs theory [{kind}, {method}]", mean_i, target, sem_i, shape)
        assert_within_sem(f"{statistic} dense vs theory [{kind}]", mean_d, target, sem_d, shape)
        assert_within_sem(f"{statistic} implicit vs dense [{kind}, {method}]", mean_i, mean_d,
                          torch.sqrt(sem_i**2 + sem_d**2), shape)


def test_several_weights_share_one_factor():
    """gaussian_products: blocks with their own std, independent of each other."""
    x = rows_fixture("m<d").expand(SAMPLES, 4, 10)  # (S, m, d)
    first, second = gaussian_products(x, (D_OUT, D_OUT), (0.5, 2.0), torch.Generator().manual_seed(6))
    target = x[0] @ x[0].T  # (m, m)
    for name, y, std in (("first", first, 0.5), ("second", second, 2.0)):
        estimate, sem = mean_and_sem(y @ y.mT / D_OUT)  # (m, m)
        assert_within_sem(f"row gram of block {name}", estimate, std**2 * target, sem, tuple(y.shape))
    estimate, sem = mean_and_sem(first @ second.mT / D_OUT)  # (m, m): cross-block covariance
    assert_within_sem("cross-block covariance", estimate, torch.zeros_like(estimate), sem, tuple(first.shape))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cholesky_falls_back_on_singular_gram(dtype):
    """Duplicate and zero rows: the factor is finite and reproduces the Gram."""
    base = torch.randn(3, 16, dtype=dtype)
    x = torch.stack([base, torch.stack([base[0], base[0], torch.zeros(16, dtype=dtype)])])  # (2, 3, 16)
    left = factor_rows(x, "cholesky")  # (2, 3, 3)
    assert torch.isfinite(left).all()
    tolerance = 1e-4 if dtype == torch.float32 else 1e-10
    assert torch.allclose(left @ left.mT, x @ x.mT, atol=tolerance * 16, rtol=tolerance)


def nearly_collinear_rows(samples: int = 1) -> torch.Tensor:
    """(samples, 6, 32) float32 rows 1e-4 apart (relative) around one direction, one row 100x larger
    (like the end-to-end tangent of a collapsed stack): the float32 Gram is numerically singular."""
    gen = torch.Generator().manual_seed(12)
    base = torch.randn(1, 32, generator=gen)  # (1, d)
    rows = base + 1e-4 * torch.randn(6, 32, generator=gen)  # (m, d)
    rows[-1] *= 100.0
    return rows.expand(samples, 6, 32)  # (S, m, d)


def assert_float32_cholesky_fails(x: torch.Tensor) -> None:
    """Precondition of the refactor tests: the float32 Cholesky of x x^T fails for every sample."""
    info = torch.linalg.cholesky_ex(x @ x.mT).info  # (S,)
    assert bool((info != 0).all()), f"float32 Cholesky succeeded (info {info[:4].tolist()}): nothing to refactor"


def test_refactor_is_a_float64_cholesky_within_float32_rounding(monkeypatch):
    """Nearly collinear float32 rows: no QR, and L L^T = x x^T within 4 u_32 |L||L|^T entry-wise."""
    x = nearly_collinear_rows()  # (1, m, d)
    assert_float32_cholesky_fails(x)

    def no_qr(rows):
        raise AssertionError(f"QR fallback taken for rows of shape {tuple(rows.shape)}")

    monkeypatch.setattr(implicit, "_qr_left", no_qr)
    left = refactor_rows(x)  # (1, m, m)
    assert left.dtype == torch.float32 and torch.equal(left, left.tril())
    wide, exact = left.double(), x.double() @ x.double().mT  # (1, m, m) each
    error = (wide @ wide.mT - exact).abs()  # (1, m, m)
    bound = 4 * 2.0**-24 * (wide.abs() @ wide.abs().mT)  # (1, m, m)
    assert bool((error <= bound).all()), f"max error / bound {(error / bound).max().item():.3g} > 1, shape {x.shape}"
    assert torch.equal(factor_rows(x, "cholesky"), left)  # factor_rows refactors exactly these samples


def test_nearly_collinear_rows_keep_the_law_of_their_differences():
    """The small directions survive: Gram of (XW)_i - (XW)_0 = s^2 (x_i - x_0)(x_j - x_0)^T within 4 sem."""
    x = nearly_collinear_rows(SAMPLES)  # (S, m, d), the same rows in every sample
    assert_float32_cholesky_fails(x[:8])
    product = gaussian_product(x, D_OUT, STD, torch.Generator().manual_seed(13), method="cholesky").double()
    rows = x[0].double()  # (m, d)
    estimate, sem = mean_and_sem(product @ product.mT / D_OUT)  # (m, m)
    assert_within_sem("row gram [nearly collinear]", estimate, STD**2 * rows @ rows.T, sem, tuple(product.shape))
    gaps = product[:, 1:-1] - product[:, :1]  # (S, m-2, d_out): differences of the small rows
    estimate, sem = mean_and_sem(gaps @ gaps.mT / D_OUT)  # (m-2, m-2)
    target = STD**2 * (rows[1:-1] - rows[:1]) @ (rows[1:-1] - rows[:1]).T  # (m-2, m-2), ~1e-8 of the row gram
    assert_within_sem("difference gram [nearly collinear]", estimate, target, sem, tuple(gaps.shape))


def test_same_generator_same_numbers_and_dense_fallback():
    x = torch.randn(2, 6, 4)  # (S, m, d): m > d runs dense
    draw = lambda method: gaussian_product(x, 5, 0.3, torch.Generator().manual_seed(9), method=method)
    assert torch.equal(draw("cholesky"), draw("cholesky"))
    assert torch.equal(draw("cholesky"), draw("dense"))
    unbatched = gaussian_product(x[0], 5, 0.3, torch.Generator().manual_seed(9))  # (m, d)
    assert unbatched.shape == (6, 5)


def test_half_precision_and_noise_dtype():
    x = torch.randn(2, 4, 32)  # (S, m, d)
    assert gaussian_product(x.bfloat16(), 8, 0.1, torch.Generator().manual_seed(0)).dtype == torch.bfloat16
    y = gaussian_product(x.double(), 8, 0.1, torch.Generator().manual_seed(0), noise_dtype=torch.float32)
    assert y.dtype == torch.float64 and y.shape == (2, 4, 8)


def test_bad_method_is_named():
    with pytest.raises(ValueError, match="method='svd'"):
        gaussian_product(torch.ones(1, 2, 3), 2, 1.0, None, method="svd")


def test_cost_model_choices():
    """Factored on CPU when m << d (random numbers dominate); dense when m > d; TF32 GPU: dense often wins."""
    assert choose_method(8, 64, 512, 1376, "cpu") == "cholesky"
    assert choose_method(8, 600, 512, 512, "cpu") == "dense"
    gpu = method_costs(1, 1024, 11008, 4096, "cuda", dtype=torch.float32, costs=DEFAULT_COSTS["cuda"])
    assert gpu["qr"] > gpu["cholesky"]  # 13 ms QR vs 0.6 ms Gram + Cholesky on an H200
    assert choose_method(1, 1024, 11008, 4096, "cuda", dtype=torch.bfloat16) == "dense"
    assert choose_method(8, 64, 512, 1376, "cuda", dtype=torch.bfloat16) in ("dense", "cholesky")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_row_gram_is_exact_on_gpu():
    x = rows_fixture("rank-deficient").float().cuda()
    batch = x.expand(SAMPLES, *x.shape)  # (S, m, d)
    gen = torch.Generator(device="cuda").manual_seed(1)
    product = gaussian_product(batch, D_OUT, STD, gen, method="cholesky").double()  # (S, m, d_out)
    estimate, sem = mean_and_sem(product @ product.mT / D_OUT)  # (m, m)
    target = STD**2 * (x.double() @ x.double().T)
    assert_within_sem("row gram on GPU", estimate.cpu(), target.cpu(), sem.cpu() + 1e-5, tuple(product.shape))
