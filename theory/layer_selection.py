"""Which layers of a per-layer table to keep: the ``--layers`` flag of ``python -m theory predict``.

A table over ``0..depth`` has ``depth + 1`` rows per curve; at depth 10^6 its CSV is about 576 MB.
:class:`LayerSelection` names a subset (all, a stride, a log-spaced set, a list), and
:func:`theory.meanfield.prediction.predict` (``layers=``) builds only those rows.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

__all__ = ["LayerSelection", "LAYERS_ALLOWED", "layer_selection_type"]

LAYERS_ALLOWED = ("all, every:K (K >= 1: layers 0, K, 2K, ... and the last), log:N (N >= 2: N "
                  "log-spaced layers, 0 and the last among them) or a comma list of layers in 0..depth "
                  "such as 0,1,10,100")


@dataclass(frozen=True)
class LayerSelection:
    """Which of the layers ``0..depth`` a per-layer table keeps: the value of ``--layers``.

    ``form`` is ``all``, ``every`` (every ``count``-th layer and the last), ``log`` (``count``
    log-spaced layers, or all of them if there are fewer: every layer up to where log spacing is
    wider than one, then geometric steps; always 0 and the last) or ``list`` (the layers in ``listed``).

    >>> LayerSelection.parse("every:4").layers(10).tolist()
    [0, 4, 8, 10]
    >>> LayerSelection.parse("log:6").layers(1000).tolist()
    [0, 1, 6, 32, 178, 1000]
    >>> LayerSelection.parse("10,0,10").layers(10).tolist(), str(LayerSelection.parse(" log:6 "))
    ([0, 10], 'log:6')
    >>> LayerSelection.parse("every:0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'every:0' is not allowed: every:K needs an integer K >= 1; ...
    """

    form: str
    count: int = 0
    listed: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "LayerSelection":
        """The selection that ``text`` spells (:data:`LAYERS_ALLOWED`); ValueError saying what is allowed if none."""
        spec = text.strip().lower()
        form, _, number = spec.partition(":")

        def refuse(why: str) -> NoReturn:
            raise ValueError(f"{text!r} is not allowed: {why}; allowed: {LAYERS_ALLOWED}")

        if spec == "all":
            return cls("all")
        if form in ("every", "log"):
            low = 1 if form == "every" else 2
            letter = "K" if form == "every" else "N"
            if not re.fullmatch(r"\s*\d+\s*", number, re.ASCII) or int(number) < low:
                refuse(f"{form}:{letter} needs an integer {letter} >= {low}")
            return cls(form, int(number))
        parts = [part.strip() for part in spec.split(",")]
        if not all(re.fullmatch(r"-?\d+", part, re.ASCII) for part in parts):
            refuse("none of the forms")
        layers = sorted({int(part) for part in parts})
        if layers[0] < 0:
            refuse(f"layer {layers[0]} is negative")
        return cls("list", listed=tuple(layers))

    def __str__(self) -> str:
        return ",".join(map(str, self.listed)) if self.form == "list" else \
            self.form + (f":{self.count}" if self.count else "")

    def layers(self, depth: int) -> np.ndarray:
        """The kept layers of a stack of ``depth`` blocks, sorted and distinct, (M,) int64.

        Raises ValueError saying what is allowed when a listed layer is above ``depth``.
        """
        if self.form == "list":
            if self.listed[-1] > depth:
                raise ValueError(f"{str(self)!r} is not allowed: layer {self.listed[-1]} is above the depth "
                                 f"{depth} (layers are 0..{depth}); allowed: {LAYERS_ALLOWED}")
            return np.asarray(self.listed, dtype=np.int64)
        if self.form == "all" or (self.form == "log" and self.count >= depth + 1):
            return np.arange(depth + 1, dtype=np.int64)
        if self.form == "every":
            return np.unique(np.append(np.arange(0, depth + 1, self.count), depth))
        return np.array([0, depth]) if self.count == 2 else _log_spaced(depth, self.count)


def _log_spaced(depth: int, count: int) -> np.ndarray:
    """``count`` (``3 <= count <= depth``) distinct layers from 0 to ``depth``, log-spaced where that is possible.

    Layers ``0..m-1`` one by one, then ``count - m`` geometric steps from ``m`` to ``depth``, with
    the smallest ``m`` whose first step is at least one layer wide; rounding half up then keeps them distinct.
    """
    start = np.arange(1, count - 1)  # (count - 2,) candidates m; m = count - 2 always qualifies
    steps = count - start  # geometric points from m to depth, both included
    first_gap = start * ((depth / start) ** (1.0 / (steps - 1)) - 1.0)
    m = int(start[np.argmax(first_gap >= 1.0)])
    tail = np.floor(np.geomspace(m, depth, count - m) + 0.5).astype(np.int64)  # (count - m,)
    return np.concatenate([np.arange(m), tail])


def layer_selection_type(text: str) -> LayerSelection:
    """An argparse ``type`` for ``--layers``: argparse prints ``argument --layers: <message>`` on one line.

    >>> layer_selection_type("log:1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'log:1' is not allowed: log:N needs an integer N >= 2; ...
    """
    try:
        return LayerSelection.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None

