"""Every selected score of one model on held-out batches, as the two tables of ``python -m simulate scores``.

``scores.csv`` has columns :data:`SCORE_COLUMNS` (``layer, score, value, sem, n``; blocks
1..L, and layer 0 for the model as a whole: ``loss`` and ``usefulness_fraction``);
``pairs.csv`` has :data:`PAIR_COLUMNS` (``layer, other, score, value``) for the pairwise
scores: ``angular_last``/``angular_all`` over stream indices ``0 <= layer < other <= L``,
``causal`` (skipped block, later block) and ``permutation`` (block pairs). Definitions:
:mod:`simulate.scores.definitions`, :mod:`simulate.scores.jacobian`, docs/scores.md.

>>> parse_scores("prune,jac_dev")
('prune', 'jacobian')
>>> parse_scores("all") == SCORE_GROUPS
True
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd
import torch

from simulate.scores import definitions as sd
from simulate.scores.jacobian import JACOBIAN_SCORES, jacobian_scores

__all__ = ["SCORE_GROUPS", "ROW_SCORES", "SCORE_COLUMNS", "PAIR_COLUMNS", "ScoreOptions", "parse_scores",
           "held_out_batches", "compute_scores"]

SCORE_GROUPS = ("prune", "angular", "causal", "permutation", "usefulness", "jacobian")
# The score names each group writes (scores.csv and, for pairwise ones, pairs.csv).
ROW_SCORES = {"prune": ("prune",), "angular": ("angular_last", "angular_all"), "causal": ("causal",),
              "permutation": ("permutation",), "usefulness": ("usefulness", "usefulness_fraction"),
              "jacobian": JACOBIAN_SCORES}
SCORE_COLUMNS = ["layer", "score", "value", "sem", "n"]
PAIR_COLUMNS = ["layer", "other", "score", "value"]


@dataclass(frozen=True)
class ScoreOptions:
    """How much held-out text and how many probes the scores use.

    Attributes
    ----------
    sequences, batch_size : int
        Held-out sequences (windows of the Setting's ``tokens`` bytes) and how many run at once.
    pairs : "all" or int
        Block pairs of the permutation score (:func:`simulate.scores.definitions.select_pairs`).
    jac_sequences, probes, iterations : int
        Sequences the Jacobian statistics use, Rademacher probes per block and power iterations.
    seed : int
        Seed of the Jacobian probes.
    """

    sequences: int = 64
    batch_size: int = 32
    pairs: object = "all"
    jac_sequences: int = 8
    probes: int = 4
    iterations: int = 20
    seed: int = 0


def parse_scores(text) -> tuple[str, ...]:
    """Score groups from ``'all'`` or a comma-separated list of group or score names (ValueError names the bad one)."""
    words = [w.strip() for w in (text.split(",") if isinstance(text, str) else text) if w.strip()]
    if words == ["all"]:
        return SCORE_GROUPS
    owner = {name: group for group, names in ROW_SCORES.items() for name in names}
    owner.update({group: group for group in SCORE_GROUPS})
    bad = [w for w in words if w not in owner]
    if bad or not words:
        names = ", ".join(list(SCORE_GROUPS) + [n for g in SCORE_GROUPS for n in ROW_SCORES[g] if n != g])
        raise ValueError(f"scores={bad[0] if bad else ''!r} is not allowed: 'all' or names from {names}")
    chosen = {owner[w] for w in words}
    return tuple(g for g in SCORE_GROUPS if g in chosen)


def held_out_batches(held_out: torch.Tensor, sequences: int, tokens: int, batch_size: int, device="cpu"):
    """``sequences`` windows of ``tokens + 1`` bytes evenly spaced over held-out text, in batches.

    The same windows as the trainer's fixed probe batch (:func:`simulate.training.data.probe_batch`)
    when the counts agree; inputs and next-byte targets ``(B, T)`` int64 each.
    """
    from simulate.training.data import Corpus, probe_batch

    inputs, targets = probe_batch(Corpus("held-out", held_out[:0], held_out), sequences, tokens)  # (N, T) each
    return [(inputs[i:i + batch_size].to(device), targets[i:i + batch_size].to(device))
            for i in range(0, sequences, batch_size)]


def compute_scores(stack, batches, groups=SCORE_GROUPS, options: ScoreOptions = ScoreOptions(),
                   progress=None, timings: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(scores, pairs)`` tables of the selected groups for ``stack`` on ``batches``.

    ``timings``, if given, receives the seconds each group took (for the speed report).
    """
    timings = {} if timings is None else timings
    started = time.perf_counter()
    base = sd.base_run(stack, batches)
    timings["base"] = time.perf_counter() - started
    rows, pairs = sd.loss_rows(base), []
    for group in groups:
        started = time.perf_counter()
        if group == "prune":
            rows += sd.prune_scores(stack, batches, base, progress)
        elif group == "angular":
            more, more_pairs = sd.angular_scores(base)
            rows, pairs = rows + more, pairs + more_pairs
        elif group == "causal":
            more, more_pairs = sd.causal_scores(stack, base, progress)
            rows, pairs = rows + more, pairs + more_pairs
        elif group == "permutation":
            more, more_pairs = sd.permutation_scores(stack, batches, base, options.pairs, progress)
            rows, pairs = rows + more, pairs + more_pairs
        elif group == "usefulness":
            rows += sd.usefulness_scores(stack, batches, base, progress)
        elif group == "jacobian":
            rows += _jacobian_rows(stack, base, options, progress)
        timings[group] = time.perf_counter() - started
    return (pd.DataFrame(rows, columns=SCORE_COLUMNS),
            pd.DataFrame(pairs, columns=PAIR_COLUMNS))


def _jacobian_rows(stack, base, options: ScoreOptions, progress) -> list[dict]:
    """Jacobian statistics on the first ``jac_sequences`` held-out sequences."""
    inputs = []
    for layer in range(base.depth):
        stream = torch.cat([xs[layer] for xs in base.streams], 0)[:options.jac_sequences]  # (B_jac, T, d)
        inputs.append(stream)
    return jacobian_scores(lambda x, layer: stack.block(x, layer, layer), inputs, base.depth,
                           probes=options.probes, iterations=options.iterations, seed=options.seed,
                           progress=progress)
