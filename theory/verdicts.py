"""The words of every judgement the workbench prints: one enum per kind, each word defined once.

A judgement's word is an enum member, never a bare string: it prints as its word
(``str(Verdict.HOLDS) == "holds"``) but does not compare equal to one, so a misspelt or stale
word is an error where it is read (:meth:`Word.parse`), not a silent mismatch. The module sits
at the bottom of the workbench (no imports but the standard library), so the random-init checks
(``simulate.compare``), the accuracy map (``theory.accuracy``) and the trained claims
(``simulate.claims``) share the words without importing each other. Which rule chooses a word
lives with what it judges.

>>> str(Verdict.HOLDS), Verdict.HOLDS == "holds", Verdict.parse("violated") is Verdict.VIOLATED
('holds', False, True)
>>> Verdict.parse("hold")
Traceback (most recent call last):
...
ValueError: 'hold' is not a Verdict word: one of holds, holds as a bound, holds approximately, ...
>>> f"{GrowthClass.EXPONENTIAL:>12}|", Stability.parse("moves").name
(' exponential|', 'MOVES')
>>> sorted([Stability.MOVES, Stability.STABLE])  # a word sorts by its place in its enum (tables group by words)
[<Stability.STABLE: 'stable'>, <Stability.MOVES: 'moves'>]
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Word", "Verdict", "Size", "GrowthClass", "BlindTest", "Stability", "AccuracyClass", "PointStatus",
           "RateStatus", "CellStatus", "RateLine"]


class Word(Enum):
    """A judgement's word: prints as its value; :meth:`parse` reads one back and refuses an unknown word."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __lt__(self, other):
        """Declaration order within one enum (pandas sorts the keys it groups by); no order across enums."""
        if type(other) is not type(self):
            return NotImplemented
        members = list(type(self))
        return members.index(self) < members.index(other)

    @classmethod
    def parse(cls, word, field: str | None = None):
        """The member whose word is ``word`` (a member is returned as it is); ValueError naming the allowed words
        (the first three, then ``...``) for anything else, or, for the input ``field`` of a caller, naming the field
        and every allowed word (``law='cubic' is not allowed: one of power, exponential in L``)."""
        if isinstance(word, cls):
            return word
        try:
            return cls(word)
        except ValueError:
            allowed = [member.value for member in cls]
            if field is not None:
                raise ValueError(f"{field}={word!r} is not allowed: one of {', '.join(allowed)}") from None
            shown = ", ".join(allowed[:3]) + (", ..." if len(allowed) > 3 else "")
            raise ValueError(f"{word!r} is not a {cls.__name__} word: one of {shown}") from None


class Verdict(Word):
    """What a check or a claim says: the random-init laws (``simulate.compare``), the trained claims' levels and
    trends (``simulate.claims``)."""

    HOLDS = "holds"
    HOLDS_AS_BOUND = "holds as a bound"
    HOLDS_APPROXIMATELY = "holds approximately"
    VIOLATED = "violated"
    INCONCLUSIVE = "inconclusive"
    UNRESOLVABLE = "design cannot resolve"
    NO_PREDICTION = "no prediction"
    NOT_MEASURED = "not measured"
    NOT_APPLICABLE = "not applicable at init"
    NO_DIRECTION = "no direction claimed"
    TOO_FEW_AXIS_VALUES = "too few axis values"
    CONFOUNDED = "confounded with the rate"  # a trend whose cells change rate where too few remain to hold it apart

    @property
    def judged(self) -> bool:
        """Whether the word is a judgement of the evidence (holds, violated, inconclusive, cannot resolve), not
        the absence of one."""
        return self in (Verdict.HOLDS, Verdict.VIOLATED, Verdict.INCONCLUSIVE, Verdict.UNRESOLVABLE)


