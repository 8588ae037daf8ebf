"""A study's models read back from disk, the lines its comparisons use, and its tables: one row per model, per
cell, per trend, and the calibration of its verdicts on its own design.

``points``
    One row per model of the study: its key, status, seed, every swept field, the Setting's
    and the options' main fields, epochs, the versions of the code, corpus, Python and torch that
    made it (``not recorded`` where its record predates them), seconds and every statistic of
    :data:`simulate.claims.statistics.STATISTICS` (NaN for a model that failed or is pending).
``lines``
    The models the comparisons use (:func:`comparison_lines`): a tuned study's cells at their chosen
    rates without the tuning seeds (``tuned``; the rate was chosen on those seeds' held-out loss, so
    they would carry the winner's curse into the comparison) and the same at each scheme's fixed rate
    (``fixed``, :func:`simulate.study.tuning.fixed_rates`; only where it differs); an untuned study's
    every model (``trained``).
``levels``, ``trends``, ``calibration``
    The claims judged per cell and along each axis by :mod:`simulate.claims.along_axes`, laid out
    by :mod:`simulate.study.tables`; the family's verdict rules simulated on the study's design
    (:mod:`simulate.claims.calibration`).

:func:`judge_study` makes all of them at once, a study's :class:`~simulate.study.tables.StudyJudgement`:
the one object every page formats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from simulate.claims import ModelEvidence, ModelStatistics, STATISTICS, model_statistics
from simulate.claims.along_axes import judge_levels, judge_trends
from simulate.claims.calibration import calibrate
from simulate.study.point_table import point_evidence
from simulate.study.tables import StudyJudgement, level_frame, trend_frame
from simulate.sweep.store import finished_records, read_point

__all__ = ["VERSION_COLUMNS", "Model", "load_models", "distinct_models", "points_table", "comparison_lines",
           "levels_table", "trends_table", "calibration_table", "judge_study"]

# What a model rests on: column of points.parquet -> key of its record's headline (simulate.study.point)
VERSION_COLUMNS = {"code": "code", "corpus": "data", "python": "python", "torch": "torch"}
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
               *dict.fromkeys((*study.cell_fields(), *_POINT_FIELDS, *_OPTION_FIELDS)), "epochs", *VERSION_COLUMNS,
               "train_s", "score_s", "finished_at", *STATISTICS]  # also for a study with no model yet (a tuned one, early)
    rows = []
    for model in models:
        record = model.record or {}
        headline = record.get("headline") or {}
        row = {"point": model.point.key, "status": model.status, "error": record.get("error") or "",
               "seed": model.seed, "scheme": model.scheme}
        row.update({name: model.value(name) for name in (*study.cell_fields(), *_POINT_FIELDS, *_OPTION_FIELDS)})
        row.update({column: headline.get(key) or "" for column, key in VERSION_COLUMNS.items()})
        row.update(epochs=headline.get("epochs", math.nan), train_s=headline.get("train_s", math.nan), score_s=headline.get("score_s", math.nan),
                   finished_at=record.get("finished_at", ""))
        row.update(model.stats.as_dict())
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def comparison_lines(study, models: list[Model]) -> dict[str, list[Model]]:
    """The lines of models the comparisons use (module docstring)."""
    if not study.tuned:
        return {"trained": models}
    from simulate.study.tuning import fixed_rates

    tuned = [m for m in models if m.seed not in study.tune_seeds]
    rates = fixed_rates(study, models)
    fixed = [m for m in tuned if rates.get(m.scheme) == m.point.setting.lr]
    return {"tuned": tuned, **({"fixed": fixed} if len(fixed) < len(tuned) else {})}


def levels_table(study, models: list[Model]) -> pd.DataFrame:
    """One row per claim and cell (:func:`simulate.claims.along_axes.judge_levels`) of the first line."""
    return level_frame(judge_levels(study, comparison_lines(study, models)), list(study.cell_fields()))


def _trend_fields(study) -> list[str]:
    return list(dict.fromkeys(f for axis in study.axes for f in study.group_fields(axis)))


def trends_table(study, models: list[Model]) -> tuple[pd.DataFrame, list]:
    """One row per claim, axis, group and line (:func:`simulate.claims.along_axes.judge_trends`), and the
    judgements (the calibration's design)."""
    judgements = judge_trends(study, comparison_lines(study, models))
    return trend_frame(judgements, _trend_fields(study)), judgements


def calibration_table(study, judgements, studies: int = 1000) -> pd.DataFrame:
    """The family's verdict rules simulated on the study's own design
    (:func:`simulate.claims.calibration.calibrate`)."""
    family = [j for j in judgements if j.in_family and math.isfinite(j.design.residual_var)]
    return calibrate(family, study.inference, studies=studies)


def judge_study(study, models: list[Model], tuning: pd.DataFrame | None = None) -> StudyJudgement:
    """The judgement of ``study`` on ``models`` (those at its cells' chosen rates for a tuned study), with its
    ``tuning`` table (:func:`simulate.study.tuning.tuning_table`; None for an untuned study)."""
    trends, judgements = trends_table(study, models)
    return StudyJudgement(study.name, points_table(study, models), levels_table(study, models), trends,
                          calibration_table(study, judgements), tuning)
