"""What one point of a study computes: a training, the scores of its model, one long table of both.

A study point is a sweep point of task ``study`` (:data:`STUDY`, which this module registers
with the sweep's tasks, :func:`simulate.sweep.outcome.register_task`): the
point's Setting trained with its seed (:class:`simulate.training.Trainer`), then every
selected score of the trained model (:func:`simulate.scores.score_run`), nothing more: the
model is trained once and scored from the weights it ends with. The run directory is the
point's ``workdir`` (``DIR/runs/KEY`` of a study; a temporary directory otherwise), so an
interrupted point resumes from its last checkpoint (removed once the training is done) and
a finished one can be scored again (``python -m simulate scores DIR/runs/KEY``).

Options (defaults: the study recipe of docs/studies.md, after P1's and P2's training) are
``python -m simulate train``'s flags and the scores': ``steps`` (1600), ``batch`` (16),
``warmup`` (steps/10), ``data`` ("stdlib"), ``log_every`` (100), ``clip`` (1.0),
``probe_batch`` (= batch), ``moe_lns_top_k``, ``precision`` (auto), ``device`` (auto),
``scores`` ("all"), ``sequences`` (64), ``pairs`` ("all": every block pair of the
permutation score).

The point's table (:data:`RAW_COLUMNS`, one row per number) holds

=========  ==================================================================
``loss``   ``step``, ``name`` = split (``train``, ``val``), ``value`` = loss
``layers`` every probe metric of ``train_layers.csv``: ``step``, ``layer``,
           ``name`` = metric, ``value`` = mean, ``sem``
``scores`` ``scores.csv`` of the last step: ``layer``, ``name`` = score, ``value``, ``sem``
``pairs``  ``pairs.csv``: ``layer``, ``other``, ``name`` = score, ``value``
=========  ==================================================================

with ``-1`` where a column does not apply. Headline: ``val_loss`` (the scores' held-out
loss), ``final_train_loss``, ``epochs`` of the corpus seen, ``train_s`` and ``score_s``
(seconds), and what made the model, recorded because a study's key leaves it out: ``code``
(the code version of this module's import closure, the training and the scores together),
``code_train`` and ``code_scores`` (the trainer's and the scores' own, as the run's
``config.json`` and its scores' record keep them), ``data`` (the corpus digest), ``python``
and ``torch`` (``''`` where the run or its scores recorded none, or a failed point has no scores).

A run's ``scores/`` (:func:`simulate.scores.runs.save_scores`) is reused only when its key is that
of the point's scores (:func:`simulate.scores.runs.reusable_scores`: the same model, options,
code, corpus, Python and torch); otherwise the model is scored again.

>>> sorted(check_options({"steps": 8})["scores"])[:2]
['angular', 'causal']
"""

from __future__ import annotations

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from simulate.sweep.outcome import Outcome, PointFailed, Task, merge_options, register_task
from simulate.sweep.training_tasks import SCORES_DEFAULTS, check_scores_options, check_train_setting

__all__ = ["STUDY_DEFAULTS", "RAW_COLUMNS", "RAW_TABLES", "STUDY", "check_options", "run_point", "raw_table"]

STUDY_DEFAULTS = {**SCORES_DEFAULTS, "steps": 1600, "data": "stdlib", "log_every": 100, "clip": 1.0,
                  "scores": "all", "pairs": "all"}
STUDY_DEFAULTS.pop("at_init")
RAW_COLUMNS = ["table", "step", "layer", "other", "name", "value", "sem"]
RAW_TABLES = ("loss", "layers", "scores", "pairs")


def check_options(options: dict) -> dict:
    """Defaults filled in and checked (ValueError naming the option), as the train and scores flags are."""
    merged = merge_options(options, STUDY_DEFAULTS, "study")
    from simulate.scores.definitions import PAIRS

    pairs = PAIRS.check("pairs", merged.pop("pairs"))
    checked = check_scores_options({**merged, "at_init": False})
    checked.pop("at_init")
    return {**checked, "pairs": pairs}


@contextmanager
def _run_directory(point):
    """The point's run directory: its ``workdir``, or a temporary one removed afterwards."""
    if point.workdir is not None:
        path = Path(point.workdir)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="study-point-") as temp:
        yield Path(temp)


