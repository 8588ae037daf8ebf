"""The lemma registry: every paper statement, exact law and bridge, by id.

``LEMMAS`` maps the 19 ids of docs/derivations.md to frozen :class:`Lemma` records. Each
carries its sympy statement, assumptions, closed form, the growth class derived here
(as depth, or steps, go to infinity) and a symbolic check that sympy proves
(:mod:`theory.symbolic.checks`).

>>> lemma("p2-thm-1").source
'P2 Theorem 1'
>>> lemma("masked-linear").symbolic_check()
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from theory.symbolic import bounds as bd
from theory.symbolic import checks as ck
from theory.symbolic import recursions as rc
from theory.symbolic.symbols import (
    J_LN, L, a, d, eta, g, gate, h_vec, j, jac_dev, k, l, lam, sigma, sigma_L, sigma_V, sigma_next, t, var_expert,
    var_moe, var_out, var_u,
)

__all__ = ["Lemma", "LEMMAS", "LEMMA_IDS", "lemma", "growth_class", "derive_growth"]


@dataclass(frozen=True, kw_only=True)
class Lemma:
    """One statement of the theory.

    ``kind`` is "paper" (as a paper states it), "exact" (random-init law, equality in
    expectation under ``assumptions``) or "bridge" (docs/derivations.md#bridge-aligned). ``growth`` is the
    class derived here (see :func:`derive_growth`), ``notes`` records findings, e.g.
    where a paper statement is loose or wrong; ``related`` names lemmas it is
    compared with. ``exact_for`` says which curves of ``theory predict`` carrying this id are of kind exact
    (blocks, schemes, regime); its other curves are approximate (empty for the papers' statements).
    """

    id: str
    source: str
    kind: str
    title: str
    statement: sp.Basic
    assumptions: str
    closed_form: sp.Basic | None = None
    symbolic_check: Callable[[], bool] | None = None
    growth: str | None = None
    notes: str = ""
    related: tuple[str, ...] = ()
    exact_for: str = ""


# -- growth derivations -----------------------------------------------------------------
def _jac_growth(expr):
    return bd.classify_growth(expr.subs(l, L), L)


_DERIVATIONS: dict[str, Callable[[], str | None]] = {
    "p1-lemma-3.2": lambda: bd.p1_lemma_3_2_growth()[3],
    "p1-thm-3.3": lambda: "O(1)" if ck.check_p1_thm_3_3() else None,
    "p1-lns": lambda: bd.p1_lns_growth()[2],
    "p2-thm-1": lambda: bd.classify_growth(bd.p2_thm_1_bound()),
    "p2-thm-2": lambda: bd.classify_growth((bd.p2_thm_2().rhs / sigma**2) ** L),
    "p2-thm-3": lambda: bd.classify_growth(bd.p2_thm_3_bound().subs({t: L, eta: 1 / (2 * lam)})),
    "masked-linear": lambda: bd.classify_growth(rc.masked_linear_variance()),
    "exact-weight-decay": lambda: bd.classify_growth(rc.weight_decay_variance().subs({t: L, eta: 1 / (2 * lam)})),
    "preln-init": lambda: bd.classify_growth(rc.preln_variance()),
    "lns-init": lambda: bd.classify_growth(rc.lns_variance()),
    "jacobian-init": lambda: _jac_growth(rc.preln_jacobian_deviation()),
    "bridge-aligned": lambda: bd.classify_growth(rc.bridge_variance("aligned").subs(a, sp.Symbol("a", positive=True))),
}


def derive_growth(lemma_id: str) -> str | None:
    """Derive the growth class of a lemma with sympy (slow: limits); ``None`` if depth-free.

    Examples
    --------
    >>> derive_growth("p1-lemma-3.2")
    'Theta(L^2)'
    """
    lemma(lemma_id)
    derivation = _DERIVATIONS.get(lemma_id)
    return derivation() if derivation else None


def growth_class(lemma_id: str) -> str | None:
    """The growth class recorded for a lemma (tests check it equals :func:`derive_growth`).

    Examples
    --------
    >>> growth_class("lns-init")
    'Theta(log L)'
    """
    return lemma(lemma_id).growth


_EXACT_INIT = ("random init: weights i.i.d. N(0, s^2), zero-mean, independent of the stream, the masks and "
               "each other; no biases; RMSNorm output with ||h||^2 = d g_l^2 exactly (no epsilon)")


def _build() -> dict[str, Lemma]:
    entries = [
        Lemma(
            id="p1-lemma-3.2",
            source="P1 Lemma 3.2",
            kind="paper",
            title="Pre-LN variance recursion and its bounds",
            statement=bd.p1_lemma_3_2(),
            assumptions="Pre-LN; P1's Theta(1 + 1/sigma_l) read as 1 + c/sigma_l, c > 0 constant",
            symbolic_check=ck.check_p1_lemma_3_2,
            growth="Theta(L^2)",
            notes="Finding (derived here): x -> x + c sqrt(x) gives sqrt(x_l+1) - sqrt(x_l) -> c/2, so "
            "sigma_L^2 ~ c^2 L^2/4 (float64 iteration from sigma_0^2 = 1 to L = 1e6: slope d log x/d log L "
            "= 2.0000 on 1e5..1e6, x_L/L^2 = c^2/4 within 2e-5 relative, for c = 0.5, 1, 2). "
            "The recursion never reaches the Theta(exp(L)) upper bound, and "
            "its Theta(L) lower bound is not tight either; exp(L) needs a per-layer factor bounded away from "
            "1 (the Theta constant > 1), not the 1/sigma_l term. Pre-LN at random init is Theta(L) "
            "(preln-init): its per-layer factor is 1 + v/sigma_l^2, not 1 + c/sigma_l.",
            related=("preln-init", "bridge-aligned"),
        ),
        Lemma(
            id="p1-ln-jacobian",
            source="P1 Section 3 (LN Jacobian)",
            kind="paper",
            title="LayerNorm Jacobian ~ I/sigma",
            statement=bd.p1_ln_jacobian(),
            assumptions="LN/RMSNorm at input std sigma_x; '~' up to lower-order terms",
            closed_form=sp.Eq(J_LN, g / sigma * (sp.Identity(d) - h_vec * h_vec.T / d)),
            symbolic_check=ck.check_p1_ln_jacobian,
            notes="Exact (derived here): (g_l/rms(x)) (I - h h^T/d) with h = x/rms(x); the '~ I/sigma' drops a "
            "rank-one projection, so ||dLN/dx||_F^2 = (d-1) g^2/sigma^2, not d g^2/sigma^2.",
            related=("jacobian-init",),
        ),
        Lemma(
            id="p1-thm-3.3",
            source="P1 Theorem 3.3 (= P2 Lemma 1)",
            kind="paper",
            title="Deep blocks tend to identity",
            statement=bd.p1_thm_3_3(),
            assumptions="exponential variance growth sigma_l ~ exp(c l); ||J_l|| <= 1 + C/sigma_l",
            symbolic_check=ck.check_p1_thm_3_3,
            growth="O(1)",
            notes="Holds under its hypothesis (sum_l 1/sigma_l < oo). The hypothesis fails for P1's own recursion "
            "(Theta(L^2): sum 2/(c l) diverges) and at random init (Pre-LN sigma_l ~ sqrt(l)): there the "
            "mean-square end-to-end gain of a linear Pre-LN stack is sigma_L^2/sigma_0^2 = 1 + alpha L/sigma_0^2, "
            "unbounded (omega(1)) although each block tends to the identity.",
            related=("jacobian-init",),
        ),
        Lemma(
            id="p1-lns",
            source="P1 Section 4 (LayerNorm Scaling)",
            kind="paper",
            title="LNS variance bounds",
            statement=bd.p1_lns(),
            assumptions="LNS: norm output times 1/sqrt(l); modelled (our model, not P1's text: "
            "docs/derivations.md#p1-lns-model) as "
            "sigma_{l+1}^2 = sigma_l^2 (1 + c/(sigma_l sqrt(l)))",
            symbolic_check=ck.check_p1_lns,
            growth="Theta(L)",
            notes="Derived here: the model gives sigma_L^2 ~ c^2 L (iteration to L = 1e6: x_L/(c^2 L) = 1.002, "
            "1.000, 0.999 and slope 0.998, 1.000, 1.001 on 1e5..1e6 for c = 0.5, 1, 2): "
            "P1's lower bound Theta(L) is the tight one, L^(2-eps) is loose. At random init LNS is "
            "Theta(log L) (lns-init), which violates P1's lower bound Theta(L).",
            related=("lns-init",),
        ),
        Lemma(
            id="p2-thm-1",
            source="P2 Theorem 1",
            kind="paper",
            title="Masked linear residual: variance bound",
            statement=bd.p2_thm_1(),
            assumptions="r_{l+1} = r_l + D_l W_l r_l, W_l independent of (r_l, D_l), rho the mask's "
            "second-moment retention; written with homogeneous alpha, rho",
            closed_form=bd.p2_thm_1_bound(),
            symbolic_check=ck.check_p2_thm_1,
            growth="Theta(exp(L))",
            notes="Never tight for alpha*rho > 0: the exact gain is 1 + alpha rho (masked-linear), the bound's "
            "(1 + sqrt(alpha rho))^2 exceeds it by 2 sqrt(alpha rho); at alpha = rho = 1 the bound is 4^L "
            "against the exact 2^L.",
            related=("masked-linear",),
        ),
        Lemma(
            id="p2-thm-2",
            source="P2 Theorem 2",
            kind="paper",
            title="Attention + FFN with a common mask: per-branch gains",
            statement=bd.p2_thm_2(),
            assumptions="no norm; one mask D_l shared by both branches; alpha_attn, alpha_ffn the branches' "
            "second-moment gains",
            symbolic_check=ck.check_p2_thm_2,
            growth="Theta(exp(L))",
            notes="At random init with zero-mean output weights the cross terms vanish and the exact gain is "
            "(1 + alpha_attn rho)(1 + alpha_ffn rho) (derived here), below the bound by the same 2 sqrt terms.",
            related=("masked-linear",),
        ),
        Lemma(
            id="p2-thm-3",
            source="P2 Theorem 3",
            kind="paper",
            title="Decoupled weight decay bounds parameter variance",
            statement=bd.p2_thm_3(),
            assumptions="u_{t+1} = (1 - eta lam) u_t - eta g_t, g_t zero-mean, variance sigma_G^2, "
            "independent of u_t; 0 < eta lam <= 1",
            closed_form=bd.p2_thm_3_bound(),
            symbolic_check=ck.check_weight_decay,
            growth="O(1)",
            notes="True (proved here from the exact law). Tight only at eta lam = 1: the exact steady state is "
            "eta sigma_G^2/(lam (2 - eta lam)), so for the usual small eta lam the bound is about 2x the "
            "variance. Growth is in steps t, not depth.",
            related=("exact-weight-decay",),
        ),
        Lemma(
            id="p2-thm-4",
            source="P2 Theorem 4",
            kind="paper",
            title="Uniform attention averages T values",
            statement=bd.p2_thm_4(),
            assumptions="uniform, non-causal attention over T zero-mean independent values of variance sigma_V^2",
            symbolic_check=ck.check_p2_thm_4,
            notes="With a causal mask (every LLM here) query t averages t values: the mean is sigma_V^2 H_T/T, "
            "larger than sigma_V^2/T by H_T ~ log T (causal-attention).",
            related=("causal-attention",),
        ),
        Lemma(
            id="p2-thm-5",
            source="P2 Theorem 5",
            kind="paper",
            title="Top-k MoE divides variance by k",
            statement=bd.p2_thm_5(),
            assumptions="uniform gates 1/k; independent zero-mean experts; locally constant routing "
            "(for the Jacobian)",
            symbolic_check=ck.check_p2_thm_5,
            notes="Exact for uniform gates; softmax gates over the top-k give E[sum g_i^2] in [1/k, 1] "
            "(moe-gates), so 1/k is the best case.",
            related=("moe-gates",),
        ),
        Lemma(
            id="p2-gqa",
            source="P2 Section 3.2.2 (GQA/MQA)",
            kind="paper",
            title="GQA output variance ~ sigma_V^2/(G n)",
            statement=bd.p2_gqa(),
            assumptions="uniform attention over n values; the G heads of a group averaged and treated as "
            "independent",
            symbolic_check=ck.check_p2_gqa,
            notes="Not at init: heads are summed through independent blocks of W_O, not averaged, so the output "
            "variance equals MHA's and does not depend on G (gqa-init).",
            related=("gqa-init",),
        ),
        Lemma(
            id="masked-linear",
            source="derived here (exact version of P2 Theorem 1)",
            kind="exact",
            title="Masked linear residual: exact variance",
            statement=sp.Eq(sigma_L**2, rc.masked_linear_variance()),
            assumptions=_EXACT_INIT + "; D_l = diag(Bernoulli(rho)), no 1/rho rescaling; alpha = d s^2",
            closed_form=rc.masked_linear_variance(),
            symbolic_check=ck.check_masked_linear,
            growth="Theta(exp(L))",
            notes="Exponential with rate log(1 + alpha rho), below P2 Theorem 1's 2 log(1 + sqrt(alpha rho)).",
            related=("p2-thm-1",),
            exact_for=("var, var_mlp of the masked linear stack without a norm (scheme none, linear block); "
                       "angular approx"),
        ),
        Lemma(
            id="exact-weight-decay",
            source="derived here (exact version of P2 Theorem 3)",
            kind="exact",
            title="Weight-decay process: exact variance",
            statement=sp.Eq(var_u, rc.weight_decay_variance()),
            assumptions="g_t zero-mean, variance sigma_G^2, independent of u_t and each other; 0 < eta lam <= 1",
            closed_form=rc.weight_decay_variance(),
            symbolic_check=ck.check_weight_decay,
            growth="O(1)",
            notes="Converges to eta^2 sigma_G^2/(1 - (1 - eta lam)^2) = eta sigma_G^2/(lam (2 - eta lam)).",
            related=("p2-thm-3",),
            exact_for="the weight-decay process (every step)",
        ),
        Lemma(
            id="preln-init",
            source="derived here",
            kind="exact",
            title="Pre-LN at init: additive variance",
            statement=sp.Eq(sigma_L**2, rc.preln_variance()),
            assumptions=_EXACT_INIT + "; increments v_attn, v_mlp do not depend "
            "on sigma_l (ReLU MLP: v_mlp = d_ff s^2 alpha g^2/2)",
            closed_form=rc.preln_variance(),
            symbolic_check=ck.check_preln,
            growth="Theta(L)",
            notes="Linear, not exponential: the norm output has unit variance whatever sigma_l is.",
            related=("p1-lemma-3.2",),
            exact_for=("var, var_mlp of linear and MLP blocks under every scheme with a norm; of attention, "
                       "transformer and llama blocks only in the uniform-attention regime (alpha_q alpha_k g^4 "
                       "<= 0.02, Pre-LN-type schemes); angular approx everywhere"),
        ),
        Lemma(
            id="lns-init",
            source="derived here",
            kind="exact",
            title="LNS at init: harmonic variance",
            statement=sp.Eq(sigma_L**2, rc.lns_variance()),
            assumptions=_EXACT_INIT + "; g_l = 1/sqrt(l); increments homogeneous "
            "of degree 2 in g_l (linear, ReLU, uniform attention), c = the increment at g = 1",
            closed_form=rc.lns_variance(),
            symbolic_check=ck.check_lns,
            growth="Theta(log L)",
            notes="SwiGLU's MLP increment is ~ d_ff s^2 alpha^2/(4 l^2) for l >> alpha (any alpha, not only small "
            "alpha), so an MLP-only SwiGLU LNS stack converges; attention keeps the log: its increment "
            "alpha^2 g_l^2 (c_tok + (1 - c_tok) E[sum a^2]) lies between alpha^2/(T l) and alpha^2/l, and "
            "softmax rows tend to uniform as g_l -> 0 (scores scale like g_l^2), so c is then the "
            "uniform-attention constant, not the g = 1 one.",
            related=("p1-lns",),
            exact_for=("var, var_mlp of linear and MLP blocks under LNS; of attention-bearing blocks only in the "
                       "uniform-attention regime; angular approx everywhere"),
        ),
        Lemma(
            id="moe-gates",
            source="derived here (exact version of P2 Theorem 5)",
            kind="exact",
            title="MoE: variance factor sum of squared gates",
            statement=sp.Eq(var_moe, var_expert * sp.Sum(gate(j) ** 2, (j, 1, k))),
            assumptions="experts independent, zero-mean, independent of the gates; gates >= 0 summing to 1",
            closed_form=var_expert / k,
            symbolic_check=ck.check_moe,
            notes="sum g_i^2 lies in [1/k, 1]; = 1/k iff the gates are uniform (closed form shown). Softmax gates "
            "over the top-k logits give E[sum g_i^2] > 1/k (computed numerically by theory.predict). The "
            "same factor holds for the Jacobian only with locally constant routing (gate derivatives "
            "dropped).",
            related=("p2-thm-5",),
            exact_for=("var_mlp of MoE blocks behind a norm (softmax or uniform gates), in the token-covariance "
                       "recursion"),
        ),
        Lemma(
            id="gqa-init",
            source="derived here",
            kind="exact",
            title="GQA at init: variance independent of G",
            statement=sp.Eq(var_out, rc.gqa_attention_increment()),
            assumptions=_EXACT_INIT + "; each head its own block of W_O; A_2 = E[sum_j a_j^2] of one attention row",
            closed_form=rc.gqa_attention_increment(),
            symbolic_check=ck.check_gqa_init,
            notes="No 1/G: contradicts P2's sigma_V^2/(G n) at init.",
            related=("p2-gqa",),
            exact_for="var_attn in the uniform-attention regime (alpha_q alpha_k g^4 <= 0.02, Pre-LN-type schemes)",
        ),
        Lemma(
            id="causal-attention",
            source="derived here",
            kind="exact",
            title="Causal uniform attention: H_T/T",
            statement=sp.Eq(var_out, sigma_V**2 * rc.causal_uniform_attention_factor()),
            assumptions="uniform causal attention a_tj = 1/t (j <= t), independent zero-mean values of variance "
            "sigma_V^2; averaged over query positions t = 1..T",
            closed_form=sigma_V**2 * rc.causal_uniform_attention_factor(),
            symbolic_check=ck.check_causal,
            notes="H_T/T ~ log(T)/T, a factor H_T above P2 Theorem 4's 1/T.",
            related=("p2-thm-4",),
            exact_for=("var_attn and token_cos in the uniform-attention regime (alpha_q alpha_k g^4 <= 0.02, "
                       "Pre-LN-type schemes, not MoE); approx elsewhere"),
        ),
        Lemma(
            id="jacobian-init",
            source="derived here",
            kind="exact",
            title="Block Jacobian deviation ~ g_l/sigma_l",
            statement=sp.Eq(jac_dev, rc.jacobian_deviation()),
            assumptions=_EXACT_INIT + "; kappa = ||df/dh||_F/sqrt(d) at unit "
            "input (linear: sqrt(alpha (d-1)/d)); exact for linear, leading order for degree-1 sublayers",
            closed_form=rc.preln_jacobian_deviation(),
            symbolic_check=ck.check_jacobian,
            growth="Theta(L^(-1/2))",
            notes="Pre-LN: kappa/sqrt(sigma_0^2 + v (l-1)) = Theta(l^-1/2); LNS: Theta(1/sqrt(l log l)); SwiGLU under "
            "LNS has kappa ~ g_l, one more 1/sqrt(l). Linear Pre-LN end-to-end gain^2 = sigma_L^2/sigma_0^2.",
            related=("p1-ln-jacobian", "p1-thm-3.3"),
            exact_for="none of its curves (jac_dev, e2e_gain are ratios of expectations: approx)",
        ),
        Lemma(
            id="bridge-aligned",
            source="derived here",
            kind="bridge",
            title="Aligned + independent sublayer output",
            statement=sp.Eq(sigma_next**2, rc.bridge_step()),
            assumptions="f = a x/sigma_l + b xi, xi zero-mean, unit variance, "
            "independent of x; a, b constant unless stated",
            closed_form=rc.bridge_variance("aligned"),
            symbolic_check=ck.check_bridge,
            growth="Theta(L^2)",
            notes="a = 0: sigma_0^2 + L b^2 (linear, random init); a > 0 constant: (sigma_0 + L a)^2 + O(L b^2), "
            "quadratic; a = kappa sigma_l: exponential (1 + kappa)^(2L). P1 Lemma 3.2's step equals the "
            "aligned step with a = c/2 minus c^2/4, hence its quadratic growth.",
            related=("p1-lemma-3.2",),
            exact_for="var of linear and MLP blocks with a planted aligned part under Pre-LN-type schemes",
        ),
    ]
    return {entry.id: entry for entry in entries}


LEMMAS: dict[str, Lemma] = _build()
LEMMA_IDS: tuple[str, ...] = tuple(LEMMAS)


def lemma(lemma_id: str) -> Lemma:
    """Look a lemma up by id; an unknown id raises ``KeyError`` naming the valid ids.

    Examples
    --------
    >>> lemma("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    KeyError: "unknown lemma id 'nope'; valid ids: p1-lemma-3.2, ...
    """
    try:
        return LEMMAS[lemma_id]
    except KeyError:
        raise KeyError(f"unknown lemma id {lemma_id!r}; valid ids: {', '.join(LEMMAS)}") from None
