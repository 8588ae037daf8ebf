"""Jacobian statistics of each trained block by random probes (P2's Jacobian analysis, cross-token terms in).

``J_l`` is the Jacobian of block ``l`` as a map of a whole sequence's stream, ``(T d) x (T d)``:
tokens influence each other through attention, and those cross-token entries count.
Nothing of size ``(T d)^2`` is formed; per sequence, with ``n = T d`` and ``K`` Rademacher
probes ``v_k`` (``E v v^T = I``) pushed through the block (``J v``, :class:`Linearised`):

``jac_dev``       ``sqrt(mean_k ||J v_k - v_k||^2 / n)`` = ``||J - I||_F / sqrt(T d)`` (the simulator's
                  metric, so trained and init values compare with the theory).
``jac_diag_mean`` ``mean_i J_ii`` from ``dhat = mean_k v_k * J v_k`` (unbiased for ``diag J``).
``jac_diag_std``  spread of ``J_ii`` over the n entries: ``var_i(dhat)`` less the probes' own
                  noise ``mean_i s_i^2 / K`` (``s_i^2`` the sample variance over probes).
``jac_offdiag``   ``sqrt((||J||_F^2 - sum_i J_ii^2) / n)``, ``||J||_F^2 = E||J v||^2`` and
                  ``sum_i J_ii^2`` estimated as ``sum_i (dhat_i^2 - s_i^2/K)``.
``jac_spectral``  ``||J||_2`` by power iteration on ``J^T J`` (forward and reverse products).

Derived here (Hutchinson 1990; Bekas, Kokiopoulou and Saad 2007 for the diagonal);
docs/scores.md. P2 divides ``||J - I||_F`` by ``d``; ``jac_dev * sqrt(T d) / d`` converts.

>>> import torch
>>> rows = jacobian_scores(lambda x, layer: 2.0 * x, [torch.randn(2, 3, 4)], depth=1, probes=4, iterations=5)
>>> {r["score"]: round(r["value"], 6) for r in rows}["jac_spectral"]
2.0
"""

from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from tqdm.auto import tqdm

from simulate.scores.definitions import score_row
from theory.constraints import Integer

__all__ = ["JACOBIAN_SCORES", "Linearised", "probe_statistics", "spectral_norm", "jacobian_scores"]

JACOBIAN_SCORES = ("jac_dev", "jac_diag_mean", "jac_diag_std", "jac_offdiag", "jac_spectral")


class Linearised:
    """``J v`` and ``J^T w`` of ``function`` at ``x``, from one autograd graph built once.

    ``J^T w`` is a backward pass of ``y = function(x)``; ``J v`` is the double-backward
    trick, ``d/du <J^T u, v>``, on the graph of ``J^T u`` (linear in ``u``). Both reuse the
    graph, which on small CPU blocks is ~100x faster than ``torch.func.jvp``'s dispatch.
    """

    def __init__(self, function, x: torch.Tensor):
        with torch.enable_grad():
            self.x = x.detach().clone().requires_grad_(True)
            self.y = function(self.x)
            self.u = torch.zeros_like(self.y, requires_grad=True)
            (self.pulled,) = torch.autograd.grad(self.y, self.x, self.u, create_graph=True)  # J^T u

    def jvp(self, v: torch.Tensor) -> torch.Tensor:
        """``J v``: (B, T, d) -> (B, T, d)."""
        (out,) = torch.autograd.grad(self.pulled, self.u, v, retain_graph=True)
        return out

    def vjp(self, w: torch.Tensor) -> torch.Tensor:
        """``J^T w``: (B, T, d) -> (B, T, d)."""
        (out,) = torch.autograd.grad(self.y, self.x, w, retain_graph=True)
        return out


