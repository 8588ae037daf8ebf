"""The words a verdict may say: one enum for the random-init checks and the trained claims.

A :class:`Verdict` is a ``str``, so tables and CSV files keep their text (``"holds"``) and a
verdict read back from a file compares equal to its member. The rules that choose one live
with what they judge: the random-init curves in :mod:`simulate.compare`, a claimed sign in
:meth:`simulate.claims.intervals.Interval.verdict`, a growth class in
:mod:`simulate.claims.growth`, a trend in :mod:`simulate.claims.trends`.

>>> Verdict.HOLDS == "holds", f"{Verdict.VIOLATED}", Verdict("inconclusive").name, {Verdict.HOLDS: 1}["holds"]
(True, 'violated', 'INCONCLUSIVE', 1)
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Verdict"]


class Verdict(str, Enum):
    """A verdict's word (module docstring)."""

    HOLDS = "holds"
    HOLDS_AS_BOUND = "holds as a bound"
    HOLDS_APPROXIMATELY = "holds approximately"
    VIOLATED = "violated"
    INCONCLUSIVE = "inconclusive"
    NO_PREDICTION = "no prediction"
    NOT_MEASURED = "not measured"
    NOT_APPLICABLE = "not applicable at init"
    NO_DIRECTION = "no direction claimed"
    TOO_FEW_AXIS_VALUES = "too few axis values"

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__
    __hash__ = str.__hash__  # a dict keyed by verdicts finds them by their words (Enum hashes the name)
