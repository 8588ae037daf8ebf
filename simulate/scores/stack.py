"""What the layer-effectiveness scores need of a model: a stack they can cut, replace and reorder.

A :class:`LayerStack` exposes a residual language model as three pieces, so that every
score of :mod:`simulate.scores.definitions` is a short loop over blocks:

``embed(inputs)``
    token ids ``(B, T)`` to the stream entering block 1, ``x_0`` ``(B, T, d)``.
``block(x, params, position)``
    the block whose *parameters* are those of block ``params`` (1..L), run at *position*
    ``position`` (1..L): position-dependent factors (LayerNorm Scaling's ``1/sqrt(l)``, a
    DeepNorm residual scale) follow the position, never the parameters. ``block(x, l, l)``
    is the model's own block ``l``: ``x_l`` from ``x_{l-1}``.
``sequence_loss(x_L, targets)``
    final norm, head and token-mean cross-entropy: one loss per sequence, ``(B,)``.

Layers are counted as everywhere in the workbench: ``x_0`` is the input of block 1 and
``x_l`` the stream after block ``l`` (docs/scores.md). :class:`CallableStack` wraps three
plain functions; :func:`simulate.scores.model.stack_of` builds one from a trained model.

>>> import torch
>>> stack = CallableStack(embed=lambda ids: torch.ones(*ids.shape, 2),
...                       block=lambda x, params, position: x + params,
...                       sequence_loss=lambda x, targets: x.mean((-1, -2)), depth=3)
>>> streams(stack, torch.zeros(1, 4, dtype=torch.long))[-1].mean().item()  # 1 + 1 + 2 + 3
7.0
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

__all__ = ["LayerStack", "CallableStack", "Batch", "streams", "run_from"]

Batch = tuple  # (inputs (B, T) long, targets (B, T) long)


class LayerStack:
    """The interface the scores use (module docstring); subclasses implement the three methods."""

    depth: int

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def block(self, x: torch.Tensor, params: int, position: int) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def sequence_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


class CallableStack(LayerStack):
    """A :class:`LayerStack` from three functions (tests, toy models, adapters)."""

    def __init__(self, embed: Callable[[torch.Tensor], torch.Tensor],
                 block: Callable[[torch.Tensor, int, int], torch.Tensor],
                 sequence_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], depth: int):
        self.embed, self.block, self.sequence_loss, self.depth = embed, block, sequence_loss, int(depth)


def streams(stack: LayerStack, inputs: torch.Tensor) -> list[torch.Tensor]:
    """``[x_0, x_1, ..., x_L]`` of the unmodified model, each ``(B, T, d)``."""
    xs = [stack.embed(inputs)]
    for layer in range(1, stack.depth + 1):
        xs.append(stack.block(xs[-1], layer, layer))
    return xs


def run_from(stack: LayerStack, x: torch.Tensor, start: int, params: Sequence[int] | None = None,
             replace: dict[int, Callable[[torch.Tensor], torch.Tensor]] | None = None,
             keep: bool = False):
    """Run positions ``start..L`` from ``x`` (the stream entering position ``start``).

    Parameters
    ----------
    params : sequence of int, optional
        ``params[p - 1]`` is the parameter index used at position ``p`` (default: ``p``).
    replace : dict, optional
        Position -> a function of the stream that stands in for that block (identity to
        skip it, an affine map for the usefulness score).
    keep : bool
        Also return every stream ``x_{start-1}..x_L``.

    Returns
    -------
    Tensor or list of Tensor
        ``x_L`` (``keep=False``) or the list of streams (``keep=True``).
    """
    replace = replace or {}
    kept = [x]
    for position in range(start, stack.depth + 1):
        if position in replace:
            x = replace[position](x)
        else:
            x = stack.block(x, position if params is None else params[position - 1], position)
        if keep:
            kept.append(x)
    return kept if keep else x
