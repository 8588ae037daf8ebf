"""The study spec's declarations (simulate.study.plan.spec STUDY_FIELDS, STUDY_SEEDS): an invalid value of any declared
field, generated from its declaration, is refused in one line naming the field and what is allowed; each rule
between fields is refused in its own line; the list and text kinds they are declared with accept what they say."""

from __future__ import annotations

import copy

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from simulate.study.plan.spec import STUDY_FIELDS, STUDY_SEEDS, StudyError, parse_study  # noqa: E402
from theory.constraints import Integer, ListOf, Real, Text  # noqa: E402

SPEC = {"name": "t", "seeds": 2, "setting": {"preset": "llama", "width": 16, "heads": 2, "tokens": 16},
        "axes": {"scheme": ["pre", "lns"], "depth": [2, 4]}, "options": {"steps": 4, "data": "docs"},
        "study": {"axes": ["depth"]}}
DECLARED = {"seeds": STUDY_SEEDS, **{f"study.{name}": constraint for name, constraint in STUDY_FIELDS.items()}}


def _spec(edits: dict) -> dict:
    """:data:`SPEC` with each ``key: value`` of ``edits`` set (``study.KEY``: in the [study] table)."""
    spec = copy.deepcopy(SPEC)
    for key, value in edits.items():
        table, _, name = key.rpartition(".")
        (spec[table] if table else spec)[name] = value
    return spec


@given(key=st.sampled_from(sorted(DECLARED)), data=st.data())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much,
                                 HealthCheck.too_slow], deadline=None)
def test_an_invalid_value_of_a_declared_study_field_names_it_and_what_is_allowed(key, data, invalid_values):
    constraint = DECLARED[key]
    value = data.draw(invalid_values(constraint), label=key)
    with pytest.raises(StudyError) as caught:
        parse_study(_spec({key: value}))
    assert str(caught.value) == f"{key}={value!r} is not allowed: {constraint.allowed}"


def test_the_valid_spec_parses_and_a_field_left_out_takes_its_default():
    study = parse_study(_spec({}))
    assert study.axes == ("depth",) and not study.tuned and study.stability is None
    assert study.inference.confidence == 0.95 and "p1-lns-loss" in study.claims
    assert set(STUDY_FIELDS) >= {"axes", "claims", "stability", "tune_lr", "tune_seeds", "tune_lr_beyond",
                                 "confidence", "multiplicity", "bootstrap"}


# Each rule between fields, the one raise that states it (simulate.study.plan.spec).
@pytest.mark.parametrize("edit, message", [
    ({"study.axes": ["steps"], "study.stability": 0.5},
     "study.axes: 'steps' is swept by the study table itself, not an axis of trends"),
    ({"study.axes": ["width"]}, "study.axes: 'width' is not a swept numeric field of this study: choose from depth"),
    ({"study.axes": ["norm"], "axes": {"scheme": ["pre", "lns"], "norm": ["rmsnorm", "layernorm"]}},
     "study.axes: 'norm' has values ['layernorm', 'rmsnorm']: trends run against log(norm)"),
    ({"axes": {"scheme": ["pre", "lns"], "depth": [2]}}, "study.axes: 'depth' has one value (2): a trend needs"),
    ({"study.claims": ["p1-lns-loss"], "axes": {"scheme": ["pre"], "depth": [2, 4]}},
     "study.claims: 'p1-lns-loss' needs scheme 'lns', which this study does not train (schemes: pre)"),
    ({"study.stability": 0.01}, "study.stability=0.01 is not allowed with steps=4: round(fraction x steps)"),
    ({"study.stability": 0.5, "axes": {"scheme": ["pre", "lns"], "depth": [2, 4], "steps": [4, 8]}},
     "study.stability is not allowed with steps among the axes: stability sweeps steps itself"),
    ({"study.tune_lr_beyond": [3e-2]}, "study.tune_lr_beyond is allowed only with study.tune_lr"),
    ({"study.tune_lr": [1e-3, 1e-2], "study.tune_lr_beyond": [3e-3]},
     "study.tune_lr_beyond=[0.003] is not allowed: learning rates below 0.001 or above 0.01 (outside study.tune_lr)"),
    ({"study.tune_lr": [1e-3, 1e-2], "study.tune_seeds": [2]},
     "study.tune_seeds: seed 2 is not allowed: the study trains seeds 0, 1"),
])
def test_each_rule_between_fields_is_one_line_naming_the_field(edit, message):
    with pytest.raises(StudyError) as caught:
        parse_study(_spec(edit))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value), str(caught.value)


@pytest.mark.parametrize("constraint, valid, invalid", [
    (Text(), ["", "depth"], [1, None, ["depth"], b"depth"]),
    (ListOf(Integer(0)), [[], [0, 0, 3]], [(0,), "0", [-1], [0, None], None]),
    (ListOf(Real(0.0, low_open=True), 2, distinct=True), [[1e-3, 1e-2]], [[1e-3], [1e-3, 1e-3], [1e-3, 0.0]]),
    (ListOf(Text(), 1), [["depth"], ["depth", "depth"]], [[], [1]]),
    (Integer(2) | ListOf(Integer(0), 2, distinct=True), [2, [0, 3]], [1, [3], [1, 1], [0, True]]),
])
def test_what_the_list_and_text_kinds_accept(constraint, valid, invalid):
    assert all(constraint.accepts(v) for v in valid), [v for v in valid if not constraint.accepts(v)]
    assert not any(constraint.accepts(v) for v in invalid), [v for v in invalid if constraint.accepts(v)]
