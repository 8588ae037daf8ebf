"""A study's judgement tables on disk: the only writer and reader of ``levels.csv``, ``trends.csv`` and
``calibration.csv``.

:func:`level_frame` and :func:`trend_frame` lay the judges' typed records
(:class:`~simulate.claims.judgement.Judgement`, :class:`~simulate.claims.judgement.TrendJudgement`)
out as tables, one row each, with the words of :mod:`theory.verdicts` as enum members; the files
hold the words. :func:`read_study` reads a study's reports back and parses every word column into
its enum, refusing a word it does not know (a table written by other code), so that nothing
downstream compares words as strings. Columns: docs/formats.md#simulate-study.

>>> from theory.verdicts import Verdict
>>> frame = pd.DataFrame({"verdict": ["holds", ""], "stability": ["stable", ""]})
>>> parsed = _parse_words(frame, "levels.csv")
>>> parsed["verdict"].tolist()[0] is Verdict.HOLDS, parsed["verdict"].tolist()[1]
(True, None)
>>> _parse_words(pd.DataFrame({"verdict": ["hold"]}), "levels.csv")
Traceback (most recent call last):
...
ValueError: levels.csv, column verdict: 'hold' is not a Verdict word: one of holds, holds as a bound, holds approximately, ...

A text column read back (``shape``, ``crossing``, ``needs``, ``direction``) holds NaN where its
writer left the cell empty; :func:`words` gives what a reader should see:

>>> words(float("nan")), words("stable"), words(None)
('', 'stable', '')

and :func:`value_text` a swept field's value as the reports name it:

>>> value_text(0.003), value_text(64), value_text("lns")
('0.003', '64', 'lns')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simulate.claims.judgement import Interval
from theory.files import atomic_write
from theory.verdicts import GrowthClass, Size, Stability, Verdict

__all__ = ["LEVEL_COLUMNS", "TREND_COLUMNS", "TABLE_FILES", "REPORT_FILES", "StudyResults", "level_frame",
           "trend_frame", "write_tables", "read_study", "read_verdicts", "at_full_length", "words", "value_text",
           "verdict_interval", "change_interval"]

LEVEL_COLUMNS = ("claim", "source", "statistic", "scheme", "n", "mean", "low", "high", "confidence", "method",
                 "verdict", "size", "reference", "detectable", "growth_class", "detail", "stability", "change",
                 "change_low", "change_high", "change_confidence", "change_dof", "margin",
                 "versions")  # the cell's fields come after "scheme"
TREND_COLUMNS = ("claim", "source", "statistic", "scheme", "axis", "group", "line", "n", "failed", "pending",
                 "cells", "rates", "slope", "low", "high", "confidence", "family_low", "family_high",
                 "family_confidence", "lack_of_fit_p", "p_value", "p_adjusted", "in_family", "direction", "verdict",
                 "size", "shape", "crossing", "detectable", "reference", "needs", "stability", "change", "change_low",
                 "change_high", "change_confidence", "change_dof", "margin",
                 "versions")  # the group's fields come after "axis"
TABLE_FILES = ("levels.csv", "trends.csv", "calibration.csv")
REPORT_FILES = ("points.parquet", *TABLE_FILES, "study.md")  # a study's reports (simulate.study.report)
_WORDS = {"verdict": Verdict, "size": Size, "growth_class": GrowthClass, "stability": Stability}


@dataclass(frozen=True)
class StudyResults:
    """A study's report tables read back (:func:`read_study`)."""

    name: str
    points: pd.DataFrame
    levels: pd.DataFrame
    trends: pd.DataFrame
    calibration: pd.DataFrame
    tuning: pd.DataFrame | None = None  # a tuned study's tuning.csv


def _change(change, margin: float) -> dict:
    return {"change": change.estimate, "change_low": change.low, "change_high": change.high,
            "change_confidence": change.confidence if change.bounded else math.nan, "change_dof": change.dof,
            "margin": margin}


def level_frame(judgements, fields) -> pd.DataFrame:
    """One row per level judgement (module docstring); ``fields``: the cell's fields, in order."""
    rows = [{"claim": j.claim.id, "source": j.claim.source, "statistic": j.statistic,
             "scheme": "-".join(j.claim.schemes),
             **{f: j.cell.get(f) for f in fields}, "n": j.n, "mean": j.estimate.estimate, "low": j.estimate.low,
             "high": j.estimate.high, "confidence": j.estimate.confidence, "method": j.estimate.method,
             "verdict": j.verdict, "size": j.size,
             "reference": j.claim.reference.level if j.claim.reference and j.claim.reference.level is not None
             else math.nan, "detectable": j.detectable, "growth_class": j.growth_class, "detail": j.comment,
             "stability": j.stability, **_change(j.change, j.margin), "versions": len(j.rests_on)} for j in judgements]
    return pd.DataFrame(rows, columns=[*LEVEL_COLUMNS[:4], *fields, *LEVEL_COLUMNS[4:]])


