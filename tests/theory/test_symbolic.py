"""Symbolic identities, closed forms against iteration, bounds, and derived growth classes.

Identities are checked twice: ``sympy.simplify(lhs - rhs) == 0`` and at random
numeric points (integers for integer symbols). Closed forms are compared with a
direct float64 iteration of their recursion; growth classes with an iteration to
``l = 1e6`` (log-log slope on ``1e5..1e6``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from sympy.core.function import AppliedUndef

from theory.symbolic import bounds as bd
from theory.symbolic import recursions as rc
from theory.symbolic.symbols import (
    G, H, L, T, a, alpha, alpha_attn, alpha_ffn, b, c, d_ff, eta, g, k, kappa, l, lam, q, rho, s, sigma, sigma_0,
    sigma_G, t, u0_var, v, v_attn, v_mlp,
)

RNG_SEED = 20251129


def _functions_to_symbols(expr):
    """Replace applied undefined functions (``Var(u_0)``) by positive symbols."""
    atoms = expr.atoms(AppliedUndef)
    ordered = sorted(atoms, key=str)
    return expr.xreplace({atom: sp.Symbol(f"_f{index}", positive=True) for index, atom in enumerate(ordered)})


def _even_powers_canonical(expr):
    """``(x - 1)**(2t)`` -> ``(1 - x)**(2t)`` (even exponent), so sympy sees equal terms."""
    return expr.replace(lambda e: e.is_Pow and e.exp.is_even and e.base.could_extract_minus_sign(),
                        lambda e: (-e.base) ** e.exp)


def _random_point(expr, rng):
    """Random values for the free symbols: integers 1..40 for integer symbols, else (0.05, 0.95)."""
    point = {}
    for symbol in expr.free_symbols:
        if getattr(symbol, "is_integer", False):
            point[symbol] = int(rng.integers(1, 40))
        else:
            point[symbol] = float(rng.uniform(0.05, 0.95))
    return point


def _numeric_equal(lhs, rhs, rng, trials=5):
    lhs, rhs = _functions_to_symbols(lhs), _functions_to_symbols(rhs)
    for _ in range(trials):
        point = _random_point(sp.Add(lhs, rhs), rng)
        left = complex(sp.N(sp.expand_func(lhs).subs(point), 30))
        right = complex(sp.N(sp.expand_func(rhs).subs(point), 30))
        assert abs(left - right) <= 1e-10 * max(1.0, abs(right)), (point, left, right)


Q2 = (1 - eta * lam) ** 2
IDENTITIES = [
    ("masked-linear closed form", rc.masked_linear_variance(), sigma_0**2 * (1 + alpha * rho) ** L),
    ("weight decay, geometric-sum form", rc.weight_decay_variance(),
     Q2**t * u0_var + eta**2 * sigma_G**2 * (1 - Q2**t) / (1 - Q2)),
    ("weight decay, rsolve form", rc.weight_decay_variance(),
     rc.solve_first_order(rc.weight_decay_step, u0_var, index=t)),
    ("Pre-LN additive", rc.preln_variance(), sigma_0**2 + L * (v_attn + v_mlp)),
    ("LNS harmonic", rc.lns_variance(), sigma_0**2 + c * sp.harmonic(L)),
    ("ReLU increment", rc.relu_mlp_increment(), d_ff * s**2 * alpha * g**2 / 2),
    ("linear increment", rc.linear_increment(1 / sp.sqrt(l)), alpha / l),
    ("MoE uniform gates", rc.moe_uniform_gate_factor(), 1 / k),
    ("causal uniform attention", rc.causal_uniform_attention_factor(), sp.harmonic(T) / T),
    ("GQA = MHA", rc.gqa_attention_increment(G), rc.gqa_attention_increment(1)),
    ("bridge a = 0", rc.bridge_variance("random"), sigma_0**2 + L * b**2),
    ("bridge b = 0", rc.bridge_variance("aligned"), (sigma_0 + L * a) ** 2),
    ("P1 step = aligned bridge - c^2/4", bd.p1_lemma_3_2_step(sigma**2),
     rc.bridge_step(sigma, c / 2, 0) - c**2 / 4),
    ("linear Pre-LN e2e gain telescopes", rc.preln_linear_e2e_gain_sq(),
     rc.preln_variance().subs({v_attn: alpha, v_mlp: 0}) / sigma_0**2),
    ("SwiGLU LNS limit", rc.lns_swiglu_mlp_limit(), d_ff * s**2 * alpha**2 / 4),
    ("P2 Thm 1 bound", bd.p2_thm_1_bound(), sigma_0**2 * (1 + sp.sqrt(alpha * rho)) ** (2 * L)),
    ("Thm 1 gap", (1 + sp.sqrt(alpha * rho)) ** 2 - (1 + alpha * rho), 2 * sp.sqrt(alpha * rho)),
    ("Jacobian deviation Pre-LN", rc.preln_jacobian_deviation(), kappa / sp.sqrt(sigma_0**2 + v * (l - 1))),
]


@pytest.mark.parametrize("name,lhs,rhs", IDENTITIES, ids=[row[0] for row in IDENTITIES])
def test_identity(name, lhs, rhs):
    assert sp.simplify(_even_powers_canonical(sp.expand_func(lhs - rhs))) == 0, name
    _numeric_equal(lhs, rhs, np.random.default_rng(RNG_SEED))


def test_rmsnorm_jacobian_is_projection_over_rms():
    jacobian, difference = rc.rmsnorm_jacobian(3)
    assert difference == sp.zeros(3, 3)
    point = {symbol: value for symbol, value in zip(sorted(jacobian.free_symbols, key=str), (0.3, -1.2, 0.7, 2.0))}
    numeric = np.array(jacobian.subs(point).evalf(), dtype=float)
    x = np.array([point[sp.Symbol(f"x{i}", real=True)] for i in (1, 2, 3)])
    rms = np.sqrt(np.mean(x**2))
    h = x / rms
    g_value = point[g]
    assert np.allclose(numeric, g_value / rms * (np.eye(3) - np.outer(h, h) / 3))


def test_silu_series_matches_quadrature():
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)  # E over N(0, 1)
    weights = weights / weights.sum()
    series = sp.lambdify(q, rc.silu_second_moment_series(order=3))
    for variance in (1e-3, 1e-2, 5e-2):
        z = np.sqrt(variance) * nodes
        exact = np.sum(weights * (z / (1 + np.exp(-z))) ** 2)
        assert abs(series(variance) - exact) <= 10 * variance**4, (variance, series(variance), exact)


# -- closed forms against direct iteration ---------------------------------------------
def _iterate(step, start, steps):
    values = [start]
    for index in range(steps):
        values.append(step(values[-1], index))
    return np.array(values)


@pytest.mark.parametrize("alpha_value,rho_value,sigma0", [(1.0, 1.0, 1.0), (0.5, 0.25, 0.02), (2.0, 0.9, 3.0)])
def test_masked_linear_closed_form_vs_iteration(alpha_value, rho_value, sigma0):
    closed = sp.lambdify((L, alpha, rho, sigma_0), rc.masked_linear_variance(), "numpy")
    iterated = _iterate(lambda x, _: x * (1 + alpha_value * rho_value), sigma0**2, 50)
    assert np.allclose(closed(np.arange(51), alpha_value, rho_value, sigma0), iterated, rtol=1e-12)


@pytest.mark.parametrize("eta_value,lam_value,noise,u0", [(1e-2, 0.1, 1.0, 1.0), (0.3, 2.0, 0.5, 4.0),
                                                         (0.5, 2.0, 1.0, 2.0), (1e-3, 1.0, 2.0, 0.0)])
def test_weight_decay_closed_form_vs_iteration(eta_value, lam_value, noise, u0):
    values = {eta: eta_value, lam: lam_value, sigma_G: noise, u0_var: u0}
    closed = sp.lambdify(t, rc.weight_decay_variance().subs(values), "numpy")
    decay = (1 - eta_value * lam_value) ** 2
    iterated = _iterate(lambda x, _: decay * x + eta_value**2 * noise**2, u0, 200)
    assert np.allclose(closed(np.arange(201)), iterated, rtol=1e-10, atol=1e-15)
    bound = sp.lambdify(t, bd.p2_thm_3_bound().subs(values), "numpy")(np.arange(201))
    assert np.all(iterated <= bound * (1 + 1e-12))  # P2 Theorem 3 holds
    steady = eta_value * noise**2 / (lam_value * (2 - eta_value * lam_value))
    assert math.isclose(float(closed(10**7)), steady, rel_tol=1e-9)  # the steady state
    assert np.all(bound >= steady)  # the bound's steady state eta sigma_G^2/lam is above it


@pytest.mark.parametrize("v_value,sigma0", [(1.0, 1.0), (0.0016, 0.02), (3.0, 0.1)])
def test_preln_and_lns_closed_forms_vs_iteration(v_value, sigma0):
    pre = sp.lambdify((L, sigma_0, v_attn, v_mlp), rc.preln_variance(), "numpy")
    iterated = _iterate(lambda x, _: x + v_value, sigma0**2, 100)
    assert np.allclose(pre(np.arange(101), sigma0, v_value / 2, v_value / 2), iterated, rtol=1e-12)
    lns = rc.lns_variance().subs({c: v_value, sigma_0: sigma0})
    iterated = _iterate(lambda x, index: x + v_value / (index + 1), sigma0**2, 100)
    closed = np.array([float(lns.subs(L, depth)) for depth in (1, 10, 100)])
    assert np.allclose(closed, iterated[[1, 10, 100]], rtol=1e-12)


@pytest.mark.parametrize("a_value,b_value,sigma0", [(0.0, 0.3, 1.0), (0.2, 0.0, 0.5), (0.1, 0.4, 2.0)])
def test_bridge_closed_forms_vs_iteration(a_value, b_value, sigma0):
    iterated = _iterate(lambda x, _: (math.sqrt(x) + a_value) ** 2 + b_value**2, sigma0**2, 40)
    if a_value == 0:
        closed = rc.bridge_variance("random").subs({b: b_value, sigma_0: sigma0})
    elif b_value == 0:
        closed = rc.bridge_variance("aligned").subs({a: a_value, sigma_0: sigma0})
    else:  # both: squeezed between the two pure regimes
        assert np.all(iterated >= (sigma0 + a_value * np.arange(41)) ** 2 - 1e-12)
        return
    values = np.array([float(closed.subs(L, depth)) for depth in range(41)])
    assert np.allclose(values, iterated, rtol=1e-12)


@pytest.mark.parametrize("kappa_value,b_value", [(0.1, 0.0), (0.05, 0.3)])
def test_bridge_proportional_vs_iteration(kappa_value, b_value):
    closed = rc.bridge_variance("proportional").subs({kappa: kappa_value, b: b_value, sigma_0: 1.0})
    iterated = _iterate(lambda x, _: (1 + kappa_value) ** 2 * x + b_value**2, 1.0, 30)
    assert np.allclose([float(closed.subs(L, depth)) for depth in range(31)], iterated, rtol=1e-12)


# -- bounds ---------------------------------------------------------------------------------
def test_exact_masked_linear_below_p2_theorem_1_on_grid():
    exact = sp.lambdify((L, alpha, rho, sigma_0), rc.masked_linear_variance(), "numpy")
    bound = sp.lambdify((L, alpha, rho, sigma_0), bd.p2_thm_1_bound(), "numpy")
    grid = np.meshgrid(np.arange(0, 30), np.linspace(0.01, 2, 7), np.linspace(0.01, 1, 7), indexing="ij")
    assert np.all(exact(*grid, 1.0) <= bound(*grid, 1.0))
    assert np.all(exact(*grid, 1.0)[1:] < bound(*grid, 1.0)[1:])  # never tight for L >= 1


def test_exact_two_branch_gain_below_p2_theorem_2():
    ratio = bd.p2_thm_2().rhs / sigma**2 / ((1 + alpha_attn * rho) * (1 + alpha_ffn * rho))
    values = sp.lambdify((alpha_attn, alpha_ffn, rho), ratio, "numpy")(*np.meshgrid(
        np.linspace(0.01, 3, 9), np.linspace(0.01, 3, 9), np.linspace(0.01, 1, 9)))
    assert np.all(values > 1)


# -- growth classes --------------------------------------------------------------------------
def _slope(values, lo=10**5, hi=10**6):
    return math.log(values[hi] / values[lo]) / math.log(hi / lo)


@pytest.mark.parametrize("c_value", [0.5, 1.0, 2.0])
def test_p1_lemma_3_2_recursion_is_quadratic(c_value):
    values = bd.iterate_p1_lemma_3_2(c_value, 1.0, 10**6)
    assert abs(_slope(values) - 2) < 1e-3
    assert math.isclose(values[-1] / 1e12, c_value**2 / 4, rel_tol=1e-4)
    assert bd.p1_lemma_3_2_growth()[3] == "Theta(L^2)"
    # the recursion never approaches exponential growth: per-layer ratio -> 1
    assert values[-1] / values[-2] - 1 < 3e-6


@pytest.mark.parametrize("c_value", [0.5, 1.0, 2.0])
def test_p1_lns_model_is_linear(c_value):
    values = bd.iterate_p1_lns(c_value, 1.0, 10**6)
    assert abs(_slope(values) - 1) < 3e-3
    assert math.isclose(values[-1] / 1e6, c_value**2, rel_tol=3e-3)
    assert bd.p1_lns_growth()[2] == "Theta(L)"


def test_exact_init_laws_growth_at_large_depth():
    depth = np.arange(10**6 + 1, dtype=float)
    preln = 1.0 + 0.5 * depth  # sigma_0^2 + v L
    assert abs(_slope(preln) - 1) < 1e-4
    lns = 1.0 + 0.5 * np.concatenate([[0.0], np.cumsum(1.0 / depth[1:])])  # sigma_0^2 + c H_L
    assert math.isclose(lns[-1] - 0.5 * math.log(1e6), 1.0 + 0.5 * np.euler_gamma, rel_tol=1e-6)
    assert _slope(lns) < 0.1  # far below linear
    pre_jac = 1.0 / np.sqrt(1.0 + 0.5 * (depth[1:] - 1))  # kappa = 1, stream entering block l
    assert abs(math.log(pre_jac[-1] / pre_jac[10**5 - 1]) / math.log(10) + 0.5) < 1e-3
    lns_jac = 1.0 / np.sqrt(depth[1:]) / np.sqrt(lns[:-1])
    scaled = lns_jac[-1] * math.sqrt(1e6 * math.log(1e6))
    assert 0.9 < scaled * math.sqrt(0.5) < 1.0  # -> kappa/sqrt(c) = sqrt(2), slowly from below


@pytest.mark.parametrize("expr,expected", [
    (sigma_0**2 + L * v, "Theta(L)"),
    (sigma_0**2 + c * sp.harmonic(L), "Theta(log L)"),
    ((sigma_0 + L * c) ** 2, "Theta(L^2)"),
    (sigma_0**2 * (1 + alpha * rho) ** L, "Theta(exp(L))"),
    (1 - (1 - c / (1 + c)) ** L, "O(1)"),
    (kappa / sp.sqrt(sigma_0**2 + v * L), "Theta(L^(-1/2))"),
    (kappa / sp.sqrt(L) / sp.sqrt(sigma_0**2 + c * sp.harmonic(L)), "Theta(1/sqrt(L log L))"),
])
def test_classify_growth(expr, expected):
    assert bd.classify_growth(expr) == expected


def test_swiglu_lns_increments_sum_converges():
    limit = rc.lns_swiglu_mlp_limit()
    assert sp.Sum(limit / l**2, (l, 1, sp.oo)).doit() == limit * sp.pi**2 / 6
    increment = sp.lambdify(l, rc.swiglu_mlp_increment(scale=1 / sp.sqrt(l)).subs({d_ff: 1, s: 1, alpha: 0.5}))
    for depth in (10, 100, 1000):
        assert math.isclose(increment(depth) * depth**2, 0.25 * 0.25, rel_tol=5.0 / depth)


def test_gqa_increment_free_of_group_size():
    increment = rc.gqa_attention_increment()
    assert G not in increment.free_symbols and H not in increment.free_symbols


def test_weight_decay_bound_is_loose_by_two_minus_eta_lam_in_steady_state():
    exact_steady = eta**2 * sigma_G**2 / (1 - (1 - eta * lam) ** 2)
    bound_steady = bd.p2_thm_3_bound().subs(u0_var, 0)
    assert sp.simplify(bound_steady / exact_steady - (2 - eta * lam)) == 0


def test_causal_attention_is_h_t_above_p2_theorem_4():
    ratio = rc.causal_uniform_attention_factor() / (1 / T)
    assert ratio == sp.harmonic(T)
    assert math.isclose(float(ratio.subs(T, 64)), sum(1 / i for i in range(1, 65)), rel_tol=1e-12)


def test_stride_quadrature_sums_a_quadratic_exactly():
    """docs/derivations.md#stride-tail: with ``h = 2c + 1``, the quadratic through ``g(0), g(c), g(2c)`` sums over
    ``k = 0..h-1`` to ``h g(c) + S (g(0) + g(2c) - 2 g(c))/(2 c^2)``, ``S = sum (k - c)^2 = (h^3 - h)/12``; and the
    product of ``1 + x_k`` (commuting) is, to first order in the curvature, ``(1 + x_c)^h`` plus ``S`` times the
    half-curvature times ``(1 + x_c)^(h - 1)`` (the stride keeps that term's lowest order in ``x``)."""
    cc, kk, g0, g1, g2, x0, x1, x2 = sp.symbols("c k g0 g1 g2 x0 x1 x2")
    h = 2 * cc + 1
    quadratic = g1 + (kk - cc) * (g2 - g0) / (2 * cc) + (kk - cc) ** 2 * (g0 + g2 - 2 * g1) / (2 * cc**2)
    assert sp.simplify(quadratic.subs(kk, 0) - g0) == 0 and sp.simplify(quadratic.subs(kk, 2 * cc) - g2) == 0
    spread = sp.summation((kk - cc) ** 2, (kk, 0, 2 * cc))
    assert sp.simplify(spread - (h**3 - h) / 12) == 0
    total = sp.summation(sp.expand(quadratic), (kk, 0, 2 * cc))
    assert sp.simplify(total - (h * g1 + spread * (g0 + g2 - 2 * g1) / (2 * cc**2))) == 0
    for c_value in (1, 2, 5):  # the tangent: log prod (1 + x_k), x_k quadratic in k, to first order in the curvature
        e = sp.Symbol("e")
        xs = [x1 + e * (k_value - c_value) ** 2 for k_value in range(2 * c_value + 1)]
        product = sp.prod([1 + x for x in xs])
        first_order = sp.diff(product, e).subs(e, 0)
        rule = sp.Rational((2 * c_value + 1) ** 3 - (2 * c_value + 1), 12) * (1 + x1) ** (2 * c_value)
        assert sp.simplify(first_order - rule) == 0, c_value
