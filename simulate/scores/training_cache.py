"""Tiny trainings kept in the workbench cache, for figures, notebooks and ``verify --trained``.

:func:`cached_training` trains a Setting with :class:`simulate.training.loop.Trainer` into
``$DEPTH_WORKBENCH_CACHE/train/<key>`` once; the key is the run's
(:func:`simulate.training.identity.run_key`: the Setting, the training options, the trainer's
code version, the corpus digest, Python and torch), so the same request finds the same run
and a change to any of them trains again. A run is trained in a temporary directory beside
its entry and renamed into place when complete, so a reader never sees half a run.
:func:`cached_scores` keeps scores in ``$DEPTH_WORKBENCH_CACHE/scores/<key>`` the same way
(:func:`simulate.scores.runs.scores_key`).

:data:`TINY` is the tiny family the quick figures and the tests use; :func:`claim_runs`
lists the runs that test the trained claims (Pre-LN, LNS and one setting per sparsity knob,
several seeds each).

>>> sorted(claim_settings(TINY))[:3]
['gqa', 'lns', 'moe']
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TinyTraining", "TINY", "SMALL", "FULL", "cached_training", "claim_settings", "claim_runs",
           "cached_scores"]


@dataclass(frozen=True)
class TinyTraining:
    """A size of the claim trainings: the architecture point and the optimiser budget."""

    width: int
    depth: int
    heads: int
    tokens: int
    steps: int
    batch: int
    log_every: int
    seeds: tuple[int, ...]
    lr: float = 1e-2


# quick figures, notebook quick mode, tests: seconds per run
TINY = TinyTraining(width=32, depth=4, heads=2, tokens=32, steps=20, batch=8, log_every=10, seeds=(0,))
# the notebook and the trained-claims report: about 11 s of CPU per run (150 steps), three seeds
SMALL = TinyTraining(width=32, depth=6, heads=2, tokens=32, steps=150, batch=8, log_every=50, seeds=(0, 1, 2))
# full-size figures and ``verify --trained`` without --quick
FULL = TinyTraining(width=64, depth=8, heads=4, tokens=64, steps=300, batch=16, log_every=50, seeds=(0, 1, 2))


def cached_training(setting, *, steps: int, batch: int, log_every: int, seed: int = 0, data: str = "docs",
                    progress: bool = False) -> Path:
    """The run directory of ``setting`` trained with these options (trained now if not cached)."""
    import torch

    from simulate.cache import cache_dir
    from simulate.training.identity import run_key
    from simulate.training.loop import TrainConfig
    from simulate.training.run_directory import RunDirectory, train_into

    config = TrainConfig(steps=steps, batch=batch, log_every=log_every, seed=seed, data=data)
    key = run_key(setting, config)
    entry = cache_dir() / "train" / key
    if RunDirectory(entry).finished:
        return entry
    entry.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=entry.parent))
    try:
        train_into(temp, setting, config, torch.device("cpu"), header={"command": ["cached_training"]},
                   progress=progress)
        try:
            temp.rename(entry)
        except OSError:  # another process finished the same run first: keep theirs
            shutil.rmtree(temp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return entry


def claim_settings(size: TinyTraining) -> dict:
    """The settings of the trained claims at ``size``: Pre-LN, LNS and one per sparsity knob (from Pre-LN).

    Knobs (P2): ``weight_decay`` 0.1 -> 1.0, ``tokens`` x2, GQA ``kv_heads`` = 1 (G = heads),
    MoE top-1 of 4 experts; the reference is ``pre`` (weight decay 0.1, MHA, dense).
    """
    from theory.setting import Setting

    pre = Setting.preset("llama", width=size.width, depth=size.depth, heads=size.heads, tokens=size.tokens,
                         lr=size.lr, weight_decay=0.1, input_std=0.02)
    return {"pre": pre, "lns": pre.replace(scheme="lns"), "weight_decay": pre.replace(weight_decay=1.0),
            "tokens": pre.replace(tokens=2 * size.tokens), "gqa": pre.replace(kv_heads=1),
            "moe": pre.replace(block="moe", experts=4, top_k=1)}


def claim_runs(size: TinyTraining = TINY, names=None, progress: bool = False) -> dict[str, list[Path]]:
    """``{name: [run dir per seed]}`` of :func:`claim_settings`, trained through the cache."""
    settings = claim_settings(size)
    chosen = list(settings) if names is None else list(names)
    return {name: [cached_training(settings[name], steps=size.steps, batch=size.batch, log_every=size.log_every,
                                   seed=seed, progress=progress) for seed in size.seeds]
            for name in chosen}


def cached_scores(run, *, at_init: bool, groups, options) -> tuple:
    """``(scores, pairs)`` of a run directory (:func:`simulate.scores.runs.score_run`) through the cache.

    Keyed by :func:`simulate.scores.runs.scores_key` (the model's weights, at init its Setting and
    seed; the groups, the options, the data; the scores' code, the corpus digest, Python and torch),
    so a user's run directory is only read, never written.
    """
    from simulate.cache import cache_dir
    from simulate.scores.runs import reusable_scores, save_scores, score_run, scores_key

    entry = cache_dir() / "scores" / scores_key(run, tuple(groups), options, at_init=at_init)
    saved = reusable_scores(entry, run, tuple(groups), options, at_init=at_init)
    if saved is not None:
        return saved[0], saved[1]
    scores, pairs, summary = score_run(run, tuple(groups), options, at_init=at_init, device="cpu", progress=False)
    save_scores(entry, scores, pairs, summary)
    return scores, pairs
