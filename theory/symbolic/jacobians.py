"""Jacobians at random init: the exact RMSNorm Jacobian and the block deviation ``||J_l - I||``.

P1 (Sun et al. 2025) states ``dLN(x)/dx ~ I/sigma_x``, hence ``J_l ~ I + (sublayer
terms)/sigma_l``. Here the norm's Jacobian is exact, ``(g/rms)(I - h h^T/d)``, and the
block deviation is ``kappa g_l/sigma_l`` with ``sigma_l`` from the exact variance laws of
:mod:`theory.symbolic.recursions` (derived here, docs/derivations.md#jacobian-init).

>>> preln_jacobian_deviation()
kappa/sqrt(sigma_0**2 + v*(l - 1))
"""

from __future__ import annotations

import sympy as sp

from theory.symbolic.symbols import L, alpha, c, g, kappa, l, sigma, sigma_0, v

__all__ = ["rmsnorm_jacobian", "jacobian_deviation", "preln_jacobian_deviation", "lns_jacobian_deviation",
           "preln_linear_e2e_gain_sq"]


def rmsnorm_jacobian(dim=3):
    """Symbolic Jacobian of ``h = g x/rms(x)`` and the difference to ``(g/rms)(I - h h^T/d)``.

    Returns ``(jacobian, difference)``; the difference simplifies to zero.
    Source: derived here, docs/derivations.md#jacobian-init (P1's ``dLN/dx ~ I/sigma`` made exact).

    Parameters
    ----------
    dim : int
        The width ``d`` of the concrete check.

    Returns
    -------
    tuple of sympy.Matrix
        The Jacobian and its difference to the closed form.

    Examples
    --------
    >>> jac, diff = rmsnorm_jacobian(2)
    >>> diff
    Matrix([
    [0, 0],
    [0, 0]])
    """
    xs = sp.Matrix(sp.symbols(f"x1:{dim + 1}", real=True))
    rms = sp.sqrt(sum(xi**2 for xi in xs) / dim)
    h = g * xs / rms
    jac = h.jacobian(xs)
    hn = xs / rms
    expected = (g / rms) * (sp.eye(dim) - hn * hn.T / dim)
    return jac, sp.simplify(jac - expected)


def jacobian_deviation(scale=g, std=sigma, gain=kappa):
    """``||J_l - I||_F / sqrt(d) ~ kappa g_l / sigma_l`` for a Pre-LN-type block.

    ``kappa = ||df/dh||_F/sqrt(d)`` at unit input (linear: ``sqrt(alpha (d-1)/d)``).
    Source: derived here (docs/derivations.md#jacobian-init) from :func:`rmsnorm_jacobian`;
    exact in expectation for a
    linear sublayer, leading order for homogeneous degree-1 sublayers (ReLU).

    Parameters
    ----------
    scale : sympy.Expr
        ``g_l``.
    std : sympy.Expr
        ``sigma_l``, the std of the stream entering the block.
    gain : sympy.Expr
        ``kappa``.

    Returns
    -------
    sympy.Expr
        ``||J_l - I||_F / sqrt(d)``.

    Examples
    --------
    >>> jacobian_deviation()
    g_l*kappa/sigma_l
    """
    return gain * scale / std


def preln_jacobian_deviation():
    """Pre-LN: ``kappa/sqrt(sigma_0^2 + v (l-1))`` (stream entering block ``l``), Theta(l^-1/2).

    Examples
    --------
    >>> preln_jacobian_deviation()
    kappa/sqrt(sigma_0**2 + v*(l - 1))
    """
    return jacobian_deviation(1, sp.sqrt(sigma_0**2 + v * (l - 1)))


def lns_jacobian_deviation():
    """LNS: ``kappa l^-1/2 / sqrt(sigma_0^2 + c H_{l-1})``, Theta(1/sqrt(l log l)).

    Examples
    --------
    >>> lns_jacobian_deviation()
    kappa/(sqrt(l)*sqrt(c*harmonic(l - 1) + sigma_0**2))
    """
    return jacobian_deviation(1 / sp.sqrt(l), sp.sqrt(sigma_0**2 + c * sp.harmonic(l - 1)))


def preln_linear_e2e_gain_sq():
    """Linear Pre-LN: ``E||dx_L/dx_0 v||^2/||v||^2 = sigma_L^2/sigma_0^2`` (telescoping).

    Each block multiplies ``E||u||^2`` by ``1 + alpha ||P u||^2/(sigma_{l-1}^2 ||u||^2)``
    (cross term zero: ``W`` zero-mean), ``P = I - h h^T/d``. Taking ``||P u||^2 = ||u||^2``
    (drops the ``(d-1)/d`` of the projection; the tangent is not aligned with the
    stream) and ``sigma_l^2 = sigma_0^2 + alpha l`` the product telescopes. Source:
    derived here, docs/derivations.md#jacobian-init (a 20-sample numpy check at d = 256, L = 40
    gave 45 +- 3.5 for 41).
    Grows like ``L``, so P1 Theorem 3.3's uniform bound does not apply at init.

    Examples
    --------
    >>> preln_linear_e2e_gain_sq()
    L*alpha/sigma_0**2 + 1
    """
    factor = (sigma_0**2 + alpha * l) / (sigma_0**2 + alpha * (l - 1))
    return sp.expand(sp.simplify(sp.gammasimp(sp.product(factor, (l, 1, L)))))
