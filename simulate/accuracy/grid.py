"""The accuracy map's grid: which settings at init it measures, declared once, checked on construction.

A cell is one :class:`~theory.setting.Setting` (a scheme, a block, a width ``d``, a sequence length ``T``,
causal or not, at one depth). The six blocks of the map are the five of :data:`theory.setting.BLOCKS` at
the Setting's defaults (the explorer's blocks: SwiGLU, RMSNorm, RoPE, ``init_std = 1/sqrt(d)``) and
``llama``, the LLaMA preset (``init_std = 0.02``) with its transformer block.

Two designs (docs/accuracy.md#the-grid):

``star`` (the default)
    every scheme x block at the centre (the middle width and length of the lists, causal), and from
    there one factor at a time: every other width, every other length, the other causality. Blocks
    without attention (linear, mlp) vary only the width: ``T`` and causality enter no law of theirs
    but ``token_cos``, which is 0 at every ``T`` for independent input tokens.
``full``
    the full factorial (with the same reduction for linear and mlp).

>>> grid = MapGrid(schemes=("pre",), blocks=("mlp", "transformer"))
>>> [(c.block, c.width, c.tokens, c.causal) for c in grid.cells()][:4]
[('mlp', 64, 16, True), ('mlp', 16, 16, True), ('mlp', 256, 16, True), ('transformer', 64, 16, True)]
>>> len(grid.cells()), len(MapGrid().cells())
(9, 360)
>>> MapGrid(blocks=("mlp", "lstm"))
Traceback (most recent call last):
...
theory.constraints.ConstraintError: blocks='lstm' is not allowed: one of linear, mlp, attention, transformer, moe, llama
"""

from __future__ import annotations

from dataclasses import dataclass

from theory.constraints import Boolean, Choice, ConstraintError, Integer, Real
from theory.meanfield.finite_width import FINITE_WIDTH_MIN, WIDTH_LAW_CHOICE
from theory.setting import BLOCKS, SCHEMES, Setting

__all__ = ["MAP_BLOCKS", "DESIGNS", "MapGrid"]

MAP_BLOCKS = (*BLOCKS, "llama")
DESIGNS = ("star", "full")
_ATTENTION_FREE = ("linear", "mlp")

# What each field may hold; a sequence field's constraint applies to each of its items.
_ITEM_CONSTRAINTS = {
    "schemes": Choice(*SCHEMES), "blocks": Choice(*MAP_BLOCKS), "widths": Integer(4), "tokens": Integer(1),
    "causal": Boolean(),
}
_FIELD_CONSTRAINTS = {
    "design": Choice(*DESIGNS), "depth": Integer(1), "heads": Integer(1), "target_sem": Real(0.0, low_open=True),
    "pilot_samples": Integer(2), "max_sample_tokens": Integer(2), "tangent_sample_tokens": Integer(2),
    "seed": Integer(0), "width_law": WIDTH_LAW_CHOICE,
}


