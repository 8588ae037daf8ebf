"""Property-based tests of the Setting and of ``theory.predict`` (hypothesis).

Drawn over every field of :class:`theory.Setting`:

- a valid Setting predicts finite curves, or its curves leave float64 from some layer on
  and stay out (inf/nan to the end), which is what ``python -m theory predict`` reports;
- an invalid value of any one field, generated from the field's declared constraint
  (``theory.setting.FIELD_CONSTRAINTS``, tests/conftest.py ``invalid_strategy``), raises a
  :class:`theory.SettingError` naming that field;
- every Setting survives ``to_dict``/``from_dict`` (through JSON too) and the command-line
  flags: Setting -> its flags -> ``setting_from_args(parser.parse_args(flags))`` is the Setting.

The profile is bounded (``max_examples``, no deadline) to keep CI's time budget: set
``HYPOTHESIS_PROFILE=thorough`` for a longer search.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from theory import Setting, SettingError, predict  # noqa: E402
from theory.cli import CliParser  # noqa: E402
from theory.setting import (ACTIVATIONS, BLOCKS, FIELD_CONSTRAINTS, NORMS, PRESETS, SCHEMES,  # noqa: E402
                            add_setting_arguments, setting_from_args)

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)

FIELDS = [f.name for f in fields(Setting)]
ROOT = Path(__file__).resolve().parents[2]
_unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def valid_settings(draw, *, max_depth: int = 300, max_tokens: int = 24) -> Setting:
    """Any valid Setting: every field drawn, the cross-field rules respected by construction."""
    rope = draw(st.booleans())
    heads = draw(st.sampled_from([1, 2, 3, 4, 8]))
    head_dim = draw(st.integers(1, 48)) * (2 if rope else 1)
    width = max(2, heads * head_dim)  # width 1: test_width_one_is_refused_or_predicted
    experts = draw(st.integers(1, 12))
    lr = draw(st.floats(min_value=1e-4, max_value=1.0))
    values = dict(
        scheme=draw(st.sampled_from(SCHEMES)), block=draw(st.sampled_from(BLOCKS)),
        norm=draw(st.sampled_from(NORMS)), activation=draw(st.sampled_from(ACTIVATIONS)),
        depth=draw(st.integers(1, max_depth)), width=width,
        ffn_width=draw(st.none() | st.integers(1, 4 * width)), heads=heads,
        kv_heads=draw(st.none() | st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0])),
        tokens=draw(st.integers(1, max_tokens)), causal=draw(st.booleans()), rope=rope,
        # init_std through alpha = d s^2 <= 4: larger score variances are the known memory
        # blow-up of test_predict_with_a_large_attention_init_stays_in_bounded_memory.
        init_std=draw(st.none() | st.floats(min_value=1e-2, max_value=4.0).map(lambda a: math.sqrt(a / width))),
        input_std=draw(st.floats(min_value=1e-3, max_value=100.0)),
        input_cos=draw(st.floats(min_value=0.0, max_value=0.999)),
        mask_density=draw(st.floats(min_value=0.01, max_value=1.0)),
        experts=experts, top_k=draw(st.integers(1, experts)),
        shared_expert=draw(st.booleans()), uniform_gates=draw(st.booleans()),
        alignment=draw(st.floats(min_value=0.0, max_value=5.0)), mix_fraction=draw(_unit),
        layerscale_init=draw(st.floats(min_value=1e-3, max_value=10.0)),
        lr=lr, weight_decay=draw(st.floats(min_value=1e-4, max_value=1.0 / lr)),
        grad_noise_std=draw(st.floats(min_value=0.0, max_value=10.0)),
    )
    if draw(st.booleans()):
        # A preset supplies init_std (0.02); an override is explicit, never "derived" (None):
        # the flags have no spelling for None against a preset that sets the field.
        if values["init_std"] is None:
            values["init_std"] = PRESETS["llama"]["init_std"]
        return Setting.preset("llama", **values)
    return Setting(**values)


def test_every_field_is_declared_with_a_constraint():
    assert set(FIELD_CONSTRAINTS) == set(FIELDS)


@given(setting=valid_settings(max_depth=120, max_tokens=12))
@(settings(max_examples=15) if PROFILE == "ci" else settings())  # predict is the slow one
def test_valid_settings_predict_finite_curves_or_leave_float64_for_good(setting):
    table = predict(setting)
    assert {"layer", "metric", "law", "kind", "value"} <= set(table.columns)
    assert table["layer"].between(0, setting.depth).all(), f"layers outside 0..{setting.depth}"
    for (metric, law), curve in table.groupby(["metric", "law"], observed=True):
        values = curve.sort_values("layer")["value"].to_numpy(dtype=float)  # (layers,)
        bad = ~np.isfinite(values)
        if bad.any():
            first = int(np.argmax(bad))
            assert bad[first:].all(), (f"{metric}/{law} leaves float64 at row {first} and comes back: "
                                       f"{values[first:first + 5]} for {setting}")


@given(base=valid_settings(max_depth=8, max_tokens=4), name=st.sampled_from(FIELDS), data=st.data())
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_an_invalid_value_of_any_field_names_that_field(base, name, data, invalid_values):
    value = data.draw(invalid_values(FIELD_CONSTRAINTS[name]), label=name)
    with pytest.raises(SettingError) as caught:
        Setting(**{**base.to_dict(), name: value})
    assert caught.value.field == name, f"{name}={value!r} reported as {caught.value.field!r}: {caught.value}"
    assert name in str(caught.value)


@given(base=valid_settings(max_depth=8, max_tokens=4))
def test_the_cross_field_rules_name_the_field_that_breaks_them(base):
    cases = {"heads": dict(width=base.heads * 2 + 1, heads=2), "top_k": dict(top_k=base.experts + 1),
             "kv_heads": dict(heads=4, width=16, kv_heads=3), "weight_decay": dict(weight_decay=2.0 / base.lr)}
    for name, changes in cases.items():
        with pytest.raises(SettingError) as caught:
            Setting(**{**base.to_dict(), **changes})
        assert caught.value.field == name, f"{changes} reported as {caught.value.field!r}"


@given(setting=valid_settings())
def test_to_dict_from_dict_round_trips_through_json(setting):
    assert Setting.from_dict(setting.to_dict()) == setting
    assert Setting.from_dict(json.loads(json.dumps(setting.to_dict()))) == setting


def setting_flags(setting: Setting) -> list[str]:
    """The command-line flags that describe ``setting`` (fields left None are derived: no flag)."""
    flags = ["--preset", setting.preset] if setting.preset else []
    for name, value in setting.to_dict().items():
        if name == "preset" or value is None:
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else (
            repr(value) if isinstance(value, float) else str(value))  # repr: the float's exact digits
        flags += ["--" + name.replace("_", "-"), text]
    return flags


_PARSER = CliParser(prog="test")
add_setting_arguments(_PARSER)


@given(setting=valid_settings())
def test_cli_flags_round_trip(setting):
    flags = setting_flags(setting)
    assert setting_from_args(_PARSER.parse_args(flags)) == setting, flags


def test_from_dict_refuses_an_unknown_key():
    with pytest.raises(SettingError) as caught:
        Setting.from_dict({**Setting().to_dict(), "widht": 3})
    assert caught.value.field == "widht"


def test_predict_with_a_large_attention_init_stays_in_bounded_memory():
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "from theory import Setting, predict; "
            "predict(Setting(block='attention', depth=2, width=22, heads=2, tokens=18, rope=False, init_std=7.8))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1:]


def test_width_one_is_refused():
    """The unbiased feature variance and LayerNorm divide by width - 1."""
    with pytest.raises(SettingError) as caught:
        Setting(block="linear", norm="layernorm", depth=1, width=1, heads=1, tokens=1, rope=False)
    assert caught.value.field == "width"