def _train(point, run: Path, device) -> float:
    """Train the point into ``run`` (:func:`simulate.training.run_directory.train_into`); seconds."""
    from simulate.sweep.training_tasks import train_config
    from simulate.training.run_directory import train_into

    return train_into(run, point.setting, train_config(point.options, point.seed), device, header={"point": point.key})


def _score(point, run: Path, device) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """scores.csv, pairs.csv and the record of the trained model's scores, kept in ``run/scores`` and reused
    from there when they are this point's (module docstring)."""
    from simulate.scores import ScoreOptions
    from simulate.scores.runs import reusable_scores, save_scores, score_run

    where, groups = run / "scores", tuple(point.options["scores"])
    options = ScoreOptions(sequences=point.options["sequences"], pairs=point.options["pairs"])
    saved = reusable_scores(where, run, groups, options)
    if saved is not None:
        return saved
    started = time.perf_counter()
    scores, pairs, summary = score_run(run, groups, options, device=device)
    summary["seconds_total"] = round(time.perf_counter() - started, 3)
    save_scores(where, scores, pairs, summary)
    return scores, pairs, summary


def raw_table(run: Path, scores: pd.DataFrame | None = None, pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The point's long table (module docstring) from a run directory and its scores."""
    from simulate.training.run_directory import RunDirectory

    directory = RunDirectory(run)
    parts = []
    loss = directory.loss()
    parts.append(pd.DataFrame({"table": "loss", "step": loss["step"], "layer": -1, "other": -1,
                               "name": loss["split"], "value": loss["loss"], "sem": float("nan")}))
    layers = directory.layers()
    parts.append(pd.DataFrame({"table": "layers", "step": layers["step"], "layer": layers["layer"], "other": -1,
                               "name": layers["metric"], "value": layers["mean"], "sem": layers["sem"]}))
    last = int(loss["step"].max())
    if scores is not None:
        parts.append(pd.DataFrame({"table": "scores", "step": last, "layer": scores["layer"], "other": -1,
                                   "name": scores["score"], "value": scores["value"], "sem": scores["sem"]}))
    if pairs is not None:
        parts.append(pd.DataFrame({"table": "pairs", "step": last, "layer": pairs["layer"], "other": pairs["other"],
                                   "name": pairs["score"], "value": pairs["value"], "sem": float("nan")}))
    table = pd.concat(parts, ignore_index=True)[RAW_COLUMNS]
    return table.astype({"step": "int64", "layer": "int64", "other": "int64", "value": "float64",
                         "sem": "float64"})


def _headline(run: Path, table: pd.DataFrame, train_s: float, scores_record: dict | None) -> dict:
    from simulate.runtime.versions import closure_version
    from simulate.training.run_directory import RunDirectory

    config, scored = RunDirectory(run).saved_config or {}, scores_record or {}
    trained = config.get("versions") or {}
    loss = table[table["table"] == "loss"]
    train = loss[loss["name"] == "train"].sort_values("step")["value"]
    val = table[(table["table"] == "scores") & (table["name"] == "loss")]["value"]
    return {"val_loss": float(val.iloc[0]) if len(val) else float("nan"),
            "final_train_loss": float(train.iloc[-1]) if len(train) else float("nan"),
            "epochs": float(config.get("data", {}).get("epochs", float("nan"))),
            "train_s": round(train_s, 2), "score_s": round(float(scored.get("seconds_total", 0.0)), 2),
            "code": closure_version(__name__), "code_train": trained.get("code", ""),
            "code_scores": (scored.get("versions") or {}).get("code", ""),
            **{name: trained.get(name, "") for name in ("data", "python", "torch")}}


def run_point(point) -> Outcome:
    """Train, score and tabulate one study point (module docstring); a nan loss fails it, keeping the logs."""
    from simulate.engine import resolve_device
    from simulate.training.loop import LossNotFinite

    device = resolve_device(point.options["device"])
    with _run_directory(point) as run:
        try:
            train_s = _train(point, run, device)
        except LossNotFinite as error:
            table = raw_table(run)
            raise PointFailed(str(error), table, _headline(run, table, 0.0, None), device.type) from None
        scores, pairs, record = _score(point, run, device)
        table = raw_table(run, scores, pairs)
        return Outcome(table, _headline(run, table, train_s, record), device.type)


STUDY = register_task(Task("study", True, check_options, run_point, check_train_setting, versioned=False))
