"""A study judged: the lines its comparisons use, and its tables: one row per model, per cell, per trend, and the
calibration of its verdicts on its own design (the models read back from disk: :mod:`simulate.study.read.models`).

``points``
    One row per model of the study: its key, status, seed, every swept field, the Setting's
    and the options' main fields, epochs, the versions of the code, corpus, Python and torch that
    made it (``not recorded`` where its record predates them), seconds and every statistic of
    :data:`simulate.claims.statistics.STATISTICS` (NaN for a model that failed or is pending).
``lines``
    The models the comparisons use (:func:`comparison_lines`): a tuned study's cells at their chosen
    rates without the tuning seeds (``tuned``; the rate was chosen on those seeds' held-out loss, so
    they would carry the winner's curse into the comparison) and the same at each scheme's fixed rate
    (``fixed``, :func:`simulate.study.plan.tuning.fixed_rates`; only where it differs); an untuned study's
    every model (``trained``).
``levels``, ``trends``, ``calibration``
    The claims judged per cell and along each axis by :mod:`simulate.claims.along_axes`, laid out
    by :mod:`simulate.study.judge.tables`; the family's verdict rules simulated on the study's design
    (:mod:`simulate.claims.calibration`).

:func:`judge_study` makes all of them at once, a study's :class:`~simulate.study.judge.tables.StudyJudgement`:
the one object every page formats.
"""

from __future__ import annotations

import math

import pandas as pd

from simulate.claims import STATISTICS
from simulate.claims.along_axes import judge_levels, judge_trends
from simulate.claims.calibration import calibrate
from simulate.study.judge.across_width import paper_size_table
from simulate.study.judge.tables import StudyJudgement, level_frame, trend_frame
from simulate.study.read.models import VERSION_COLUMNS, Model
from theory.verdicts import RateLine

__all__ = ["points_table", "comparison_lines", "levels_table", "trends_table", "calibration_table", "judge_study"]

_POINT_FIELDS = ("depth", "width", "heads", "tokens", "lr", "weight_decay", "input_std")
_OPTION_FIELDS = ("steps", "batch", "log_every", "clip", "data")


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


def comparison_lines(study, models: list[Model]) -> dict[RateLine, list[Model]]:
    """The lines of models the comparisons use (module docstring)."""
    if not study.tuned:
        return {RateLine.TRAINED: models}
    from simulate.study.plan.tuning import fixed_rates

    tuned = [m for m in models if m.seed not in study.tune_seeds]
    rates = fixed_rates(study, models)
    fixed = [m for m in tuned if rates.get(m.scheme) == m.point.setting.lr]
    return {RateLine.TUNED: tuned, **({RateLine.FIXED: fixed} if len(fixed) < len(tuned) else {})}


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


def judge_study(study, models: list[Model], tuning: pd.DataFrame | None = None,
                candidates: list[Model] | None = None) -> StudyJudgement:
    """The judgement of ``study`` on ``models`` (those at its cells' chosen rates for a tuned study), with its
    ``tuning`` table (:func:`simulate.study.plan.tuning.tuning_table`; None for an untuned study) and, along width and
    depth, its laws at P1's sizes fitted on ``candidates`` (every model at every rate a cell tried,
    :func:`simulate.study.read.models.candidate_models`; default ``models``). Its blind tests are judged apart
    (:func:`simulate.study.judge.preregistration.write_judgements`: they read the pre-registered files' commits)."""
    trends, judgements = trends_table(study, models)
    sizes = paper_size_table(study, models if candidates is None else candidates)
    return StudyJudgement(study.name, points_table(study, models), levels_table(study, models), trends,
                          calibration_table(study, judgements), tuning, sizes if len(sizes) else None)
