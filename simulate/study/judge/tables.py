"""A study's judgement, in memory and on disk: :class:`StudyJudgement`, and the only writer and reader of its files
``points.parquet``, ``levels.csv``, ``trends.csv``, ``calibration.csv``, ``tuning.csv`` and ``paper_sizes.csv``.

:func:`simulate.study.judge.analysis.judge_study` makes a :class:`StudyJudgement` from a study's models,
:func:`write_tables` writes it, :func:`read_study` reads it back equal (the round trip:
tests/simulate/test_study.py::test_the_judgement_read_back_is_the_judgement_written); every page formats the
object it is given (:mod:`simulate.study.write.report`, :mod:`simulate.study.write.headline`,
:mod:`simulate.study.write.provenance`).

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

A text column read back (``shape``, ``crossing``, ``needs``, ``direction``, ...) holds '' where its writer left
the cell empty, as the judge's own frame does (:data:`TEXT_COLUMNS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simulate.claims.along_axes import describe_needs, describe_trend_shape
from simulate.claims.trends import describe_crossing
from simulate.claims.width_laws import WidthLawForm
from simulate.study.judge.preregistration import read_judgements
from simulate.study.judge.rows import interval_words, size_words, status_tally
from theory.files import atomic_write
from theory.verdicts import CellStatus, GrowthClass, PointStatus, RateLine, RateStatus, Size, Stability, Verdict

__all__ = ["LEVEL_COLUMNS", "TREND_COLUMNS", "TEXT_COLUMNS", "TABLE_FILES", "REPORT_FILES", "StudyJudgement",
           "level_frame", "trend_frame", "write_tables", "read_study", "read_verdicts", "at_full_length"]

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
REPORT_FILES = ("points.parquet", *TABLE_FILES, "study.md")  # a study's reports (simulate.study.write.report)
TEXT_COLUMNS = ("claim", "source", "statistic", "scheme", "method", "detail", "axis", "group", "line", "direction",
                "shape", "crossing", "needs")  # '' where empty, in memory and read back
_WORDS = {"verdict": Verdict, "size": Size, "growth_class": GrowthClass, "stability": Stability, "status": PointStatus,
          "line": RateLine}
_FILE_WORDS = {"tuning.csv": {"status": RateStatus, "cell_status": CellStatus},  # a rate's and a cell's state
               "paper_sizes.csv": {"line": RateLine, "law": WidthLawForm, "answer": Size}}  # "size": a model's name


def _words_of(file: str) -> dict:
    """The word columns of one of the judgement's files and their enums."""
    return _FILE_WORDS.get(file, _WORDS)


@dataclass(frozen=True)
class StudyJudgement:
    """What a study's judge says: one row per model (``points``), per claim and cell (``levels``), per claim, axis,
    group and line (``trends``), the verdict rules simulated on the study's design (``calibration``), a tuned
    study's rates (``tuning``; None for an untuned one), a study along width and depth's laws asked at P1's sizes
    (``paper_sizes``, :func:`simulate.study.judge.across_width.paper_size_table`; None for another study), a study
    along depth's variance laws (``variance_laws``, the table of
    :class:`simulate.study.judge.variance_laws.VarianceLaws`, written beside the studies as ``extrapolation.csv``;
    None for another study) and the pre-registered predictions judged against its models (``blind_tests``,
    :class:`simulate.study.judge.preregistration.Judged`; each file's commit and first start are not in the files, so
    they read back as None). Word columns hold the enums of :mod:`theory.verdicts` (and the law forms of
    :mod:`simulate.claims.width_laws`), text columns '' where empty (:data:`TEXT_COLUMNS`); columns:
    docs/formats.md#simulate-study.

    Made by :func:`simulate.study.judge.analysis.judge_study` (its blind tests by
    :func:`simulate.study.judge.preregistration.write_judgements`) or read back by :func:`read_study`: the two are
    equal.
    """

    name: str
    points: pd.DataFrame
    levels: pd.DataFrame
    trends: pd.DataFrame
    calibration: pd.DataFrame
    tuning: pd.DataFrame | None = None
    paper_sizes: pd.DataFrame | None = None
    variance_laws: pd.DataFrame | None = None
    blind_tests: tuple = ()  # of Judged

    def frames(self) -> dict[str, pd.DataFrame]:
        """``{file name: table}`` of every table the judgement writes in its folder (``tuning.csv`` only for a tuned
        study, ``paper_sizes.csv`` only for one along width and depth; the variance laws and the blind tests are
        written beside the studies: ``extrapolation.csv``, each pre-registered file's ``-judged.csv``)."""
        tables = dict(zip(("points.parquet", *TABLE_FILES), (self.points, self.levels, self.trends, self.calibration)))
        optional = {"tuning.csv": self.tuning, "paper_sizes.csv": self.paper_sizes}
        return tables | {name: frame for name, frame in optional.items() if frame is not None}

    def summary(self, axis: str | None = None) -> str:
        """A few lines to read first: the models by status, then each trend at the full length (along ``axis``
        only, if given) with the interval its verdict reads, its verdict and its answer against the papers' size,
        then each claim's level verdicts counted (``study.md`` has the rest)."""
        lines = [f"Study {self.name}: {len(self.points)} models ({status_tally(self.points['status'])})"]
        trends = at_full_length(self.trends)
        shown = trends[trends["axis"] == axis] if axis else trends
        for _, row in shown.iterrows():
            size = size_words(row)
            lines.append(f"  {row['claim']} ({row['scheme']}) along {row['axis']} ({row['group']}), line {row['line']}: "
                         f"slope {interval_words(row) or 'none'} -> {row['verdict']}" + (f"; {size}" if size else ""))
        levels = at_full_length(self.levels)
        for claim, rows in levels.groupby("claim", sort=False):
            tally = rows["verdict"].map(lambda v: "no verdict" if v is None else str(v)).value_counts()
            lines.append(f"  {claim}, {len(rows)} cells: " + ", ".join(f"{word} {n}" for word, n in tally.items()))
        return "\n".join(lines)


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
                     "size": j.size, "shape": describe_trend_shape(j),
                     "crossing": "" if j.crossing is None else describe_crossing(j.crossing, j.axis),
                     "detectable": j.detectable,
                     "reference": reference, "needs": describe_needs(j.needs), "stability": j.stability,
                     **_change(j.change, j.margin), "versions": len(j.rests_on)})
    return pd.DataFrame(rows, columns=[*TREND_COLUMNS[:5], *fields, *TREND_COLUMNS[5:]])


