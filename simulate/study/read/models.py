"""A study's models read back from disk: each point's record, long table, evidence and statistics.

:func:`load_models` reads every model of one study (a pending one where its point has not finished),
:func:`distinct_models` those of several studies once each; a :class:`Model` is what the judge
(:func:`simulate.study.judge.analysis.judge_study`), the tuning (:mod:`simulate.study.plan.tuning`) and the
figures read.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from simulate.claims import ModelEvidence, ModelStatistics, model_statistics
from simulate.study.read.point_table import point_evidence
from simulate.sweep.store import finished_records, read_point, record_status
from theory.verdicts import PointStatus

__all__ = ["VERSION_COLUMNS", "Model", "load_models", "candidate_models", "distinct_models"]

# What a model rests on: column of points.parquet -> key of its record's headline (simulate.study.train.point)
VERSION_COLUMNS = {"code": "code", "corpus": "data", "python": "python", "torch": "torch"}


@dataclass(frozen=True)
class Model:
    """One trained model of a study: its point, status (ok, failed, pending), record, long table (read through
    :mod:`simulate.study.read.point_table`), evidence and statistics."""

    point: object
    status: PointStatus
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

    @property
    def versions(self) -> tuple:
        """What the model rests on: its record's ``(code, corpus, Python, torch)`` ('' where not recorded)."""
        headline = (self.record or {}).get("headline") or {}
        return tuple(headline.get(key) or "" for key in VERSION_COLUMNS.values())


def _load(points, out, statistics: bool) -> list[Model]:
    records = finished_records(out, [p.key for p in points])
    models = []
    for point in points:
        if point.key not in records:
            models.append(Model(point, PointStatus.PENDING, None, None, None, ModelStatistics.missing()))
            continue
        record, table = read_point(out, point.key)
        status = record_status(record)
        evidence = point_evidence(table, point.setting.depth)
        stats = model_statistics(evidence) if status is PointStatus.OK and statistics else ModelStatistics.missing()
        models.append(Model(point, status, record, table, evidence, stats))
    return models


def load_models(study, out, statistics: bool = True) -> list[Model]:
    """Every model of ``study`` as found in ``out``: finished points read (and measured), the rest pending.

    ``statistics=False`` skips :func:`model_statistics` (about a second per deep model, for its
    growth fits at every logged step): figures that draw the tables need only those.
    """
    return _load(study.sweep.points, out, statistics)


def candidate_models(study, out, statistics: bool = True) -> list[Model]:
    """Every model of a resolved study (:func:`simulate.study.plan.tuning.resolve_tuning`) at every rate its cells
    tried (a tuned study's grid, the tuning models among them), or, untuned, its models (:func:`load_models`)."""
    return _load((study.candidates or study.sweep).points, out, statistics)


def distinct_models(studies, out, statistics: bool = False) -> dict[str, Model]:
    """The models of several studies by point key, each read once (a model shared by two studies is one;
    its point is that of the first study that has it). ``statistics`` as in :func:`load_models`."""
    points = {}
    for study in studies:
        for point in study.sweep.points:
            points.setdefault(point.key, point)
    return {model.point.key: model for model in _load(list(points.values()), out, statistics)}
