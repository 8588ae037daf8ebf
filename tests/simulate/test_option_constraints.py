"""The declared options of the trainer, the sweep tasks and the scores: an invalid value of any field,
generated from its declaration (tests/conftest.py ``invalid_strategy``), is refused naming the field."""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from simulate.sweep.tasks import RUN_OPTIONS, TASKS  # noqa: E402
from simulate.sweep.training_tasks import SCORES_OPTIONS  # noqa: E402
from simulate.training.loop import CONFIG_CONSTRAINTS, TrainConfig  # noqa: E402

# (declaration, what checks it): TrainConfig's fields, the run task's options, the scores' own options.
DECLARATIONS = {"train config": (CONFIG_CONSTRAINTS, lambda name, value: TrainConfig(**{name: value})),
                "run options": (RUN_OPTIONS, lambda name, value: TASKS["run"].check_options({name: value})),
                "scores options": (SCORES_OPTIONS, lambda name, value: TASKS["scores"].check_options({name: value}))}
FIELDS = [(kind, name) for kind, (declared, _) in DECLARATIONS.items() for name in sorted(declared)]


@given(field=st.sampled_from(FIELDS), data=st.data())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much,
                                 HealthCheck.too_slow])
def test_an_invalid_value_of_a_declared_option_names_it(field, data, invalid_values):
    kind, name = field
    declared, check = DECLARATIONS[kind]
    value = data.draw(invalid_values(declared[name]), label=f"{kind}: {name}")
    with pytest.raises(ValueError, match=rf"^{name}=.* is not allowed: "):
        check(name, value)
