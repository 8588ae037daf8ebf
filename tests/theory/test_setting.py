"""The Setting: validation names the field, presets, and the shared flag set."""

import argparse

import pytest

from theory.setting import (
    SCHEMES,
    Setting,
    SettingError,
    add_setting_arguments,
    llama_ffn_width,
    setting_from_args,
)

BAD_VALUES = [
    ("scheme", "prenorm", "one of pre, post"),
    ("block", "mamba", "one of linear"),
    ("norm", "batchnorm", "one of rmsnorm, layernorm"),
    ("activation", "tanh", "one of relu"),
    ("depth", -3, "an integer >= 1"),
    ("depth", 0, "an integer >= 1"),
    ("depth", 2.5, "an integer >= 1"),
    ("width", True, "an integer >= 2"),
    ("width", 1, "an integer >= 2"),
    ("heads", 3, "a divisor of width=256"),
    ("kv_heads", 3, "a divisor of heads=4"),
    ("top_k", 9, "an integer in 1..experts=8"),
    ("mask_density", 0.0, "(0, 1]"),
    ("mask_density", 1.5, "(0, 1]"),
    ("input_std", -1.0, "(0, inf)"),
    ("input_cos", 1.0, "[0, 1)"),
    ("init_std", float("nan"), "(0, inf)"),
    ("alignment", -0.1, "[0, inf)"),
    ("mix_fraction", 2.0, "[0, 1]"),
    ("causal", "yes", "true or false"),
    ("weight_decay", 200.0, "0 <= lr*weight_decay <= 1"),
]


@pytest.mark.parametrize("field_name, value, allowed", BAD_VALUES)
def test_bad_value_names_field_value_and_allowed(field_name, value, allowed):
    with pytest.raises(SettingError) as caught:
        Setting(**{field_name: value})
    message = str(caught.value)
    assert caught.value.field == field_name
    assert message.startswith(f"{field_name}={value!r} is not allowed")
    assert allowed in message


def test_every_scheme_is_accepted():
    assert [Setting(scheme=name).scheme for name in SCHEMES] == list(SCHEMES)


def test_llama_preset_and_overrides():
    setting = Setting.preset("llama", width=768, scheme="lns")
    assert (setting.preset, setting.scheme, setting.norm, setting.activation) == ("llama", "lns", "rmsnorm", "swiglu")
    assert (setting.causal, setting.rope, setting.resolved_init_std) == (True, True, 0.02)
    assert setting.resolved_ffn_width == 2048
    with pytest.raises(SettingError, match="preset='gpt2'"):
        Setting.preset("gpt2")


def test_derived_quantities():
    setting = Setting(width=64, heads=8, kv_heads=2, activation="relu")
    assert (setting.group_size, setting.head_dim, setting.resolved_kv_heads) == (4, 8, 2)
    assert setting.resolved_ffn_width == 256
    assert setting.alpha == pytest.approx(1.0)
    assert [llama_ffn_width(d) for d in (512, 1024, 2048)] == [1376, 2736, 5461]


def test_replace_validates_and_dict_round_trip():
    setting = Setting.preset("llama", depth=5)
    assert Setting.from_dict(setting.to_dict()) == setting
    with pytest.raises(SettingError, match="depth"):
        setting.replace(depth=-1)
    with pytest.raises(SettingError, match="colour"):
        Setting.from_dict({**setting.to_dict(), "colour": "red"})


def test_flags_build_the_same_setting():
    parser = argparse.ArgumentParser()
    add_setting_arguments(parser)
    args = parser.parse_args(["--preset", "llama", "--scheme", "lns", "--depth", "7", "--kv-heads", "2",
                              "--causal", "false", "--mask-density", "0.5"])
    assert setting_from_args(args) == Setting.preset("llama", scheme="lns", depth=7, kv_heads=2, causal=False,
                                                     mask_density=0.5)
    assert setting_from_args(parser.parse_args([])) == Setting()
