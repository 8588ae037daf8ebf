"""The plan of a stack: per-sublayer parameters of the mean-field recursions, read off a Setting.

:func:`build_plan` turns a :class:`~theory.setting.Setting` into a :class:`SublayerPlan`,
arrays of length ``N = blocks planned x sublayers per block`` (every block by default; the wiring from
:mod:`theory.architecture`, the one spec of schemes and blocks), with the interpolation
tables (:mod:`theory.meanfield.tables`) the recursions need and the MoE gate moments
(:func:`moe_gate_square_sum`). Source: derived here (schemes: docs/design.md#schemes;
increments: docs/derivations.md#scheme-increments).

>>> from theory.setting import Setting
>>> plan = build_plan(Setting(block="transformer", depth=2, width=32, heads=4, tokens=4))
>>> plan.size, plan.kind.tolist(), plan.block.tolist()  # (N,) = (depth * 2,): attention, MLP per block
(4, [2, 1, 2, 1], [1, 1, 2, 2])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory import architecture
from theory.meanfield.tables import AttentionTable, KernelTable, attention_table, kernel_table
from theory.setting import Setting

__all__ = ["LINEAR", "MLP", "ATTENTION", "MOE", "SUBLAYER_CODES", "SublayerPlan", "build_plan",
           "moe_gate_square_sum"]

LINEAR, MLP, ATTENTION, MOE = 0, 1, 2, 3  # SublayerPlan.kind codes

_KIND_CODES = {"linear": LINEAR, "mlp": MLP, "attention": ATTENTION, "moe": MOE}
SUBLAYER_CODES = {block: tuple(_KIND_CODES[kind] for kind in kinds) for block, kinds in architecture.SUBLAYERS.items()}
_RAW_TAU2_MAX = 25.0  # attention scores of un-normalised streams: table clipped here (approx)
# Score variance where the softmax table ends (score std 20: rows are one-hot but for the top few
# keys); beyond it the quadrature grid would grow with the std (GiB at std 10^3), values clip here.
_TAU2_TABLE_MAX = 400.0


@dataclass(frozen=True)
class SublayerPlan:
    """Per-sublayer parameters of a stack, arrays of length ``N`` (sublayers in order).

    A sublayer maps the stream ``x`` (second moment ``v``, cosine ``rho``) to
    ``y = N?(stream_scale x + B + alignment x/rms(x))`` with the branch
    ``B = mask * branch_scale * N_b?(f(input))``, ``input = sqrt(in_scale2) N(x)`` if
    ``norm_input`` else ``x`` (so its second moment is ``q_in = in_scale2`` or ``v``).
    ``branch2`` is ``branch_scale^2 * rho_mask``.
    """

    kind: np.ndarray  # (N,) int: LINEAR, MLP, ATTENTION, MOE
    block: np.ndarray  # (N,) 1-based block index
    norm_input: np.ndarray  # (N,) bool
    in_scale2: np.ndarray  # (N,) g^2
    norm_branch: np.ndarray  # (N,) bool (sandwich/peri)
    branch2: np.ndarray  # (N,)
    stream_scale2: np.ndarray  # (N,) (deepnorm)
    norm_after: np.ndarray  # (N,) bool (post, deepnorm)
    alpha_in: np.ndarray  # (N,) alpha of W_V, W1 (and W3), W (linear)
    alpha_out: np.ndarray  # (N,) alpha of W_O, W2; 1 for linear
    alpha_qk: np.ndarray  # (N,) alpha_q * alpha_k
    activation: str
    ffn_ratio: float
    width: int
    rope: bool
    alignment: float
    attention: AttentionTable | None
    kernel: KernelTable | None
    gate2: np.ndarray | None = None  # (N,) MoE E[sum g_i^2] of each step's router (moe_gate_square_sums); 1 elsewhere
    gate_overlap0: float = 1.0  # MoE E[sum_i g_ti g_t'i] for independent routing (1/E)
    shared_expert: bool = False
    depth: int | None = None  # blocks in the stack (default: the last block planned)
    additive_from: int | None = None  # every block from this one on is additive (depth + 1: not the last one)

    def __post_init__(self) -> None:
        if self.gate2 is None:  # no MoE step: every step's gate factor is 1
            object.__setattr__(self, "gate2", np.ones(len(self.kind)))
        if self.depth is None:
            object.__setattr__(self, "depth", int(self.block[-1]))
        if self.additive_from is None:  # every block planned: read it off the steps
            object.__setattr__(self, "additive_from", _additive_from(self.block, self.is_additive(slice(None))))

    @property
    def size(self) -> int:
        return len(self.kind)

    @property
    def period(self) -> int:
        """Sublayers per block."""
        return int(np.searchsorted(self.block, self.block[0], side="right"))

    @property
    def blocks(self) -> np.ndarray:
        """(M,) the blocks planned, 1-based and increasing: every block of the stack, or those :func:`build_plan`
        was asked for."""
        return self.block[::self.period]

    @property
    def carries_tangents(self) -> bool:
        """No norm after a sum and no alignment: the recursion carries the tangent covariances (``jac_dev``,
        ``e2e_gain``), and an additive tail can stride."""
        return not self.norm_after.any() and self.alignment == 0

    def steps(self, block: int) -> range:
        """The step indices of block ``block`` (1-based; it must be planned).

        >>> build_plan(Setting(block="transformer", depth=9, width=32, heads=4), blocks=[1, 5, 9]).steps(5)
        range(2, 4)
        """
        start = int(np.searchsorted(self.block, block))
        if start == self.size or self.block[start] != block:
            raise ValueError(f"block {block} is not planned; planned: {self.blocks.tolist()}")
        return range(start, start + self.period)

    def is_additive(self, idx) -> np.ndarray:
        """Steps whose increment does not depend on ``v``: ``v' = v + B(rho)``; bool, shape of ``idx``.

        >>> build_plan(Setting(scheme="post", block="mlp", depth=2, width=32)).is_additive(np.arange(2)).tolist()
        [False, False]
        """
        return _additive(self.norm_input[idx], self.norm_after[idx], self.stream_scale2[idx], self.alignment)


def _additive(norm_input, norm_after, stream_scale2, alignment: float) -> np.ndarray:
    """Norm on the input, none after the sum, stream kept as it is, no alignment: ``v' = v + B(rho)``."""
    return norm_input & ~norm_after & (stream_scale2 == 1) & (alignment == 0)


