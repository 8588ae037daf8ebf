"""Norm schemes: where the norm sits, what scales what, and the weight stds per block.

Block l = 1..L, N the norm, f the sublayer, D the branch mask (CONTRACT.md):

===================  ==========================================================
pre                  x + f(N(x))
post                 N(x + f(x))
lns                  x + f(N(x)/sqrt(l))  (the final norm, not simulated, is unscaled)
mix                  post for l <= floor(mix_fraction*L), pre after
deepnorm             N(x (2L)^(1/4) + f(x)), v/o/MLP/linear weights std (8L)^(-1/4)
sandwich             x + N(f(N(x)))
peri                 as sandwich, and the input embedding normalised
scaled-init          pre, output projections (o, MLP down, linear) std/sqrt(2L)
depth-scaled-init    pre, every weight of block l std/sqrt(l)
layerscale           x + lambda f(N(x)), lambda = layerscale_init
skipinit             x + beta f(x), beta = 0, no norm
none                 x + f(x), no norm
===================  ==========================================================

The stream is recorded before any final norm, so a final norm never enters a metric.

>>> from theory.setting import Setting
>>> placement(Setting(scheme="lns", depth=4), 4).input_scale
0.5
>>> round(weight_std(Setting(scheme="deepnorm", depth=2, width=16), 1, "v") * 4 * 16 ** 0.25, 12)
1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Placement", "placement", "weight_std", "normalises_input", "OUTPUT_ROLES"]

OUTPUT_ROLES = ("o", "down", "linear")  # output projections (scaled-init)
_DEEPNORM_ROLES = ("v", "o", "up", "gate", "down", "linear")  # DeepNet's beta-scaled weights


@dataclass(frozen=True)
class Placement:
    """How one residual sublayer of a block is wired.

    y = N(stream_scale*x + B) if ``norm_after_add`` else x + B, with the branch
    B = D * (branch_scale * N_b(f(input_scale * N(x) or x))) + alignment * x/rms(x),
    N_b present when ``norm_branch``, N(x) when ``norm_input``.
    """

    norm_input: bool = True
    input_scale: float = 1.0
    norm_branch: bool = False
    branch_scale: float = 1.0
    stream_scale: float = 1.0
    norm_after_add: bool = False


def _is_post_block(setting, layer: int) -> bool:
    return setting.scheme == "post" or (
        setting.scheme == "mix" and layer <= math.floor(setting.mix_fraction * setting.depth))


def placement(setting, layer: int) -> Placement:
    """The wiring of every sublayer of block ``layer`` (1-based) under ``setting.scheme``."""
    scheme = setting.scheme
    if _is_post_block(setting, layer):
        return Placement(norm_input=False, norm_after_add=True)
    if scheme == "deepnorm":
        return Placement(norm_input=False, norm_after_add=True, stream_scale=(2 * setting.depth) ** 0.25)
    if scheme == "lns":
        return Placement(input_scale=1.0 / math.sqrt(layer))
    if scheme in ("sandwich", "peri"):
        return Placement(norm_branch=True)
    if scheme == "layerscale":
        return Placement(branch_scale=setting.layerscale_init)
    if scheme == "skipinit":
        return Placement(norm_input=False, branch_scale=0.0)
    if scheme == "none":
        return Placement(norm_input=False)
    return Placement()  # pre, mix (pre part), scaled-init, depth-scaled-init


def weight_std(setting, layer: int, role: str) -> float:
    """Std of weight ``role`` in block ``layer``: s times the scheme's factor.

    Roles: q, k, v, o, up, gate, down, router, linear (MoE experts use up/gate/down).
    """
    std = setting.resolved_init_std
    if setting.scheme == "deepnorm" and role in _DEEPNORM_ROLES:
        return std * (8 * setting.depth) ** -0.25
    if setting.scheme == "scaled-init" and role in OUTPUT_ROLES:
        return std / math.sqrt(2 * setting.depth)
    if setting.scheme == "depth-scaled-init":
        return std / math.sqrt(layer)
    return std


def normalises_input(setting) -> bool:
    """Whether the input embedding is normalised before block 1 (peri)."""
    return setting.scheme == "peri"
