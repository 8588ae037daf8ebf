"""Paper statements (docs/derivations.md#paper-statements) encoded verbatim as sympy, and what they grow like.

P1 = Sun et al., "The Curse of Depth in Large Language Models" (arXiv 2502.05795).
P2 = "When Does Sparsity Mitigate the Curse of Depth in LLMs" (arXiv 2603.15389).
A ``Theta(.)`` of a paper is written with constants ``C_1``, ``C_2`` (bounds) or ``c``
(P1's per-layer factor ``Theta(1 + 1/sigma_l)`` read as ``1 + c/sigma_l``).

The growth of P1's own recursions is derived here, not assumed (docs/derivations.md#p1-recursion-growth,
docs/derivations.md#p1-lns-model; :func:`p1_lemma_3_2_growth`, :func:`p1_lns_growth`): Lemma 3.2's recursion gives
``sigma_L^2 ~ c^2 L^2/4`` (quadratic), so its ``Theta(exp(L))`` upper bound is never
reached by the recursion itself.

>>> p2_thm_1()
sigma_L**2 <= sigma_0**2*Product((sqrt(alpha)*sqrt(rho) + 1)**2, (l, 1, L))
"""

from __future__ import annotations

import sympy as sp

from theory.symbolic.iterations import iterate_p1_lemma_3_2, iterate_p1_lns  # re-exported: P1's recursions iterated
from theory.symbolic.symbols import (
    C_1, C_2, G, J_LN, L, M, T, alpha, alpha_attn, alpha_ffn, c, d, epsilon, eta, jac_norm, k, l,
    lam, n, rho, sigma, sigma_0, sigma_G, sigma_L, sigma_V, sigma_next, t, u0_var, var_expert,
    var_moe, var_out, var_u, x, y,
)

__all__ = [
    "p1_lemma_3_2", "p1_lemma_3_2_step", "p1_ln_jacobian", "p1_thm_3_3", "p1_lns",
    "p1_lns_step", "p2_thm_1", "p2_thm_1_bound", "p2_thm_2", "p2_thm_3", "p2_thm_3_bound",
    "p2_thm_4", "p2_thm_5", "p2_gqa", "classify_growth", "p1_lemma_3_2_growth",
    "p1_lns_growth", "iterate_p1_lemma_3_2", "iterate_p1_lns", "GROWTH_CANDIDATES",
]


# -- P1 ------------------------------------------------------------------------------
def p1_lemma_3_2_step(prev=x):
    """P1 Lemma 3.2 per-layer law on ``x = sigma_l^2``: ``x (1 + c/sqrt(x))``.

    Source: P1 Lemma 3.2, ``sigma_{l+1}^2 = sigma_l^2 Theta(1 + 1/sigma_l)``, read as
    ``1 + c/sigma_l`` (the only reading under which the factor tends to 1).

    Parameters
    ----------
    prev : sympy.Expr
        ``sigma_l^2`` (default ``x``).

    Returns
    -------
    sympy.Expr
        ``sigma_{l+1}^2``.

    Examples
    --------
    >>> p1_lemma_3_2_step()
    x*(c/sqrt(x) + 1)
    """
    return prev * (1 + c / sp.sqrt(prev))


def p1_lemma_3_2():
    """P1 Lemma 3.2: the recursion and ``Theta(L) <= sigma_L^2 <= Theta(exp(L))``.

    Source: P1 Lemma 3.2 (Pre-LN). Finding (derived here, docs/derivations.md#p1-recursion-growth):
    the recursion itself grows like ``c^2 L^2/4``; neither bound is tight for it.

    Examples
    --------
    >>> sorted(map(str, p1_lemma_3_2().args))
    ['C_1*L <= sigma_L**2', 'Eq(sigma_{l+1}**2, sigma_l**2*(c/sigma_l + 1))', 'sigma_L**2 <= C_2*exp(L)']
    """
    return sp.And(sp.Eq(sigma_next**2, sigma**2 * (1 + c / sigma)),
                  sp.Le(C_1 * L, sigma_L**2), sp.Le(sigma_L**2, C_2 * sp.exp(L)))