class Size(Word):
    """A claim's effect against the size the papers report (``simulate.claims``): the second question of a verdict
    beside its direction, read from the same interval."""

    AS_LARGE = "as large as the papers say"
    SMALLER = "in the papers' direction, smaller than they say"
    SMALLER_UNSIGNED = "smaller than the papers say, direction not resolved"
    LARGER = "larger than the papers say"
    OPPOSITE = "opposite to the papers"
    CANNOT_TELL = "cannot tell"
    NO_SIZE = "no size given"
    NOT_MEASURED = "not measured"


class GrowthClass(Word):
    """The shape of a variance profile over the blocks of one model (``simulate.claims.growth``)."""

    POLYNOMIAL = "polynomial"
    EXPONENTIAL = "exponential"
    UNDETERMINED = "undetermined"
    NOT_IDENTIFIABLE = "not identifiable"  # too few blocks for the fits to tell the classes apart


class BlindTest(Word):
    """A law's prediction of models it was not fitted on, once they exist."""

    PASSES = "passes"
    PASSES_UNINFORMATIVE = "passes, uninformative"
    FAILS = "fails"
    PENDING = "pending"
    NOT_TESTABLE = "not testable"  # its models will never exist (a fixed rate's seeds where the cell chose another)


class PointStatus(Word):
    """Where a sweep's or a study's point stands: its record's ``status`` on disk is the word
    (``simulate.sweep.store.record_status`` reads it back); the sweep's summary, a study's models and its
    judgement's ``points`` table hold the member."""

    OK = "ok"  # run (trained, scored) and recorded
    FAILED = "failed"  # recorded with its error (a blow-up, another code version), what was measured kept
    PENDING = "pending"  # planned, no record on disk yet


class RateStatus(Word):
    """Where one rate of a tuned study's tuning cell stands (``simulate.study.plan.tuning``): the ``status`` column of
    its ``tuning.csv`` holds the word, the judgement's ``tuning`` table the member."""

    OK = "ok"  # every tuning seed finished, and their held-out loss is finite and below the uniform guess
    DIVERGED = "diverged"  # finished, but a model failed or learned nothing (loss not finite or above log 256)
    PENDING = "pending"  # a tuning seed at this rate has not finished


class CellStatus(Word):
    """Where a tuned study's tuning cell stands (``simulate.study.plan.tuning``): the ``cell_status`` column of its
    ``tuning.csv``."""

    TUNED = "tuned"  # every rate it reached finished, and it chose one
    FAILED = "failed"  # every rate it reached diverged: no models, its rates in the table
    PENDING = "pending"  # a rate it reached is pending: no rate chosen yet


class RateLine(Word):
    """Which models a study's comparison reads (``simulate.study.judge.analysis.comparison_lines``): its line.
    Declared in the order of the words, so that a table sorted by its line keeps the order it had as text."""

    FIXED = "fixed"  # each scheme at one rate in every cell (the one most cells chose), where that differs
    TRAINED = "trained"  # an untuned study: every model
    TUNED = "tuned"  # each cell at the rate it chose, the tuning seeds left out (they chose it)


class Stability(Word):
    """Whether a statistic holds still between a shorter and the full training length (``simulate.claims``)."""

    STABLE = "stable"  # the change lies inside the claim's declared margin (two one-sided tests)
    MOVES = "moves"  # the change lies beyond the margin
    CANNOT_TELL = "cannot tell"  # neither


class AccuracyClass(Word):
    """Where a law is exact at init, per curve of the accuracy map (``simulate.accuracy``; ``theory.accuracy``
    reads it), best first."""

    WITHIN_NOISE = "within noise"
    WITHIN_1 = "within 1 %"
    WITHIN_5 = "within 5 %"
    WORSE = "worse"
    UNRESOLVED = "unresolved"
    BOUND_HOLDS = "bound holds"
    BOUND_CROSSED = "bound crossed"
    NOT_MEASURED = "not measured"

    @property
    def resolved(self) -> bool:
        """Whether the class says something of the law's error (not unresolved, not unmeasured)."""
        return self not in (AccuracyClass.UNRESOLVED, AccuracyClass.NOT_MEASURED)
