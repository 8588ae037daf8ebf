"""Exact random-init variance laws and the aligned bridge (derived here, docs/derivations.md).

Every function returns a sympy expression in the symbols of :mod:`theory.symbolic.symbols`.
"Exact" means: an equality in expectation under the stated assumptions (i.i.d.
zero-mean Gaussian weights, independent of the stream, the masks and each other;
no biases; RMSNorm output with ``||h||^2 = d`` exactly, i.e. no epsilon). Cross terms
between the stream and a branch vanish because the branch's last weight matrix is
zero-mean and independent of everything before it. The Jacobian laws live in
:mod:`theory.symbolic.jacobians` and are re-exported here.

>>> masked_linear_variance()
sigma_0**2*(alpha*rho + 1)**L
"""

from __future__ import annotations

import sympy as sp

from theory.symbolic.symbols import (
    G, H, L, T, a, alpha, b, c, cos_tok, d_ff, eta, g, j, k, kappa, l, lam, q, rho, s,
    sigma, sigma_0, sigma_G, t, u0_var, v, v_attn, v_mlp, x,  # noqa: F401 (v: in a doctest)
)

__all__ = [
    "solve_first_order", "masked_linear_step", "masked_linear_variance",
    "weight_decay_step", "weight_decay_variance", "linear_increment", "relu_mlp_increment",
    "gaussian_moment_series", "silu_second_moment_series", "swiglu_mlp_increment",
    "attention_increment", "preln_variance", "lns_variance", "lns_swiglu_mlp_limit",
    "moe_gate_factor", "moe_uniform_gate_factor", "gqa_attention_increment",
    "causal_uniform_attention_factor", "rmsnorm_jacobian", "jacobian_deviation",
    "preln_jacobian_deviation", "lns_jacobian_deviation", "preln_linear_e2e_gain_sq",
    "bridge_step", "bridge_variance",
]

from theory.symbolic.jacobians import (  # noqa: E402 - re-exported: the Jacobian laws live there
    jacobian_deviation, lns_jacobian_deviation, preln_jacobian_deviation, preln_linear_e2e_gain_sq,
    rmsnorm_jacobian,
)

_f = sp.Function("f")


def solve_first_order(step, initial, index=L):
    """Solve ``f(index+1) = step(f(index))``, ``f(0) = initial`` with ``sympy.rsolve``.

    ``step`` maps a sympy expression (the previous value) to the next value and must be
    affine in it. Source: derived here (a thin wrapper over sympy's linear solver).

    Parameters
    ----------
    step : callable
        Maps the previous value (a sympy expression) to the next one; affine in it.
    initial : sympy.Expr
        The value at ``index = 0``.
    index : sympy.Symbol
        The recursion index (default ``L``).

    Returns
    -------
    sympy.Expr
        The closed form in ``index``.

    Examples
    --------
    >>> solve_first_order(lambda prev: prev + v, sigma_0**2)
    L*v + sigma_0**2
    """
    previous = _f(index)
    solution = sp.rsolve(_f(index + 1) - step(previous), _f(index), {_f(0): initial})
    if solution is None:
        raise ValueError(f"rsolve found no closed form for the step {step(previous)}")
    return sp.simplify(solution)


# -- masked linear residual (P2 Theorem 1, exact version) ---------------------------
def masked_linear_step(prev=x):
    """One step of ``r_{l+1} = r_l + D_l W_l r_l`` for the per-coordinate variance.

    Source: derived here, docs/derivations.md#masked-linear. ``W`` is d x d with entries N(0, s^2),
    ``D = diag(Bernoulli(rho))``, both independent of ``r``; then
    ``E||D W r||^2 = rho*d*s^2*||r||^2`` and the cross term vanishes, so the
    variance is multiplied by ``1 + alpha*rho`` exactly.

    Parameters
    ----------
    prev : sympy.Expr
        ``sigma_l^2`` (default the free variable ``x``).

    Returns
    -------
    sympy.Expr
        ``sigma_{l+1}^2``.

    Examples
    --------
    >>> masked_linear_step()
    x*(alpha*rho + 1)
    """
    return (1 + alpha * rho) * prev