def p1_ln_jacobian():
    """P1: ``dLN(x)/dx ~ I/sigma_x`` (so ``J_l ~ I + (sublayer terms)/sigma_l``).

    Source: P1 Section 3 (also P2 Lemma 1's proof). The exact RMSNorm Jacobian is
    ``(g/rms)(I - h h^T/d)``: the ``~`` drops a rank-one projection.

    Examples
    --------
    >>> p1_ln_jacobian()
    Eq(J_LN, 1/sigma_l*I)
    """
    return sp.Eq(J_LN, sp.Identity(d) / sigma)


def p1_thm_3_3():
    """P1 Theorem 3.3 (= P2 Lemma 1): exponential growth gives ``Gamma_L = ||dy_L/dx_1||_2 <= M``.

    Source: P1 Theorem 3.3. With ``||J_l|| <= 1 + C/sigma_l`` the product is bounded
    iff ``sum_l 1/sigma_l < oo``: true for ``sigma_l ~ exp(c l)``, false for the
    quadratic growth of P1's own recursion (``sum 2/(c l)`` diverges) and for
    Pre-LN at init (``sigma_l ~ sqrt(l)``).

    Examples
    --------
    >>> p1_thm_3_3()
    Gamma_L <= M
    """
    return sp.Le(jac_norm, M)


def p1_lns_step(prev=x, index=l):
    """P1 LNS modelled as ``x (1 + c/(sqrt(x) sqrt(l)))`` on ``x = sigma_l^2``.

    Source: our model of P1's LNS statement, not P1's text (docs/derivations.md#p1-lns-model).

    Parameters
    ----------
    prev : sympy.Expr
        ``sigma_l^2`` (default ``x``).
    index : sympy.Expr
        The block index ``l``.

    Returns
    -------
    sympy.Expr
        ``sigma_{l+1}^2``.

    Examples
    --------
    >>> p1_lns_step()
    x*(c/(sqrt(l)*sqrt(x)) + 1)
    """
    return prev * (1 + c / (sp.sqrt(prev) * sp.sqrt(index)))


def p1_lns():
    """P1 LNS: the model recursion and ``Theta(L) <= sigma_L^2 <= Theta(L^(2-epsilon))``.

    Source: P1 Section 4 (LayerNorm Scaling); the recursion is our model (docs/derivations.md#p1-lns-model).

    Examples
    --------
    >>> for part in sorted(map(str, p1_lns().args)):
    ...     print(part)
    C_1*L <= sigma_L**2
    Eq(sigma_{l+1}**2, sigma_l**2*(c/(sqrt(l)*sigma_l) + 1))
    sigma_L**2 <= C_2*L**(2 - epsilon)
    """
    return sp.And(sp.Eq(sigma_next**2, sigma**2 * (1 + c / (sigma * sp.sqrt(l)))),
                  sp.Le(C_1 * L, sigma_L**2), sp.Le(sigma_L**2, C_2 * L ** (2 - epsilon)))


# -- P2 ------------------------------------------------------------------------------
def p2_thm_1_bound():
    """Right side of P2 Theorem 1 with homogeneous layers: ``sigma_0^2 (1 + sqrt(alpha rho))^(2L)``.

    Examples
    --------
    >>> p2_thm_1_bound()
    sigma_0**2*(sqrt(alpha)*sqrt(rho) + 1)**(2*L)
    """
    return sp.Product((1 + sp.sqrt(alpha * rho)) ** 2, (l, 1, L)).doit() * sigma_0**2


