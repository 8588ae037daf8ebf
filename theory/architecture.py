"""The one specification of what a scheme and a block are (read by theory, simulator, trainer).

A stack of ``L`` blocks ``l = 1..L`` acts on a residual stream ``x`` of width ``d``. Each
block is a sequence of residual sublayers (:data:`SUBLAYERS`); each sublayer ``f`` is
wired by the block's :class:`Placement`, with ``N`` the norm (RMSNorm or LayerNorm, no
epsilon in theory) and ``D`` the Bernoulli(rho) feature mask of the branch:

===================  ==========================================================
pre                  x + f(N(x))
post                 N(x + f(x))
lns                  x + f(N(x)/sqrt(l))  (LayerNorm Scaling; the final norm is unscaled)
mix                  post for l <= floor(mix_fraction*L), pre after (Mix-LN)
deepnorm             N(x (2L)^(1/4) + f(x)), v/o/up/gate/down/linear std (8L)^(-1/4)
sandwich             x + N(f(N(x)))
peri                 as sandwich, and the input embedding normalised
scaled-init          pre, output projections (o, MLP down, linear) std/sqrt(2L)
depth-scaled-init    pre, every weight of block l std/sqrt(l)
layerscale           x + lambda f(N(x)), lambda = layerscale_init
skipinit             x + beta f(x), beta = 0, no norm
none                 x + f(x), no norm
===================  ==========================================================

DeepNorm's constants are those of DeepNet (Wang et al. 2022, *DeepNet: Scaling
Transformers to 1,000 Layers*, Table 1, decoder-only column): residual scale
``alpha = (2L)^(1/4)`` and init factor ``beta = (8L)^(-1/4)`` on the value, output and
feed-forward weights. The meaning of each scheme is defined here and nowhere else
(``docs/design.md``); every function takes a scalar block index (simulator, trainer)
or a numpy array of them (the theory's vectorised plan) and broadcasts.

>>> from theory.setting import Setting
>>> placement(Setting(scheme="lns", depth=4), 4).input_scale
0.5
>>> round(weight_std(Setting(scheme="deepnorm", depth=2, width=16), 1, "v") * 4 * 16 ** 0.25, 12)
1.0
>>> SUBLAYERS["moe"], ROLES["attention"]
(('attention', 'moe'), ('q', 'k', 'v', 'o'))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

__all__ = ["SUBLAYERS", "ROLES", "OUTPUT_ROLES", "DEEPNORM_ROLES", "Placement", "placement", "placements",
           "deepnorm_constants", "is_post_block", "weight_std", "weight_std_factor", "weight_variance_factor", "normalises_input",
           "input_moments", "moe_lns_input_scale"]

# Which residual sublayers a block has, in order.
SUBLAYERS = {"linear": ("linear",), "mlp": ("mlp",), "attention": ("attention",),
             "transformer": ("attention", "mlp"), "moe": ("attention", "moe")}
# The weights of each sublayer kind (MoE experts use up/gate/down; the gate only for SwiGLU).
ROLES = {"linear": ("linear",), "attention": ("q", "k", "v", "o"), "mlp": ("up", "gate", "down"),
         "moe": ("router", "up", "gate", "down")}
OUTPUT_ROLES = ("o", "down", "linear")  # output projections (scaled-init)
DEEPNORM_ROLES = ("v", "o", "up", "gate", "down", "linear")  # DeepNet's beta-scaled weights


@dataclass(frozen=True)
class Placement:
    """How every residual sublayer of a block is wired.

    ``y = N(stream_scale*x + B)`` if ``norm_after_add`` else ``x + B``, with the branch
    ``B = D * (branch_scale * N_b(f(input_scale * N(x) or x))) + alignment * x/rms(x)``,
    ``N_b`` present when ``norm_branch``, ``N(x)`` when ``norm_input``. Fields are Python
    scalars for one block (:func:`placement`) or numpy arrays over blocks (:func:`placements`).
    """

    norm_input: bool = True
    input_scale: float = 1.0
    norm_branch: bool = False
    branch_scale: float = 1.0
    stream_scale: float = 1.0
    norm_after_add: bool = False


def deepnorm_constants(depth: int) -> tuple[float, float]:
    """DeepNet's decoder-only ``(alpha, beta) = ((2L)^(1/4), (8L)^(-1/4))`` (Wang et al. 2022, Table 1).

    >>> tuple(round(c, 12) for c in deepnorm_constants(2))  # (4^(1/4), 16^(-1/4)) = (sqrt 2, 1/2)
    (1.414213562373, 0.5)
    """
    return (2 * depth) ** 0.25, (8 * depth) ** -0.25


def is_post_block(setting, layer):
    """Whether block ``layer`` (1-based; int or array) is Post-LN: every block of ``post``, the first of ``mix``.

    >>> from theory.setting import Setting
    >>> is_post_block(Setting(scheme="mix", depth=8, mix_fraction=0.25), np.arange(1, 9)).tolist()
    [True, True, False, False, False, False, False, False]
    """
    layer = np.asarray(layer)
    if setting.scheme == "post":
        return np.ones(layer.shape, bool)
    if setting.scheme == "mix":
        return layer <= math.floor(setting.mix_fraction * setting.depth)
    return np.zeros(layer.shape, bool)


def placements(setting, layers) -> Placement:
    """The :class:`Placement` of every block in ``layers`` (1-based array), fields as arrays of its shape.

    >>> from theory.setting import Setting
    >>> placements(Setting(scheme="lns", depth=4), np.arange(1, 5)).input_scale.tolist()
    [1.0, 0.7071067811865475, 0.5773502691896258, 0.5]
    """
    layers = np.asarray(layers)
    scheme, ones = setting.scheme, np.ones(layers.shape)
    post = is_post_block(setting, layers)
    after_add = post | (scheme == "deepnorm")
    raw_input = after_add | (scheme in ("skipinit", "none"))  # sublayers read the stream itself
    input_scale = np.where(post, 1.0, 1.0 / np.sqrt(layers)) if scheme == "lns" else ones
    branch_scale = {"layerscale": setting.layerscale_init, "skipinit": 0.0}.get(scheme, 1.0) * ones
    stream_scale = (deepnorm_constants(setting.depth)[0] if scheme == "deepnorm" else 1.0) * ones
    return Placement(norm_input=~raw_input, input_scale=input_scale,
                     norm_branch=np.full(layers.shape, scheme in ("sandwich", "peri")),
                     branch_scale=branch_scale, stream_scale=stream_scale, norm_after_add=after_add)


def placement(setting, layer: int) -> Placement:
    """The wiring of every sublayer of block ``layer`` (1-based), as Python scalars."""
    wiring = placements(setting, np.array([layer]))
    return Placement(**{f.name: getattr(wiring, f.name)[0].item() for f in fields(Placement)})


def weight_variance_factor(setting, layer, role: str):
    """The scheme's factor on the init variance ``s^2`` of weight ``role`` in block ``layer`` (int or array).

    Roles: q, k, v, o, up, gate, down, router, linear (:data:`ROLES`). deepnorm: ``beta^2 =
    1/sqrt(8L)`` on :data:`DEEPNORM_ROLES`; scaled-init: ``1/(2L)`` on :data:`OUTPUT_ROLES`;
    depth-scaled-init: ``1/l`` on every weight; otherwise 1. The theory reads this
    second-moment factor, the simulator and the trainer its square root
    (:func:`weight_std_factor`).

    >>> from theory.setting import Setting
    >>> weight_variance_factor(Setting(scheme="scaled-init", depth=8), 3, "o"), weight_variance_factor(Setting(), 3, "o")
    (0.0625, 1.0)
    """
    layer = np.asarray(layer, dtype=float)
    if setting.scheme == "deepnorm" and role in DEEPNORM_ROLES:
        factor = np.full(layer.shape, 1.0 / math.sqrt(8 * setting.depth))
    elif setting.scheme == "scaled-init" and role in OUTPUT_ROLES:
        factor = np.full(layer.shape, 1.0 / (2 * setting.depth))
    elif setting.scheme == "depth-scaled-init":
        factor = 1.0 / layer
    else:
        factor = np.ones(layer.shape)
    return factor.item() if factor.ndim == 0 else factor


def weight_std_factor(setting, layer, role: str):
    """``sqrt`` of :func:`weight_variance_factor`: the factor on the init std (int or array ``layer``).

    >>> from theory.setting import Setting
    >>> weight_std_factor(Setting(scheme="scaled-init", depth=8), 3, "o")
    0.25
    """
    factor = np.sqrt(weight_variance_factor(setting, layer, role))
    return factor.item() if factor.ndim == 0 else factor


def weight_std(setting, layer: int, role: str) -> float:
    """Std of weight ``role`` in block ``layer``: the Setting's init std times the scheme's factor."""
    return setting.resolved_init_std * weight_std_factor(setting, layer, role)


def normalises_input(setting) -> bool:
    """Whether the input embedding is normalised before block 1 (peri)."""
    return setting.scheme == "peri"


def input_moments(setting) -> tuple[float, float]:
    """``(v0, c0)``: variance of an input coordinate and covariance between two tokens (peri: ``v0 = 1``).

    >>> from theory.setting import Setting
    >>> input_moments(Setting(input_std=0.5, input_cos=0.2))
    (0.25, 0.05)
    """
    v0 = 1.0 if normalises_input(setting) else setting.input_std**2
    return v0, v0 * setting.input_cos


def moe_lns_input_scale(setting, layer):
    """P2's LNS factor of block ``layer`` (int or array): ``top_k/sqrt(l)`` in MoE blocks, else the placement's.

    P1's LNS scales both pre-norm outputs of block ``l`` by ``1/sqrt(l)``; for MoE blocks P2
    uses ``top_k/sqrt(l)`` (P2, LNS for MoE). Here the factor multiplies both pre-norm outputs
    of an MoE block, as P1's does; any other scheme or block keeps
    :func:`placements`' ``input_scale``. An option of the trainer, not of the Setting.

    >>> from theory.setting import Setting
    >>> moe_lns_input_scale(Setting(scheme="lns", block="moe", top_k=2, depth=4), np.arange(1, 5)).tolist()
    [2.0, 1.414213562373095, 1.1547005383792517, 1.0]
    >>> moe_lns_input_scale(Setting(scheme="lns", depth=4), 4)
    0.5
    """
    scale = placements(setting, np.atleast_1d(np.asarray(layer))).input_scale
    if setting.scheme == "lns" and setting.block == "moe":
        scale = scale * setting.top_k
    return scale.item() if np.ndim(layer) == 0 else scale.reshape(np.shape(layer))
