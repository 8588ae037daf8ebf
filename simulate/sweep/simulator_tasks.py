"""The simulator's sweep tasks: ``predict`` (the theory's curves) and ``run`` (the Monte-Carlo engine).

``predict``
    :func:`theory.predict` of the point's Setting (deterministic: no seeds, no options);
    the table has columns ``layer, metric, law, kind, value``.
``run``
    :func:`simulate.simulate` (not the cache: the sweep's own Parquet is the record);
    options ``samples`` (8), ``metrics`` (["var"]; a list, a comma-separated string or
    "all"), ``device`` (auto), ``dtype`` (float32), ``weights`` (auto), ``precision``
    (highest), as ``python -m simulate run`` takes them. A numerical blow-up fails the
    point, keeping the layers measured before it and ``blow_up_layer``.

>>> RUN.check_options({"samples": 4})["metrics"]
['var']
>>> RUN.check_options({"sample": 4})
Traceback (most recent call last):
...
ValueError: unknown option 'sample' of task run: choose from samples, metrics, device, dtype, weights, precision
"""

from __future__ import annotations

from simulate.sweep.headline import measured_headline, predicted_headline
from simulate.sweep.outcome import Outcome, PointFailed, Task, merge_options, register_task
from theory.constraints import Choice, Integer, check_fields

__all__ = ["PREDICT", "RUN", "RUN_OPTIONS"]


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


PREDICT = register_task(Task("predict", False, lambda options: merge_options(options, {}, "predict"), _run_predict,
                             needs_gpu=lambda options: False))
RUN = register_task(Task("run", True, _check_run_options, _run_run, _check_run_setting))
