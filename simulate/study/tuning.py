"""The peak learning rate tuned per scheme and cell: which models tune, which rate each cell chose.

A tuned study (``[study] tune_lr = [...]``, :mod:`simulate.study.spec`) sweeps ``lr`` over
its grid. Its *tuning cell* is one scheme and one value of each swept field but ``lr``,
``steps`` and the seed: the rate is tuned at the study's full length ``N`` and the models of
a stability study's shorter length use the rate their cell chose at ``N`` (the same recipe,
trained for fewer steps). Tuning trains the cell's tuning seeds (``tune_seeds``) at every rate
of the grid; the chosen rate is the one of lowest mean held-out loss over those seeds (the
scores' ``val_loss``, on sequences no step trained on), as P2 picks each depth's rate on
validation loss (its Sec. 2 and App. C.1). The study's models are then every seed at the
chosen rate, the tuning seeds' models shared. A rate whose models failed or whose loss is not
finite or above the uniform guess ``log 256`` diverged; a cell whose every rate diverged is
failed (no models; its rates are in the table) and the study goes on. A rate chosen at an
edge of the grid is flagged: the best rate may lie beyond it.

Columns of ``tuning.csv`` (:func:`tuning_table`): ``scheme``, the cell's fields, ``lr``,
``n`` (tuning seeds finished), ``val_loss`` (their mean), ``status`` (ok, pending, diverged),
``chosen`` (the cell's rate), ``edge`` (chosen at an end of the grid), ``cell_status``
(tuned, pending, failed).

>>> import math
>>> choose_rate({1e-3: [2.1, 2.0], 3e-3: [1.9, 1.95], 1e-2: [math.nan, 2.0]})
(0.003, False)
>>> choose_rate({1e-3: [1.8], 3e-3: [1.9]})
(0.001, True)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from simulate.sweep.store import finished_records

__all__ = ["DIVERGED_LOSS", "tuning_cell", "tuning_points", "choose_rate", "tuning_table", "resolve_tuning",
           "planned_points", "resolve_studies"]

DIVERGED_LOSS = math.log(256)  # nats/byte of the uniform guess over bytes: a model above it learned nothing


def _cell_fields(study) -> tuple[str, ...]:
    return tuple(f for f in study.cell_fields() if f != "steps")


def tuning_cell(study, point) -> tuple:
    """The point's tuning cell: its scheme and its value of each swept field but lr, steps and the seed."""
    values = [point.axes[f] if f in point.axes else getattr(point.setting, f) for f in _cell_fields(study)]
    return (point.setting.scheme, *values)


def tuning_points(study) -> list:
    """The models that tune: the tuning seeds at every rate of the grid, at the full length."""
    full = study.stability[1] if study.stability else None
    return [p for p in (study.candidates or study.sweep).points
            if p.seed in study.tune_seeds and (full is None or p.options["steps"] == full)]


def _learned(values) -> bool:
    """Whether a rate's losses (one per tuning seed) are all finite and below :data:`DIVERGED_LOSS`."""
    return bool(values) and all(math.isfinite(v) and v < DIVERGED_LOSS for v in values)


def choose_rate(losses: dict[float, list[float]]) -> tuple[float | None, bool]:
    """``(rate, at_edge)``: the rate of lowest mean loss among those whose every loss is finite and below
    :data:`DIVERGED_LOSS`; ``(None, False)`` when every rate diverged. ``losses``: ``{rate: [loss per seed]}``."""
    means = {rate: float(np.mean(values)) for rate, values in losses.items() if _learned(values)}
    if not means:
        return None, False
    best = min(means, key=means.get)
    return best, best in (min(losses), max(losses))


def _losses(study, out) -> dict[tuple, dict[float, list]]:
    """``{cell: {rate: [held-out loss per finished tuning seed (NaN: failed)]}}``, None where one is pending."""
    points = tuning_points(study)
    records = finished_records(out, [p.key for p in points])
    cells: dict[tuple, dict[float, list]] = {}
    for point in points:
        rates = cells.setdefault(tuning_cell(study, point), {})
        record = records.get(point.key)
        if record is None:
            rates[point.setting.lr] = None
        elif rates.get(point.setting.lr, []) is not None:
            loss = (record.get("headline") or {}).get("val_loss", math.nan) if record["status"] == "ok" else math.nan
            rates.setdefault(point.setting.lr, []).append(float(loss))
    return cells


def tuning_table(study, out) -> pd.DataFrame:
    """One row per tuning cell and rate (module docstring)."""
    rows = []
    for cell, rates in _losses(study, out).items():
        chosen, edge, status = _choice(rates)
        for rate, values in sorted(rates.items()):
            finite = [v for v in values or [] if math.isfinite(v)]
            diverged = values is not None and not _learned(values)
            rows.append({"scheme": cell[0], **dict(zip(_cell_fields(study), cell[1:])), "lr": rate,
                         "n": len(values or []), "val_loss": float(np.mean(finite)) if finite else math.nan,
                         "status": "pending" if values is None else ("diverged" if diverged else "ok"),
                         "chosen": rate == chosen, "edge": bool(edge and rate == chosen), "cell_status": status})
    return pd.DataFrame(rows)


def _choice(rates: dict[float, list | None]) -> tuple[float | None, bool, str]:
    """``(rate, at_edge, cell status)`` of one cell: pending while a tuning model is, failed when all diverged."""
    if any(values is None for values in rates.values()):
        return None, False, "pending"
    chosen, edge = choose_rate(rates)
    return chosen, edge, "failed" if chosen is None else "tuned"


def resolve_tuning(study, out):
    """The study's models at each tuned cell's chosen rate (every seed and length); cells pending or failed
    have none yet. The grid's models stay in ``candidates``. An untuned study is returned as it is."""
    if not study.tuned:
        return study
    candidates = study.candidates or study.sweep
    study = dataclasses.replace(study, sweep=candidates, candidates=candidates)
    chosen = {cell: _choice(rates)[0] for cell, rates in _losses(study, out).items()}
    points = tuple(p for p in candidates.points if chosen.get(tuning_cell(study, p)) == p.setting.lr)
    return dataclasses.replace(study, sweep=dataclasses.replace(candidates, points=points))


def planned_points(study) -> tuple[list, int]:
    """``(points, unknown)``: the models a (resolved) tuned study trains that are known (the tuning models and
    every model at a chosen rate) and how many more it will train once its pending cells have chosen
    (every seed and length of such a cell, but its tuning models)."""
    if not study.tuned:
        return list(study.sweep.points), 0
    tuning = tuning_points(study)
    known = {p.key: p for p in [*tuning, *study.sweep.points]}
    chosen_cells = {tuning_cell(study, p) for p in study.sweep.points}
    cells = {tuning_cell(study, p) for p in tuning}
    per_cell = len({(p.seed, p.options["steps"]) for p in (study.candidates or study.sweep).points}) \
        - len(study.tune_seeds)
    return list(known.values()), per_cell * len(cells - chosen_cells)


def resolve_studies(studies, out) -> list:
    """:func:`resolve_tuning` of each study."""
    return [resolve_tuning(study, out) for study in studies]
