"""Random numbers of a run: keyed generators and the Gaussian weight application.

Every random draw of a run (the input, each weight, each branch mask, each Jacobian
probe) comes from its own ``torch.Generator`` seeded by a hash of
``(seed, layer, part)``, so a run is reproducible, a layer can be replayed without
storing it, and the same seed gives the same numbers on the CPU. Layer 0 holds the
input and the end-to-end probe; blocks are layers 1..L. Samples are a leading batch
dimension and each sample has its own independent weights: one draw of shape
``(S, d_in, d_out)`` per weight.

>>> import torch
>>> sampler = WeightSampler(seed=3, samples=2, device="cpu", dtype=torch.float64, mode="dense")
>>> x = torch.ones(2, 5, 4)  # (S, m, d_in)
>>> sampler.apply(x.double(), (1, PART["q"]), 6, 0.5).shape
torch.Size([2, 5, 6])
>>> bool((sampler.draw((1, PART["q"]), 4, 6, 0.5) == sampler.draw((1, PART["q"]), 4, 6, 0.5)).all())
True
"""

from __future__ import annotations

import importlib
import warnings

import torch

from simulate.engine.noise import DRAW_DTYPE, NoiseSource, key_generator, key_seed

__all__ = ["DRAW_DTYPE", "PART", "expert_part", "key_seed", "generator", "WeightSampler", "WEIGHT_MODES"]

WEIGHT_MODES = ("dense", "implicit", "auto")

# Part index of every random draw inside a layer (the "sublayer" of the key).
PART = {
    "input": 0, "input_common": 1, "e2e_probe": 2,  # layer 0
    "q": 10, "k": 11, "v": 12, "o": 13,  # attention
    "up": 20, "gate": 21, "down": 22,  # dense MLP (gate = SwiGLU's W3)
    "linear": 30, "router": 40,  # linear block; MoE router
    "shared_up": 50, "shared_gate": 51, "shared_down": 52,  # MoE shared expert
    "mask": 60, "jac_probe": 61,  # branch mask of the block; Jacobian probe of the block
}
_EXPERT_BASE = 1000


def expert_part(expert: int, role: str) -> int:
    """Part index of weight ``role`` ('up', 'gate', 'down') of MoE expert ``expert``.

    >>> expert_part(2, "down")
    1008
    """
    return _EXPERT_BASE + 3 * expert + ("up", "gate", "down").index(role)


generator = key_generator  # the generator of draw (seed, layer, part) on a device


def _implicit_module():
    try:
        return importlib.import_module("simulate.engine.implicit")
    except ImportError:
        return None


