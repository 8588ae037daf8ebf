"""The symbolic check of each lemma: what sympy proves about its statement, closed form and growth.

Each ``check_*`` returns True when sympy proves what the lemma's docstring says (a closed form solves
its recursion, a bound lies above the exact law, a growth class holds); :mod:`theory.symbolic.lemmas`
attaches one to each lemma, and ``tests/theory/test_lemmas.py`` runs them all.

>>> check_p2_thm_4(), check_gqa_init()
(True, True)
"""

from __future__ import annotations

import sympy as sp

from theory.symbolic import bounds as bd
from theory.symbolic import recursions as rc
from theory.symbolic.symbols import (
    G, L, T, alpha, alpha_attn, alpha_ffn, b, c, d_ff, eta, g, k, kappa, l, lam, n, q, rho, s, sigma, sigma_0,
    sigma_V, t, u0_var, v, v_attn, v_mlp, var_expert, x, y,
)

__all__ = ["check_p1_lemma_3_2", "check_p1_ln_jacobian", "check_p1_thm_3_3", "check_p1_lns", "check_p2_thm_1", "check_p2_thm_2", "check_weight_decay", "check_p2_thm_4", "check_p2_thm_5", "check_p2_gqa", "check_masked_linear", "check_preln", "check_lns", "check_moe", "check_gqa_init", "check_causal", "check_jacobian", "check_bridge"]


def _zero(expr) -> bool:
    return sp.simplify(expr) == 0


def _nonnegative(expr) -> bool:
    return bool(sp.simplify(expr).is_nonnegative)


def _satisfies(closed, step, index=L, start=None) -> bool:
    """closed(index+1) == step(closed(index)), and closed(0) == start when given."""
    ok = _zero(closed.subs(index, index + 1) - step(closed))
    return ok and (start is None or _zero(closed.subs(index, 0) - start))


# -- symbolic checks ------------------------------------------------------------------
def check_p1_lemma_3_2() -> bool:
    """The recursion's own growth c^2 L^2/4 lies strictly between Theta(L) and Theta(exp(L))."""
    leading = bd.p1_lemma_3_2_growth()[2]
    return sp.limit(leading / L, L, sp.oo) is sp.oo and sp.limit(leading / sp.exp(L), L, sp.oo) == 0


def check_p1_ln_jacobian() -> bool:
    """Exact RMSNorm Jacobian (sympy, d = 3) = (g/rms)(I - h h^T/d): I/sigma up to a rank-one part."""
    _, diff = rc.rmsnorm_jacobian(3)
    return diff == sp.zeros(3, 3)


def check_p1_thm_3_3() -> bool:
    """sum 1/sigma_l converges for sigma_l = exp(c l) (so M exists), diverges for c l/2 and sqrt(l)."""
    ratio = sp.exp(-c * (l + 1)) / sp.exp(-c * l)  # ratio test on 1/sigma_l, sigma_l = exp(c l)
    exp_ok = bool(sp.expand_log(sp.log(sp.limit(sp.simplify(ratio), l, sp.oo)), force=True).is_negative)
    quad = sp.Sum(2 / l, (l, 1, sp.oo)).is_convergent()  # 1/sigma_l for sigma_l ~ c l/2, c factored out
    preln = sp.Sum(1 / sp.sqrt(l), (l, 1, sp.oo)).is_convergent()
    return bool(exp_ok) and not quad and not preln


def check_p1_lns() -> bool:
    """The model's growth c^2 L is >= Theta(L) (tight) and o(L^(2-eps)) for 0 < eps < 1."""
    leading = bd.p1_lns_growth()[1]
    eps_in_01 = 1 / (1 + y)
    lower = sp.limit(leading / L, L, sp.oo)
    return bool(lower.is_positive and lower.is_finite) and sp.limit(leading / L ** (2 - eps_in_01), L, sp.oo) == 0


def check_p2_thm_1() -> bool:
    """(1 + sqrt(alpha rho))^2 - (1 + alpha rho) = 2 sqrt(alpha rho) >= 0: the exact law is below."""
    gap = sp.expand((1 + sp.sqrt(alpha * rho)) ** 2 - (1 + alpha * rho))
    base = sp.simplify(bd.p2_thm_1_bound() / rc.masked_linear_variance()) ** (1 / L)  # per-layer ratio
    per_layer_ok = _nonnegative(sp.powdenest(base, force=True) - 1)
    return _zero(gap - 2 * sp.sqrt(alpha * rho)) and _nonnegative(gap) and per_layer_ok


def check_p2_thm_2() -> bool:
    """Bound - exact two-branch gain (1 + alpha_attn rho)(1 + alpha_ffn rho) expands to terms >= 0."""
    exact = (1 + alpha_attn * rho) * (1 + alpha_ffn * rho)
    bound = bd.p2_thm_2().rhs / sigma**2
    return _nonnegative(sp.expand(bound - exact))


def check_weight_decay() -> bool:
    """Exact law solves the recursion and is below P2 Thm 3 for 0 < eta lam <= 1 (1-(1-x)^2 >= x)."""
    exact = rc.weight_decay_variance()
    solves = _satisfies(exact, rc.weight_decay_step, index=t, start=u0_var)
    key = _zero(sp.factor(1 - (1 - x) ** 2 - x) - x * (1 - x))  # 1-(1-x)^2 >= x on (0,1]
    gap = (bd.p2_thm_3_bound() - exact).subs(eta, (1 / (1 + y)) / lam)
    return solves and key and _nonnegative(gap)


