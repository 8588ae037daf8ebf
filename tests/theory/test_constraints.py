"""theory.constraints: each constraint's messages, what it accepts, and the invalid values generated from it.

The generator (tests/conftest.py ``invalid_strategy``) feeds every property test of a declaration;
here it is checked against the constraints themselves: whatever it draws is refused, and a valid
value is never drawn (a negative control: the same draw filtered the other way finds nothing).
"""

from __future__ import annotations

import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from theory.constraints import (Boolean, Choice, ConstraintError, Integer, Optional, Real,  # noqa: E402
                                check_fields)

CONSTRAINTS = [Integer(1), Integer(0, 3), Real(0.0), Real(0.0, 1.0, low_open=True), Real(0.0, 1.0, high_open=True),
               Choice("pre", "lns"), Boolean(), Optional(Integer(1)), Choice("all") | Integer(1)]


@pytest.mark.parametrize("constraint, valid, invalid", [
    (Integer(1), [1, 7], [0, -1, True, 1.0, "1", None]),
    (Integer(0, 3), [0, 3], [-1, 4, False]),
    (Real(0.0), [0, 0.0, 2.5], [-1e-300, math.inf, math.nan, True, "0"]),
    (Real(0.0, 1.0, low_open=True), [1.0, 1e-300], [0.0, 1.0 + 1e-12]),
    (Real(0.0, 1.0, high_open=True), [0.0], [1.0]),
    (Choice("pre", "lns"), ["pre"], ["Pre", 1, None]),
    (Choice(1, 2), [1], [True, 1.0]),  # a bool or a float is not the int choice
    (Boolean(), [True, False], [0, 1, "true"]),
    (Optional(Integer(1)), [None, 2], [0]),
    (Choice("all") | Integer(1), ["all", 3], ["none", 0]),
])
def test_what_each_constraint_accepts(constraint, valid, invalid):
    assert all(constraint.accepts(v) for v in valid), [v for v in valid if not constraint.accepts(v)]
    assert not any(constraint.accepts(v) for v in invalid), [v for v in invalid if constraint.accepts(v)]


@pytest.mark.parametrize("constraint, message", [
    (Integer(1), "an integer >= 1"), (Integer(0, 3), "an integer in 0..3"), (Integer(), "an integer"),
    (Real(0.0), "a real number in [0, inf)"), (Real(0.0, 1.0, low_open=True), "a real number in (0, 1]"),
    (Real(0.0, note="0 = off"), "a real number in [0, inf) (0 = off)"), (Choice("a", "b"), "one of a, b"),
    (Boolean(), "true or false"), (Optional(Integer(2)), "an integer >= 2"),
    (Choice("all") | Integer(1), "'all' or an integer >= 1"),
])
def test_each_message_is_one_line_naming_the_field_and_what_is_allowed(constraint, message):
    assert constraint.allowed == message
    with pytest.raises(ConstraintError) as caught:
        constraint.check("field", object())
    assert str(caught.value).startswith("field=<object object") and str(caught.value).endswith(message)
    assert caught.value.field == "field" and "\n" not in str(caught.value)


def test_check_fields_raises_the_callers_error_type_for_the_first_bad_field():
    class OwnError(ConstraintError):
        pass

    with pytest.raises(OwnError) as caught:
        check_fields({"a": 1, "b": 0, "c": -1}, {"a": Integer(1), "b": Integer(1), "c": Integer(1)}, OwnError)
    assert caught.value.field == "b"


@given(data=st.data(), index=st.integers(0, len(CONSTRAINTS) - 1))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much,
                                 HealthCheck.too_slow])  # a timing check: it failed once under load
def test_the_generated_invalid_values_are_refused(data, index, invalid_values):
    constraint = CONSTRAINTS[index]
    value = data.draw(invalid_values(constraint))
    with pytest.raises(ConstraintError):
        constraint.check("field", value)


def test_negative_control_the_generator_draws_no_valid_value(invalid_values):
    """Filtered to the values a constraint accepts, the generator has nothing left to give."""
    from hypothesis.errors import FailedHealthCheck, Unsatisfiable

    accepted = invalid_values(Integer(1)).filter(Integer(1).accepts)

    @given(value=accepted)
    @settings(max_examples=5)
    def draw(value):
        pass

    with pytest.raises((Unsatisfiable, FailedHealthCheck)):  # hypothesis gives up: nothing passes the filter
        draw()
