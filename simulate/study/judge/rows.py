"""One row of a study's judgement tables in words: the interval its verdict reads, its answer against the papers'
size, its stability, a swept value; the one place each of these is formatted, for every page (``study.md``, the
results README's headline answers, the atlas tables, the figures' captions).

A row is a level's (``mean``, ``low``, ``high``, ``confidence``) or a trend's (``slope`` ..., the family's
``family_low`` ...) as :class:`simulate.study.judge.tables.StudyJudgement` holds it, whether just judged or read back
from the files (the two are equal: tests/simulate/test_study.py::test_the_judgement_read_back_is_the_judgement_written).

>>> row = pd.Series({"claim": "p1-lns-loss", "slope": 0.5, "low": 0.1, "high": 0.9, "confidence": 0.95,
...                  "family_low": -0.2, "family_high": 1.2, "family_confidence": 0.997, "in_family": True})
>>> verdict_interval(row).format(), interval_words(row)
('0.5 [-0.2, 1.2]', '0.5 [-0.2, 1.2] (99.7 %, simultaneous)')
>>> value_text(0.003), value_text(64), value_text("lns")
('0.003', '64', 'lns')
"""

from __future__ import annotations

import math
from collections import Counter
from enum import Enum

import pandas as pd

from simulate.claims import CLAIMS
from simulate.claims.judgement import Interval, describe_size, describe_stability, level_label
from theory.verdicts import PointStatus

__all__ = ["status_tally", "verdict_interval", "change_interval", "interval_words", "size_words", "stability_words",
           "value_text", "cell_text"]


def status_tally(statuses) -> str:
    """The models counted by status, every status named (``statuses``: :class:`~theory.verdicts.PointStatus`
    members, e.g. a judgement's ``points["status"]``).

    >>> status_tally([PointStatus.OK, PointStatus.OK, PointStatus.PENDING])
    '2 ok, 0 failed, 1 pending'
    """
    counts = Counter(statuses)
    return ", ".join(f"{counts[status]} {status}" for status in PointStatus)


def cell_text(value) -> str:
    """A table cell as a reader should see it: '' where the value is missing (NaN, None), else its text.

    >>> cell_text(float("nan")), cell_text(None), cell_text(0.5)
    ('', '', '0.5')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def value_text(value) -> str:
    """A swept field's value as text: a float in its shortest form (``0.003``, not ``0.0030000000000000001``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def verdict_interval(row) -> Interval:
    """The interval a row's verdict reads: a trend in the family at the family's level (``family_low``,
    ``family_high``, ``family_confidence``), any other trend its slope's, a level its own; every page prints this
    one beside the verdict (docs/studies.md#verdicts).

    >>> verdict_interval(pd.Series({"mean": 1.0, "low": 0.5, "high": 1.5, "confidence": 0.9})).format()
    '1 [0.5, 1.5]'
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


def interval_words(row) -> str:
    """``0.0054 [-0.0066, 0.017] (99.7 %, simultaneous)``: the estimate and the interval its verdict reads, with its
    level where that is not the row's own (a family member's); '' without an estimate."""
    interval = verdict_interval(row)
    text = interval.format()
    if text and interval.bounded and "slope" in row and bool(row.get("in_family")) \
            and interval.confidence != row["confidence"]:
        text += f" ({level_label(interval.confidence)}, simultaneous)"
    return text


def size_words(row) -> str:
    """The answer against the papers' size of a levels' or trends' row ('' for a claim without one)."""
    claim = CLAIMS[row["claim"]]
    if claim.reference is None or not isinstance(row.get("size"), Enum) or pd.isna(row.get("reference")):
        return ""
    trend = "slope" in row
    unit = f" per e-fold of {row['axis']}" if trend else ""
    return describe_size(row["size"], verdict_interval(row), claim.reference, float(row["reference"]), unit, trend)


def stability_words(row) -> str:
    """``stable (change -0.11 [90 % -0.22, 0.00], margin ±0.25)`` of a levels' or trends' row, '' without one."""
    if row["stability"] is None:
        return ""
    return describe_stability(row["stability"], change_interval(row), float(row["margin"]))