def _additive_from(block: np.ndarray, additive: np.ndarray) -> int:
    """The first block from which every step in ``additive`` (bool, aligned with ``block``) is True."""
    other = np.flatnonzero(~additive)
    return int(block[other[-1]]) + 1 if len(other) else 1


# -- MoE gates ------------------------------------------------------------------------------
def moe_gate_square_sum(experts: int, top_k: int, logit_var: float, uniform: bool = False,
                        draws: int = 1 << 17, seed: int = 0) -> float:
    """``E[sum_i g_i^2]`` over the top-k gates (softmax over the top-k logits).

    Logits i.i.d. ``N(0, logit_var)`` (router ``h W_r`` with ``||h||^2`` fixed). Uniform gates:
    exactly ``1/k``; ``k = 1``: exactly 1; otherwise a fixed-seed numpy Monte-Carlo with
    ``draws`` samples (standard error < 1e-3 for 2^17 draws). Source: derived here,
    docs/derivations.md#moe-gate-square-sum.

    >>> moe_gate_square_sum(8, 2, 1.0, uniform=True), moe_gate_square_sum(8, 1, 1.0)
    (0.5, 1.0)
    """
    if uniform or top_k == 1 or logit_var == 0:
        return 1.0 if top_k == 1 else 1.0 / top_k
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((draws, experts)) * math.sqrt(logit_var)  # (draws, E)
    top = -np.sort(-logits, axis=1)[:, :top_k]  # (draws, k), descending
    gates = np.exp(top - top[:, :1])
    gates /= gates.sum(axis=1, keepdims=True)
    return float((gates**2).sum(axis=1).mean())


def moe_gate_square_sums(experts: int, top_k: int, logit_var: np.ndarray, uniform: bool = False) -> np.ndarray:
    """:func:`moe_gate_square_sum` for each router logit variance of ``logit_var`` (N,): exact at up to 16
    distinct values, else interpolated in ``log logit_var`` between 33 log-spaced ones (the sum is smooth in it;
    interpolation error below the Monte-Carlo's 1e-3).

    >>> moe_gate_square_sums(8, 2, np.array([1.0, 1.0, 0.25])).round(2).tolist()
    [0.55, 0.55, 0.52]
    """
    logit_var = np.asarray(logit_var, dtype=float)
    distinct = np.unique(logit_var)
    if len(distinct) > 16:
        distinct = np.geomspace(distinct.min(), distinct.max(), 33)
    sums = np.array([moe_gate_square_sum(experts, top_k, v, uniform) for v in distinct])  # (M,)
    if len(distinct) == 1:
        return np.full(logit_var.shape, sums[0])
    return np.interp(np.log(logit_var), np.log(distinct), sums)


