"""Every symbol of the theory, defined once, with its sympy assumptions.

Notation of docs/derivations.md#notation (P1 = Sun et al. 2025, "The Curse of Depth in Large
Language Models"; P2 = "When Does Sparsity Mitigate the Curse of Depth in LLMs").

Integers (``integer=True, positive=True`` unless noted)

==========  ===================================================================
``L``       depth: number of residual blocks
``l``       block index, counted from 1
``d``       residual width
``d_ff``    MLP (hidden) width
``H``       query heads
``G``       group size: query heads per key-value head (1 = MHA, H = MQA)
``T``       tokens in the sequence
``n``       values averaged by one attention head (P2's ``n``; ``T`` when uniform)
``E``       experts of a mixture-of-experts layer
``k``       experts chosen per token (top-k)
``t``       step of the weight-decay process, or query-token position (``nonnegative``)
``j``       summation index (token or expert)
==========  ===================================================================

Positive reals (``positive=True``)

==============  ================================================================
``s``           std of the i.i.d. Gaussian weight entries, N(0, s^2)
``alpha``       d*s^2, second-moment gain of one d x d Gaussian map
``alpha_attn``  second-moment gain of the attention branch (P2 Theorem 2)
``alpha_ffn``   second-moment gain of the FFN branch (P2 Theorem 2)
``sigma``       sigma_l, per-coordinate std of the stream entering a block
``sigma_0``     std of the input stream (layer 0)
``sigma_V``     std of a value coordinate (P2 GQA)
``sigma_G``     std of the gradient noise (P2 Theorem 3)
``g``           g_l, scale on the norm output (1 Pre-LN, 1/sqrt(l) LNS)
``rho``         mask density: second-moment retention of a branch mask, in (0, 1]
``eta``         learning rate
``lam``         decoupled weight decay (printed lambda)
``c``           a constant of an asymptotic statement (P1's Theta constant)
``q``           variance of one pre-activation, alpha*g^2
``v``           variance one sublayer adds to the stream
``v_attn``      variance the attention sublayer adds
``v_mlp``       variance the MLP sublayer adds
``kappa``       ||df/dh||_F / sqrt(d) of a sublayer at unit input
``x``           a free positive variable (sigma^2, or eta*lam in a check)
``y``           a free positive variable (reparametrises an interval)
``epsilon``     P1's epsilon in Theta(L^(2-epsilon))
==============  ================================================================

Left-hand sides of the paper statements: ``sigma_next`` (sigma_{l+1}), ``sigma_L``;
``Var`` a nonnegative function, with ``var_u`` = Var(u_t), ``u0_var`` = Var(u_0),
``var_out`` = Var(o) of an attention output, ``var_moe`` / ``var_expert`` = Var(y_MoE) /
Var(y_e) of an MoE and of one expert; ``jac_norm`` = Gamma_L = ||dy_L/dx_1||_2 and ``M``
its bound; ``jac_dev`` = Delta_l = ||J_l - I||_F/sqrt(d); ``C_1``, ``C_2`` the
constants of a Theta. Matrices: ``J_LN`` (d x d) the norm's Jacobian, ``h_vec`` (d x 1)
the normalised stream; ``gate(j)`` = gamma(j) the MoE gate of the j-th chosen expert.

Nonnegative reals: ``a`` (aligned part) and ``b`` (independent part) of a sublayer
output, ``f = a*x/sigma + b*xi`` (docs/derivations.md#bridge-aligned); ``cos_tok`` mean cosine between
distinct normalised tokens.

>>> from theory.symbolic.symbols import L, alpha, rho, lam
>>> (L.is_integer, alpha.is_positive, rho.is_positive, lam)
(True, True, True, lambda)
"""

from __future__ import annotations

import sympy as sp

__all__ = [
    "L", "l", "d", "d_ff", "H", "G", "T", "n", "E", "k", "t", "j",
    "s", "alpha", "alpha_attn", "alpha_ffn", "sigma", "sigma_0", "sigma_V", "sigma_G",
    "g", "rho", "eta", "lam", "c", "q", "v", "v_attn", "v_mlp", "kappa", "x", "y", "epsilon",
    "a", "b", "u0_var", "cos_tok", "Var", "sigma_next", "sigma_L", "var_u", "var_out", "var_moe",
    "var_expert", "jac_norm", "jac_dev", "M", "C_1", "C_2", "J_LN", "h_vec", "gate", "ALL_SYMBOLS",
]

