"""The exact implicit Gaussian product: ``X W`` without drawing ``W``.

Let ``X`` be ``m`` rows of width ``d`` (one matrix per Monte-Carlo sample) and ``W``
a ``d x d_out`` matrix with i.i.d. N(0, s^2) entries, independent of ``X`` and used
only once. Write ``X = L Q`` with ``Q`` (k x d) having orthonormal rows and
``L`` (m x k), k = min(m, d). Given ``X``, ``Q W`` is again a k x d_out matrix of
i.i.d. N(0, s^2) entries (rotation invariance of the Gaussian), so

    X W  has exactly the law of  L Z,   Z ~ N(0, s^2)^(k x d_out).

Equivalently: given X, the rows of X W are jointly Gaussian with covariance
``s^2 (X X^T) (x) I_{d_out}``, and any ``L`` with ``L L^T = X X^T`` reproduces it.
Two ways to get ``L`` (derived here; docs/design.md#how-the-simulator-stays-fast):

- ``"qr"``: the reduced QR of ``X^T = Q R`` gives ``L = R^T``. Robust: exact for any X,
  including rank-deficient X (a zero pivot of R just gives a zero column of L).
- ``"cholesky"``: ``L = chol(X X^T)``. Fast (a Gram matmul and an m x m factorisation),
  backward stable whenever it completes; where ``cholesky_ex`` reports failure (the Gram
  is numerically singular in X's precision, e.g. nearly collinear tokens) those samples
  are factored again in float64 (:func:`refactor_rows`), and only the samples whose
  float64 Gram is singular too (rank-deficient X) fall back to QR. Checking the
  failure flag costs one device-to-host sync per product, unless the caller passes a
  ``failures`` counter (no sync; the caller redoes the work with QR if it is not zero).
- ``"dense"``: draw W and multiply (the reference).

When m < d this draws m*d_out numbers instead of d*d_out and costs O(m^2 (d + d_out))
flops instead of O(m d d_out). For m > d the factored forms save nothing and the
product is dense. The identity needs Gaussian, rotation-invariant W that meets all
its rows in one call: stack tangent (JVP) rows into ``x`` rather than differentiating
through the factorisation; element-wise weight masks need the dense path.

>>> import torch
>>> x = torch.randn(3, 4, 16, dtype=torch.float64)  # (S, m, d)
>>> gen = torch.Generator().manual_seed(0)
>>> gaussian_product(x, 32, 0.1, gen, method="qr").shape
torch.Size([3, 4, 32])
>>> choose_method(samples=8, rows=64, d_in=512, d_out=1376, device="cpu")
'cholesky'
>>> choose_method(samples=8, rows=600, d_in=512, d_out=1376, device="cpu")
'dense'
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import torch

__all__ = [
    "METHODS",
    "DeviceCosts",
    "DEFAULT_COSTS",
    "gaussian_product",
    "gaussian_products",
    "factor_rows",
    "refactor_rows",
    "choose_method",
    "method_costs",
    "calibrate_costs",
    "set_costs",
    "costs_for",
]

# "implicit" = the fastest factored form (Cholesky with QR fallback); "auto" = cost model.
METHODS = ("auto", "implicit", "cholesky", "qr", "dense")
_LOW_PRECISION = (torch.float16, torch.bfloat16)


# -- the cost model ------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceCosts:
    """Throughputs the cost model of :func:`choose_method` uses (per device type).

    Attributes
    ----------
    matmul_flops : float
        Matmul throughput in flop/s at the run's precision (fp32 without TF32).
    matmul_flops_fast : float
        Matmul throughput when reduced-precision matmuls are on (TF32 / bf16).
    randn_per_s : float
        Standard normal numbers drawn per second (float32).
    qr_flops : float
        Effective flop/s of a batched reduced QR (flops counted 2 d m^2 - 2 m^3 / 3).
    cholesky_flops : float
        Effective flop/s of a batched Cholesky (flops counted m^3 / 3).
    op_seconds : float
        Fixed cost of one launched operation (dispatch / kernel launch).
    sync_seconds : float
        Cost of one device-to-host sync (Cholesky's failure check).
    """

    matmul_flops: float
    matmul_flops_fast: float
    randn_per_s: float
    qr_flops: float
    cholesky_flops: float
    op_seconds: float
    sync_seconds: float


# CPU: measured on this workbench's 2-core AMD EPYC (torch 2.13): randn 2.9e8/s (one
# thread; MT19937-bound, float64 draws are 5x slower), matmul ~1.2e11 flop/s on 2
# threads, batched QR 8 x (512 x 64) in 2.1 ms, Gram + Cholesky of 8 x 64 x 64 in 0.35 ms.
# CUDA: an H200. fp32 matmul ~5e13, TF32 ~4e14 flop/s; Philox randn ~5e11/s; a QR of
# 11008 x 1024 took 13 ms (~1.7e12 flop/s) against 0.6 ms for Gram + Cholesky; launches
# ~10 us. Rough numbers: :func:`calibrate_costs` measures the device at hand.
DEFAULT_COSTS: dict[str, DeviceCosts] = {
    "cpu": DeviceCosts(matmul_flops=1.2e11, matmul_flops_fast=1.2e11, randn_per_s=2.9e8,
                       qr_flops=1.5e10, cholesky_flops=5e9, op_seconds=5e-6, sync_seconds=0.0),
    "cuda": DeviceCosts(matmul_flops=5e13, matmul_flops_fast=4e14, randn_per_s=5e11,
                        qr_flops=1.7e12, cholesky_flops=1e12, op_seconds=1e-5, sync_seconds=2e-5),
}
_COSTS: dict[str, DeviceCosts] = dict(DEFAULT_COSTS)


def set_costs(device_type: str, costs: DeviceCosts) -> None:
    """Use ``costs`` for ``device_type`` ('cpu', 'cuda') from now on (e.g. from :func:`calibrate_costs`)."""
    _COSTS[device_type] = costs


def costs_for(device: torch.device | str) -> DeviceCosts:
    """The cost constants in use for ``device`` (unknown device types use the CUDA ones)."""
    return _COSTS.get(torch.device(device).type, _COSTS["cuda"])


def _fast_matmuls(device_type: str, dtype: torch.dtype | None) -> bool:
    if dtype in _LOW_PRECISION:
        return True
    if device_type != "cuda" or dtype == torch.float64:
        return False
    return bool(torch.backends.cuda.matmul.allow_tf32)


def method_costs(samples: int, rows: int, d_in: int, d_out: int, device: torch.device | str = "cpu",
                 *, dtype: torch.dtype | None = None, costs: DeviceCosts | None = None) -> dict[str, float]:
    """Modelled seconds of one product X W by each method ('dense', 'cholesky', 'qr').

    Dense: draw d_in*d_out numbers, multiply (2 m d_in d_out flops). Cholesky: Gram
    (2 m^2 d_in), factor (m^3/3), draw m*d_out, multiply L Z (2 m^2 d_out), one sync.
    QR: factor (2 d_in m^2 - 2 m^3/3), draw, multiply. All times ``samples``. For
    rows > d_in the factored methods cost infinity (they fall back to dense).

    >>> costs = method_costs(8, 64, 512, 1376)
    >>> costs["cholesky"] < costs["qr"] < costs["dense"]
    True
    """
    device = torch.device(device)
    c = costs or costs_for(device)
    flops = c.matmul_flops_fast if _fast_matmuls(device.type, dtype) else c.matmul_flops
    randn_scale = 5.0 if (dtype == torch.float64 and device.type == "cpu") else 1.0
    S, m = samples, rows
    dense = (S * d_in * d_out * randn_scale / c.randn_per_s + 2 * S * m * d_in * d_out / flops
             + 2 * c.op_seconds)
    if m > d_in:
        return {"dense": dense, "cholesky": math.inf, "qr": math.inf}
    draw_and_multiply = S * m * d_out * randn_scale / c.randn_per_s + 2 * S * m * m * d_out / flops
    cholesky = (2 * S * m * m * d_in / flops + S * m**3 / 3 / c.cholesky_flops + draw_and_multiply
                + 5 * c.op_seconds + c.sync_seconds)
    qr = S * (2 * d_in * m * m - 2 * m**3 / 3) / c.qr_flops + draw_and_multiply + 4 * c.op_seconds
    return {"dense": dense, "cholesky": cholesky, "qr": qr}


def choose_method(samples: int, rows: int, d_in: int, d_out: int, device: torch.device | str = "cpu",
                  *, dtype: torch.dtype | None = None, costs: DeviceCosts | None = None) -> str:
    """The cheapest method for ``samples`` products of (rows x d_in) by (d_in x d_out).

    Returns one of 'dense', 'cholesky', 'qr' (see :func:`method_costs`). On the GPU
    with TF32 a dense draw plus matmul often wins: random numbers are cheap there and
    the factorisations run far below matmul peak.

    >>> choose_method(1, 1024, 11008, 4096, "cuda", dtype=torch.bfloat16)
    'dense'
    >>> choose_method(8, 64, 512, 512, "cpu")
    'cholesky'
    """
    estimates = method_costs(samples, rows, d_in, d_out, device, dtype=dtype, costs=costs)
    return min(estimates, key=estimates.__getitem__)


def _time(fn, repeats: int = 3) -> float:
    fn()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def calibrate_costs(device: torch.device | str = "cpu", *, size: int = 512) -> DeviceCosts:
    """Measure the :class:`DeviceCosts` of ``device`` (about a second; call once, then :func:`set_costs`).

    Times a float32 randn, a square matmul with and without reduced precision, a
    batched QR and a batched Gram + Cholesky at sizes around ``size``.
    """
    device = torch.device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def timed(fn) -> float:
        return _time(lambda: (fn(), sync()))

    gen = torch.Generator(device=device).manual_seed(0)
    n = 4 * size * size * (16 if device.type == "cuda" else 1)
    randn_per_s = n / timed(lambda: torch.randn(n, generator=gen, device=device))
    big = 4 * size if device.type == "cuda" else size
    a = torch.randn(big, big, device=device)
    matmul_flops = 2 * big**3 / timed(lambda: a @ a)
    matmul_flops_fast = matmul_flops
    if device.type == "cuda":
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            matmul_flops_fast = 2 * big**3 / timed(lambda: a @ a)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
    m, batch = size // 8, 8
    rows = torch.randn(batch, m, size, device=device)  # (S, m, d)
    qr_flops = batch * (2 * size * m * m - 2 * m**3 / 3) / timed(lambda: torch.linalg.qr(rows.mT))
    gram = rows @ rows.mT  # (S, m, m)
    cholesky_flops = batch * m**3 / 3 / timed(lambda: torch.linalg.cholesky_ex(gram))
    launch = timed(lambda: a.add_(0.0)) if device.type == "cuda" else 5e-6
    sync_seconds = _time(sync) if device.type == "cuda" else 0.0
    return replace(DEFAULT_COSTS["cuda" if device.type == "cuda" else "cpu"], matmul_flops=matmul_flops,
                   matmul_flops_fast=matmul_flops_fast, randn_per_s=randn_per_s, qr_flops=qr_flops,
                   cholesky_flops=cholesky_flops, op_seconds=launch, sync_seconds=sync_seconds)


# -- the factorisation ---------------------------------------------------------------
def _qr_left(x: torch.Tensor) -> torch.Tensor:
    """L = R^T from the reduced QR of x^T: x (..., m, d) -> L (..., m, k), k = min(m, d).

    ``mode="r"``: only R is formed (Householder, no Q): the same R as the reduced QR.
    """
    _, upper = torch.linalg.qr(x.mT, mode="r")  # (..., k, m)
    return upper.mT  # (..., m, k)


def refactor_rows(x: torch.Tensor) -> torch.Tensor:
    """The left factor of rows whose Cholesky failed in their own precision: x (F, m, d) -> (F, m, m), m <= d.

    Float32 x: the Gram is formed and factored in float64 and the factor is rounded to
    float32; no jitter is added. Exactness (derived here): a product of two float32
    numbers is exact in float64, so the float64 Gram and its Cholesky factor L_64 carry
    errors of order (d + m) u_64 ||x_i|| ||x_j|| (u = unit roundoff; ``|L||L|^T`` is at
    most ``||x_i|| ||x_j||`` entry-wise, Cauchy-Schwarz), and rounding L_64 to float32 adds
    at most (2 u_32 + u_32^2) ||x_i|| ||x_j||. So ``L L^T = x x^T + E`` with
    ``|E_ij| <= (2 u_32 + O((d + m) u_64)) ||x_i|| ||x_j||``, below the
    ``(d + m + 1) u_32 ||x_i|| ||x_j||`` of a float32 Gram and Cholesky that completes:
    the law of L Z is that of x W to float32 precision, as on the float32 path.
    The rows whose float64 Gram is singular too (rank-deficient x: duplicated or zero
    rows) take QR (:func:`factor_rows` 'qr', in float64), exact for any x. Float64 x goes
    straight to QR.

    Why not QR for every failure: on two CPU threads a batched LAPACK QR of 128 x 48
    matrices took ~12x its one-thread time (a parallel region per panel), and with the
    tokens of P1's input std 0.02 collapsing, 22% of the sample-products of a width-128
    LLaMA stack failed in float32: QR took 30-40% of the run (``simulate bench`` rows
    ``input-std-1`` and ``input-std-0.02``). None of them failed in float64.
    A float64 m x m Cholesky costs about as much as the float32 one.

    >>> x = torch.tensor([[[1.0, 0.0], [1.0, 1e-4]], [[1.0, 0.0], [1.0, 0.0]]])  # (2, 2, 2)
    >>> int((torch.linalg.cholesky_ex(x @ x.mT).info != 0).sum())  # float32 Gram singular for both
    2
    >>> left = refactor_rows(x)
    >>> torch.allclose((left @ left.mT).double(), (x @ x.mT).double(), atol=1e-7)
    True
    """
    if x.dtype != torch.float32:
        return _qr_left(x)
    wide = x.double()  # (F, m, d)
    left, info = torch.linalg.cholesky_ex(wide @ wide.mT)  # (F, m, m), (F,)
    singular = info != 0
    if bool(singular.any()):
        left[singular] = _qr_left(wide[singular])  # (F', m, m)
    return left.to(x.dtype)


def factor_rows(x: torch.Tensor, method: str = "cholesky", *, failures: torch.Tensor | None = None) -> torch.Tensor:
    """A left factor L with ``L L^T = x x^T`` (so ``x = L Q`` for orthonormal-row Q).

    Parameters
    ----------
    x : Tensor (..., m, d)
        The rows that will meet a Gaussian weight. Half precision is factored in float32.
    method : {'cholesky', 'qr'}
        'qr': ``R^T`` of the reduced QR of ``x^T``, shape (..., m, min(m, d)), exact for
        any x. 'cholesky': the Cholesky factor of the Gram ``x x^T``, (..., m, m); the
        samples where it fails (``info != 0``) are factored again by :func:`refactor_rows`
        (float64 Cholesky, QR where that fails too), which needs m <= d (one host sync
        to find them).
    failures : Tensor, optional
        A one-element integer tensor on x's device. Given, the Cholesky path never syncs:
        it adds the number of failed samples to ``failures`` and leaves their factors as
        they are (not to be used); the caller checks ``failures`` when it syncs anyway and
        redoes the work with 'qr' if it is not zero (how :func:`simulate.simulate` runs on CUDA).

    Returns
    -------
    Tensor (..., m, k), in x's dtype (float32 for half-precision x).

    >>> x = torch.tensor([[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]], dtype=torch.float64)  # rank 1
    >>> left = factor_rows(x, "cholesky")
    >>> torch.allclose(left @ left.mT, x @ x.mT)
    True
    >>> count = torch.zeros(1, dtype=torch.int64)
    >>> _ = factor_rows(x, "cholesky", failures=count); int(count)
    1
    """
    if x.dtype in _LOW_PRECISION:
        x = x.float()
    if method == "qr":
        return _qr_left(x)
    if method != "cholesky":
        raise ValueError(f"method={method!r} is not allowed: 'cholesky' or 'qr'")
    *batch, rows, width = x.shape
    if rows > width:
        return _qr_left(x)
    flat = x.reshape(-1, rows, width)  # (B, m, d)
    gram = flat @ flat.mT  # (B, m, m)
    left, info = torch.linalg.cholesky_ex(gram)  # (B, m, m), (B,)
    failed = info != 0  # (B,); a non-finite x gives a non-finite factor either way
    if failures is not None:
        failures += failed.sum()  # no host sync
    elif bool(failed.any()):  # the one host sync of this path
        left = left.clone()
        left[failed] = refactor_rows(flat[failed])  # (F, m, m)
    return left.reshape(*batch, rows, rows)  # (..., m, m)


# -- the product ---------------------------------------------------------------------
def _resolve_method(method: str, samples: int, rows: int, d_in: int, d_out: int, x: torch.Tensor) -> str:
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not allowed: one of {', '.join(METHODS)}")
    if method == "auto":
        return choose_method(samples, rows, d_in, d_out, x.device, dtype=x.dtype)
    if method == "implicit":
        method = "cholesky"
    if method != "dense" and rows > d_in:
        return "dense"  # factoring saves nothing when the rows outnumber the width
    return method


def _scaled_product(left: torch.Tensor, noise: torch.Tensor, std: float) -> torch.Tensor:
    """std * left @ noise, scaling the smaller operand: (..., m, k) @ (..., k, n) -> (..., m, n)."""
    if left.shape[-2] <= noise.shape[-1]:
        return (left * std) @ noise
    return left @ noise.mul_(std)


def gaussian_products(x: torch.Tensor, d_outs: Sequence[int], stds: float | Sequence[float],
                      generator: torch.Generator | None = None, method: str = "implicit",
                      *, noise_dtype: torch.dtype | None = None,
                      draws: Sequence[Callable[[tuple[int, ...]], torch.Tensor]] | None = None,
                      failures: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """``x W_1, ..., x W_n`` for independent Gaussian weights that meet the same rows.

    One factorisation serves all weights (e.g. W_q, W_k, W_v or SwiGLU's W_1, W_3):
    ``x [W_1 ... W_n] = L [Z_1 ... Z_n]`` with block i scaled by ``stds[i]``. With
    ``generator``, one draw (..., k, sum d_out) and one matmul; with ``draws`` (one
    callable per weight, ``shape -> N(0, 1) numbers``, e.g. keyed generators), one draw
    and one matmul per weight. ``failures``: as :func:`factor_rows` (sync-free Cholesky).
    Other arguments as :func:`gaussian_product`.

    >>> x = torch.randn(2, 3, 8)  # (S, m, d)
    >>> q, k = gaussian_products(x, (8, 4), (0.1, 0.2), torch.Generator().manual_seed(1))
    >>> q.shape, k.shape
    (torch.Size([2, 3, 8]), torch.Size([2, 3, 4]))
    """
    d_outs = tuple(int(n) for n in d_outs)
    stds = (float(stds),) * len(d_outs) if isinstance(stds, (int, float)) else tuple(float(s) for s in stds)
    if len(stds) != len(d_outs) or (draws is not None and len(draws) != len(d_outs)):
        raise ValueError(f"stds/draws do not have one entry for each of the {len(d_outs)} weights")
    *batch, rows, d_in = x.shape
    method = _resolve_method(method, math.prod(batch), rows, d_in, sum(d_outs), x)
    left = x if method == "dense" else factor_rows(x, method, failures=failures)  # (..., m, d) or (..., m, k)
    inner = left.shape[-1]  # d for dense, k for factored
    if draws is not None:  # half-precision x: the factor is float32, L Z runs in x's dtype
        mm_dtype = x.dtype if x.dtype in _LOW_PRECISION else left.dtype
        left = left.to(mm_dtype)
        return tuple(_scaled_product(left, draw((*batch, inner, n)).to(mm_dtype), std).to(x.dtype)
                     for draw, n, std in zip(draws, d_outs, stds))  # (..., m, n_i) each
    draw_dtype = noise_dtype or left.dtype
    noise = torch.randn((*batch, inner, sum(d_outs)), generator=generator, device=x.device,
                        dtype=draw_dtype).to(left.dtype)  # (..., k, sum d_out)
    if len(set(stds)) == 1:
        product = _scaled_product(left, noise, stds[0])  # (..., m, sum d_out)
    else:
        column_std = torch.tensor([s for s, n in zip(stds, d_outs) for _ in range(n)],
                                  device=x.device, dtype=noise.dtype)  # (sum d_out,)
        product = left @ noise.mul_(column_std)  # (..., m, sum d_out)
    product = product.to(x.dtype)
    return tuple(torch.split(product, d_outs, dim=-1)) if len(d_outs) > 1 else (product,)


def gaussian_product(x: torch.Tensor, d_out: int, std: float, generator: torch.Generator | None = None,
                     method: str = "implicit", *, noise_dtype: torch.dtype | None = None) -> torch.Tensor:
    """A draw of ``x W`` for a fresh W (d x d_out, i.i.d. N(0, std^2)) per leading index.

    Parameters
    ----------
    x : Tensor (..., m, d)
        Rows; leading dims are independent samples, each with its own W. All rows
        that must share W (primal and tangent rows) have to be in this one call.
    d_out : int
        Output width.
    std : float
        Weight standard deviation s.
    generator : torch.Generator, optional
        On x's device; the only source of randomness.
    method : {'implicit', 'cholesky', 'qr', 'dense', 'auto'}
        'implicit' = 'cholesky' (falls back to QR per failing sample); 'auto' picks by
        :func:`choose_method`. Factored methods with m > d run dense.
    noise_dtype : torch.dtype, optional
        dtype the Gaussian numbers are drawn in (default: the factor's dtype). On CPU,
        float32 draws cast up to float64 are ~5x faster than float64 draws and differ
        from them only by rounding (relative 2^-24).

    Returns
    -------
    Tensor (..., m, d_out) in x's dtype: exactly distributed as x W given x.

    >>> x = torch.zeros(1, 2, 5)  # (S, m, d)
    >>> gaussian_product(x, 3, 1.0, torch.Generator().manual_seed(0), method="qr").abs().max().item()
    0.0
    """
    return gaussian_products(x, (d_out,), (std,), generator, method, noise_dtype=noise_dtype)[0]