# -- the plan of a stack ----------------------------------------------------------------------
def build_plan(setting: Setting, blocks=None) -> SublayerPlan:
    """The :class:`SublayerPlan` of ``setting`` (schemes: docs/design.md#schemes); arrays (N,), N = blocks x P.

    ``blocks``: the blocks to plan (1-based, increasing, distinct; default every block). The interpolation tables,
    the MoE gate moments and ``additive_from`` are those of the whole stack whatever is planned, so a planned step
    holds the same numbers as in the plan of every block.

    >>> plan = build_plan(Setting(scheme="pre", block="mlp", activation="relu", depth=3, width=32))
    >>> plan.kind.shape, bool(plan.norm_input.all()), plan.in_scale2.tolist(), plan.ffn_ratio
    ((3,), True, [1.0, 1.0, 1.0], 4.0)
    >>> build_plan(Setting(scheme="lns", block="mlp", depth=100, width=32), blocks=[1, 4, 100]).in_scale2.tolist()
    [1.0, 0.25, 0.01]
    """
    subs = SUBLAYER_CODES[setting.block]
    every = np.arange(1, setting.depth + 1)  # (L,) the stack's blocks: its tables cover all of them
    layers = every if blocks is None else _planned(blocks, setting.depth)  # (M,)
    block = np.repeat(layers, len(subs))  # (N,)
    kind = np.tile(np.array(subs), len(layers))
    stack = architecture.placements(setting, every)  # fields (L,): a sublayer is wired as its block
    wiring = architecture.placements(setting, block)  # fields (N,)
    in_scale2 = wiring.input_scale**2
    branch2 = setting.mask_density * wiring.branch_scale**2
    alpha = setting.alpha

    def factor(role: str, at: np.ndarray = layers) -> np.ndarray:  # the weight's variance factor per block (M,)
        return architecture.weight_variance_factor(setting, at, role)

    def per_sublayer(columns: list) -> np.ndarray:  # one column (M,) or scalar per sublayer of a block -> (N,)
        out = np.empty((len(layers), len(subs)))
        for position, column in enumerate(columns):
            out[:, position] = column
        return out.reshape(-1)  # block-major, as kind and block

    roles_in, roles_out = {LINEAR: "linear", ATTENTION: "v"}, {ATTENTION: "o"}  # else W1 (up) and W2 (down)
    alpha_in = per_sublayer([alpha * factor(roles_in.get(code, "up")) for code in subs])
    alpha_out = per_sublayer([1.0 if code == LINEAR else alpha * factor(roles_out.get(code, "down")) for code in subs])
    alpha_qk = np.repeat(alpha**2 * factor("q") * factor("k"), len(subs))
    raw = bool((~stack.norm_input).any())  # some block reads the stream itself
    stack_q_in = np.where(stack.norm_input, stack.input_scale**2, 1.0)  # (L,)
    attention = kernel = None
    if ATTENTION in subs:
        stack_tau2 = alpha**2 * factor("q", every) * factor("k", every) * stack_q_in**2  # (L,)
        tau2_max = _RAW_TAU2_MAX if raw else min(float(np.max(stack_tau2)), _TAU2_TABLE_MAX)
        attention = attention_table(setting.tokens, setting.causal, setting.head_dim, tau2_max)
    if MLP in subs or MOE in subs:
        stack_pre = alpha * factor("up", every) * stack_q_in  # (L,)
        lo, hi = (1e-8, 1e8) if raw else (float(stack_pre.min()), float(stack_pre.max()))
        kernel = kernel_table("silu" if setting.activation == "swiglu" else setting.activation, lo, hi)
    gate2 = np.ones(kind.shape)  # (N,) 1 but at MoE steps, where each router's logits are N(0, alpha f_router q_in)
    if MOE in subs:  # the sums of every block's router (interpolated over the stack's range), read at the planned ones
        router = alpha * factor("router", every) * stack_q_in  # (L,)
        sums = moe_gate_square_sums(setting.experts, setting.top_k, router, setting.uniform_gates)  # (L,)
        gate2[kind == MOE] = sums[layers - 1]
    stack_additive = _additive(stack.norm_input, stack.norm_after_add, stack.stream_scale**2, setting.alignment)
    return SublayerPlan(
        kind=kind, block=block, norm_input=wiring.norm_input, in_scale2=in_scale2, norm_branch=wiring.norm_branch,
        branch2=branch2, stream_scale2=wiring.stream_scale**2, norm_after=wiring.norm_after_add, alpha_in=alpha_in,
        alpha_out=alpha_out, alpha_qk=alpha_qk,
        activation=setting.activation, ffn_ratio=setting.resolved_ffn_width / setting.width, width=setting.width,
        rope=setting.rope, alignment=setting.alignment, attention=attention, kernel=kernel,
        gate2=gate2, gate_overlap0=1.0 / setting.experts, shared_expert=setting.shared_expert,
        depth=setting.depth, additive_from=_additive_from(every, stack_additive))


def _planned(blocks, depth: int) -> np.ndarray:
    """``blocks`` as (M,) int64 if they are increasing, distinct and within ``1..depth``; else ValueError."""
    planned = np.asarray(blocks, dtype=np.int64).reshape(-1)
    if len(planned) == 0 or planned[0] < 1 or planned[-1] > depth or np.any(np.diff(planned) <= 0):
        raise ValueError(f"blocks to plan must be increasing and distinct in 1..{depth}, got {planned.tolist()[:8]}")
    return planned
