"""Angular distance between the streams after blocks l and l+n, as P1 draws it.

The simulator streams over depth and keeps no states, so :func:`stream_states` replays
one small stack with the simulator's own pieces (same weights, same input, same block
step as :func:`simulate.simulate` with the same seed) and keeps every layer's primal
stream. It is meant for figure sizes only: memory grows with depth.
"""

from __future__ import annotations

import math

import numpy as np

from theory.setting import Setting

from paper_figs.style import llama_like, mc_sizes, new_figure, save_figure

__all__ = ["stream_states", "angular_distance_matrix", "angular_heatmap"]


def stream_states(setting: Setting, *, samples: int, seed: int = 0):
    """Every layer's stream of ``samples`` random stacks: tensor (L+1, S, T, d) on the CPU.

    Uses ``simulate.stack`` internals (``initial_stream``, ``block_context``, ``block_mask``,
    ``block_step``) so the stacks are those of :func:`simulate.simulate` with this seed.
    """
    import torch
    from simulate import stack
    from simulate.weights import WeightSampler

    sampler = WeightSampler(seed, samples, torch.device("cpu"), torch.float32, "auto")
    states = []
    with torch.inference_mode():
        stream = stack.initial_stream(setting, sampler, False, False)  # (1, S, T, d)
        states.append(stream[0].clone())
        for layer in range(1, setting.depth + 1):
            ctx = stack.block_context(setting, sampler, layer)
            stream, _ = stack.block_step(stream, ctx, None, None, stack.block_mask(setting, sampler, layer))
            states.append(stream[0].clone())
    return torch.stack(states)  # (L+1, S, T, d)


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