def trend_frame(judgements, fields) -> pd.DataFrame:
    """One row per trend judgement (module docstring); ``fields``: every field a group may fix, in order."""
    rows = []
    for j in judgements:
        reference = j.claim.reference_trend(j.axis)
        reference = math.nan if reference is None else reference
        rows.append({"claim": j.claim.id, "source": j.claim.source, "statistic": j.statistic,
                     "scheme": "-".join(j.claim.schemes), "axis": j.axis, **{f: j.group.get(f) for f in fields},
                     "group": ", ".join(f"{k}={v}" for k, v in j.group.items()) or "all", "line": j.line, "n": j.n,
                     "failed": j.failed, "pending": j.pending, "cells": j.cells, "rates": j.rates,
                     "slope": j.slope.estimate, "low": j.slope.low, "high": j.slope.high,
                     "confidence": j.slope.confidence, "family_low": j.family.low, "family_high": j.family.high,
                     "family_confidence": j.family.confidence, "lack_of_fit_p": j.lack_of_fit, "p_value": j.p_value,
                     "p_adjusted": j.p_adjusted, "in_family": j.in_family,
                     "direction": {1: "rises", -1: "falls", None: ""}[j.direction], "verdict": j.verdict,
                     "size": j.size, "shape": j.shape, "crossing": j.crossing, "detectable": j.detectable,
                     "reference": reference, "needs": j.needs, "stability": j.stability,
                     **_change(j.change, j.margin), "versions": len(j.rests_on)})
    return pd.DataFrame(rows, columns=[*TREND_COLUMNS[:5], *fields, *TREND_COLUMNS[5:]])


def _words_out(frame: pd.DataFrame) -> pd.DataFrame:
    """The word columns as their words ('' for none), for the files."""
    out = frame.copy()
    for column in _WORDS:
        if column in out:
            out[column] = [str(v) if v is not None and v == v else "" for v in out[column]]
    return out


def words(value) -> str:
    """A table's text cell as a reader should see it: '' where the value is missing (NaN or None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def value_text(value) -> str:
    """A swept field's value as text: a float in its shortest form (``0.003``, not ``0.0030000000000000001``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def verdict_interval(row) -> Interval:
    """The interval a row's verdict reads, as its table holds it: a trend in the family at the family's level
    (``family_low``, ``family_high``, ``family_confidence``), any other trend its slope's, a level its own; every page
    prints this one beside the verdict (docs/studies.md#verdicts).

    >>> row = pd.Series({"slope": 0.5, "low": 0.1, "high": 0.9, "confidence": 0.95, "family_low": -0.2,
    ...                  "family_high": 1.2, "family_confidence": 0.99, "in_family": True})
    >>> verdict_interval(row).format(), verdict_interval(row).confidence
    ('0.5 [-0.2, 1.2]', 0.99)
    """
    if "slope" not in row:
        return Interval(row["mean"], row["low"], row["high"], row["confidence"])
    if bool(row.get("in_family")) and pd.notna(row.get("family_confidence")):
        return Interval(row["slope"], row["family_low"], row["family_high"], row["family_confidence"])
    return Interval(row["slope"], row["low"], row["high"], row["confidence"])


def change_interval(row) -> Interval:
    """A row's change between the two training lengths with its interval (at the two one-sided tests' level)."""
    return Interval(row["change"], row["change_low"], row["change_high"], row["change_confidence"],
                    dof=row["change_dof"])


def _parse_words(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """The word columns parsed into their enums (None for an empty cell); ValueError naming the file, the
    column and the word for a word the enum does not know."""
    out = frame.copy()
    for column, kind in _WORDS.items():
        if column not in out:
            continue
        try:
            out[column] = pd.Series([kind.parse(v) if isinstance(v, str) and v else None for v in out[column]],
                                    index=out.index, dtype=object)
        except ValueError as error:
            raise ValueError(f"{name}, column {column}: {error}") from None
    return out


def write_tables(folder: Path, levels: pd.DataFrame, trends: pd.DataFrame, calibration: pd.DataFrame) -> None:
    """``levels.csv``, ``trends.csv`` and ``calibration.csv`` of a study into ``folder``, each written whole."""
    for name, frame in zip(TABLE_FILES, (levels, trends, calibration)):
        atomic_write(Path(folder) / name, lambda temp, frame=frame: _words_out(frame).to_csv(temp, index=False))


def read_study(out, name: str) -> StudyResults:
    """The report tables of study ``name`` in ``out``, words parsed (FileNotFoundError naming a missing file)."""
    folder = Path(out) / name
    for file in REPORT_FILES:
        if not (folder / file).is_file():
            raise FileNotFoundError(f"{folder / file}: no such study report (run python -m simulate study)")
    tables = [_parse_words(pd.read_csv(folder / file, keep_default_na=False, na_values=[""]), file)
              for file in TABLE_FILES]
    tuning = pd.read_csv(folder / "tuning.csv") if (folder / "tuning.csv").is_file() else None
    return StudyResults(name, pd.read_parquet(folder / "points.parquet"), *tables, tuning)


def read_verdicts(out, name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(levels, trends)`` of a study's reports with their verdicts parsed, every other word column left as it
    was written: a run's reports written by an earlier version, for comparing two runs (simulate.study.changes).
    FileNotFoundError naming a missing file."""
    folder = Path(out) / name
    frames = []
    for file in TABLE_FILES[:2]:
        if not (folder / file).is_file():
            raise FileNotFoundError(f"{folder / file}: no such study report (run python -m simulate study)")
        frame = pd.read_csv(folder / file, keep_default_na=False, na_values=[""])
        parsed = _parse_words(frame[["verdict"]], file)
        frames.append(frame.assign(verdict=parsed["verdict"]))
    return frames[0], frames[1]


def at_full_length(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a report table at the study's full length (its longest ``steps``; every row of a study
    without that column): the verdicts a run reports, a stability study's shorter twins apart."""
    if "steps" not in table or table["steps"].isna().all():
        return table
    return table[table["steps"] == table["steps"].max()]
