"""The full Jacobian of one block for the last token, for heatmaps (P2 Fig. 3).

Runs one sample (dense weights, the same generators as :func:`simulate.simulate`
with ``samples=1``) up to block ``layer``, then pushes the d basis tangents of the
last token's input through that block in forward mode: column j of the result is
d x_l[last] / d x_{l-1}[last] e_j, the other tokens held fixed.

>>> from theory.setting import Setting
>>> jac = block_jacobian(Setting(scheme="skipinit", block="mlp", depth=2, width=8, tokens=3), 2)
>>> jac.shape, bool(abs(jac - __import__("numpy").eye(8)).max() < 1e-12)
((8, 8), True)
"""

from __future__ import annotations

import numpy as np
import torch

from simulate.engine.stack import block_context, block_mask, block_step, initial_stream
from simulate.engine.weights import WeightSampler
from theory.constraints import Integer

__all__ = ["block_jacobian"]


def block_jacobian(setting, layer: int, *, seed: int = 0) -> np.ndarray:
    """J[i, j] = d x_l[T-1, i] / d x_{l-1}[T-1, j] of block ``layer`` (1..L): numpy (d, d), float64."""
    Integer(1, setting.depth).check("layer", layer)
    sampler = WeightSampler(seed, 1, "cpu", torch.float64, "dense")
    width, tokens = setting.width, setting.tokens
    with torch.inference_mode():
        stream = initial_stream(setting, sampler, False, False)  # (1, 1, T, d)
        for block in range(1, layer):
            ctx = block_context(setting, sampler, block)
            stream, _ = block_step(stream, ctx, None, None, block_mask(setting, sampler, block))
        basis = torch.zeros(width, 1, tokens, width, dtype=torch.float64)  # (d, 1, T, d)
        basis[torch.arange(width), 0, tokens - 1, torch.arange(width)] = 1.0
        dual = torch.cat([stream, basis], 0)  # (1 + d, 1, T, d)
        ctx = block_context(setting, sampler, layer)
        out, _ = block_step(dual, ctx, None, None, block_mask(setting, sampler, layer))
        columns = out[1:, 0, tokens - 1, :]  # (d, d): row j = J e_j
    return columns.T.contiguous().numpy()
