"""Layer-effectiveness scores of a residual LM on held-out text (P1 Fig. 1, ShortGPT, P2 Sec. 5).

Every score is a function of a :class:`~simulate.scores.stack.LayerStack` and held-out
batches, defined in docs/scores.md (after docs/trained.md's layer-effectiveness scores):

``prune``        P1 Fig. 1: loss with block l deleted (its input passed on) minus the base
                 loss; the later blocks keep their own position factors (LNS 1/sqrt(l)).
``angular_last``, ``angular_all``
                 ShortGPT block influence as P1 uses it: ``arccos(cos(x_l, x_m))/pi`` of the
                 last token (P1's code) and the mean over all tokens; per block ``m = l + 1``
                 here, every pair ``l < m`` in pairs.csv.
``causal``       P2: skip block s; ``C[s, l] = E||D'_l - D_l|| / E||D_l||`` with ``D_l = x_l -
                 x_{l-1}`` block l's increment (E: token mean); the score of s is the mean of
                 ``C[s, l]`` over ``l > s`` only (none for the last block; an l with no
                 increment at all, ``0/0``, is left out).
``permutation``  P2: ``|L(swap l1, l2) - L| / L`` with all parameters of the two blocks swapped
                 and position factors left in place; per block the mean over its pairs.
``usefulness``   P2: ``L_lin / L`` with block l replaced by the least-squares affine map from
                 its input to its output over all held-out tokens; significant above 1.1;
                 ``usefulness_fraction`` (layer 0) is the share of significant blocks.
``loss``         the base held-out loss (layer 0).

Uncertainty is over held-out sequences (one token-mean per sequence): each score is a
mean of per-sequence pseudo-values (ratios by the delta method, :func:`ratio_pseudo`),
whose standard error is the sem written to scores.csv.

>>> import numpy as np
>>> num, den = np.array([1.0, 3.0]), np.array([2.0, 2.0])
>>> ratio_pseudo(num, den).tolist()  # mean = 4/4 = 1
[0.5, 1.5]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import torch
from scipy import stats as scipy_stats
from tqdm.auto import tqdm

from simulate.engine import angular, summarise
from simulate.scores.stack import LayerStack, run_from, streams
from theory.constraints import Choice, Integer

__all__ = ["SIGNIFICANCE_RATIO", "PAIRS", "BaseRun", "ratio_pseudo", "score_row", "base_run", "loss_rows",
           "prune_scores",
           "angular_scores", "causal_scores", "permutation_scores", "select_pairs", "usefulness_scores"]

SIGNIFICANCE_RATIO = 1.1  # P2: a block is significant when L_lin / L_base exceeds this
PAIRS = Choice("all") | Integer(1)  # the permutation score's pairs: all, or those with l2 - l1 <= K


@dataclass
class BaseRun:
    """The unmodified model on the held-out batches.

    Attributes
    ----------
    streams : list of list of Tensor
        Per batch, ``[x_0, ..., x_L]`` each ``(B, T, d)``.
    losses : ndarray
        Per-sequence token-mean loss over all batches, ``(N,)``.
    """

    streams: list
    losses: np.ndarray

    @property
    def depth(self) -> int:
        return len(self.streams[0]) - 1


def ratio_pseudo(num, den) -> np.ndarray:
    """Per-sequence pseudo-values of ``mean(num)/mean(den)`` (delta method): their mean is the ratio.

    ``R + (num_s - R den_s)/mean(den)``; their standard error over sequences is the
    delta-method standard error of the ratio of means.
    """
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if den.mean() == 0:  # 0/0: e.g. the causal score on an identity block (no increment to compare with)
        return np.full(num.shape, np.nan)
    ratio = num.mean() / den.mean()
    return ratio + (num - ratio * den) / den.mean()  # (N,)


def score_row(layer: int, score: str, pseudo) -> dict:
    """One row of scores.csv from per-sequence (pseudo-)values: mean, sem, n."""
    mean, sem, _, _, n = summarise(np.asarray(pseudo, dtype=float))
    return {"layer": int(layer), "score": score, "value": mean, "sem": sem, "n": n}


def _bar(total: int, desc: str, progress):
    return tqdm(total=total, desc=desc, unit="layer", disable=None if progress is None else not progress,
                leave=False)


def _losses(stack: LayerStack, x: torch.Tensor, targets: torch.Tensor) -> np.ndarray:
    return stack.sequence_loss(x, targets).double().cpu().numpy()  # (B,)


def base_run(stack: LayerStack, batches) -> BaseRun:
    """Streams and per-sequence losses of the unmodified model (no gradients)."""
    with torch.inference_mode():
        kept, losses = [], []
        for inputs, targets in batches:
            xs = streams(stack, inputs)
            kept.append(xs)
            losses.append(_losses(stack, xs[-1], targets))
    return BaseRun(kept, np.concatenate(losses))


def loss_rows(base: BaseRun) -> list[dict]:
    """``loss`` at layer 0: the base held-out loss (nats per token)."""
    return [score_row(0, "loss", base.losses)]


def _modified_losses(stack, batches, base, start, **changes) -> np.ndarray:
    out = []
    for (inputs, targets), xs in zip(batches, base.streams):
        out.append(_losses(stack, run_from(stack, xs[start - 1], start, **changes), targets))
    return np.concatenate(out)  # (N,)


def prune_scores(stack: LayerStack, batches, base: BaseRun, progress=None) -> list[dict]:
    """``prune`` per block: loss without the block minus the base loss (paired per sequence)."""
    rows = []
    skip = lambda x: x  # noqa: E731 - the deleted block passes its input on
    with torch.inference_mode(), _bar(base.depth, "prune", progress) as bar:
        for layer in range(1, base.depth + 1):
            pruned = _modified_losses(stack, batches, base, layer, replace={layer: skip})
            rows.append(score_row(layer, "prune", pruned - base.losses))
            bar.update()
    return rows


def _angular_pair(a: torch.Tensor, b: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(last token, all tokens) angular distance per sequence: (B, T, d) x2 -> (B,), (B,)."""
    last = angular(a[:, -1:, :], b[:, -1:, :])  # (B,)
    return last.cpu().numpy(), angular(a, b).cpu().numpy()


