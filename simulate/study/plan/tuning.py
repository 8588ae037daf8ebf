"""The peak learning rate tuned per scheme and cell: which models tune, which rate each cell chose.

A tuned study (``[study] tune_lr = [...]``, :mod:`simulate.study.plan.spec`) sweeps ``lr`` over
its grid. Its *tuning cell* is one scheme and one value of each swept field but ``lr``,
``steps`` and the seed: the rate is tuned at the study's full length ``N`` and the models of
a stability study's shorter length use the rate their cell chose at ``N`` (the same recipe,
trained for fewer steps). Tuning trains the cell's tuning seeds (``tune_seeds``) at every rate
of the grid; the chosen rate is the one of lowest mean held-out loss over those seeds (the
scores' ``val_loss``, on sequences no step trained on), as P2 picks each depth's rate on
validation loss (its Sec. 2 and App. C.1). The study's models are then every seed at the
chosen rate, the tuning seeds' models shared. A rate whose models failed or whose loss is not
finite or above the uniform guess ``log 256`` diverged; a cell whose every rate diverged is
failed (no models; its rates are in the table) and the study goes on. Where the best rate so
far is at an edge of the grid, the cell goes on to the rates of ``tune_lr_beyond`` past that
edge, one at a time, while the best stays at the edge (:func:`reached_rates`; the other cells
are not trained there). A rate chosen at an edge of what its cell tried is flagged: the best
rate may lie beyond it.

Columns of ``tuning.csv`` (:func:`tuning_table`): ``scheme``, the cell's fields, ``lr``,
``n`` (tuning seeds finished), ``val_loss`` (their mean), ``status`` (:class:`~theory.verdicts.RateStatus`: ok,
diverged, pending), ``chosen`` (the cell's rate), ``edge`` (chosen at an end of the grid), ``cell_status``
(:class:`~theory.verdicts.CellStatus`: tuned, failed, pending). The table holds the members, the file the words.

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

from simulate.sweep.store import finished_records, record_status
from theory.verdicts import CellStatus, PointStatus, RateStatus

__all__ = ["DIVERGED_LOSS", "tuning_cell", "tuning_points", "choose_rate", "reached_rates", "tuning_table",
           "resolve_tuning", "planned_points", "unplanned_points", "fixed_rates", "resolve_studies"]

DIVERGED_LOSS = math.log(256)  # nats/byte of the uniform guess over bytes: a model above it learned nothing


def _cell_fields(study) -> tuple[str, ...]:
    return tuple(f for f in study.cell_fields() if f != "steps")


def tuning_cell(study, point) -> tuple:
    """The point's tuning cell: its scheme and its value of each swept field but lr, steps and the seed."""
    values = [point.axes[f] if f in point.axes else getattr(point.setting, f) for f in _cell_fields(study)]
    return (point.setting.scheme, *values)


def _tuning_candidates(study) -> list:
    """The tuning seeds' models at every rate (the grid and beyond it), at the full length."""
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


def reached_rates(grid, beyond, losses_at) -> dict[float, list | None]:
    """The rates one cell tries, ``{rate: losses_at(rate)}`` (``None``: pending): its grid, then each rate of
    ``beyond`` past an edge, outward one at a time, while the cell's best rate so far is that edge; a pending
    rate stops the walk (the next is decided by its loss).

    >>> losses = {1e-3: [2.0], 3e-3: [1.9], 1e-2: [1.8], 3e-2: [1.85], 1e-1: [1.7]}
    >>> sorted(reached_rates([1e-3, 3e-3, 1e-2], [3e-2, 1e-1], losses.get))  # 3e-2 is worse: 1e-1 is not tried
    [0.001, 0.003, 0.01, 0.03]
    """
    rates = {rate: losses_at(rate) for rate in grid}
    for side in (sorted(r for r in beyond if r > max(grid)), sorted((r for r in beyond if r < min(grid)),
                                                                    reverse=True)):
        for rate in side:
            if any(values is None for values in rates.values()):
                return rates
            best, _ = choose_rate(rates)
            if best is None or best != (max(rates) if rate > max(grid) else min(rates)):
                break
            rates[rate] = losses_at(rate)
    return rates


def _cells(study, out) -> tuple[dict[tuple, dict[float, list | None]], list]:
    """``({cell: reached_rates}, tuning points of the reached rates)``: per rate the held-out loss of each
    finished tuning seed (NaN: failed), None where one is pending."""
    candidates = _tuning_candidates(study)
    records = finished_records(out, [p.key for p in candidates])
    by_cell: dict[tuple, dict[float, list]] = {}
    for point in candidates:
        by_cell.setdefault(tuning_cell(study, point), {}).setdefault(point.setting.lr, []).append(point)

    def losses(points) -> list | None:
        if any(records.get(p.key) is None for p in points):
            return None
        return [float((records[p.key].get("headline") or {}).get("val_loss", math.nan))
                if record_status(records[p.key]) is PointStatus.OK else math.nan for p in points]

    cells, reached = {}, []
    for cell, by_rate in by_cell.items():
        cells[cell] = reached_rates(study.tune_lr, study.tune_lr_beyond, lambda rate: losses(by_rate[rate]))
        reached += [p for rate in cells[cell] for p in by_rate[rate]]
    return cells, reached


def tuning_points(study, out) -> list:
    """The models that tune: the tuning seeds at the full length at every rate of the grid, and at each rate
    beyond it that a cell has reached with the models finished in ``out`` (:func:`reached_rates`)."""
    return _cells(study, out)[1]