@dataclass(frozen=True)
class MapGrid:
    """The settings of the accuracy map and how many Monte-Carlo samples each gets.

    Parameters
    ----------
    schemes, blocks : tuple of str
        From :data:`theory.setting.SCHEMES` and :data:`MAP_BLOCKS`.
    widths, tokens : tuple of int
        Widths ``d`` (>= 4: four heads of an even head dimension) and lengths ``T``; the middle
        item of each (the lower middle for an even count) is the star's centre.
    causal : tuple of bool
        The first is the centre.
    design : {"star", "full"}
    depth, heads : int
    target_sem : float
        The relative standard error of ``var`` at the last layer that each cell's sample count aims at.
    pilot_samples : int
        The pilot run that estimates the samples needed.
    max_sample_tokens : int
        The cap on samples x ``T`` (:meth:`sample_cap`): a cell's cost grows with both, and so does the
        number of token values its mean averages.
    tangent_sample_tokens : int
        Samples x ``T`` for the tangent metrics (``jac_dev``, ``e2e_gain``: three times the cost of a stream
        metric, and only approximate laws), at most the cell's samples (:meth:`tangent_samples`).
    seed : int
    width_law : {"auto", "mean-field", "finite-width"}
        The law of the token covariance that ``theory.predict`` uses in every cell
        (:func:`theory.meanfield.finite_width.resolve_width_law`; the map records the one each cell used).
    """

    schemes: tuple[str, ...] = SCHEMES
    blocks: tuple[str, ...] = MAP_BLOCKS
    widths: tuple[int, ...] = (16, 64, 256)
    tokens: tuple[int, ...] = (8, 16, 64)
    causal: tuple[bool, ...] = (True, False)
    design: str = "star"
    depth: int = 64
    heads: int = 4
    target_sem: float = 0.002
    pilot_samples: int = 256
    max_sample_tokens: int = 32768  # 2048 samples at T = 16
    tangent_sample_tokens: int = 2048  # 128 samples at T = 16
    seed: int = 0
    width_law: str = "auto"

    def __post_init__(self) -> None:
        for name, constraint in _ITEM_CONSTRAINTS.items():
            values = getattr(self, name)
            if isinstance(values, (str, bytes)) or not isinstance(values, (tuple, list)) or not values:
                raise ConstraintError(name, values, f"a non-empty list, each item {constraint.allowed}")
            for value in values:
                constraint.check(name, value)
            object.__setattr__(self, name, tuple(values))
        for name, constraint in _FIELD_CONSTRAINTS.items():
            constraint.check(name, getattr(self, name))
        for width in self.widths:
            if self.width_law == "finite-width" and width < FINITE_WIDTH_MIN:
                raise ConstraintError("widths", width, f"widths >= {FINITE_WIDTH_MIN} with width_law='finite-width'")
            if width % self.heads or (width // self.heads) % 2:
                raise ConstraintError("widths", width, f"a multiple of 2*heads={2 * self.heads} (RoPE rotates pairs "
                                                       "of each head's dimensions)")

    def sample_cap(self, tokens: int) -> int:
        """The most samples a cell of length ``tokens`` gets (never below the pilot).

        >>> [MapGrid().sample_cap(t) for t in (8, 16, 64)]
        [4096, 2048, 512]
        """
        return max(self.pilot_samples, self.max_sample_tokens // tokens)

    def tangent_samples(self, tokens: int, samples: int) -> int:
        """Samples for ``jac_dev`` and ``e2e_gain`` in a cell of length ``tokens`` measured at ``samples``.

        >>> [MapGrid().tangent_samples(t, 2048) for t in (8, 16, 64)]
        [256, 128, 32]
        """
        return max(2, min(samples, self.tangent_sample_tokens // tokens))

    def setting(self, scheme: str, block: str, width: int, tokens: int, causal: bool) -> Setting:
        """The Setting of one cell."""
        shape = dict(scheme=scheme, width=width, tokens=tokens, causal=causal, depth=self.depth, heads=self.heads)
        if block == "llama":
            return Setting.preset("llama", **shape)
        return Setting(block=block, **shape)

    def cells(self) -> list[Setting]:
        """The cells in order: scheme, block, then the design's variations (centre first), no repeats."""
        centre = (_middle(self.widths), _middle(self.tokens), self.causal[0])
        cells: list[Setting] = []
        for scheme in self.schemes:
            for block in self.blocks:
                for width, tokens, causal in self._variations(centre, block):
                    cell = self.setting(scheme, block, width, tokens, causal)
                    if cell not in cells:
                        cells.append(cell)
        return cells

    def _variations(self, centre: tuple[int, int, bool], block: str) -> list[tuple[int, int, bool]]:
        width0, tokens0, causal0 = centre
        if block in _ATTENTION_FREE:
            return [(width0, tokens0, causal0)] + [(w, tokens0, causal0) for w in self.widths if w != width0]
        if self.design == "full":
            return [(w, t, c) for w in self.widths for t in self.tokens for c in self.causal]
        return ([centre] + [(w, tokens0, causal0) for w in self.widths if w != width0]
                + [(width0, t, causal0) for t in self.tokens if t != tokens0]
                + [(width0, tokens0, c) for c in self.causal if c != causal0])


def _middle(values: tuple):
    return values[(len(values) - 1) // 2]