def masked_linear_variance():
    """Closed form ``sigma_L^2 = sigma_0^2 (1 + alpha*rho)^L`` of the masked linear stack.

    Source: derived here (docs/derivations.md#masked-linear); solved from :func:`masked_linear_step`
    with ``rsolve``.
    Assumptions: homogeneous ``alpha``, ``rho`` over layers (else a product).

    Returns
    -------
    sympy.Expr
        ``sigma_L^2`` in ``L, alpha, rho, sigma_0``.

    Examples
    --------
    >>> masked_linear_variance()
    sigma_0**2*(alpha*rho + 1)**L
    """
    return solve_first_order(masked_linear_step, sigma_0**2)


# -- weight-decay process (P2 Theorem 3, exact version) -----------------------------
def weight_decay_step(prev=x):
    """One step of ``Var(u_{t+1})`` for ``u_{t+1} = (1-eta*lam) u_t - eta*g_t``.

    Source: derived here, docs/derivations.md#exact-weight-decay. ``g_t`` zero-mean with
    variance ``sigma_G^2``, independent
    of ``u_t``.

    Parameters
    ----------
    prev : sympy.Expr
        ``Var(u_t)`` (default the free variable ``x``).

    Returns
    -------
    sympy.Expr
        ``Var(u_{t+1})``.

    Examples
    --------
    >>> weight_decay_step()
    eta**2*sigma_G**2 + x*(-eta*lambda + 1)**2
    """
    return (1 - eta * lam) ** 2 * prev + eta**2 * sigma_G**2


def weight_decay_variance():
    """Exact ``Var(u_t) = r^t Var(u_0) + eta^2 sigma_G^2 (1 - r^t)/(1 - r)``, ``r = (1-eta*lam)^2``.

    Source: derived here (docs/derivations.md#exact-weight-decay), by summing the geometric series of the unrolled
    :func:`weight_decay_step` with ``sympy.summation``. Assumptions:
    ``0 < eta*lam <= 1`` (so ``r < 1``; the branch ``r = 1`` of the sum is dropped).

    Returns
    -------
    sympy.Expr
        ``Var(u_t)`` in ``t, eta, lambda, sigma_G, Var(u_0)``.

    Examples
    --------
    >>> weight_decay_variance()
    eta**2*sigma_G**2*(1 - (-eta*lambda + 1)**(2*t))/(1 - (-eta*lambda + 1)**2) + (-eta*lambda + 1)**(2*t)*Var(u_0)
    """
    i = sp.Symbol("i", integer=True, nonnegative=True)
    ratio = (1 - eta * lam) ** 2
    geometric = sp.summation(ratio**i, (i, 0, t - 1))
    if isinstance(geometric, sp.Piecewise):  # keep the ratio != 1 branch
        geometric = geometric.args[-1].expr
    return ratio**t * u0_var + eta**2 * sigma_G**2 * geometric


# -- Pre-LN increments --------------------------------------------------------------
def linear_increment(scale=g):
    """Variance a Pre-LN linear sublayer ``f(h) = h W`` adds: ``alpha*g^2``.

    Source: derived here, docs/derivations.md#sublayer-increments. ``h = g x/rms(x)`` has ``||h||^2 = d g^2``;
    ``W`` d x d, N(0, s^2).

    Parameters
    ----------
    scale : sympy.Expr
        ``g_l``, the norm-output scale (1 Pre-LN, ``1/sqrt(l)`` LNS).

    Returns
    -------
    sympy.Expr
        The per-coordinate variance added to the stream.

    Examples
    --------
    >>> linear_increment()
    alpha*g_l**2
    """
    return alpha * scale**2


