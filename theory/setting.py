"""The one description of an architecture point, shared by theory and simulation.

A :class:`Setting` is a frozen, validated dataclass. Both command-line tools build it
from the same flags (:func:`add_setting_arguments`, :func:`setting_from_args`), so
``python -m theory predict ARGS`` and ``python -m simulate run ARGS`` describe the
same stack.

>>> s = Setting.preset("llama", width=256, depth=4)
>>> (s.norm, s.activation, s.resolved_ffn_width, s.resolved_init_std)
('rmsnorm', 'swiglu', 688, 0.02)
>>> Setting(depth=-3)
Traceback (most recent call last):
...
theory.setting.SettingError: depth=-3 is not allowed: an integer >= 1
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any

from theory.constraints import Boolean, Choice, ConstraintError, Integer, Optional, Real, check_fields

__all__ = [
    "FIELD_CONSTRAINTS",
    "SCHEMES",
    "BLOCKS",
    "NORMS",
    "ACTIVATIONS",
    "PRESETS",
    "Setting",
    "SettingError",
    "llama_ffn_width",
    "add_setting_arguments",
    "setting_from_args",
]

SCHEMES = (
    "pre", "post", "lns", "mix", "deepnorm", "sandwich", "peri", "scaled-init",
    "depth-scaled-init", "layerscale", "skipinit", "none",
)
BLOCKS = ("linear", "mlp", "attention", "transformer", "moe")
NORMS = ("rmsnorm", "layernorm")
ACTIVATIONS = ("relu", "gelu", "silu", "swiglu")

# FFN widths of the official LNS (LayerNorm-Scaling) LLaMA configs, keyed by width.
_LLAMA_CONFIG_FFN = {256: 688, 512: 1376, 768: 2048, 1024: 2736, 2048: 5461, 4096: 11008}


class SettingError(ConstraintError):
    """A setting field holds a value outside what is allowed.

    The message names the field, the value and the allowed values; ``field`` holds
    the field name so a caller (a CLI) can point at the flag.
    """


def llama_ffn_width(width: int) -> int:
    """FFN width of the LLaMA configs used by the official LNS code.

    The configs' own values where they exist (256 -> 688, 768 -> 2048, 4096 -> 11008);
    elsewhere ``8*width/3`` rounded up to a multiple of 16, the rule the configs follow.

    >>> [llama_ffn_width(d) for d in (256, 768, 4096, 64)]
    [688, 2048, 11008, 176]
    """
    if width in _LLAMA_CONFIG_FFN:
        return _LLAMA_CONFIG_FFN[width]
    return 16 * math.ceil(8 * width / 3 / 16)


@dataclass(frozen=True)
class Setting:
    """An architecture point at random initialisation (and the training-process knobs).

    Fields are spelled as the flags without dashes (``mask_density`` is
    ``--mask-density``). ``None`` for ``ffn_width``, ``kv_heads`` and ``init_std``
    means "derived": see :attr:`resolved_ffn_width`, :attr:`resolved_kv_heads`,
    :attr:`resolved_init_std`.
    """

    scheme: str = "pre"  # norm scheme / placement, one of SCHEMES
    block: str = "transformer"  # one of BLOCKS
    norm: str = "rmsnorm"  # one of NORMS
    activation: str = "swiglu"  # MLP activation, one of ACTIVATIONS
    depth: int = 12  # L, number of blocks
    width: int = 256  # d, residual width
    ffn_width: int | None = None  # d_ff; None: LLaMA rule for swiglu, else 4*d
    heads: int = 4  # H, query heads
    kv_heads: int | None = None  # H/G key-value heads; None: = heads (MHA)
    tokens: int = 64  # T, sequence length
    causal: bool = True
    rope: bool = True
    init_std: float | None = None  # s, weight std; None: 1/sqrt(d) (alpha = 1)
    input_std: float = 1.0  # std of the i.i.d. Gaussian input tokens
    input_cos: float = 0.0  # cosine between distinct input tokens, in [0, 1)
    mask_density: float = 1.0  # rho, in (0, 1]
    experts: int = 8  # E
    top_k: int = 2  # k, in 1..E
    shared_expert: bool = False
    uniform_gates: bool = False  # MoE gates 1/k instead of softmax router weights
    alignment: float = 0.0  # a of docs/derivations.md#bridge-aligned, the planted aligned part
    mix_fraction: float = 0.25  # mix: fraction of blocks (from the bottom) in Post-LN
    layerscale_init: float = 0.1  # layerscale: initial per-channel scale
    lr: float = 1e-2  # eta, weight-decay process
    weight_decay: float = 0.1  # lam, weight-decay process
    grad_noise_std: float = 1.0  # sigma_G, weight-decay process
    preset: str | None = field(default=None, compare=True)

    def __post_init__(self) -> None:
        check_fields(self.__dict__, FIELD_CONSTRAINTS, SettingError)
        if self.width % self.heads:
            raise SettingError("heads", self.heads, f"a divisor of width={self.width}")
        if (self.width // self.heads) % 2 and self.rope:
            raise SettingError("heads", self.heads, "a head dimension width/heads that is even (RoPE rotates pairs)")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise SettingError("kv_heads", self.kv_heads, f"a divisor of heads={self.heads} (group size G = heads/kv_heads)")
        if self.top_k > self.experts:
            raise SettingError("top_k", self.top_k, f"an integer in 1..experts={self.experts}")
        if self.lr * self.weight_decay > 1:
            raise SettingError("weight_decay", self.weight_decay, f"a value with 0 <= lr*weight_decay <= 1 (lr={self.lr})")

    # -- derived quantities -------------------------------------------------------
    @property
    def resolved_ffn_width(self) -> int:
        """d_ff: the explicit value, else the LLaMA rule for swiglu, else 4*d."""
        if self.ffn_width is not None:
            return self.ffn_width
        return llama_ffn_width(self.width) if self.activation == "swiglu" else 4 * self.width

    @property
    def resolved_kv_heads(self) -> int:
        """Key-value heads (``heads`` when not given: multi-head attention)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def group_size(self) -> int:
        """G, query heads per key-value head (1 = MHA, heads = MQA)."""
        return self.heads // self.resolved_kv_heads

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @property
    def resolved_init_std(self) -> float:
        """s: the explicit value, else 1/sqrt(d) so that alpha = d*s^2 = 1."""
        return self.init_std if self.init_std is not None else 1.0 / math.sqrt(self.width)

    @property
    def alpha(self) -> float:
        """alpha = d*s^2, the second-moment gain of one d x d Gaussian linear map."""
        return self.width * self.resolved_init_std**2

    # -- construction -------------------------------------------------------------
    def replace(self, **changes: Any) -> "Setting":
        """A copy with some fields changed, validated again."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of the fields."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Setting":
        """Inverse of :meth:`to_dict`; unknown keys raise a :class:`SettingError`."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SettingError(unknown[0], data[unknown[0]], f"a field of Setting: {', '.join(sorted(names))}")
        return cls(**data)