def tuning_table(study, out) -> pd.DataFrame:
    """One row per tuning cell and rate (module docstring)."""
    rows = []
    for cell, rates in _cells(study, out)[0].items():
        chosen, edge, status = _choice(rates)
        for rate, values in sorted(rates.items()):
            finite = [v for v in values or [] if math.isfinite(v)]
            diverged = values is not None and not _learned(values)
            rows.append({"scheme": cell[0], **dict(zip(_cell_fields(study), cell[1:])), "lr": rate,
                         "n": len(values or []), "val_loss": float(np.mean(finite)) if finite else math.nan,
                         "status": RateStatus.PENDING if values is None else (
                             RateStatus.DIVERGED if diverged else RateStatus.OK),
                         "chosen": rate == chosen, "edge": bool(edge and rate == chosen), "cell_status": status})
    return pd.DataFrame(rows)


def _choice(rates: dict[float, list | None]) -> tuple[float | None, bool, CellStatus]:
    """``(rate, at_edge, cell status)`` of one cell: pending while a tuning model is, failed when all diverged."""
    if any(values is None for values in rates.values()):
        return None, False, CellStatus.PENDING
    chosen, edge = choose_rate(rates)
    return chosen, edge, CellStatus.FAILED if chosen is None else CellStatus.TUNED


def resolve_tuning(study, out):
    """The study's models at each tuned cell's chosen rate (every seed and length); cells pending or failed
    have none yet. The grid's models stay in ``candidates``. An untuned study is returned as it is."""
    if not study.tuned:
        return study
    candidates = study.candidates or study.sweep
    study = dataclasses.replace(study, sweep=candidates, candidates=candidates)
    chosen = {cell: _choice(rates)[0] for cell, rates in _cells(study, out)[0].items()}
    points = tuple(p for p in candidates.points if chosen.get(tuning_cell(study, p)) == p.setting.lr)
    return dataclasses.replace(study, sweep=dataclasses.replace(candidates, points=points))


def planned_points(study, out) -> tuple[list, int]:
    """``(points, unknown)``: the models a (resolved) tuned study trains that are known (the tuning models that
    ``out`` has reached and every model at a chosen rate) and how many more it will train once its pending cells
    have chosen (every seed and length of such a cell, but its tuning models; a rate beyond the grid that a
    cell may still reach is not counted)."""
    if not study.tuned:
        return list(study.sweep.points), 0
    tuning = tuning_points(study, out)
    known = {p.key: p for p in [*tuning, *study.sweep.points]}
    chosen_cells = {tuning_cell(study, p) for p in study.sweep.points}
    cells = {tuning_cell(study, p) for p in tuning}
    per_cell = len({(p.seed, p.options["steps"]) for p in (study.candidates or study.sweep).points}) \
        - len(study.tune_seeds)
    return list(known.values()), per_cell * len(cells - chosen_cells)


def unplanned_points(study, out) -> tuple[list, list]:
    """``(superseded, waiting)``: the finished models in ``out`` of a tuned study's grid that are neither tuning
    models its cells reached nor at a chosen rate, split by their cell: one that chose another rate (a model
    trained before the cell went on past its grid's edge and chose there), or one still tuning (its rate may
    yet be kept)."""
    if not study.tuned:
        return [], []
    cells, reached = _cells(study, out)
    chosen = {cell: _choice(rates) for cell, rates in cells.items()}
    candidates = study.candidates or study.sweep
    known = {p.key for p in reached} | {p.key for p in candidates.points
                                        if chosen[tuning_cell(study, p)][0] == p.setting.lr}
    finished = finished_records(out, [p.key for p in candidates.points if p.key not in known])
    rest = [p for p in candidates.points if p.key in finished]
    waiting = [p for p in rest if chosen[tuning_cell(study, p)][2] is CellStatus.PENDING]
    return [p for p in rest if chosen[tuning_cell(study, p)][2] is not CellStatus.PENDING], waiting


def fixed_rates(study, models) -> dict[str, float]:
    """Each scheme's *fixed* rate: the rate most of its tuning cells chose (a tie: the one its last cell chose,
    cells in order of their values), read from ``models``, a resolved study's models (each at its cell's
    chosen rate). The comparisons along an axis at one rate held fixed use it (simulate.study.judge.analysis).

    >>> from types import SimpleNamespace as Record
    >>> study = Record(cell_fields=lambda: ("depth",))
    >>> models = [Record(point=Record(setting=Record(lr=lr, scheme="lns"), axes={"depth": depth}))
    ...           for depth, lr in ((4, 3e-3), (8, 1e-2), (16, 1e-2))]
    >>> fixed_rates(study, models)
    {'lns': 0.01}
    """
    chosen: dict[tuple, float] = {}
    for model in models:
        chosen[tuning_cell(study, model.point)] = model.point.setting.lr
    counts: dict[str, dict[float, int]] = {}
    for cell in sorted(chosen):
        rates = counts.setdefault(cell[0], {})
        rates[chosen[cell]] = rates.get(chosen[cell], 0) + 1
        rates[chosen[cell]] = rates.pop(chosen[cell])  # the latest cell's rate last: it wins a tie below
    return {scheme: max(reversed(list(rates)), key=rates.get) for scheme, rates in counts.items()}


def resolve_studies(studies, out) -> list:
    """:func:`resolve_tuning` of each study."""
    return [resolve_tuning(study, out) for study in studies]