def angular_scores(base: BaseRun) -> tuple[list[dict], list[dict]]:
    """Per block ``d(x_{l-1}, x_l)`` (scores) and every stream pair ``d(x_l, x_m)``, ``l < m`` (pairs)."""
    rows, pairs = [], []
    depth = base.depth
    with torch.inference_mode():
        for first, second in combinations(range(depth + 1), 2):
            values = [_angular_pair(xs[first], xs[second]) for xs in base.streams]
            last = np.concatenate([v[0] for v in values])  # (N,)
            every = np.concatenate([v[1] for v in values])  # (N,)
            pairs += [{"layer": first, "other": second, "score": "angular_last", "value": float(last.mean())},
                      {"layer": first, "other": second, "score": "angular_all", "value": float(every.mean())}]
            if second == first + 1:
                rows += [score_row(second, "angular_last", last), score_row(second, "angular_all", every)]
    order = {"angular_last": 0, "angular_all": 1}
    rows.sort(key=lambda r: (order[r["score"]], r["layer"]))
    return rows, pairs


def _token_mean_norm(x: torch.Tensor) -> np.ndarray:
    """Mean over tokens of the feature norm: (B, T, d) -> (B,)."""
    return torch.linalg.vector_norm(x.double(), dim=-1).mean(-1).cpu().numpy()  # (B,)


def causal_scores(stack: LayerStack, base: BaseRun, progress=None) -> tuple[list[dict], list[dict]]:
    """P2's causal score per skipped block s and ``C[s, l]`` for every ``l > s`` (pairs)."""
    depth = base.depth
    rows, pairs = [], []
    skip = lambda x: x  # noqa: E731
    with torch.inference_mode(), _bar(depth, "causal", progress) as bar:
        for s in range(1, depth + 1):
            num = {l: [] for l in range(s + 1, depth + 1)}
            den = {l: [] for l in range(s + 1, depth + 1)}
            for xs in base.streams:
                changed = run_from(stack, xs[s - 1], s, replace={s: skip}, keep=True)  # x'_{s-1} .. x'_L
                for l in range(s + 1, depth + 1):
                    step, step_changed = xs[l] - xs[l - 1], changed[l - s + 1] - changed[l - s]  # (B, T, d)
                    num[l].append(_token_mean_norm(step_changed - step))
                    den[l].append(_token_mean_norm(step))
            pseudo = []
            for l in range(s + 1, depth + 1):
                values = ratio_pseudo(np.concatenate(num[l]), np.concatenate(den[l]))  # (N,)
                pairs.append({"layer": s, "other": l, "score": "causal", "value": float(values.mean())})
                pseudo.append(values)
            defined = [values for values in pseudo if np.isfinite(values).all()]  # l with an increment
            if defined:
                rows.append(score_row(s, "causal", np.mean(defined, axis=0)))  # mean over l > s, per sequence
            else:
                rows.append({"layer": s, "score": "causal", "value": math.nan, "sem": math.nan, "n": 0})
            bar.update()
    return rows, pairs