def check_p2_thm_4() -> bool:
    """sum_{i<=T} sigma_V^2/T^2 = sigma_V^2/T (variance of a uniform average)."""
    i = sp.Symbol("i", integer=True, positive=True)
    return _zero(sp.summation(sigma_V**2 / T**2, (i, 1, T)) - bd.p2_thm_4().rhs)


def check_p2_thm_5() -> bool:
    """sum_{i<=k} (1/k)^2 = 1/k (uniform gates)."""
    return _zero(rc.moe_uniform_gate_factor() * var_expert - bd.p2_thm_5().rhs)


def check_p2_gqa() -> bool:
    """Under P2's idealisation (average of G independent heads): sigma_V^2/(G n)."""
    i = sp.Symbol("i", integer=True, positive=True)
    return _zero(sp.summation(sigma_V**2 / n / G**2, (i, 1, G)) - bd.p2_gqa().rhs)


def check_masked_linear() -> bool:
    """Closed form solves r -> (1 + alpha rho) r and lies below P2 Theorem 1."""
    closed = rc.masked_linear_variance()
    return _satisfies(closed, rc.masked_linear_step, start=sigma_0**2) and check_p2_thm_1()


def check_preln() -> bool:
    """Closed form solves the additive recursion; E[relu(z)^2] = q/2 by sympy integration."""
    z = sp.Symbol("z", real=True)
    relu_moment = sp.integrate(z**2 * sp.exp(-z**2 / (2 * q)) / sp.sqrt(2 * sp.pi * q), (z, 0, sp.oo))
    solves = _satisfies(rc.preln_variance(), lambda prev: prev + v_attn + v_mlp, start=sigma_0**2)
    relu_ok = _zero(rc.relu_mlp_increment() - d_ff * s**2 * relu_moment.subs(q, alpha * g**2))
    return solves and relu_ok


def check_lns() -> bool:
    """Increments c/l sum to c H_L = Theta(log L); SwiGLU: l^2 v_mlp -> d_ff s^2 alpha^2/4, sum 1/l^2 < oo."""
    closed = rc.lns_variance()
    steps = _zero(sp.expand_func(closed.subs(L, L + 1) - closed) - c / (L + 1))
    swiglu = _zero(rc.lns_swiglu_mlp_limit() - d_ff * s**2 * alpha**2 / 4)
    converges = sp.Sum(1 / l**2, (l, 1, sp.oo)).is_convergent()
    return steps and swiglu and bool(converges) and bd.classify_growth(closed) == "Theta(log L)"


def check_moe() -> bool:
    """k = 4: sum g^2 - 1/k = sum (g - 1/k)^2 and 1 - sum g^2 = 2 sum_{i<j} g_i g_j; uniform = 1/k."""
    gates = sp.symbols("g1:4", nonnegative=True)
    last = 1 - sum(gates)  # k = 4 gates summing to one
    all_gates = list(gates) + [last]
    factor = rc.moe_gate_factor(all_gates)
    lower = _zero(factor - sp.Rational(1, 4) - sum((gi - sp.Rational(1, 4)) ** 2 for gi in all_gates))
    upper = _zero(1 - factor - 2 * sum(all_gates[p] * all_gates[r] for p in range(4) for r in range(p + 1, 4)))
    return lower and upper and _zero(rc.moe_uniform_gate_factor() - 1 / k)


def check_gqa_init() -> bool:
    """d(variance)/dG = 0."""
    return _zero(sp.diff(rc.gqa_attention_increment(), G))


def check_causal() -> bool:
    """H_T/T = 1 at T = 1 and H_T/T ~ log(T)/T."""
    factor = rc.causal_uniform_attention_factor()
    at_one = _zero(factor.subs(T, 1) - 1)
    log_ratio = sp.limit(factor * T / sp.log(T), T, sp.oo)
    return at_one and log_ratio == 1


def check_jacobian() -> bool:
    """Exact norm Jacobian; Pre-LN sqrt(l) Delta_l -> kappa/sqrt(v); LNS sqrt(l log l) Delta_l ->
    kappa/sqrt(c); linear Pre-LN e2e gain^2 telescopes to sigma_L^2/sigma_0^2."""
    pre = sp.limit(rc.preln_jacobian_deviation() * sp.sqrt(l), l, sp.oo)
    lns = sp.limit(rc.lns_jacobian_deviation() * sp.sqrt(l * sp.log(l)), l, sp.oo)
    gain = _zero(rc.preln_linear_e2e_gain_sq() - (sigma_0**2 + alpha * L) / sigma_0**2)
    return check_p1_ln_jacobian() and _zero(pre - kappa / sp.sqrt(v)) and _zero(lns - kappa / sp.sqrt(c)) and gain


def check_bridge() -> bool:
    """Closed forms of the three regimes solve the step; P1's step = aligned step (a = c/2) - c^2/4."""
    step = lambda prev: rc.bridge_step(sp.sqrt(prev)).subs(b, 0)  # noqa: E731 - b = 0 regime
    aligned = rc.bridge_variance("aligned")
    random = rc.bridge_variance("random")
    prop = rc.bridge_variance("proportional")
    ok = _satisfies(aligned, step, start=sigma_0**2)
    ok &= _satisfies(random, lambda prev: rc.bridge_step(sp.sqrt(prev), aligned=0), start=sigma_0**2)
    ok &= _satisfies(prop, lambda prev: rc.bridge_step(sp.sqrt(prev), aligned=kappa * sp.sqrt(prev)), start=sigma_0**2)
    # P1 Lemma 3.2's step is the aligned bridge with a = c/2, less a constant c^2/4
    p1_gap = sp.expand(rc.bridge_step(sigma, c / 2, 0) - bd.p1_lemma_3_2_step(sigma**2))
    return bool(ok) and _zero(p1_gap - c**2 / 4)