def p2_thm_1():
    """P2 Theorem 1, ``r_{l+1} = r_l + D_l W_l r_l``: ``Var(r_L) <= Var(r_0) prod_l (1 + sqrt(alpha_l rho_l))^2``.

    Source: P2 Theorem 1 (written with homogeneous ``alpha``, ``rho``).
    Assumptions: ``W_l`` independent of ``(r_l, D_l)``; ``rho`` the mask's second-moment
    retention.

    Examples
    --------
    >>> p2_thm_1().rhs.doit()
    sigma_0**2*(sqrt(alpha)*sqrt(rho) + 1)**(2*L)
    """
    return sp.Le(sigma_L**2, sigma_0**2 * sp.Product((1 + sp.sqrt(alpha * rho)) ** 2, (l, 1, L)))


def p2_thm_2():
    """P2 Theorem 2, attention + FFN with one mask, no norm: per-branch gains.

    Source: P2 Theorem 2: ``sigma_{l+1}^2 <= sigma_l^2 (1 + sqrt(alpha_attn rho))^2 (1 + sqrt(alpha_ffn rho))^2``.

    Examples
    --------
    >>> p2_thm_2()
    sigma_{l+1}**2 <= sigma_l**2*(sqrt(alpha_attn)*sqrt(rho) + 1)**2*(sqrt(alpha_ffn)*sqrt(rho) + 1)**2
    """
    return sp.Le(sigma_next**2, sigma**2 * (1 + sp.sqrt(alpha_attn * rho)) ** 2
                 * (1 + sp.sqrt(alpha_ffn * rho)) ** 2)


def p2_thm_3_bound():
    """Right side of P2 Theorem 3: ``(1-eta lam)^(2t) Var(u_0) + eta sigma_G^2/lam``.

    Examples
    --------
    >>> p2_thm_3_bound()
    eta*sigma_G**2/lambda + (-eta*lambda + 1)**(2*t)*Var(u_0)
    """
    return (1 - eta * lam) ** (2 * t) * u0_var + eta * sigma_G**2 / lam


def p2_thm_3():
    """P2 Theorem 3, ``u_{t+1} = (1-eta lam) u_t - eta g_t``, for ``0 < eta lam <= 1``.

    Source: P2 Theorem 3 (Appendix B.4).

    Examples
    --------
    >>> p2_thm_3()
    Var(u_t) <= eta*sigma_G**2/lambda + (-eta*lambda + 1)**(2*t)*Var(u_0)
    """
    return sp.Le(var_u, p2_thm_3_bound())


def p2_thm_4():
    """P2 Theorem 4: uniform attention over ``T`` independent values, ``Var = sigma^2/T``.

    Source: P2 Theorem 4 (Appendix B.5); non-causal, every query sees all ``T`` values.

    Examples
    --------
    >>> p2_thm_4()
    Eq(Var(o), sigma_V**2/T)
    """
    return sp.Eq(var_out, sigma_V**2 / T)


def p2_thm_5():
    """P2 Theorem 5: top-k MoE with uniform gates divides the output variance by ``k``.

    Source: P2 Theorem 5 (Appendix B.6); the same ``1/k`` for the Jacobian variance.

    Examples
    --------
    >>> p2_thm_5()
    Eq(Var(y_MoE), Var(y_e)/k)
    """
    return sp.Eq(var_moe, var_expert / k)


def p2_gqa():
    """P2 Section 3.2.2: GQA/MQA attention-output variance ``~ sigma_V^2/(G n)``.

    Source: P2 Section 3.2.2 ("Grouped Query Attention"), idealised: uniform
    attention, and the ``G`` heads of a group *averaged* as if independent.

    Examples
    --------
    >>> p2_gqa()
    Eq(Var(o), sigma_V**2/(G*n))
    """
    return sp.Eq(var_out, sigma_V**2 / (G * n))


# -- growth classes ------------------------------------------------------------------
GROWTH_CANDIDATES = (
    ("O(1)", lambda z: sp.Integer(1)),
    ("Theta(log L)", sp.log),
    ("Theta(L)", lambda z: z),
    ("Theta(L^2)", lambda z: z**2),
    ("Theta(L^(-1/2))", lambda z: 1 / sp.sqrt(z)),
    ("Theta(1/sqrt(L log L))", lambda z: 1 / sp.sqrt(z * sp.log(z))),
)


