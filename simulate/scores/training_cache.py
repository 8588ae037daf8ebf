"""Tiny trainings kept in the workbench cache, for figures, notebooks and ``verify --trained``.

:func:`cached_training` trains a Setting with :class:`simulate.training.loop.Trainer` into
``$DEPTH_WORKBENCH_CACHE/train/<key>`` once; the key is the sha256 of the Setting, the
training options and the trainer's code version, so the same request finds the same run
and a change to the trainer trains again. A run is trained in a temporary directory beside
its entry and renamed into place when complete, so a reader never sees half a run.

:data:`TINY` is the tiny family the quick figures and the tests use; :func:`claim_runs`
lists the runs that test the trained claims (Pre-LN, LNS and one setting per sparsity knob,
several seeds each).

>>> sorted(claim_settings(TINY))[:3]
['gqa', 'lns', 'moe']
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TinyTraining", "TINY", "SMALL", "FULL", "training_code_version", "cached_training", "claim_settings",
           "claim_runs", "cached_scores"]


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


def training_code_version() -> str:
    """The trainer's code version (:func:`simulate.training.loop.code_version`: its sources and what they import)."""
    from simulate.training.loop import code_version

    return code_version()


def cached_training(setting, *, steps: int, batch: int, log_every: int, seed: int = 0, data: str = "docs",
                    progress: bool = False) -> Path:
    """The run directory of ``setting`` trained with these options (trained now if not cached)."""
    import torch

    from simulate.cache import cache_dir
    from simulate.training.loop import TrainConfig
    from simulate.training.run_directory import RunDirectory, train_into

    config = TrainConfig(steps=steps, batch=batch, log_every=log_every, seed=seed, data=data)
    payload = {"setting": setting.to_dict(), "train": config.to_dict(), "code": training_code_version()}
    key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]
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

    Keyed by the checkpoint's bytes (at init: the run's config), the groups, the options and
    the scores' code, so a user's run directory is only read, never written.
    """
    import pandas as pd

    from simulate.cache import cache_dir
    from simulate.scores.runs import score_run, scores_version
    from simulate.training.run_directory import RunDirectory
    from theory.files import atomic_write

    run = RunDirectory(run)
    digest = hashlib.sha256(json.dumps(run.config, sort_keys=True).encode() if at_init else
                            run.model_path.read_bytes())
    digest.update(json.dumps([at_init, list(groups), repr(options), scores_version()]).encode())
    entry = cache_dir() / "scores" / digest.hexdigest()[:32]
    if (entry / "scores.csv").is_file() and (entry / "pairs.csv").is_file():
        return pd.read_csv(entry / "scores.csv"), pd.read_csv(entry / "pairs.csv")
    scores, pairs, _ = score_run(run.path, tuple(groups), options, at_init=at_init, device="cpu", progress=False)
    entry.mkdir(parents=True, exist_ok=True)
    atomic_write(entry / "pairs.csv", lambda temp: pairs.to_csv(temp, index=False))
    atomic_write(entry / "scores.csv", lambda temp: scores.to_csv(temp, index=False))
    return scores, pairs