class _PresetConstructor:
    """``Setting.preset(name, **overrides)`` on the class, the ``preset`` field on an instance.

    A classmethod named ``preset`` would replace the field's default inside the dataclass
    decorator, so the constructor is attached after it as a non-data descriptor: an
    instance finds its field value in its own ``__dict__`` first and never calls this.
    """

    def __get__(self, instance: Setting | None, owner: type[Setting]) -> Any:
        def preset(name: str, **overrides: Any) -> Setting:
            """A preset with some fields overridden (overrides win)."""
            if name not in PRESETS:
                raise SettingError("preset", name, f"one of {', '.join(PRESETS)}")
            return owner(**{**PRESETS[name], **overrides, "preset": name})

        return preset


Setting.preset = _PresetConstructor()  # type: ignore[assignment]

# What each field may hold (theory.constraints); the rules between fields are in Setting.__post_init__.
_POSITIVE = Real(0.0, low_open=True)
FIELD_CONSTRAINTS = {
    "scheme": Choice(*SCHEMES), "block": Choice(*BLOCKS), "norm": Choice(*NORMS), "activation": Choice(*ACTIVATIONS),
    "depth": Integer(1), "heads": Integer(1), "tokens": Integer(1), "experts": Integer(1),
    "width": Integer(2),  # the unbiased feature variance and LayerNorm divide by width - 1
    "ffn_width": Optional(Integer(1)), "kv_heads": Optional(Integer(1)), "top_k": Integer(1),
    "causal": Boolean(), "rope": Boolean(), "shared_expert": Boolean(), "uniform_gates": Boolean(),
    "init_std": Optional(_POSITIVE), "input_std": _POSITIVE, "input_cos": Real(0.0, 1.0, high_open=True),
    "mask_density": Real(0.0, 1.0, low_open=True), "alignment": Real(0.0), "mix_fraction": Real(0.0, 1.0),
    "layerscale_init": _POSITIVE, "lr": _POSITIVE,
    "weight_decay": Real(0.0),  # 0: no decay (P1 trains without it)
    "grad_noise_std": Real(0.0),
}

