"""The ``train`` and ``scores`` sweep tasks, through :mod:`simulate.training` and :mod:`simulate.scores`.

``train``
    :class:`simulate.training.Trainer` of the point's Setting with the point's seed, in a
    temporary directory (the sweep's Parquet is the record). Options are those of
    ``python -m simulate train``: ``steps`` (300), ``batch`` (16), ``warmup`` (steps/10
    when left out), ``data`` ("docs"), ``log_every`` (50), ``clip`` (0), ``probe_batch``
    (= batch when left out), ``moe_lns_top_k`` (false), ``precision`` (auto), ``device``
    (auto). The table: ``loss.csv``'s rows (``table = "loss"``: step, split, loss) and the
    last step's ``train_layers.csv`` rows (``table = "layers"``). Headline: ``final_train_loss``,
    ``final_val_loss`` and, from the last probe, ``final_var`` and the growth exponent of
    var (:mod:`simulate.sweep.headline`). A NaN loss fails the point, keeping the logs.
``scores``
    The same training, then :func:`simulate.scores.score_run` of its model (``at_init =
    true``: of the model at step 0): extra options ``scores`` (score names or groups, default
    ["prune", "angular"]), ``sequences`` (64), ``at_init`` (false). The table is
    ``scores.csv`` (layer, score, value, sem, n); headline ``final_val_loss`` and
    ``mean_<score>`` (the mean over blocks of each score).

>>> check_train_options({"steps": 20})["warmup"] is None
True
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pandas as pd

from simulate.sweep.headline import measured_headline
from simulate.sweep.outcome import Outcome, PointFailed, Task, merge_options, register_task
from theory.constraints import Boolean, Choice, Integer, check_fields

__all__ = ["TRAIN_DEFAULTS", "SCORES_DEFAULTS", "DEVICE", "SCORES_OPTIONS", "train_config", "check_train_options",
           "check_scores_options", "check_train_setting", "training_corpus", "run_train", "run_scores", "TRAIN",
           "SCORES"]

TRAIN_DEFAULTS = {"steps": 300, "batch": 16, "warmup": None, "data": "docs", "log_every": 50, "clip": 0.0,
                  "probe_batch": None, "moe_lns_top_k": False, "precision": "auto", "device": "auto"}
SCORES_DEFAULTS = {**TRAIN_DEFAULTS, "scores": ["prune", "angular"], "sequences": 64, "at_init": False}
DEVICE = Choice("auto", "cpu", "cuda")
SCORES_OPTIONS = {"sequences": Integer(2), "at_init": Boolean()}  # the scores' own options (theory.constraints)


def train_config(options: dict, seed: int = 0):
    """The :class:`simulate.training.TrainConfig` of a point's (checked) options and seed."""
    from simulate.training import TrainConfig

    names = [k for k in TRAIN_DEFAULTS if k != "device"]
    return TrainConfig(seed=seed, **{k: options[k] for k in names})


def check_train_options(options: dict, task: str = "train", defaults: dict = TRAIN_DEFAULTS) -> dict:
    """Defaults filled in and checked as ``python -m simulate train`` checks its flags (ValueError)."""
    merged = merge_options(options, defaults, task)
    check_fields(merged, {"device": DEVICE})
    train_config(merged)
    if merged["precision"] == "tf32" and merged["device"] == "cpu":
        raise ValueError("precision='tf32' is not allowed on the CPU: auto, highest or bf16")
    return merged


def check_scores_options(options: dict) -> dict:
    """:func:`check_train_options` plus the scores' own (``scores``, ``sequences``, ``at_init``)."""
    from simulate.scores.compute import parse_scores

    merged = check_train_options(options, "scores", SCORES_DEFAULTS)
    merged["scores"] = list(parse_scores(merged["scores"]))
    check_fields(merged, SCORES_OPTIONS)
    return merged


def check_train_setting(setting, options: dict) -> None:
    """A language model must be causal; the corpus must hold a window of ``tokens`` bytes."""
    from simulate.training import load_corpus

    if not setting.causal:
        raise ValueError("causal=False is not allowed in train: a language model must not see the bytes it predicts")
    load_corpus(options["data"], setting.tokens)  # DataError (a ValueError) names the data


def training_corpus(options: dict) -> str:
    """The digest of the corpus a point trains on (:func:`simulate.training.data.corpus_digest` of ``data``):
    part of a ``train`` or ``scores`` point's key."""
    from simulate.training.data import corpus_digest

    return corpus_digest(options["data"])


def _train(point, out: Path):
    """Train the point into ``out``; returns (loss table, last layers table, failure message or None, device)."""
    from simulate.engine import resolve_device
    from simulate.training.loop import LossNotFinite
    from simulate.training.run_directory import RunDirectory, train_into

    device = resolve_device(point.options["device"])
    failure = None
    try:
        train_into(out, point.setting, train_config(point.options, point.seed), device)
    except LossNotFinite as error:
        failure = str(error)
    run = RunDirectory(out)
    layers = run.layers()
    return run.loss(), layers[layers.step == layers.step.max()], failure, device.type


def _train_headline(loss: pd.DataFrame, layers: pd.DataFrame, depth: int) -> dict:
    row = {}
    for split in ("train", "val"):
        values = loss[loss.split == split].sort_values("step")["loss"]
        row[f"final_{split}_loss"] = float(values.iloc[-1]) if len(values) else math.nan
    var = measured_headline(layers[layers.metric == "var"], depth)
    row.update({k: v for k, v in var.items() if k.startswith(("final_var", "growth_"))})
    return row


def run_train(point):
    """Train one point; its table and headline (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="sweep-train-") as out:
        loss, layers, failure, device = _train(point, Path(out))
    table = pd.concat([loss.assign(table="loss"), layers.assign(table="layers")], ignore_index=True)
    headline = _train_headline(loss, layers, point.setting.depth)
    if failure is not None:
        raise PointFailed(failure, table, headline, device)
    return Outcome(table, headline, device)


def run_scores(point):
    """Train one point, then score its model; table scores.csv, headline (module docstring)."""
    from simulate.scores import ScoreOptions, score_run
    options = point.options
    with tempfile.TemporaryDirectory(prefix="sweep-scores-") as out:
        loss, layers, failure, device = _train(point, Path(out))
        headline = _train_headline(loss, layers, point.setting.depth)
        if failure is not None:
            raise PointFailed(failure, loss, headline, device)
        scores, _, _ = score_run(out, tuple(options["scores"]), ScoreOptions(sequences=options["sequences"]),
                                 at_init=options["at_init"], device=device)
    for name, rows in scores.groupby("score", sort=False):
        headline[f"mean_{name}"] = float(rows["value"].mean())
    return Outcome(scores, headline, device)


TRAIN = register_task(Task("train", True, check_train_options, run_train, check_train_setting,
                           corpus_digest=training_corpus))
SCORES = register_task(Task("scores", True, check_scores_options, run_scores, check_train_setting,
                            corpus_digest=training_corpus))