class _NextIndexSymbol(sp.Symbol):
    """A symbol named ``<base>_l+1`` (so pretty/LaTeX subscript ``l+1``) whose str form
    is the unambiguous ``<base>_{l+1}``."""

    def _sympystr(self, printer):  # noqa: ARG002 - sympy printer hook
        return self.name.replace("_l+1", "_{l+1}")


_int = dict(integer=True, positive=True)
_pos = dict(positive=True)

# integers
L = sp.Symbol("L", **_int)
l = sp.Symbol("l", **_int)  # noqa: E741 - the papers' name for the block index
d = sp.Symbol("d", **_int)
d_ff = sp.Symbol("d_ff", **_int)
H = sp.Symbol("H", **_int)
G = sp.Symbol("G", **_int)
T = sp.Symbol("T", **_int)
n = sp.Symbol("n", **_int)
E = sp.Symbol("E", **_int)
k = sp.Symbol("k", **_int)
t = sp.Symbol("t", integer=True, nonnegative=True)
j = sp.Symbol("j", **_int)

# positive reals
s = sp.Symbol("s", **_pos)
alpha = sp.Symbol("alpha", **_pos)
alpha_attn = sp.Symbol("alpha_attn", **_pos)
alpha_ffn = sp.Symbol("alpha_ffn", **_pos)
sigma = sp.Symbol("sigma_l", **_pos)
sigma_0 = sp.Symbol("sigma_0", **_pos)
sigma_V = sp.Symbol("sigma_V", **_pos)
sigma_G = sp.Symbol("sigma_G", **_pos)
g = sp.Symbol("g_l", **_pos)
rho = sp.Symbol("rho", **_pos)
eta = sp.Symbol("eta", **_pos)
lam = sp.Symbol("lambda", **_pos)
c = sp.Symbol("c", **_pos)
q = sp.Symbol("q", **_pos)
v = sp.Symbol("v", **_pos)
v_attn = sp.Symbol("v_attn", **_pos)
v_mlp = sp.Symbol("v_mlp", **_pos)
kappa = sp.Symbol("kappa", **_pos)
x = sp.Symbol("x", **_pos)
y = sp.Symbol("y", **_pos)
epsilon = sp.Symbol("epsilon", **_pos)

# nonnegative reals
a = sp.Symbol("a", nonnegative=True)
b = sp.Symbol("b", nonnegative=True)
cos_tok = sp.Symbol("c_tok", nonnegative=True)

# left-hand sides and constants of the paper statements
Var = sp.Function("Var", nonnegative=True)  # variance of a random quantity, Var(u_t)
sigma_next = _NextIndexSymbol("sigma_l+1", **_pos)  # str sigma_{l+1}
sigma_L = sp.Symbol("sigma_L", **_pos)
var_u = Var(sp.Symbol("u_t"))
u0_var = Var(sp.Symbol("u_0"))
var_out = Var(sp.Symbol("o"))
var_moe = Var(sp.Symbol("y_MoE"))
var_expert = Var(sp.Symbol("y_e"))
jac_norm = sp.Symbol("Gamma_L", nonnegative=True)  # ||dy_L/dx_1||_2
jac_dev = sp.Symbol("Delta_l", nonnegative=True)  # ||J_l - I||_F/sqrt(d)
M = sp.Symbol("M", **_pos)
C_1 = sp.Symbol("C_1", **_pos)
C_2 = sp.Symbol("C_2", **_pos)

# matrices and sequences
J_LN = sp.MatrixSymbol("J_LN", d, d)  # Jacobian of the norm, dN(x)/dx
h_vec = sp.MatrixSymbol("h", d, 1)  # normalised stream x/rms(x), a column
gate = sp.Function("gamma", nonnegative=True)  # gate(j): MoE gate of the j-th chosen expert

ALL_SYMBOLS: dict[str, sp.Symbol] = {
    name: value for name, value in globals().items()
    if isinstance(value, sp.Symbol) and not name.startswith("_")
}
