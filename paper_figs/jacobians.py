"""Block Jacobians of a shallow and a deep block (P2 Fig. 3): how close to the identity.

``simulate.block_jacobian`` gives the full d x d Jacobian of one block for the last
token with respect to its own input. A block near the identity shows a dominant
diagonal; the title gives the diagonal dominance ``mean |J_ii| / mean |J_ij|`` (i != j)
and ``||J - I||_F / sqrt(d)``.
"""

from __future__ import annotations

import numpy as np

from paper_figs.measure import llama_like, mc_sizes
from paper_figs.style import new_figure, save_figure

__all__ = ["diagonal_dominance", "jacobian_heatmaps"]


def diagonal_dominance(jacobian: np.ndarray) -> float:
    """``mean |J_ii| / mean |J_ij|`` over i != j (large = near-diagonal).

    >>> diagonal_dominance(np.array([[2.0, 1.0], [-1.0, 2.0]]))
    2.0
    """
    jacobian = np.abs(np.asarray(jacobian, dtype=float))
    off = ~np.eye(jacobian.shape[0], dtype=bool)
    return float(np.diag(jacobian).mean() / jacobian[off].mean())


def jacobian_heatmaps(out_dir, quick: bool = False):
    """Heatmaps of J - I for block 1 and block L, Pre-LN and LNS (llama, LLaMA-130M's alpha)."""
    import simulate

    size = mc_sizes(quick)
    width = 32 if quick else 64
    fig, axes = new_figure(ncols=2, nrows=2, width=3.4, height=3.0)
    for row, scheme in enumerate(("pre", "lns")):
        setting = llama_like(width, scheme=scheme, tokens=size.tokens, heads=4, depth=size.depth)
        for col, layer in enumerate((1, setting.depth)):
            ax = axes[row][col]
            jacobian = np.asarray(simulate.block_jacobian(setting, layer, seed=0), dtype=float)
            branch = jacobian - np.eye(width)  # the block's own contribution; the identity is the skip path
            limit = float(np.abs(branch).max()) or 1.0
            mesh = ax.imshow(branch, cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
            ax.grid(False)
            ax.set_title(f"{scheme}, block {layer} of {setting.depth}\ndiag dominance of J "
                         f"{diagonal_dominance(jacobian):.3g}\n||J-I||_F/sqrt(d) = "
                         f"{np.linalg.norm(branch) / np.sqrt(width):.3g}", fontsize=7)
            ax.set_xlabel("input feature j")
            ax.set_ylabel("output feature i")
            fig.colorbar(mesh, ax=ax, label="(J - I)_ij")
    fig.suptitle(f"Block Jacobians minus identity (last token) at random init, llama, alpha={setting.alpha:.3g}, "
                 f"d={width}, T={size.tokens}", fontsize=8)
    return save_figure(fig, out_dir, f"block_jacobians_d{width}_L{size.depth}")
