"""The T x T token covariance recursion through a whole stack: step by step, geometric strides, hand-over.

Derived here (numerics, docs/derivations.md#token-covariance-recursion and docs/derivations.md#stride-tail;
the per-sublayer maps are those of :mod:`theory.meanfield.covariance`).
:func:`stream_recursion` runs the first :func:`exact_blocks` blocks one by one
(:func:`matrix_recursion`); an additive plan (norm on every input, no norm after the sum, no
alignment) continues by geometric strides (:func:`stride_tail`), any other hands over to the
pair recursion :func:`theory.meanfield.pair_recursion.token_recursion`. The result is one
:class:`StreamCurves`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.meanfield.covariance import RecursionContext, recursion_context, run_block, tangent_pass, token_cosine
from theory.meanfield.finite_width import ATTENTION_SEED, attention_nodes
from theory.meanfield.gaussian import not_a_knot_spline
from theory.meanfield.pair_recursion import token_recursion
from theory.meanfield.plan import SublayerPlan

__all__ = ["StreamCurves", "MatrixRun", "matrix_recursion", "exact_blocks", "stride_schedule", "stride_tail",
           "stream_recursion", "recursion_blocks", "MATRIX_BUDGET", "MAX_MATRIX_STEPS", "STRIDE_START", "STRIDE_EPS"]

MATRIX_BUDGET = 5e7  # T^2 x steps of the matrix recursion before handing over to the pair recursion
MAX_MATRIX_STEPS = 512
STRIDE_START = 64  # blocks run one by one before an additive plan's strides (docs/derivations.md#stride-tail)
STRIDE_EPS = 0.1  # relative stride of the additive tail (stride_tail; docs/derivations.md#stride-tail)


@dataclass(frozen=True)
class StreamCurves:
    """Result of :func:`stream_recursion`: per-step arrays (N,), per-block ``angular`` (M,), how it ran.

    Over the plan's steps and blocks (every block, or those planned: :func:`recursion_blocks`).
    ``v, c`` mean diagonal / off-diagonal of ``K`` after each sublayer, ``tcos`` mean
    off-diagonal of ``R``, ``branch`` branch variance, ``jac2`` block-tangent ratio minus one,
    ``e2e2`` end-to-end tangent ratio over the step (in a planned block after a gap: over the blocks since the
    previous planned one), ``cos`` mean per-token cosine before/after the sublayer.
    """

    v: np.ndarray  # (N,)
    c: np.ndarray  # (N,)
    tcos: np.ndarray  # (N,)
    branch: np.ndarray  # (N,)
    jac2: np.ndarray  # (N,)
    e2e2: np.ndarray  # (N,)
    cos: np.ndarray  # (N,)
    angular: np.ndarray  # (M,)
    matrix_blocks: int  # blocks run step by step
    mode: str  # "matrix", "stride" or "pairs"


_STEP_KEYS = ("v", "c", "tcos", "branch", "jac2", "e2e2", "cos")


@dataclass(frozen=True)
class MatrixRun:
    """Blocks run sublayer by sublayer (:func:`matrix_recursion`).

    Per-step arrays (N,) over the plan's steps (NaN after the last step run): ``v, c`` (mean diagonal / off-diagonal
    of ``K``), ``tcos`` (mean off-diagonal of ``R``), ``branch``, ``jac2`` (block tangent from
    ``I``: ``tr C_after/tr C_before - 1``), ``e2e2`` (the same ratio for the tangent carried
    from the input), ``cos`` (mean per-token cosine before/after the sublayer); ``angular``
    (M,) per planned block; the last states ``K``, ``C`` (T, T).
    """

    v: np.ndarray
    c: np.ndarray
    tcos: np.ndarray
    branch: np.ndarray
    jac2: np.ndarray
    e2e2: np.ndarray
    cos: np.ndarray
    angular: np.ndarray
    K: np.ndarray
    C: np.ndarray


def matrix_recursion(plan: SublayerPlan, K0: np.ndarray, blocks: int, ctx: RecursionContext) -> MatrixRun:
    """Run blocks ``1..blocks`` (all planned) sublayer by sublayer from ``K0`` (T x T).

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="linear", depth=3, width=16, tokens=2))
    >>> run = matrix_recursion(plan, np.eye(2), 2, recursion_context(plan, 2, True, 4))
    >>> run.v.tolist(), run.K.tolist()  # block 3 not run: NaN
    ([2.0, 3.0, nan], [[3.0, 0.0], [0.0, 3.0]])
    """
    tokens = len(K0)
    out = {key: np.full(plan.size, np.nan) for key in _STEP_KEYS}
    out["angular"] = np.full(len(plan.blocks), np.nan)
    off = ~np.eye(tokens, dtype=bool)
    tangents = plan.carries_tangents
    K, C, eye = np.array(K0, dtype=float), np.eye(tokens), np.eye(tokens)
    for block in range(1, blocks + 1):
        K, pair, steps = run_block(plan, block, K, [eye, C] if tangents else [], ctx)
        C = pair[1] if tangents else C
        for n, step in zip(plan.steps(block), steps):
            Kn = step.K
            out["v"][n] = np.mean(np.diag(Kn))
            out["branch"][n] = step.branch
            out["cos"][n] = np.mean(step.cos_tok)
            if tangents:
                out["jac2"][n] = step.traces_after[0] / step.traces[0] - 1.0
                out["e2e2"][n] = step.traces_after[1] / step.traces[1]
            out["c"][n] = Kn[off].mean() if tokens > 1 else 0.0
            out["tcos"][n] = token_cosine(Kn, ctx)
        cos = np.prod([step.cos_tok for step in steps], axis=0)
        out["angular"][block - 1] = np.mean(np.arccos(np.clip(cos, -1, 1)) / np.pi)  # blocks 1..block are planned
        if not np.all(np.isfinite(np.diag(K))):
            last = plan.steps(block).stop
            out["v"][last:] = out["branch"][last:] = np.inf
            break
    return MatrixRun(**out, K=K, C=C)


def exact_blocks(plan: SublayerPlan, tokens: int) -> int:
    """Blocks run step by step (at least one): ``min(L, 512/P, 5e7/(P T^2))``, or fewer where the stride tail
    takes over: from block :data:`STRIDE_START` on, or after the last non-additive block, when every later block is
    additive (norm on every input, no norm after the sum, no alignment).

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> exact_blocks(build_plan(Setting(scheme="post", depth=1000, width=32, heads=4)), 64)  # 512 sublayers / 2
    256
    >>> exact_blocks(build_plan(Setting(scheme="pre", depth=1000, width=32, heads=4)), 64)  # strides from block 64
    64
    """
    period = plan.period
    steps = min(plan.depth * period, MAX_MATRIX_STEPS, int(MATRIX_BUDGET / max(tokens, 1) ** 2))
    cap = max(1, steps // period)
    if not plan.carries_tangents:  # no tangents to stride: the pair recursion takes over
        return cap
    return min(cap, max(STRIDE_START, plan.additive_from - 1))


def stream_recursion(plan: SublayerPlan, v0: float, c0: float, tokens: int, causal: bool, head_dim: int,
                     matrix_blocks: int | None = None, eps: float | None = None,
                     width_law: str = "mean-field", law_seed: int = ATTENTION_SEED) -> StreamCurves:
    """The matrix recursion over all blocks: step by step, then (additive plans) geometric strides.

    ``width_law``: ``mean-field`` or ``finite-width`` (:mod:`theory.meanfield.finite_width`; ``law_seed`` seeds its
    attention average, :data:`theory.meanfield.finite_width.ATTENTION_SEED` by default); the pair
    recursion that takes over the tails of non-additive plans is mean-field.

    The first :func:`exact_blocks` blocks run one by one (:func:`matrix_recursion`). After that
    (relative stride ``eps``, :data:`STRIDE_EPS` by default; from block :data:`STRIDE_START`
    on when the rest is additive),
    an additive plan (norm on every input, no norm after the sum, no alignment: Pre-LN, LNS,
    scaled inits, LayerScale, sandwich) continues with :func:`stride_tail`; other plans hand
    over to the pair recursion :func:`theory.meanfield.pair_recursion.token_recursion` with
    ``(v, c) = (mean_t K_tt, mean_{t != t'} K_tt')`` (an approximation: token positions forgotten).
    Returns :class:`StreamCurves`: per-step arrays ``v, c, tcos, branch, jac2, e2e2, cos`` (N,),
    per-block ``angular`` (M,), ``matrix_blocks`` (blocks run step by step) and ``mode``
    ("matrix", "stride" or "pairs").

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="linear", depth=3, width=16, tokens=2))
    >>> curves = stream_recursion(plan, 1.0, 0.0, 2, True, 4)
    >>> curves.v.tolist(), curves.mode  # v_l = 1 + l (Pre-LN linear, alpha = 1)
    ([2.0, 3.0, 4.0], 'matrix')
    """
    ctx = recursion_context(plan, tokens, causal, head_dim, width_law, law_seed)
    period = plan.period
    blocks, eps = _tail_strides(plan, tokens, matrix_blocks, eps)
    K0 = np.full((tokens, tokens), float(c0))
    np.fill_diagonal(K0, v0)
    run = matrix_recursion(plan, K0, blocks, ctx)
    out = {key: getattr(run, key) for key in _STEP_KEYS + ("angular",)}  # the run's arrays, filled on below
    stop = blocks * period
    if blocks >= plan.depth or not np.isfinite(out["v"][stop - 1]):
        return _curves(out, blocks, "matrix")
    if eps is not None:
        states, nodes = stride_tail(plan, blocks, run.K, run.C, ctx, eps)
        breaks = () if ctx.finite is None else ctx.finite.nodes[ctx.finite.nodes > blocks + 1]
        _fill_tail(plan, out, blocks, states, nodes, period, breaks)
        return _curves(out, blocks, "stride")
    if plan.size != plan.depth * period:
        raise ValueError(f"the pair recursion runs every block: plan all {plan.depth} blocks, not {len(plan.blocks)}")
    pairs = token_recursion(plan, float(out["v"][stop - 1]), float(out["c"][stop - 1]), start=stop)
    for key in ("v", "c", "branch", "jac2", "cos"):
        out[key][stop:] = pairs[key][stop:]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["tcos"][stop:] = pairs["c"][stop:] / pairs["v"][stop:]
    out["e2e2"][stop:] = 1.0 + pairs["jac2"][stop:]
    cos = np.clip(out["cos"][stop:].reshape(-1, period).prod(axis=1), -1.0, 1.0)
    out["angular"][blocks:] = np.arccos(cos) / np.pi
    return _curves(out, blocks, "pairs")


def _tail_strides(plan: SublayerPlan, tokens: int, matrix_blocks: int | None = None,
                  eps: float | None = None) -> tuple[int, float | None]:
    """``(blocks run one by one, relative stride of the tail)`` for :func:`stream_recursion`; the stride is None
    where no stride tail follows (every block run, or a tail that is not additive: the pair recursion)."""
    depth = plan.depth
    blocks = min(depth, exact_blocks(plan, tokens) if matrix_blocks is None else max(1, matrix_blocks))
    if blocks >= depth or not plan.carries_tangents or plan.additive_from > blocks + 1:
        return blocks, None
    return blocks, STRIDE_EPS if eps is None else eps


def recursion_blocks(head: SublayerPlan, tokens: int, width_law: str, written) -> np.ndarray | None:
    """The blocks :func:`stream_recursion` reads when only the blocks in ``written`` are wanted: those run one by
    one, each stride's first, middle and last blocks (:func:`stride_schedule`), the stack's last block and
    ``written`` (0, the input, is dropped); None where it reads every block (no stride tail).

    ``head``: a plan of the stack's first ``MAX_MATRIX_STEPS`` blocks or more (their wiring, ``depth`` and
    ``additive_from`` are read there). A plan of the blocks returned gives the numbers of the plan of every block at
    ``written``, to rounding (``tests/theory/test_predict.py``).

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> head = build_plan(Setting(scheme="pre", depth=10**6, width=32, heads=4), blocks=np.arange(1, 513))
    >>> blocks = recursion_blocks(head, 8, "mean-field", [0, 10**6])
    >>> blocks[:2].tolist(), int(blocks[63]), len(blocks) < 500, int(blocks[-1])
    ([1, 2], 64, True, 1000000)
    """
    blocks, eps = _tail_strides(head, tokens)
    if eps is None:
        return None
    landings = attention_nodes(head.depth) if width_law == "finite-width" else ()
    run = [head.depth]
    for b, h in stride_schedule(head.depth, blocks, eps, landings):
        run += [b + 1, b + 1 + (h - 1) // 2, b + h]  # the stride's first, middle and last blocks
    written = np.asarray(written, dtype=np.int64)
    return np.unique(np.concatenate([np.arange(1, blocks + 1), run, written[written >= 1]]))


def stride_schedule(depth: int, done: int, eps: float, landings=()) -> list[tuple[int, int]]:
    """The strides of :func:`stride_tail`, ``(b, h)``: from the state after block ``b`` over ``h`` blocks.

    ``h`` is the odd number at or just above ``max(1, floor(eps b))`` (the middle block ``b + 1 + (h - 1)/2``
    is then the stride's centre, docs/derivations.md#stride-tail), the last block runs alone, and no stride passes a
    block in ``landings`` (the finite-width law's attention nodes,
    :func:`theory.meanfield.finite_width.attention_nodes`): a stride ends just before one, shortened to an odd length.

    >>> stride_schedule(100, 40, 0.06)[:3], stride_schedule(100, 40, 0.06)[-1]
    ([(40, 3), (43, 3), (46, 3)], (99, 1))
    >>> stride_schedule(20, 10, 0.5, landings=[16])  # block 16 runs from the exact state after block 15
    [(10, 5), (15, 3), (18, 1), (19, 1)]
    """
    landings = [int(node) for node in landings if node > done + 1]
    schedule, b = [], done
    while b < depth:
        while landings and landings[0] <= b + 1:
            landings.pop(0)
        most = max(1, depth - 1 - b)  # the last block is run from the exact state
        if landings:  # the next attention node is run from an exact state: its correction is drawn there
            most = min(most, landings[0] - 1 - b)
        h = min(max(1, int(eps * b)) | 1, most)  # odd: the middle block is the stride's centre
        h -= 1 - h % 2
        schedule.append((b, h))
        b += h
    return schedule


def _curves(out: dict, matrix_blocks: int, mode: str) -> StreamCurves:
    return StreamCurves(**{key: out[key] for key in _STEP_KEYS + ("angular",)}, matrix_blocks=matrix_blocks, mode=mode)


def stride_tail(plan: SublayerPlan, done: int, K: np.ndarray, C: np.ndarray, ctx: RecursionContext,
                eps: float = STRIDE_EPS):
    """Blocks ``done+1..L`` of an additive plan by geometric strides of about ``eps b`` blocks, odd
    (:func:`stride_schedule`; the plan holds at least the blocks :func:`recursion_blocks` names).

    Derived here (numerics, docs/derivations.md#stride-tail).
    For additive steps ``K_{b+1} = K_b + F_b(K_b)`` with ``F`` slowly varying once ``b`` is large, a stride of
    ``h = 2c + 1`` blocks sums the increments of its first, middle and last blocks as a quadratic (the midpoint rule
    ``K_b + h F_mid`` with its curvature term), and carries the tangent ``C`` through ``(I + T_mid)^h`` (binomial
    expansion to third order) with the same curvature term (:func:`_stride`). Per-block outputs are evaluated at
    the strides' first blocks (from the state before the block); :func:`_fill_tail` interpolates between them.
    Under the finite-width law a stride ends just before each attention node
    (:func:`theory.meanfield.finite_width.attention_nodes`), so that the node's correction is drawn from an exact
    state, as in the full loop. Error against the full loop (llama presets, T = 8 and 64, four inits, both width
    laws, strides from block 64 on, depth 800) at ``eps = 0.1``: at most 2.3e-4 relative, on the end-to-end gain
    of a small input (tested with tolerance 5e-4).
    Returns node lists: ``states`` of ``(b, v, tcos, tr C/T)`` (state after block ``b``) and
    ``blocks`` of ``(b, branch (P,), jac2 (P,), angular)`` of block ``b``.

    >>> from theory.meanfield.plan import build_plan
    >>> from theory.setting import Setting
    >>> plan = build_plan(Setting(scheme="pre", block="linear", depth=100, width=16, tokens=2))
    >>> states, blocks = stride_tail(plan, 40, 41 * np.eye(2), np.eye(2), recursion_context(plan, 2, True, 4), 0.1)
    >>> [(b, round(v, 9)) for b, v, _, _ in states[:3]], states[-1][:2]  # odd strides of about 0.1 b blocks
    ([(40, 41.0), (45, 46.0), (50, 51.0)], (100, 101.0))
    """
    tokens = len(K)

    def state_row(b, K, C):
        return b, float(np.mean(np.diag(K))), token_cosine(K, ctx), float(np.trace(C)) / tokens

    def block_row(b, steps):
        jac2 = [st.traces_after[0] / st.traces[0] - 1.0 for st in steps]
        cos = np.prod([st.cos_tok for st in steps], axis=0)
        return (b, [st.branch for st in steps], jac2, float(np.mean(np.arccos(np.clip(cos, -1, 1)) / np.pi)))

    states, blocks = [state_row(done, K, C)], []
    end = done
    eye = np.eye(tokens)
    for b, h in stride_schedule(plan.depth, done, eps, () if ctx.finite is None else ctx.finite.nodes):
        K1, (_, C1), steps = run_block(plan, b + 1, K, [eye, C], ctx)
        blocks.append(block_row(b + 1, steps))
        if h == 1:
            K, C = K1, C1
        else:
            K, C = _stride(plan, b, h, K, C, K1, C1, ctx)
        end = b + h
        if not np.all(np.isfinite(np.diag(K))):
            break
        states.append(state_row(end, K, C))
    if blocks[-1][0] < end and np.all(np.isfinite(np.diag(K))):  # last block from the final state (O(1/L))
        blocks.append(block_row(end, run_block(plan, end, K, [eye], ctx)[2]))
    return states, blocks


def _stride(plan: SublayerPlan, b: int, h: int, K: np.ndarray, C: np.ndarray, K1: np.ndarray, C1: np.ndarray,
            ctx: RecursionContext) -> tuple[np.ndarray, np.ndarray]:
    """The state ``K`` and tangent ``C`` (T, T) after blocks ``b+1..b+h`` (``h >= 3``, odd) from those after block
    ``b``, given the first block's ``K1, C1`` (run from the exact state).

    The increments along the stride, ``F_j = F_{b+1+k}`` at ``k = 0, c, 2c`` (``c = (h - 1)/2``: the first, middle
    and last blocks; the last two from predicted states), fit a quadratic in ``k`` whose sum over ``k = 0..h-1`` is
    ``h F_mid + S (F_first + F_last - 2 F_mid)/(2 c^2)``, ``S = sum (k - c)^2 = (h^3 - h)/12``; the tangent maps
    ``T_k`` likewise: to first order in their curvature, and to lowest order in ``T`` in that term, the product
    ``prod (I + T_k)`` is ``(I + T_mid)^h + S (T_first + T_last - 2 T_mid)/(2 c^2)`` (the commutator of their
    drift is negligible).
    docs/derivations.md#stride-tail.
    """
    c = (h - 1) // 2
    first = K1 - K
    K_mid = K + c * first  # the state before the middle block b + 1 + c
    K2, (BC,), mid_steps = run_block(plan, b + 1 + c, K_mid, [C], ctx)
    middle = K2 - K_mid
    K_last = K + 2 * c * middle  # the state before the last block b + h
    K3, (LC,), _ = run_block(plan, b + h, K_last, [C], ctx)
    spread = (h**3 - h) / 12 / (2 * c**2)
    K_next = K + h * middle + spread * (first + (K3 - K_last) - 2 * middle)
    TC = BC - C
    T2C = tangent_pass(plan, b + 1 + c, mid_steps, TC, ctx) - TC
    T3C = tangent_pass(plan, b + 1 + c, mid_steps, T2C, ctx) - T2C
    power = C + h * TC + h * (h - 1) / 2 * T2C + h * (h - 1) * (h - 2) / 6 * T3C  # (I + T_mid)^h C, third order
    return K_next, power + spread * ((C1 - C) + (LC - C) - 2 * TC)


def _fill_tail(plan: SublayerPlan, out: dict, start_block: int, states: list, blocks: list, period: int,
               breaks=()) -> None:
    """Fill the per-step arrays of blocks ``start_block+1..L`` by cubic splines through the nodes in ``log b``
    (:func:`_spline`): variances, gains and angles in ``log`` (a power law in ``b`` is a line), ``token_cos``
    and the tangent ratios as they are. The per-block outputs jump at ``breaks`` (the blocks where the finite-width
    law draws a new attention correction): their splines run between breaks, each on its own nodes."""
    planned = plan.blocks
    blocks_after = planned[start_block:]  # (M - start_block,) blocks 1..start_block are all planned
    log_b = np.log(blocks_after.astype(float))
    sb, sv, stc, se = (np.array(col, dtype=float) for col in zip(*states))  # (nodes,) each
    sb = np.log(sb)
    node_blocks = np.array([row[0] for row in blocks])  # (nodes,)
    edges = np.concatenate([[start_block + 1], np.asarray(breaks, dtype=np.int64), [plan.depth + 1]])  # [a, b) each
    block_cuts = np.searchsorted(blocks_after, edges)  # blocks and nodes are sorted: each segment is a slice
    node_cuts = np.searchsorted(node_blocks, edges)

    def per_block(values: np.ndarray, log: bool = False) -> np.ndarray:  # (nodes,) -> (M - start_block,)
        fitted = np.full(len(log_b), np.nan)  # NaN where no node was run (the strides stopped at a blow-up)
        for k in range(len(edges) - 1):
            at, nodes = slice(block_cuts[k], block_cuts[k + 1]), slice(node_cuts[k], node_cuts[k + 1])
            if at.start < at.stop and nodes.start < nodes.stop:
                fitted[at] = _spline(log_b[at], np.log(node_blocks[nodes].astype(float)), values[nodes], log)
        return fitted

    branch = np.array([row[1] for row in blocks], dtype=float)  # (nodes, P)
    jac2 = np.array([row[2] for row in blocks], dtype=float)  # (nodes, P)
    v_after = _spline(log_b, sb, sv, log=True)
    log_e = _spline(np.concatenate([[sb[0]], log_b]), sb, np.log(se))
    first = start_block * period
    for p in range(period):
        idx = np.arange(first + p, plan.size, period)
        out["branch"][idx] = per_block(branch[:, p], log=True)
        out["jac2"][idx] = np.expm1(per_block(np.log1p(jac2[:, p])))
        out["e2e2"][idx] = np.exp(np.diff(log_e)) if p == period - 1 else 1.0
    later = np.zeros(len(log_b))
    for p in range(period - 1, -1, -1):  # v after sublayer p = v after the block - later branches
        idx = np.arange(first + p, plan.size, period)
        out["v"][idx] = v_after - later
        later = later + out["branch"][idx]
        out["tcos"][idx] = _spline(log_b, sb, stc)
        out["c"][idx] = out["tcos"][idx] * out["v"][idx]
        out["cos"][idx] = np.nan
    out["angular"][start_block:] = per_block(np.array([row[3] for row in blocks]), log=True)


def _spline(x: np.ndarray, nodes: np.ndarray, values: np.ndarray, log: bool = False) -> np.ndarray:
    """``values`` (nodes,) at ``x`` (M,) by the cubic spline through the nodes (:func:`not_a_knot_spline`, extended past
    the last node by its cubic; fewer than four nodes: linear, held at the ends); ``log``: of ``log values`` where
    every value is positive."""
    positive = log and bool(np.all(values > 0))
    y = np.log(values) if positive else values
    if len(nodes) < 4 or not np.all(np.isfinite(y)):
        fitted = np.interp(x, nodes, y)
    else:
        fitted = not_a_knot_spline(nodes, y, x)
    return np.exp(fitted) if positive else fitted
