"""Angular distance between the streams after blocks l and l+n, as P1 draws it.

The simulator streams over depth and keeps no states, so
:func:`simulate.engine.stack.stream_states` replays one small stack with the simulator's own
pieces and keeps every layer's primal stream (figure sizes only: memory grows with depth).
"""

from __future__ import annotations

import math

import numpy as np

from paper_figs.measure import llama_like, mc_sizes
from paper_figs.style import new_figure, save_figure
from simulate.engine import stream_states

__all__ = ["angular_distance_matrix", "angular_heatmap"]


def angular_distance_matrix(states) -> np.ndarray:
    """``D[l, n] = mean arccos(cos(x_l[t], x_{l+n}[t]))/pi`` over samples and tokens; NaN where l+n > L.

    Parameters
    ----------
    states : tensor (L+1, S, T, d)

    >>> import torch
    >>> x = torch.randn(3, 2, 4, 8)
    >>> D = angular_distance_matrix(torch.stack([x[0], x[0], -x[0]]))
    >>> round(float(D[0, 1]), 6), round(float(D[0, 2]), 6), bool(np.isnan(D[2, 1]))
    (0.0, 1.0, True)
    """
    import torch

    unit = torch.nn.functional.normalize(states.double(), dim=-1)  # (L+1, S, T, d)
    cos = torch.einsum("lstd,mstd->lmst", unit, unit).clamp(-1.0, 1.0)  # (L+1, L+1, S, T)
    pairwise = (torch.arccos(cos) / math.pi).mean((-1, -2)).numpy()  # (L+1, L+1)
    layers = pairwise.shape[0]
    out = np.full((layers, layers), np.nan)
    for n in range(layers):
        start = np.arange(layers - n)
        out[start, n] = pairwise[start, start + n]
    return out


def angular_heatmap(out_dir, quick: bool = False):
    """Heatmaps of the angular distance d(x_l, x_{l+n}) for Pre-LN and LNS at random init."""
    size = mc_sizes(quick)
    depth = size.depth if quick else 64
    samples = 4 if quick else 8
    fig, axes = new_figure(ncols=2, width=3.6, height=3.0)
    for ax, scheme in zip(axes[0], ("pre", "lns")):
        setting = llama_like(size.width, scheme=scheme, tokens=size.tokens, heads=4, depth=depth)
        distance = angular_distance_matrix(stream_states(setting, samples=samples))
        shown = np.ma.masked_invalid(distance[:, 1:].T)  # rows: n = 1..L, columns: l = 0..L
        mesh = ax.pcolormesh(np.arange(depth + 1), np.arange(1, depth + 1), shown, shading="nearest",
                             cmap="magma_r", vmin=0.0, vmax=float(np.nanmax(distance)))
        ax.grid(False)
        ax.set_xlabel("first layer l (0 = input)")
        ax.set_ylabel("block size n (layers skipped)")
        ax.set_title(f"{scheme}: llama, alpha={setting.alpha:.3g}, d={size.width}, T={size.tokens}, L={depth}, "
                     f"S={samples}", fontsize=7)
        fig.colorbar(mesh, ax=ax, label="angular distance arccos(cos)/pi")
    fig.suptitle("Angular distance between x_l and x_{l+n} at random init", fontsize=8)
    return save_figure(fig, out_dir, f"angular_heatmap_d{size.width}_L{depth}")