def _words_out(frame: pd.DataFrame, file: str) -> pd.DataFrame:
    """The word columns of ``file`` as their words ('' for none), for the file."""
    out = frame.copy()
    for column in _words_of(file):
        if column in out:
            out[column] = [str(v) if v is not None and v == v else "" for v in out[column]]
    return out


def _parse_words(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """The word columns of file ``name`` parsed into their enums (None for an empty cell); ValueError naming the
    file, the column and the word for a word the enum does not know."""
    out = frame.copy()
    for column, kind in _words_of(name).items():
        if column not in out:
            continue
        try:
            out[column] = pd.Series([kind.parse(v) if isinstance(v, str) and v else None for v in out[column]],
                                    index=out.index, dtype=object)
        except ValueError as error:
            raise ValueError(f"{name}, column {column}: {error}") from None
    return out


def write_tables(folder: Path, judgement: StudyJudgement) -> None:
    """Every table of ``judgement`` into ``folder`` (:meth:`StudyJudgement.frames`), each written whole."""
    for name, frame in judgement.frames().items():
        if name.endswith(".parquet"):
            atomic_write(Path(folder) / name,
                         lambda temp, frame=frame, name=name: _words_out(frame, name).to_parquet(temp, index=False))
        else:
            atomic_write(Path(folder) / name,
                         lambda temp, frame=frame, name=name: _words_out(frame, name).to_csv(temp, index=False))


def _read_table(path: Path) -> pd.DataFrame:
    """A judgement table read back: words parsed into their enums, text columns '' where empty."""
    frame = _parse_words(pd.read_csv(path, keep_default_na=False, na_values=[""]), path.name)
    text = [c for c in TEXT_COLUMNS if c in frame]
    return frame.astype({c: object for c in text}).fillna({c: "" for c in text})


def read_study(out, name: str) -> StudyJudgement:
    """The judgement of study ``name`` as its reports in ``out`` hold it (FileNotFoundError naming a missing
    file; ValueError naming a word no enum knows)."""
    folder = Path(out) / name
    for file in REPORT_FILES:
        if not (folder / file).is_file():
            raise FileNotFoundError(f"{folder / file}: no such study report (run python -m simulate study)")
    tables = [_read_table(folder / file) for file in TABLE_FILES]
    tuning, paper_sizes = (_parse_words(pd.read_csv(folder / file), file) if (folder / file).is_file() else None
                           for file in ("tuning.csv", "paper_sizes.csv"))
    points = _parse_words(pd.read_parquet(folder / "points.parquet"), "points.parquet")
    blind_tests = tuple(judged for judged in read_judgements(out) if judged.study == name)
    laws = Path(out) / "extrapolation.csv"
    variance_laws = pd.read_csv(laws) if laws.is_file() else None
    if variance_laws is not None and set(variance_laws.get("study", ())) != {name}:
        variance_laws = None  # another study's laws, none (no scheme fitted), or a file that did not name its study
    return StudyJudgement(name, points, *tables, tuning, paper_sizes, variance_laws, blind_tests)


def read_verdicts(out, name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(levels, trends)`` of a study's reports with their verdicts parsed, every other word column left as it
    was written: a run's reports written by an earlier version, for comparing two runs (simulate.study.judge.changes).
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