class WeightSampler:
    """Draws the random numbers of one run and applies Gaussian weights to rows.

    Parameters
    ----------
    seed : int
        Run seed; every draw is keyed by ``(seed, layer, part)``.
    samples : int
        S, the Monte-Carlo batch; each sample gets independent weights.
    device, dtype
        Where and in what precision numbers are drawn.
    mode : {'dense', 'implicit', 'auto'}
        'dense' draws W (S, d_in, d_out) and multiplies (bmm). 'implicit' and 'auto'
        use ``simulate.engine.implicit`` (X W has the law of L Z,
        docs/design.md#how-the-simulator-stays-fast); 'auto' lets
        ``simulate.engine.implicit.choose_method`` pick per product. Without that module
        every product is dense (a warning says so once).
    prefetch : bool
        Draw the coming blocks' numbers on a background thread
        (:class:`simulate.engine.noise.NoiseSource`); the numbers do not change.
    matmul_dtype : torch.dtype, optional
        Run the weight products in this dtype (bfloat16 on CUDA), the rest in ``dtype``.
    sync_free : bool, optional
        Cholesky factorisations never sync with the host: failures are counted on the
        device (:meth:`factor_failed` reads the count) instead of being fixed by QR on the
        spot. Default: on for CUDA.
    factor : {'cholesky', 'qr'}
        The factorisation of the implicit products ('qr' after a Cholesky failure).
    share_factors : bool
        Weights that meet the same rows share one factorisation (:meth:`apply_many`);
        False factors the rows once per weight (same numbers; the bench's ablation).
    """

    def __init__(self, seed: int, samples: int, device: torch.device | str, dtype: torch.dtype,
                 mode: str = "dense", *, prefetch: bool = False, matmul_dtype: torch.dtype | None = None,
                 sync_free: bool | None = None, factor: str = "cholesky", share_factors: bool = True):
        if mode not in WEIGHT_MODES:
            raise ValueError(f"weights={mode!r} is not allowed: one of {', '.join(WEIGHT_MODES)}")
        self.seed, self.samples = int(seed), int(samples)
        self.device, self.dtype, self.mode = torch.device(device), dtype, mode
        self.matmul_dtype, self.factor, self.share_factors = matmul_dtype, factor, bool(share_factors)
        if sync_free is None:
            sync_free = self.device.type == "cuda"
        self.failures = torch.zeros(1, dtype=torch.int64, device=self.device) if sync_free else None
        self.noise = NoiseSource(self.seed, self.device, prefetch)
        self._implicit = _implicit_module() if mode != "dense" else None
        if mode != "dense" and self._implicit is None:
            warnings.warn("simulate.engine.implicit is not available: weights are drawn dense", stacklevel=2)

    def generator(self, key: tuple[int, int]) -> torch.Generator:
        """The generator of draw ``key = (layer, part)``."""
        return generator(self.seed, key[0], key[1], self.device)

    def begin_layer(self, layer: int, last: int) -> None:
        """Block ``layer`` of 1..``last`` starts (lets the noise source prefetch)."""
        self.noise.begin_layer(layer, last)

    def close(self) -> None:
        """Stop any prefetching."""
        self.noise.close()

    def factor_failed(self) -> bool:
        """Whether a sync-free Cholesky failed so far (one host sync; False when not sync-free)."""
        return self.failures is not None and bool(self.failures.item())

    def normal(self, key: tuple[int, int], shape: tuple[int, ...], std: float = 1.0) -> torch.Tensor:
        """i.i.d. N(0, std^2) numbers of ``shape`` from the generator of ``key``."""
        noise = self.noise.normal(key, shape).to(self.dtype)
        return noise.mul_(std) if std != 1.0 else noise

    def bernoulli(self, key: tuple[int, int], shape: tuple[int, ...], p: float) -> torch.Tensor:
        """i.i.d. Bernoulli(p) zeros and ones of ``shape`` (as ``dtype``)."""
        return (self.noise.uniform(key, shape) < p).to(self.dtype)

    def draw(self, key: tuple[int, int], d_in: int, d_out: int, std: float) -> torch.Tensor:
        """The dense weight of ``key``: (S, d_in, d_out), entries N(0, std^2), one per sample."""
        return self.normal(key, (self.samples, d_in, d_out), std)

    def apply(self, x: torch.Tensor, key: tuple[int, int], d_out: int, std: float) -> torch.Tensor:
        """Rows times a fresh Gaussian weight: x (S, m, d_in) -> x W (S, m, d_out).

        All rows that meet this weight (primal and tangent rows) must come in one call
        so that, in implicit mode, their joint law is exact.
        """
        return self.apply_many(x, (key,), (d_out,), (std,))[0]

    def apply_many(self, x: torch.Tensor, keys, d_outs, stds) -> tuple[torch.Tensor, ...]:
        """Rows times several independent Gaussian weights: x (S, m, d_in) -> (x W_i (S, m, d_out_i), ...).

        In implicit mode one factorisation of x serves every weight (q/k/v, SwiGLU
        up/gate); each W_i keeps its own key, so the numbers do not depend on the grouping.
        """
        samples, rows, d_in = x.shape
        if not self.share_factors and len(keys) > 1:
            return tuple(self.apply_many(x, (key,), (n,), (std,))[0] for key, n, std in zip(keys, d_outs, stds))
        if self.matmul_dtype is not None:
            x = x.to(self.matmul_dtype)
        method = self._method(rows, d_in, sum(d_outs), x.dtype)
        if method != "dense":
            draws = [lambda shape, key=key: self.noise.normal(key, shape) for key in keys]
            outs = self._implicit.gaussian_products(x, d_outs, stds, method=method, draws=draws,
                                                    failures=self.failures)
        else:
            outs = [torch.bmm(x, self.normal(key, (samples, d_in, n), std).to(x.dtype))  # (S, m, n)
                    for key, n, std in zip(keys, d_outs, stds)]
        return tuple(out.to(self.dtype) for out in outs)

    def _method(self, rows: int, d_in: int, d_out: int, dtype: torch.dtype) -> str:
        """'dense' or a factored method of simulate.engine.implicit ('implicit', 'cholesky', 'qr')."""
        if self._implicit is None or self.mode == "dense":
            return "dense"
        if self.mode == "implicit":
            method = "cholesky" if rows <= d_in else "dense"
        else:
            method = self._implicit.choose_method(self.samples, rows, d_in, d_out, self.device, dtype=dtype)
        return self.factor if method == "cholesky" else method
