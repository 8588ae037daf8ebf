"""Growth regimes: the aligned bridge (docs/derivations.md#bridge-aligned) and P2's weight-decay process.

The bridge ``sigma_{l+1}^2 = (sigma_l + a)^2 + b^2`` (``theory.symbolic.recursions.bridge_step``)
is linear in depth for ``a = 0``, quadratic for ``b = 0`` and exponential only when
``a`` grows like ``sigma_l``. The map shows the local growth exponent
``p = d log(sigma_L^2 - sigma_0^2) / d log L`` over ``(a, b)``.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from theory.setting import Setting

from paper_figs.legends import figure_legend, series_handles, style_handles
from paper_figs.measure import mc_sizes, profile_panel
from paper_figs.style import LAW_LINESTYLE, new_figure, save_figure, sources

__all__ = ["bridge_growth_exponent", "exponent_panel", "regime_cases", "regime_map", "WEIGHT_DECAY_CASES",
           "weight_decay_figure", "weight_decay"]


def bridge_growth_exponent(aligned, independent, depth: int, sigma0: float = 1.0) -> np.ndarray:
    """Local exponent of ``sigma_L^2 - sigma_0^2`` in ``L`` at ``L = depth`` for the bridge.

    Iterates ``theory.symbolic.recursions.bridge_step`` numerically (vectorised over the grid)
    and takes the log-log slope between ``depth/2`` and ``depth``.

    >>> bridge_growth_exponent(np.array([0.0, 1.0]), np.array([1.0, 0.0]), 1000).round(2).tolist()
    [1.0, 2.0]
    """
    from theory.symbolic import recursions, symbols

    step = sp.lambdify((symbols.sigma, symbols.a, symbols.b), recursions.bridge_step(), "numpy")
    a, b = np.broadcast_arrays(np.asarray(aligned, float), np.asarray(independent, float))
    std = np.full(a.shape, float(sigma0))
    half = None
    for layer in range(1, depth + 1):
        std = np.sqrt(step(std, a, b))
        if layer == depth // 2:
            half = std**2 - sigma0**2
    return np.log((std**2 - sigma0**2) / half) / math.log(depth / (depth // 2))


def exponent_panel(ax, depth: int, grid) -> np.ndarray:
    """The map of :func:`bridge_growth_exponent` over ``(a, b)`` in ``grid x grid`` (log axes), a colorbar beside it.

    Returns
    -------
    ndarray (len(grid), len(grid))
        The exponent, rows over ``b``, columns over ``a``.
    """
    aligned, independent = np.meshgrid(grid, grid)  # (n, n) each
    exponent = bridge_growth_exponent(aligned, independent, depth)  # (n, n)
    mesh = ax.pcolormesh(grid, grid, exponent, shading="auto", cmap="viridis", vmin=1, vmax=2)
    ax.grid(False)
    ax.contour(grid, grid, exponent, levels=[1.5], colors="white", linewidths=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("aligned strength a (per sublayer)")
    ax.set_ylabel("independent std b (per sublayer)")
    ax.set_title(f"growth exponent p of sigma_L^2 - sigma_0^2 ~ L^p\nat L={depth} "
                 "(1 = linear, 2 = quadratic; white: p = 1.5)")
    ax.figure.colorbar(mesh, ax=ax, label="local exponent p")
    return exponent


def regime_cases(width: int, tokens: int, depth: int) -> dict:
    """The four growth regimes as linear-block settings: label -> Setting (the figure's and notebook 05's)."""
    base = Setting(block="linear", width=width, tokens=tokens, depth=depth)
    return {"pre, a=0: linear": base.replace(scheme="pre"),
            "pre, a=1, b~0: quadratic": base.replace(scheme="pre", alignment=1.0, init_std=1e-4),
            "pre, a=1, b=1": base.replace(scheme="pre", alignment=1.0),
            "no norm, alpha=0.5: exponential": base.replace(scheme="none", init_std=math.sqrt(0.5 / width))}


def regime_map(out_dir, quick: bool = False):
    """Left: growth exponent over (a, b); right: the regimes measured against theory."""
    size = mc_sizes(quick)
    depth_map = 1000 if quick else 10000
    fig, axes = new_figure(ncols=2, width=4.6, height=3.3)
    exponent_panel(axes[0][0], depth_map, np.logspace(-2, 1, 31 if quick else 121))
    ax = axes[0][1]
    cases = regime_cases(size.width, size.tokens, size.depth)
    for k, (label, setting) in enumerate(cases.items()):
        profile_panel(ax, setting, "var", samples=size.samples, label=label, color=f"C{k}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("layer l")
    ax.set_ylabel("stream variance sigma_l^2")
    ax.set_title(f"linear block, d={size.width}, T={size.tokens}, L={size.depth}: MC vs theory")
    kinds = {source.kind for source in sources(fig) if source.law is not None}
    figure_legend(fig, series_handles([(label, f"C{k}") for k, label in enumerate(cases)]) + style_handles(kinds),
                  ncol=4)
    return save_figure(fig, out_dir, f"regime_map_L{depth_map}_d{size.width}")


WEIGHT_DECAY_CASES = ((0.01, 0.1, 1.0), (0.1, 1.0, 1.0), (0.5, 1.0, 1.0))  # (eta, lambda, sigma_G)


def weight_decay_figure(cases=WEIGHT_DECAY_CASES, *, steps: int, groups: int):
    """P2 Theorem 3: Var(u_t) of decoupled weight decay, measured, against the exact law and the bound.

    Parameters
    ----------
    cases : iterable of (lr, weight_decay, grad_noise_std)
    steps : int
        Training steps simulated.
    groups : int
        Monte-Carlo groups of ``Setting().width`` independent chains each.

    Returns
    -------
    (Figure, list of dict)
        The figure and per case ``setting``, ``table`` (``simulate.weight_decay_process``), ``exact`` and
        ``bound`` (per step, ``theory.weight_decay_variance`` / ``theory.weight_decay_bound``).
    """
    import simulate
    import theory

    fig, axes = new_figure(width=6.8, height=3.4)
    ax, runs, labels = axes[0][0], [], []
    for lr, lam, noise in cases:
        setting = Setting(lr=lr, weight_decay=lam, grad_noise_std=noise)
        table = simulate.weight_decay_process(setting, samples=groups, seed=0, steps=steps)
        table = table[table["metric"] == "var"].sort_values("layer")
        label = f"eta={lr:g}, lambda={lam:g}, sigma_G={noise:g}"
        (line,) = ax.plot(table["layer"], table["mean"], linewidth=0.8, label=f"{label} (MC)")
        labels.append((label, line.get_color()))
        ax.fill_between(table["layer"], table["ci_low"], table["ci_high"], color=line.get_color(), alpha=0.25)
        args = dict(steps=int(table["layer"].max()), lr=lr, weight_decay=lam, grad_noise_std=noise,
                    init_var=setting.resolved_init_std**2)
        t = np.arange(args["steps"] + 1)
        exact, bound = theory.weight_decay_variance(**args), theory.weight_decay_bound(**args)
        ax.plot(t, exact, color=line.get_color(), linestyle=LAW_LINESTYLE["exact"], linewidth=1.2, alpha=0.7,
                label=f"{label}: exact-weight-decay (exact)")
        ax.plot(t, bound, color=line.get_color(), linestyle=LAW_LINESTYLE["upper"], linewidth=1.2,
                label=f"{label}: p2-thm-3 (upper)")
        runs.append({"setting": setting, "table": table, "exact": exact, "bound": bound})
    ax.set_xscale("symlog", linthresh=1)
    ax.set_yscale("log")
    ax.set_xlabel("training step t")
    ax.set_ylabel("Var(u_t) of one weight")
    ax.set_title("decoupled weight decay u_{t+1} = (1 - eta lambda) u_t - eta g_t")
    styles = style_handles(("exact", "upper"))
    styles[0] = (styles[0][0], f"Monte Carlo mean over {groups}x{Setting().width} chains, 95 % band")
    figure_legend(fig, series_handles(labels) + styles, ncol=3)
    return fig, runs


def weight_decay(out_dir, quick: bool = False):
    """P2 Theorem 3: Var(u_t) of decoupled weight decay with gradient noise, vs exact law and bound."""
    steps = 200 if quick else 3000
    fig, _ = weight_decay_figure(steps=steps, groups=16 if quick else 256)
    return save_figure(fig, out_dir, f"weight_decay_process_T{steps}")