def select_pairs(depth: int, pairs="all") -> list[tuple[int, int]]:
    """Block pairs ``l1 < l2`` to permute: ``"all"`` or an int K (only ``l2 - l1 <= K``).

    >>> select_pairs(3), select_pairs(3, 1)
    ([(1, 2), (1, 3), (2, 3)], [(1, 2), (2, 3)])
    """
    every = list(combinations(range(1, depth + 1), 2))
    if pairs == "all":
        return every
    PAIRS.check("pairs", pairs)
    return [(a, b) for a, b in every if b - a <= pairs]


def permutation_scores(stack: LayerStack, batches, base: BaseRun, pairs="all",
                       progress=None) -> tuple[list[dict], list[dict]]:
    """P2's permutation score of every selected pair (pairs.csv) and its mean over a block's pairs."""
    depth = base.depth
    chosen = select_pairs(depth, pairs)
    signed: dict[tuple[int, int], np.ndarray] = {}
    with torch.inference_mode(), tqdm(total=len(chosen), desc="permutation", unit="pair", leave=False,
                                      disable=None if progress is None else not progress) as bar:
        for first, second in chosen:
            order = list(range(1, depth + 1))
            order[first - 1], order[second - 1] = second, first
            swapped = _modified_losses(stack, batches, base, first, params=order)
            signed[(first, second)] = ratio_pseudo(swapped - base.losses, base.losses)  # (N,)
            bar.update()
    pair_rows = [{"layer": a, "other": b, "score": "permutation", "value": float(abs(v.mean()))}
                 for (a, b), v in signed.items()]
    rows = []
    for layer in range(1, depth + 1):
        mine = [np.sign(v.mean()) * v for (a, b), v in signed.items() if layer in (a, b)]  # pseudo-values of |r|
        rows.append(score_row(layer, "permutation", np.mean(mine, axis=0)) if mine else
                    {"layer": layer, "score": "permutation", "value": math.nan, "sem": math.nan, "n": 0})
    return rows, pair_rows


def _affine_fit(inputs, outputs) -> torch.Tensor:
    """Least squares ``[x, 1] W = y`` over every token: lists of (B, T, d) -> W (d + 1, d), float64."""
    width = inputs[0].shape[-1]
    gram = torch.zeros(width + 1, width + 1, dtype=torch.float64)
    cross = torch.zeros(width + 1, width, dtype=torch.float64)
    for x, y in zip(inputs, outputs):
        flat = x.reshape(-1, width).double().cpu()  # (B T, d)
        design = torch.cat([flat, torch.ones(flat.shape[0], 1, dtype=torch.float64)], 1)  # (B T, d + 1)
        gram += design.T @ design
        cross += design.T @ y.reshape(-1, width).double().cpu()
    return torch.linalg.lstsq(gram, cross, driver="gelsd").solution  # (d + 1, d)


def usefulness_scores(stack: LayerStack, batches, base: BaseRun, progress=None) -> list[dict]:
    """P2's usefulness ``L_lin / L`` per block and the fraction of significant blocks (layer 0)."""
    depth = base.depth
    rows = []
    with torch.inference_mode(), _bar(depth, "usefulness", progress) as bar:
        for layer in range(1, depth + 1):
            weights = _affine_fit([xs[layer - 1] for xs in base.streams], [xs[layer] for xs in base.streams])

            def affine(x, w=weights):
                design = x.double().cpu()  # (B, T, d)
                return (design @ w[:-1] + w[-1]).to(device=x.device, dtype=x.dtype)  # (B, T, d)

            replaced = _modified_losses(stack, batches, base, layer, replace={layer: affine})
            rows.append(score_row(layer, "usefulness", ratio_pseudo(replaced, base.losses)))
            bar.update()
    ratio = np.array([r["value"] for r in rows])
    sem = np.array([r["sem"] for r in rows])
    # chance that each block's true ratio exceeds the threshold, given its estimate and sem
    chance = np.where(sem > 0, scipy_stats.norm.cdf((ratio - SIGNIFICANCE_RATIO) / np.where(sem > 0, sem, 1.0)),
                      (ratio > SIGNIFICANCE_RATIO).astype(float))
    fraction_sem = float(np.sqrt(np.sum(chance * (1 - chance)))) / depth
    rows.append({"layer": 0, "score": "usefulness_fraction", "value": float(np.mean(ratio > SIGNIFICANCE_RATIO)),
                 "sem": fraction_sem, "n": depth})
    return rows
