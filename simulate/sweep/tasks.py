"""What one sweep point does, per task: its options, its checks, its run and its code version.

``TASKS`` maps a task name to a :class:`Task`:

``predict``
    :func:`theory.predict` of the point's Setting (deterministic: no seeds, no options);
    the table has columns ``layer, metric, law, kind, value``.
``run``
    :func:`simulate.simulate` (not the cache: the sweep's own Parquet is the record);
    options ``samples`` (8), ``metrics`` (["var"]; a list, a comma-separated string or
    "all"), ``device`` (auto), ``dtype`` (float32), ``weights`` (auto), ``precision``
    (highest), as ``python -m simulate run`` takes them. A numerical blow-up fails the
    point, keeping the layers measured before it and ``blow_up_layer``.
``train``, ``scores``
    Trainings and layer-effectiveness scores through :mod:`simulate.training` and
    :mod:`simulate.scores` (:mod:`simulate.sweep.training_tasks`: options, tables, headline).
``study``
    A training and every score of its model, kept in the point's work directory, as one
    long table (:mod:`simulate.study.point`); the points of ``python -m simulate study``.

A task's run returns an :class:`Outcome` (table, headline numbers, device) or raises
:class:`PointFailed` (a failure with what was measured) or any other exception (recorded
as the point's error by :mod:`simulate.sweep.engines`). Heavy imports (torch) happen
inside the functions, so validating a spec of ``predict`` points stays light.

>>> sorted(TASKS)
['predict', 'run', 'scores', 'study', 'train']
>>> TASKS["run"].check_options({"samples": 4})["metrics"]
['var']
>>> TASKS["run"].check_options({"sample": 4})
Traceback (most recent call last):
...
ValueError: unknown option 'sample' of task run: choose from samples, metrics, device, dtype, weights, precision
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


from simulate.sweep.headline import measured_headline, predicted_headline
from simulate.sweep.outcome import Outcome, PointFailed, merge_options
from simulate.runtime.versions import ROOT, source_digest
from theory.constraints import Choice, Integer, check_fields

__all__ = ["Task", "TASKS", "RUN_OPTIONS"]

_OWN_SOURCES = ("simulate/sweep/tasks.py", "simulate/sweep/outcome.py", "simulate/sweep/headline.py",
                "simulate/sweep/training_tasks.py")


def _no_check(setting, options: dict) -> None:
    return None


@dataclass(frozen=True)
class Task:
    """One task: option checks (defaults filled in), the run of a point, its code version.

    ``needs_gpu(options)`` says whether a point asks for CUDA (``device = "cuda"``): the Ray
    engine requests a GPU for it. A ``versioned`` task's code version is part of each
    point's key (a change of code means new points); a task that is not (``study``: hours
    of training per spec) records the version with each result instead.
    """

    name: str
    seeded: bool
    check_options: Callable[[dict], dict]
    run: Callable[[Any], Outcome]
    version: Callable[[], str]
    check_setting: Callable[[Any, dict], None] = _no_check
    needs_gpu: Callable[[dict], bool] = field(default=lambda options: options.get("device") == "cuda")
    versioned: bool = True

    def code_version(self) -> str:
        """Digest of the sources that decide this task's numbers (a change means new points)."""
        return self.version()


# -- predict ---------------------------------------------------------------------------
def _predict_version() -> str:
    theory = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "theory").rglob("*.py"))
    return source_digest(sorted(tuple(theory) + _OWN_SOURCES))


def _run_predict(point) -> Outcome:
    from theory import predict

    table = predict(point.setting)
    return Outcome(table, predicted_headline(table, point.setting.depth), "cpu")


# -- run ---------------------------------------------------------------------------------
_RUN_DEFAULTS = {"samples": 8, "metrics": ["var"], "device": "auto", "dtype": "float32", "weights": "auto",
                 "precision": "highest"}
RUN_OPTIONS = {"samples": Integer(1), "device": Choice("auto", "cpu", "cuda"), "dtype": Choice("float32", "float64"),
               "weights": Choice("dense", "implicit", "auto"), "precision": Choice("highest", "tf32", "bf16")}


def _check_run_options(options: dict) -> dict:
    import torch

    from simulate.engine import check_precision, parse_metrics, resolve_dtype

    merged = merge_options(options, _RUN_DEFAULTS, "run")
    check_fields(merged, RUN_OPTIONS)
    metrics = merged["metrics"]
    if not (isinstance(metrics, str) or (isinstance(metrics, list) and all(isinstance(m, str) for m in metrics))):
        raise ValueError(f"metrics={metrics!r} is not allowed: a list of names, a comma-separated string or 'all'")
    merged["metrics"] = "all" if metrics == "all" else list(parse_metrics(metrics))
    device = torch.device("cpu" if merged["device"] == "cpu" else "cuda")  # auto: checked as on a GPU
    check_precision(merged["precision"], device, resolve_dtype(merged["dtype"]))
    return merged


def _check_run_setting(setting, options: dict) -> None:
    from simulate.engine import parse_metrics

    parse_metrics(options["metrics"], setting.block)


def _run_version() -> str:
    from simulate.cache import code_version

    return source_digest(sorted(_OWN_SOURCES), salt=code_version())  # the simulator's sources, then ours


def _run_run(point) -> Outcome:
    from simulate.engine import parse_metrics
    from simulate.engine import NumericalBlowUp, resolve_device, simulate

    options, depth = point.options, point.setting.depth
    device = resolve_device(options["device"])
    try:
        table = simulate(point.setting, samples=options["samples"], seed=point.seed,
                         metrics=parse_metrics(options["metrics"], point.setting.block), device=device,
                         dtype=options["dtype"], weights=options["weights"], matmul_precision=options["precision"])
    except NumericalBlowUp as error:
        headline = {**measured_headline(error.table, depth), "blow_up_layer": error.layer}
        raise PointFailed(str(error), error.table, headline, device.type) from None
    return Outcome(table, measured_headline(table, depth), device.type)


def _tasks() -> dict[str, Task]:
    from simulate.study import point as study_point
    from simulate.sweep import training_tasks

    return {
        "predict": Task("predict", False, lambda options: merge_options(options, {}, "predict"), _run_predict,
                        _predict_version, needs_gpu=lambda options: False),
        "run": Task("run", True, _check_run_options, _run_run, _run_version, _check_run_setting),
        "train": Task("train", True, training_tasks.check_train_options, training_tasks.run_train,
                      lambda: source_digest(sorted(_OWN_SOURCES), salt=training_tasks.train_version()),
                      training_tasks.check_train_setting),
        "scores": Task("scores", True, training_tasks.check_scores_options, training_tasks.run_scores,
                       lambda: source_digest(sorted(_OWN_SOURCES), salt=training_tasks.scores_version()),
                       training_tasks.check_train_setting),
        "study": Task("study", True, study_point.check_options, study_point.run_point, study_point.version,
                      training_tasks.check_train_setting, versioned=False),
    }


TASKS: dict[str, Task] = _tasks()