def classify_growth(expr, var=L):
    """Growth class of ``expr`` as ``var -> oo``, by limits of ratios (derived, not assumed).

    Tries each of :data:`GROWTH_CANDIDATES` (``lim expr/candidate`` finite and
    nonzero), then exponential (``lim log(expr)/var`` finite and positive).
    Returns ``None`` when nothing matches.

    Parameters
    ----------
    expr : sympy.Expr
        A positive function of ``var``.
    var : sympy.Symbol
        The variable going to infinity (default ``L``).

    Returns
    -------
    str or None
        One of the names of :data:`GROWTH_CANDIDATES` or ``"Theta(exp(L))"``.

    Examples
    --------
    >>> classify_growth(sp.harmonic(L) + 3), classify_growth(2**L + L**5)
    ('Theta(log L)', 'Theta(exp(L))')
    """
    for name, candidate in GROWTH_CANDIDATES:
        try:
            ratio = sp.limit(expr / candidate(var), var, sp.oo)
        except NotImplementedError:  # gruntz cannot sign a symbolic rate: try the next
            continue
        if ratio.is_finite and ratio.is_positive:
            return name
    rate = sp.limit(sp.expand_log(sp.log(expr), force=True) / var, var, sp.oo)
    if rate.is_finite and rate.is_positive:
        return "Theta(exp(L))"
    return None


def p1_lemma_3_2_growth():
    """Derive the growth of P1 Lemma 3.2's recursion ``x -> x + c sqrt(x)``.

    With ``y = sqrt(x)``: ``y_{l+1} - y_l = sqrt(y^2 + c y) - y -> c/2`` as ``y -> oo``
    (sympy limit), so ``y_L/L -> c/2`` (Stolz-Cesaro) and ``sigma_L^2 ~ c^2 L^2/4``:
    Theta(L^2). The next term of the increment, ``-c^2/(8y)``, makes
    ``y_L = cL/2 - (c/4) log L + O(1)``. Returns ``(increment limit, increment
    series, leading term, class)``. Source: derived here, docs/derivations.md#p1-recursion-growth.

    Examples
    --------
    >>> p1_lemma_3_2_growth()
    (c/2, -c**2/(8*y) + c/2, L**2*c**2/4, 'Theta(L^2)')
    """
    increment = sp.sqrt(y**2 + c * y) - y
    limit = sp.limit(increment, y, sp.oo)
    series = sp.series(increment, y, sp.oo, 2).removeO()
    leading = (limit * L) ** 2
    return limit, series, leading, classify_growth(leading)


def p1_lns_growth():
    """Derive the growth of the LNS model ``x -> x + c sqrt(x)/sqrt(l)``.

    With ``y = sqrt(x)`` and the ansatz ``y = K sqrt(l)``: Stolz-Cesaro against
    ``sqrt(l)`` gives ``(y_{l+1} - y_l)/(sqrt(l+1) - sqrt(l)) -> c`` for every
    ``K > 0``, so ``y_L/sqrt(L) -> c`` and ``sigma_L^2 ~ c^2 L``: Theta(L)
    (P1's lower bound, tight). Returns ``(ratio limit, leading term, class)``.
    Source: derived here, docs/derivations.md#p1-lns-model.

    Examples
    --------
    >>> p1_lns_growth()
    (c, L*c**2, 'Theta(L)')
    """
    K = sp.Symbol("K", positive=True)
    increment = sp.sqrt(K**2 * l + c * K) - K * sp.sqrt(l)
    ratio = sp.limit(increment / (sp.sqrt(l + 1) - sp.sqrt(l)), l, sp.oo)
    leading = ratio**2 * L
    return ratio, leading, classify_growth(leading)