# The architecture of the official LNS code (lmsdss/LayerNorm-Scaling, LLaMA configs):
# RMSNorm, SwiGLU, RoPE, causal attention, no biases, all weights N(0, 0.02^2).
PRESETS: dict[str, dict[str, Any]] = {
    "llama": dict(block="transformer", norm="rmsnorm", activation="swiglu", causal=True,
                  rope=True, init_std=0.02, ffn_width=None),
}
FIELD_CONSTRAINTS["preset"] = Optional(Choice(*PRESETS))


# -- the flag set both CLIs share ----------------------------------------------------
def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean: use true or false")


_FLAG_HELP = {
    "scheme": "norm scheme", "block": "block type", "norm": "normalisation",
    "activation": "MLP activation", "depth": "number of blocks L", "width": "residual width d",
    "ffn_width": "MLP width d_ff (default: LLaMA rule for swiglu, else 4d)",
    "heads": "query heads H", "kv_heads": "key-value heads (default: heads; G = heads/kv_heads)",
    "tokens": "sequence length T", "causal": "causal attention", "rope": "rotary embeddings",
    "init_std": "weight std s (default 1/sqrt(d), i.e. alpha = 1)", "input_std": "input token std",
    "input_cos": "cosine between distinct input tokens", "mask_density": "mask density rho in (0, 1]",
    "experts": "MoE experts E", "top_k": "MoE top-k", "shared_expert": "MoE shared expert",
    "uniform_gates": "MoE gates 1/k", "alignment": "planted aligned strength a (docs/derivations.md#bridge-aligned)",
    "mix_fraction": "mix: fraction of Post-LN blocks", "layerscale_init": "layerscale initial scale",
    "lr": "learning rate eta (weight-decay process)", "weight_decay": "weight decay lam",
    "grad_noise_std": "gradient-noise std sigma_G",
}
_CHOICES = {"scheme": SCHEMES, "block": BLOCKS, "norm": NORMS, "activation": ACTIVATIONS}
_FLAG_TYPES = {"int": int, "int | None": int, "float": float, "float | None": float, "bool": _bool,
               "str": str, "str | None": str}


def add_setting_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--preset`` and one ``--flag-name`` per Setting field to ``parser``.

    Flags left out keep the preset's value (or the Setting default); no validation
    happens here, :func:`setting_from_args` builds (and so validates) the Setting.
    """
    group = parser.add_argument_group("setting")
    group.add_argument("--preset", choices=sorted(PRESETS), default=None, help="start from a preset")
    for f in fields(Setting):
        if f.name == "preset":
            continue
        flag = "--" + f.name.replace("_", "-")
        # Values are checked by Setting itself, so an error names the field once.
        choices = _CHOICES.get(f.name)
        help_text = _FLAG_HELP[f.name] + (f": {', '.join(choices)}" if choices else "")
        if "default" not in help_text:
            help_text += f" (default: {f.default})"
        group.add_argument(flag, dest=f.name, type=_FLAG_TYPES[f.type], default=None,
                           metavar="{true,false}" if f.type == "bool" else f.name.upper().replace("_", "-"),
                           help=help_text)


def setting_from_args(args: argparse.Namespace) -> Setting:
    """Build the Setting from parsed flags: preset values, then explicit flags."""
    given = {f.name: getattr(args, f.name) for f in fields(Setting)
             if f.name != "preset" and getattr(args, f.name, None) is not None}
    if args.preset:
        return Setting.preset(args.preset, **given)
    return Setting(**given)