def relu_mlp_increment(scale=g):
    """Variance a Pre-LN ReLU MLP adds: ``d_ff s^2 E[relu(z)^2] = d_ff s^2 alpha g^2/2``.

    Source: derived here (docs/derivations.md#sublayer-increments). ``z = (h W1)_i ~ N(0, alpha g^2)``
    exactly given ``h``
    (``||h||^2 = d g^2``), ``E[relu(z)^2] = Var(z)/2``; ``W2`` d_ff x d, N(0, s^2).

    Parameters
    ----------
    scale : sympy.Expr
        ``g_l``, the norm-output scale.

    Returns
    -------
    sympy.Expr
        The per-coordinate variance added to the stream.

    Examples
    --------
    >>> relu_mlp_increment()
    alpha*d_ff*g_l**2*s**2/2
    """
    return d_ff * s**2 * alpha * scale**2 / 2


def gaussian_moment_series(func_of_z, z, variance=q, order=3):
    """Small-variance series of ``E[func(z)]``, ``z ~ N(0, variance)``, to ``variance**order``.

    Source: derived here (docs/derivations.md#sublayer-increments): Taylor-expand ``func`` at 0 and
    replace ``z^(2m)`` by
    ``(2m-1)!! variance^m`` (odd moments vanish). The series is asymptotic.

    Parameters
    ----------
    func_of_z : sympy.Expr
        A function of ``z``, analytic at 0.
    z : sympy.Symbol
        The Gaussian variable.
    variance : sympy.Expr
        ``Var(z)`` (default ``q``).
    order : int
        Highest power of ``variance`` kept.

    Returns
    -------
    sympy.Expr
        A polynomial in ``variance``.

    Examples
    --------
    >>> z = sp.Symbol("z", real=True)
    >>> gaussian_moment_series(sp.cos(z), z, order=3)
    -q**3/48 + q**2/8 - q/2 + 1
    """
    taylor = sp.series(func_of_z, z, 0, 2 * order + 1).removeO()
    poly = sp.Poly(sp.expand(taylor), z)
    result = sp.Integer(0)
    for (power,), coeff in poly.terms():
        if power % 2 == 0:
            result += coeff * sp.factorial2(power - 1) * variance ** (power // 2)
    return sp.expand(result)


def silu_second_moment_series(order=3):
    """``E[silu(z)^2]`` for ``z ~ N(0, q)`` as a series in small ``q``.

    Source: derived here (:func:`gaussian_moment_series`, docs/derivations.md#sublayer-increments).

    Parameters
    ----------
    order : int
        Highest power of ``q`` kept.

    Returns
    -------
    sympy.Expr
        A polynomial in ``q``.

    Examples
    --------
    >>> silu_second_moment_series(order=3)
    -5*q**3/32 + 3*q**2/16 + q/4
    """
    z = sp.Symbol("z", real=True)
    return gaussian_moment_series((z / (1 + sp.exp(-z))) ** 2, z, q, order)


def swiglu_mlp_increment(scale=g, order=3):
    """Variance a Pre-LN SwiGLU MLP adds, as a small-``q`` series, ``q = alpha g^2``.

    ``v_mlp = d_ff s^2 E[silu(z1)^2] E[z3^2]`` with independent ``z1, z3 ~ N(0, q)``
    (W1 and W3 independent). Leading term ``d_ff s^2 q^2/4``: quadratic in ``g^2``,
    unlike ReLU/GELU (linear in ``g^2``). Source: derived here, docs/derivations.md#sublayer-increments.

    Parameters
    ----------
    scale : sympy.Expr
        ``g_l``, the norm-output scale.
    order : int
        Highest power of ``q`` kept in ``E[silu(z)^2]``.

    Returns
    -------
    sympy.Expr
        The per-coordinate variance added to the stream (a series).

    Examples
    --------
    >>> sp.expand(swiglu_mlp_increment(order=2))
    3*alpha**3*d_ff*g_l**6*s**2/16 + alpha**2*d_ff*g_l**4*s**2/4
    """
    pre_var = alpha * scale**2
    return d_ff * s**2 * silu_second_moment_series(order).subs(q, pre_var) * pre_var


def attention_increment(scale=g, sum_a2=sp.Symbol("A_2", positive=True), token_cos=cos_tok):
    """Variance a Pre-LN attention sublayer adds for the query with row ``a``.

    ``alpha^2 g^2 (c_tok + (1 - c_tok) sum_j a_j^2)``: ``W_V``, ``W_O`` d x d N(0, s^2)
    (split into heads or not: the same), rows ``a`` independent of ``W_V`` (scores use
    ``W_Q, W_K`` only), ``sum_j a_j = 1``, and the pairwise cosines of the normalised
    tokens equal to ``c_tok`` (or uncorrelated with ``a_i a_j``). From
    ``||sum_j a_j h_j||^2/d = g^2 (sum_j a_j^2 + sum_{i != j} a_i a_j cos_ij)``: the token
    correlation enters additively, not as a factor. Source: derived here, docs/derivations.md#attention-increment.

    Parameters
    ----------
    scale : sympy.Expr
        ``g_l``, the norm-output scale.
    sum_a2 : sympy.Expr
        ``sum_j a_j^2`` of the attention row (``1/t`` uniform causal).
    token_cos : sympy.Expr
        Mean cosine between distinct normalised tokens.

    Returns
    -------
    sympy.Expr
        The per-coordinate variance added at that query.

    Examples
    --------
    >>> attention_increment()
    alpha**2*g_l**2*(A_2*(1 - c_tok) + c_tok)
    """
    return alpha**2 * scale**2 * (token_cos + (1 - token_cos) * sum_a2)


def causal_uniform_attention_factor():
    """``E_t[sum_j a_tj^2]`` for uniform causal attention, ``a_tj = 1/t``: ``H_T/T``.

    Source: derived here (docs/derivations.md#causal-attention); averaged over query positions ``t = 1..T``.

    Examples
    --------
    >>> causal_uniform_attention_factor()
    harmonic(T)/T
    """
    row = sp.summation((1 / t) ** 2, (j, 1, t))  # = 1/t, the uniform row over j <= t
    return sp.summation(row, (t, 1, T)) / T


def preln_variance():
    """Pre-LN at init: ``sigma_L^2 = sigma_0^2 + L (v_attn + v_mlp)`` (additive, Theta(L)).

    Source: derived here (docs/derivations.md#preln-init). The norm output has unit variance whatever
    ``sigma_l`` is, so each sublayer adds a variance independent of ``sigma_l``.

    Examples
    --------
    >>> preln_variance()
    L*(v_attn + v_mlp) + sigma_0**2
    """
    return sp.factor_terms(solve_first_order(lambda prev: prev + v_attn + v_mlp, sigma_0**2))


def lns_variance():
    """LNS at init with degree-2 homogeneous increments ``c g_l^2 = c/l``: ``sigma_0^2 + c H_L``.

    Source: derived here (docs/derivations.md#lns-init). Holds for linear, ReLU and (uniform-)attention sublayers,
    whose increments are proportional to ``g_l^2``; ``c`` is the Pre-LN increment.

    Examples
    --------
    >>> lns_variance()
    c*harmonic(L) + sigma_0**2
    """
    return sigma_0**2 + sp.summation(c / l, (l, 1, L))


def lns_swiglu_mlp_limit():
    """``lim l^2 v_mlp(g = 1/sqrt(l))`` for SwiGLU: ``d_ff s^2 alpha^2/4``.

    So the SwiGLU MLP adds ``~ 1/l^2`` under LNS (any ``alpha``, for ``l >> alpha``),
    and its sum over depth converges (``sum 1/l^2 = pi^2/6``). Source: derived here,
    docs/derivations.md#lns-init.

    Examples
    --------
    >>> lns_swiglu_mlp_limit()
    alpha**2*d_ff*s**2/4
    """
    return sp.limit(l**2 * swiglu_mlp_increment(scale=1 / sp.sqrt(l)), l, sp.oo)


# -- MoE, GQA -------------------------------------------------------------------------
def moe_gate_factor(gates):
    """Variance factor ``sum_i g_i^2`` of a top-k MoE output over one expert's variance.

    Source: derived here (docs/derivations.md#moe-gates). Experts independent, zero-mean, independent of the gates.

    Parameters
    ----------
    gates : sequence of sympy.Expr
        The top-k gates (nonnegative, summing to one).

    Returns
    -------
    sympy.Expr
        ``sum_i g_i^2``, in ``[1/k, 1]``.

    Examples
    --------
    >>> moe_gate_factor([sp.Rational(1, 2), sp.Rational(1, 2)])
    1/2
    """
    return sp.Add(*[gate**2 for gate in gates])


def moe_uniform_gate_factor():
    """Uniform gates ``1/k``: ``sum_{i=1}^k (1/k)^2 = 1/k`` (P2 Theorem 5's factor).

    Examples
    --------
    >>> moe_uniform_gate_factor()
    1/k
    """
    return sp.summation((1 / k) ** 2, (j, 1, k))


def gqa_attention_increment(group=G, sum_a2=sp.Symbol("A_2", positive=True)):
    """Attention-output variance with ``H`` heads in groups of ``G`` sharing ``W_V``.

    Each head has its own independent block of ``W_O``, so cross terms vanish and the
    sum over heads equals MHA's: ``H * alpha^2 g^2 A_2/H``, no ``G``. Source: derived here,
    docs/derivations.md#gqa-init.

    Parameters
    ----------
    group : sympy.Expr
        ``G``, query heads per key-value head.
    sum_a2 : sympy.Expr
        ``E[sum_j a_j^2]`` of one attention row.

    Returns
    -------
    sympy.Expr
        The attention-output variance; it does not contain ``G``.

    Examples
    --------
    >>> gqa_attention_increment()
    A_2*alpha**2*g_l**2
    """
    heads_per_group = group
    groups = H / group
    per_head = alpha**2 * g**2 * sum_a2 / H
    return sp.simplify(groups * heads_per_group * per_head)


# -- the aligned bridge (docs/derivations.md#bridge-aligned) -----------------------------------
def bridge_step(std=sigma, aligned=a, independent=b):
    """``sigma_{l+1}^2 = (sigma_l + a)^2 + b^2`` for ``f = a x/sigma + b xi``.

    Source: derived here (docs/derivations.md#bridge-aligned): ``xi`` zero-mean, unit variance, independent
    of ``x``; per coordinate ``E(x + a x/sigma)^2 = (sigma + a)^2``.

    Parameters
    ----------
    std : sympy.Expr
        ``sigma_l``.
    aligned : sympy.Expr
        ``a``, the aligned part's strength.
    independent : sympy.Expr
        ``b``, the independent part's std.

    Returns
    -------
    sympy.Expr
        ``sigma_{l+1}^2``.

    Examples
    --------
    >>> bridge_step()
    b**2 + (a + sigma_l)**2
    """
    return (std + aligned) ** 2 + independent**2


def bridge_variance(regime):
    """Closed form of the bridge in one regime: ``"random"`` (a=0), ``"aligned"`` (b=0),
    ``"proportional"`` (``a = kappa sigma_l``).

    Parameters
    ----------
    regime : {"random", "aligned", "proportional"}
        Which special case of :func:`bridge_step`.

    Returns
    -------
    sympy.Expr
        ``sigma_L^2``.

    Examples
    --------
    >>> bridge_variance("random"), bridge_variance("aligned")
    (L*b**2 + sigma_0**2, (L*a + sigma_0)**2)
    >>> bridge_variance("proportional")
    b**2*((kappa + 1)**(2*L) - 1)/(kappa*(kappa + 2)) + sigma_0**2*(kappa + 1)**(2*L)
    """
    if regime == "random":
        return solve_first_order(lambda prev: prev + b**2, sigma_0**2)
    if regime == "aligned":  # sigma_{l+1} = sigma_l + a exactly
        return solve_first_order(lambda prev: prev + a, sigma_0) ** 2
    if regime == "proportional":  # (sigma + kappa sigma)^2 + b^2, affine in sigma^2
        closed = solve_first_order(lambda prev: (1 + kappa) ** 2 * prev + b**2, sigma_0**2)
        target = sigma_0**2 * (1 + kappa) ** (2 * L) + b**2 * ((1 + kappa) ** (2 * L) - 1) / (kappa * (kappa + 2))
        if sp.simplify(closed - target) != 0:
            raise AssertionError("rsolve disagrees with the geometric closed form")
        return target
    raise ValueError(f"regime={regime!r} is not one of random, aligned, proportional")
