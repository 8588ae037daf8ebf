"""The trained LM (:class:`simulate.training.model.CausalLM`) as a :class:`~simulate.scores.stack.LayerStack`.

Built by composing the model's own submodules (its forward is not edited): ``embed`` is
``CausalLM.embed_tokens``, ``sequence_loss`` is ``CausalLM.readout`` and a token-mean
cross-entropy per sequence, and ``block(x, params, position)`` runs ``blocks[params - 1]``
with the *position* factors of ``blocks[position - 1]``: each sublayer's ``input_scale``
(LayerNorm Scaling's ``1/sqrt(l)``, P2's ``top_k/sqrt(l)`` in MoE blocks) and
``stream_scale`` (DeepNorm's residual scale) are those of the position while it runs.
Everything else of a block (weights, norm gains, branch gains, its feature mask) travels
with its parameters; under ``mix`` a block keeps its own Post- or Pre-LN wiring
(docs/scores.md).

>>> from theory.setting import Setting
>>> from simulate.training.model import CausalLM
>>> model = CausalLM(Setting(scheme="lns", block="mlp", activation="relu", depth=3, width=8, heads=2,
...                          tokens=4), seed=0)
>>> stack = stack_of(model)
>>> x = torch.randn(2, 4, 8)
>>> bool(torch.equal(stack.block(x, 2, 2), model.blocks[1](x)))
True
>>> [s.input_scale for s in model.blocks[0].sublayers] == [1.0]  # restored after a swapped run
True
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from simulate.scores.stack import LayerStack

__all__ = ["ModelStack", "stack_of", "at_position"]


@contextmanager
def at_position(block, position_block):
    """Run ``block`` with the position factors of ``position_block`` (restored on exit)."""
    saved = [(sub.input_scale, sub.stream_scale) for sub in block.sublayers]
    try:
        for sub, there in zip(block.sublayers, position_block.sublayers):
            sub.input_scale, sub.stream_scale = there.input_scale, there.stream_scale
        yield block
    finally:
        for sub, (input_scale, stream_scale) in zip(block.sublayers, saved):
            sub.input_scale, sub.stream_scale = input_scale, stream_scale


class ModelStack(LayerStack):
    """A :class:`~simulate.training.model.CausalLM` seen block by block (module docstring)."""

    def __init__(self, model):
        self.model = model
        self.depth = len(model.blocks)

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(inputs)  # (B, T, d)

    def block(self, x: torch.Tensor, params: int, position: int) -> torch.Tensor:
        block = self.model.blocks[params - 1]
        if params == position:
            return block(x)
        with at_position(block, self.model.blocks[position - 1]):
            return block(x)

    def sequence_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.model.readout(x)  # (B, T, V)
        return F.cross_entropy(logits.transpose(1, 2).float(), targets, reduction="none").mean(-1)  # (B,)


def stack_of(model) -> ModelStack:
    """The :class:`ModelStack` of a trained (or step-0) ``CausalLM``."""
    return ModelStack(model)