def probe_statistics(linear: Linearised, probes: int, generator: torch.Generator) -> dict:
    """Per-sequence ``jac_dev, jac_diag_mean, jac_diag_std, jac_offdiag`` (module docstring): (B,) each."""
    Integer(2).check("probes", probes)  # two at least: the diagonal's spread needs a probe variance
    x = linear.x
    n = x.shape[-1] * x.shape[-2]
    products, dev2, frob2 = [], [], []
    for _ in range(probes):
        v = (torch.randint(0, 2, x.shape, generator=generator, dtype=torch.int64) * 2 - 1).to(x)  # (B, T, d)
        jv = linear.jvp(v).double()  # (B, T, d)
        v = v.double()
        products.append(v * jv)
        dev2.append((jv - v).pow(2).sum((-1, -2)))  # (B,)
        frob2.append(jv.pow(2).sum((-1, -2)))  # (B,)
    products = torch.stack(products)  # (K, B, T, d)
    dhat = products.mean(0)  # (B, T, d)
    noise = products.var(0, unbiased=True) / probes  # (B, T, d): variance of dhat per entry
    diag_var = (dhat.flatten(1).var(1, unbiased=True) - noise.flatten(1).mean(1)).clamp_min(0.0)  # (B,)
    diag_sq = (dhat.pow(2) - noise).flatten(1).sum(1)  # (B,)
    offdiag = ((torch.stack(frob2).mean(0) - diag_sq).clamp_min(0.0) / n).sqrt()  # (B,)
    return {"jac_dev": (torch.stack(dev2).mean(0) / n).sqrt(), "jac_diag_mean": dhat.flatten(1).mean(1),
            "jac_diag_std": diag_var.sqrt(), "jac_offdiag": offdiag}


def spectral_norm(linear: Linearised, iterations: int, generator: torch.Generator) -> torch.Tensor:
    """``||J||_2`` per sequence by power iteration on ``J^T J``: (B,).

    Sequences do not interact inside a block, so ``J`` is block-diagonal over the batch and
    one batched iteration, normalised per sequence, runs every sequence's own iteration.
    """
    x = linear.x
    u = torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)  # (B, T, d)
    norm = lambda t: torch.linalg.vector_norm(t.double(), dim=(-1, -2))  # noqa: E731  (B,)
    for _ in range(iterations):
        u = u / norm(u).clamp_min(1e-300).to(u.dtype)[:, None, None]
        u = linear.vjp(linear.jvp(u))
    u = u / norm(u).clamp_min(1e-300).to(u.dtype)[:, None, None]
    return norm(linear.jvp(u))  # (B,)


def jacobian_scores(block, inputs, depth: int, *, probes: int = 4, iterations: int = 20, seed: int = 0,
                    progress=None) -> list[dict]:
    """Rows of scores.csv for every block and :data:`JACOBIAN_SCORES`; sem over sequences.

    Parameters
    ----------
    block : callable
        ``block(x, layer)`` is block ``layer`` (1..depth) applied to its input ``x`` (B, T, d).
    inputs : list of list of Tensor or list of Tensor
        ``inputs[l - 1]`` is block l's input ``x_{l-1}`` on the probed sequences, or, for
        ``depth == 1`` doctests, one tensor per block.
    """
    generator = torch.Generator().manual_seed(seed)
    values = {name: [] for name in JACOBIAN_SCORES}
    # the fused attention kernels have no forward-mode rule: the math kernel computes the same
    # the math attention kernel has every double-backward rule the products need
    with sdpa_kernel(SDPBackend.MATH), tqdm(total=depth, desc="jacobian", unit="layer", leave=False,
                                            disable=None if progress is None else not progress) as bar:
        for layer in range(1, depth + 1):
            x = inputs[layer - 1].clone()  # a normal tensor even if made under inference mode
            linear = Linearised(lambda h, layer=layer: block(h, layer), x)
            stats = probe_statistics(linear, probes, generator)
            stats["jac_spectral"] = spectral_norm(linear, iterations, generator)
            del linear  # free the block's graph before the next
            for name in JACOBIAN_SCORES:
                values[name].append(score_row(layer, name, stats[name].detach().double().cpu().numpy()))
            bar.update()
    return [row for name in JACOBIAN_SCORES for row in values[name]]
