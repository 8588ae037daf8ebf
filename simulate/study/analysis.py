"""A study's models read back from disk, and its three tables: one row per model, per cell, per trend.

``points``
    One row per model of the study: its key, status, seed, every swept field, the Setting's
    and the options' main fields, epochs, code version, seconds and every statistic of
    :data:`simulate.claims.statistics.STATISTICS` (NaN for a model that failed or is pending).
``levels``, ``trends``
    The claims judged per cell and along each axis by :mod:`simulate.claims.along_axes`, each
    row with its ``stability`` (:mod:`simulate.study.stability`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from simulate.claims import ModelEvidence, ModelStatistics, STATISTICS, level_rows, model_statistics, trend_rows
from simulate.study.point_table import point_evidence
from simulate.study.stability import stability_column
from simulate.sweep.store import finished_records, read_point

__all__ = ["Model", "load_models", "distinct_models", "points_table", "levels_table", "trends_table"]

_POINT_FIELDS = ("depth", "width", "heads", "tokens", "lr", "weight_decay", "input_std")
_OPTION_FIELDS = ("steps", "batch", "log_every", "clip", "data")


@dataclass(frozen=True)
class Model:
    """One trained model of a study: its point, status (ok, failed, pending), record, long table (read through
    :mod:`simulate.study.point_table`), evidence and statistics."""

    point: object
    status: str
    record: dict | None
    table: pd.DataFrame | None
    evidence: ModelEvidence | None
    stats: ModelStatistics

    @property
    def scheme(self) -> str:
        return self.point.setting.scheme

    @property
    def seed(self) -> int:
        return self.point.seed

    @property
    def profiles(self) -> dict:
        """``{step: var over layers 0..L}`` of every logged step (empty for a pending model)."""
        return self.evidence.profiles if self.evidence is not None else {}

    def value(self, name: str):
        """The model's value of a swept field, a Setting field or an option."""
        if name in self.point.axes:
            return self.point.axes[name]
        if hasattr(self.point.setting, name):
            return getattr(self.point.setting, name)
        return self.point.options[name]

    def cell(self, fields) -> tuple:
        return tuple(self.value(f) for f in fields)


def _load(points, out, statistics: bool) -> list[Model]:
    records = finished_records(out, [p.key for p in points])
    models = []
    for point in points:
        if point.key not in records:
            models.append(Model(point, "pending", None, None, None, ModelStatistics.missing()))
            continue
        record, table = read_point(out, point.key)
        ok = record["status"] == "ok"
        evidence = point_evidence(table, point.setting.depth)
        stats = model_statistics(evidence) if ok and statistics else ModelStatistics.missing()
        models.append(Model(point, record["status"], record, table, evidence, stats))
    return models


def load_models(study, out, statistics: bool = True) -> list[Model]:
    """Every model of ``study`` as found in ``out``: finished points read (and measured), the rest pending.

    ``statistics=False`` skips :func:`model_statistics` (about a second per deep model, for its
    growth fits at every logged step): figures that draw the tables need only those.
    """
    return _load(study.sweep.points, out, statistics)


def distinct_models(studies, out, statistics: bool = False) -> dict[str, Model]:
    """The models of several studies by point key, each read once (a model shared by two studies is one;
    its point is that of the first study that has it). ``statistics`` as in :func:`load_models`."""
    points = {}
    for study in studies:
        for point in study.sweep.points:
            points.setdefault(point.key, point)
    return {model.point.key: model for model in _load(list(points.values()), out, statistics)}


def points_table(study, models: list[Model]) -> pd.DataFrame:
    """One row per model (module docstring)."""
    columns = ["point", "status", "error", "seed", "scheme",
               *dict.fromkeys((*study.cell_fields(), *_POINT_FIELDS, *_OPTION_FIELDS)), "epochs", "code", "train_s",
               "score_s", "finished_at", *STATISTICS]  # also for a study with no model yet (a tuned one, early)
    rows = []
    for model in models:
        record = model.record or {}
        headline = record.get("headline") or {}
        row = {"point": model.point.key, "status": model.status, "error": record.get("error") or "",
               "seed": model.seed, "scheme": model.scheme}
        row.update({name: model.value(name) for name in (*study.cell_fields(), *_POINT_FIELDS, *_OPTION_FIELDS)})
        row.update(epochs=headline.get("epochs", math.nan), code=headline.get("code", ""),
                   train_s=headline.get("train_s", math.nan), score_s=headline.get("score_s", math.nan),
                   finished_at=record.get("finished_at", ""))
        row.update(model.stats.as_dict())
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def levels_table(study, models: list[Model]) -> pd.DataFrame:
    """One row per claim and cell (:func:`simulate.claims.along_axes.level_rows`), with its stability."""
    fields = study.cell_fields()
    levels = level_rows(study.claims, models, fields, study.inference)
    levels["stability"] = ""
    if len(levels):
        pairing = ["claim", "statistic", "scheme", *(f for f in fields if f != "steps")]
        levels["stability"] = stability_column(levels, pairing, study.stability)
    return levels


def trends_table(study, models: list[Model]) -> pd.DataFrame:
    """One row per claim, axis and group (:func:`simulate.claims.along_axes.trend_rows`), with its stability."""
    trends = trend_rows(study.claims, models, study.axes, study.group_fields, study.inference)
    trends["stability"] = ""
    if len(trends):
        pairing = ["claim", "statistic", "scheme", "axis",
                   *(f for axis in study.axes for f in study.group_fields(axis) if f != "steps")]
        trends["stability"] = stability_column(trends, list(dict.fromkeys(pairing)), study.stability)
    return trends
