"""``python -m simulate bench --train --batches 16,32,64,128``: batch size and thread layout at a fixed budget.

A study's models are many small trainings on a few cores, so two choices set its cost: the
batch (sequences per step) and the layout of its workers on the cores (one worker of two
threads, or two workers of one thread each, the sweep engine's ``--workers``). Each row
trains the atlas's model (LLaMA preset, d=64, L=16, T=64, the study recipe, the ``stdlib``
corpus) with the trainer as a study runs it, for one budget of tokens (default: the atlas's
400-step model, 400 x 16 x 64 = 409,600 tokens, so that ``steps = budget / (batch T)``), and
reports

====================  ==================================================================
batch, steps          sequences per step and the steps the budget allows
layout                ``1x2`` (one worker, two threads) or ``2x1`` (two workers at once,
                      one thread each, different seeds)
tokens_per_s          training tokens per second of the trainer's own time
                      (``Trainer.seconds``: steps, probes, held-out losses, checkpoints)
                      of the whole layout: both workers' tokens over the slower one's
                      seconds for ``2x1``
train_s               that trainer's seconds (the slower worker)
startup_s             what a point pays before its first step: loading the corpus and
                      building the trainer (model, optimiser), in a warm worker process
wall_s                the layout's wall seconds, new processes and their imports included
val_loss              held-out loss at the end of the budget (mean over the workers):
                      the loss the budget's tokens buy at this batch size
====================  ==================================================================

The peak learning rate is the study's (1e-3) at every batch size: a larger batch usually
wants a larger rate, which the per-cell tuning of a study gives it; here the loss column says
what the same rate buys. Nothing here asserts a time.

>>> [(row.batch, row.steps) for row in batch_plan((16, 128), 409_600, 64)]
[(16, 400), (128, 50)]
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

import pandas as pd

__all__ = ["BATCH_COLUMNS", "LAYOUTS", "ATLAS_BUDGET", "BatchRow", "batch_plan", "batch_setting", "bench_batches"]

BATCH_COLUMNS = ["batch", "steps", "layout", "tokens_per_s", "train_s", "startup_s", "wall_s", "val_loss"]
LAYOUTS = {"1x2": (1, 2), "2x1": (2, 1)}  # name: (workers, torch threads per worker)
ATLAS_BUDGET = 400 * 16 * 64  # tokens of the atlas's 400-step model


class BatchRow(NamedTuple):
    batch: int
    steps: int


def batch_plan(batches, budget: int, tokens: int) -> list[BatchRow]:
    """One row per batch size: the steps that spend ``budget`` tokens in sequences of ``tokens`` (at least 10)."""
    return [BatchRow(int(batch), max(10, budget // (int(batch) * tokens))) for batch in batches]


def batch_setting(quick: bool):
    """The atlas's model (``quick``: a two-block one of seconds)."""
    from theory.setting import Setting

    if quick:
        return Setting.preset("llama", width=32, depth=2, heads=2, tokens=16, lr=1e-3, input_std=0.02)
    return Setting.preset("llama", width=64, depth=16, heads=4, tokens=64, lr=1e-3, weight_decay=0.1,
                          input_std=0.02)


def _train_once(setting_dict: dict, steps: int, batch: int, seed: int, threads: int) -> dict:
    """In a worker process: train once as a study point does; its seconds and final held-out loss."""
    import torch

    from simulate.training.data import load_corpus
    from simulate.training.loop import Trainer, TrainConfig
    from simulate.training.run_directory import RunDirectory
    from theory.setting import Setting

    torch.set_num_threads(threads)
    started = time.perf_counter()
    setting = Setting.from_dict(setting_dict)
    config = TrainConfig(steps=steps, batch=batch, data="stdlib", seed=seed, log_every=max(1, steps // 4), clip=1.0)
    with tempfile.TemporaryDirectory() as temp:
        trainer = Trainer(setting, config, load_corpus(config.data, setting.tokens), torch.device("cpu"), Path(temp))
        startup = time.perf_counter() - started
        trainer.run()
        loss = RunDirectory(temp).loss()
    held_out = loss[(loss["split"] != "train") & (loss["step"] == steps)]["loss"]
    return {"train_s": trainer.seconds, "startup_s": startup, "val_loss": float(held_out.mean())}


def bench_batches(batches=(16, 32, 64, 128), layouts=tuple(LAYOUTS), budget: int = ATLAS_BUDGET,
                  quick: bool = False) -> pd.DataFrame:
    """The rows of the module docstring, each layout's workers in fresh ``spawn`` processes."""
    setting = batch_setting(quick)
    rows = []
    for row in batch_plan(batches, budget if not quick else 4 * 16 * 4, setting.tokens):
        for layout in layouts:
            workers, threads = LAYOUTS[layout]
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                began = time.perf_counter()
                futures = [pool.submit(_train_once, setting.to_dict(), row.steps, row.batch, seed, threads)
                           for seed in range(workers)]
                runs = [future.result() for future in futures]
                wall = time.perf_counter() - began
            tokens = workers * row.steps * row.batch * setting.tokens
            train_s = max(r["train_s"] for r in runs)
            rows.append({"batch": row.batch, "steps": row.steps, "layout": layout, "tokens_per_s": tokens / train_s,
                         "train_s": train_s, "startup_s": max(r["startup_s"] for r in runs), "wall_s": wall,
                         "val_loss": sum(r["val_loss"] for r in runs) / workers})
    return pd.DataFrame(rows, columns=BATCH_COLUMNS)
