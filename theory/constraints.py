"""One vocabulary for what a field may hold: intervals, choices, types, each with its one-line message.

In the style of scikit-learn's parameter validation: a field is declared with a
:class:`Constraint` (:class:`Integer`, :class:`Real`, :class:`Choice`, :class:`Boolean`, :class:`Text`,
:class:`ListOf` for a list of such, and :class:`Optional` / ``|`` to combine them); :meth:`Constraint.check` raises
:class:`ConstraintError`, whose message is the workbench's one line
``name=value is not allowed: <what is allowed>``. The Setting, the training options, the
sweep and study options and the command lines declare their fields with these, so a rule is
written once and its message is the same everywhere; the property tests generate invalid
values from the same declarations. Rules between two fields (``heads`` divides ``width``)
stay explicit where the fields meet. Pure Python: no numpy, no torch.

>>> Integer(1).check("depth", 4)
4
>>> Integer(1).check("depth", True)
Traceback (most recent call last):
...
theory.constraints.ConstraintError: depth=True is not allowed: an integer >= 1
>>> Real(0.0, 1.0, low_open=True).allowed, Choice("pre", "lns").allowed, Choice("llama").allowed
('a real number in (0, 1]', 'one of pre, lns', 'one of llama')
>>> (Choice("all") | Integer(1)).check("pairs", 0)
Traceback (most recent call last):
...
theory.constraints.ConstraintError: pairs=0 is not allowed: 'all' or an integer >= 1
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ConstraintError", "Constraint", "Integer", "Real", "Choice", "Boolean", "Text", "ListOf", "Optional",
           "AnyOf", "check_fields"]


class ConstraintError(ValueError):
    """A field holds a value its constraint does not allow; ``field``, ``value`` and ``allowed`` say which."""

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field, self.value, self.allowed = field_name, value, allowed
        super().__init__(f"{field_name}={value!r} is not allowed: {allowed}")


class Constraint:
    """What a field may hold. Subclasses give :meth:`accepts` and :attr:`allowed` (the message's end)."""

    allowed: str = ""

    def accepts(self, value: Any) -> bool:
        raise NotImplementedError

    def check(self, name: str, value: Any, error: type[ConstraintError] = ConstraintError) -> Any:
        """``value`` if allowed, else ``error(name, value, self.allowed)`` (a :class:`ConstraintError` subclass)."""
        if not self.accepts(value):
            raise error(name, value, self.allowed)
        return value

    def __or__(self, other: "Constraint") -> "AnyOf":
        return AnyOf((self, other))

    def argparse_type(self, convert: Callable[[str], Any]) -> Callable[[str], Any]:
        """An argparse ``type``: ``convert`` the text, then check it (argparse prints the one-line message).

        >>> Integer(1).argparse_type(int)("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: '0' is not allowed: an integer >= 1
        """
        def parse(text: str) -> Any:
            try:
                value = convert(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r} is not allowed: {self.allowed}") from None
            if not self.accepts(value):
                raise argparse.ArgumentTypeError(f"{text!r} is not allowed: {self.allowed}")
            return value

        parse.__name__ = self.allowed
        return parse


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Integer(Constraint):
    """An int (not a bool) in ``low..high`` (either bound may be None: open)."""

    low: int | None = None
    high: int | None = None

    @property
    def allowed(self) -> str:
        if self.low is not None and self.high is not None:
            return f"an integer in {self.low}..{self.high}"
        if self.low is not None:
            return f"an integer >= {self.low}"
        return "an integer" if self.high is None else f"an integer <= {self.high}"

    def accepts(self, value: Any) -> bool:
        return _is_int(value) and (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class Real(Constraint):
    """A finite real number (an int or a float, not a bool) in an interval; ``note`` ends the message.

    >>> Real(0.0).allowed, Real(0.0, note="0 = no clipping").allowed
    ('a real number in [0, inf)', 'a real number in [0, inf) (0 = no clipping)')
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    note: str = ""

    @property
    def allowed(self) -> str:
        lo = "(" if self.low_open or self.low == -math.inf else "["
        hi = ")" if self.high_open or self.high == math.inf else "]"
        text = f"a real number in {lo}{self.low:g}, {self.high:g}{hi}"
        return f"{text} ({self.note})" if self.note else text

    def accepts(self, value: Any) -> bool:
        if not _is_real(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


@dataclass(frozen=True)
class Choice(Constraint):
    """One of ``values`` (compared with ``==``; a bool is never an int's choice)."""

    values: tuple

    def __init__(self, *values: Any):
        object.__setattr__(self, "values", tuple(values))

    @property
    def allowed(self) -> str:
        return "one of " + ", ".join(str(v) for v in self.values)

    def accepts(self, value: Any) -> bool:
        return any(value == v and type(value) is type(v) for v in self.values)


@dataclass(frozen=True)
class Boolean(Constraint):
    """``True`` or ``False`` (not 0 or 1)."""

    @property
    def allowed(self) -> str:
        return "true or false"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class Text(Constraint):
    """A string (a name whose allowed values depend on other fields is checked where those fields meet).

    >>> Text().check("axis", 4)
    Traceback (most recent call last):
    ...
    theory.constraints.ConstraintError: axis=4 is not allowed: a string
    """

    @property
    def allowed(self) -> str:
        return "a string"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str)


@dataclass(frozen=True)
class ListOf(Constraint):
    """A list (not a tuple or a string) of at least ``min_length`` items, each allowed by ``item``; ``distinct``:
    no item twice; ``note`` ends the message.

    >>> ListOf(Real(0.0, low_open=True), 2, distinct=True).check("grid", [1e-3, 1e-3])
    Traceback (most recent call last):
    ...
    theory.constraints.ConstraintError: grid=[0.001, 0.001] is not allowed: a list of at least 2 distinct values, \
each a real number in (0, inf)
    >>> ListOf(Text(), 1, note="swept fields").allowed, ListOf(Integer(0)).accepts([0, 2])
    ('a non-empty list of values, each a string (swept fields)', True)
    """

    item: Constraint
    min_length: int = 0
    distinct: bool = False
    note: str = ""

    @property
    def allowed(self) -> str:
        size = {0: "a list of", 1: "a non-empty list of"}.get(self.min_length, f"a list of at least {self.min_length}")
        text = f"{size} {'distinct ' if self.distinct else ''}values, each {self.item.allowed}"
        return f"{text} ({self.note})" if self.note else text

    def accepts(self, value: Any) -> bool:
        return (isinstance(value, list) and len(value) >= self.min_length and all(map(self.item.accepts, value))
                and not (self.distinct and any(v in value[:i] for i, v in enumerate(value))))


@dataclass(frozen=True)
class AnyOf(Constraint):
    """Any of several constraints (``a | b``)."""

    options: tuple

    @property
    def allowed(self) -> str:
        return " or ".join(repr(option.values[0]) if isinstance(option, Choice) and len(option.values) == 1
                           else option.allowed for option in self.options)

    def accepts(self, value: Any) -> bool:
        return any(option.accepts(value) for option in self.options)


@dataclass(frozen=True)
class Optional(Constraint):
    """``None`` (the field is derived) or what ``inner`` allows; the message names ``inner``'s rule."""

    inner: Constraint

    @property
    def allowed(self) -> str:
        return self.inner.allowed

    def accepts(self, value: Any) -> bool:
        return value is None or self.inner.accepts(value)


def check_fields(values: dict, constraints: dict, error: type[ConstraintError] = ConstraintError,
                 prefix: str = "") -> None:
    """Check every ``name: constraint`` of ``constraints`` against ``values[name]``, in order (the first fails);
    the message names the field ``prefix + name`` (the table it sits in).

    >>> check_fields({"steps": 0}, {"steps": Integer(1)})
    Traceback (most recent call last):
    ...
    theory.constraints.ConstraintError: steps=0 is not allowed: an integer >= 1
    >>> check_fields({"stability": 2.0}, {"stability": Real(0.0, 1.0)}, prefix="study.")
    Traceback (most recent call last):
    ...
    theory.constraints.ConstraintError: study.stability=2.0 is not allowed: a real number in [0, 1]
    """
    for name, constraint in constraints.items():
        constraint.check(prefix + name, values[name], error)
