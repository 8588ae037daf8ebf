"""The trained probe's model: forward options, the raw stream, JVP probes against explicit Jacobians."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.autograd.functional import jacobian
from torch.nn.attention import SDPBackend, sdpa_kernel

from simulate.training.model import CausalLM
from simulate.training.probes import jacobian_statistics
from theory import Setting
from theory.setting import SCHEMES

TINY = dict(depth=3, width=16, heads=2, tokens=4)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_builds_and_trains_one_step(scheme):
    model = CausalLM(Setting.preset("llama", scheme=scheme, **TINY), seed=0)
    tokens = torch.randint(0, 256, (2, 4))
    logits = model(tokens).logits  # (2, 4, 256)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
    loss.backward()
    assert math.isfinite(float(loss.detach())) and logits.shape == (2, 4, 256)
    assert all(p.grad is not None for p in model.parameters())


def test_skip_replace_and_raw_stream():
    model = CausalLM(Setting.preset("llama", **TINY), seed=0)
    tokens = torch.randint(0, 256, (2, 4))
    with torch.no_grad():
        full = model(tokens, collect=True)
        skipped = model(tokens, skip=[2], collect=True)
        replaced = model(tokens, replace={2: lambda h: h}, collect=True)
    assert torch.equal(skipped.hidden[2], skipped.hidden[1]) and skipped.branches[2] == {}
    assert torch.equal(replaced.hidden[3], skipped.hidden[3])
    assert torch.equal(skipped.hidden[1], full.hidden[1]) and not torch.equal(skipped.hidden[3], full.hidden[3])
    # the collected last stream is raw: the logits are the final norm and head applied to it
    assert torch.allclose(model.readout(full.hidden[-1]), full.logits)
    assert not torch.allclose(full.hidden[-1].pow(2).mean(-1), torch.ones(2, 4))


def test_moe_lns_top_k_option_scales_the_block_inputs():
    setting = Setting.preset("llama", scheme="lns", block="moe", experts=4, top_k=2, **TINY)
    plain, p2 = CausalLM(setting, seed=0), CausalLM(setting, seed=0, moe_lns_top_k=True)
    scales = [[s.input_scale for s in block.sublayers] for block in (plain.blocks[2], p2.blocks[2])]
    assert scales == [[1 / math.sqrt(3)] * 2, [2 / math.sqrt(3)] * 2]


def _explicit_deviation(block, h, v):
    """(J - I) v from the full Jacobian of the block at h (T d x T d), float64."""
    flat = h.reshape(-1)
    jac = jacobian(lambda z: block(z.reshape(h.shape)).reshape(-1), flat)  # (T d, T d)
    return ((jac - torch.eye(flat.numel(), dtype=flat.dtype)) @ v.reshape(-1)).reshape(h.shape)


@pytest.mark.parametrize("scheme", ["pre", "post", "deepnorm", "sandwich"])
def test_jvp_probes_equal_explicit_jacobians(scheme):
    setting = Setting.preset("llama", scheme=scheme, init_std=0.3, **TINY)
    model = CausalLM(setting, seed=1).double()
    with torch.no_grad():
        hidden = model(torch.randint(0, 256, (2, 4)), collect=True).hidden
    jac, e2e = jacobian_statistics(model, hidden, seed=5, step=7)  # (L+1, S) each
    from simulate.training.data import step_generator

    gen = step_generator(5, 7, "jac_probe")
    with sdpa_kernel(SDPBackend.MATH):
        for layer, block in enumerate(model.blocks, start=1):
            v = torch.randn(hidden[0].shape, generator=gen).double()  # (S, T, d), the probe's own draw
            for s in range(2):
                deviation = _explicit_deviation(block, hidden[layer - 1][s:s + 1], v[s:s + 1])
                expected = float(deviation.pow(2).mean().sqrt())
                assert np.isclose(jac[layer, s], expected, rtol=1e-6), (scheme, layer, s, jac[layer, s], expected)
    # e2e_gain: the carried tangent equals the JVP of the whole stack h_0 -> h_l (one probe from layer 0)
    v0 = torch.randn(hidden[0].shape, generator=step_generator(5, 7, "e2e_probe")).double()  # (S, T, d)

    def stack(h):
        outs = []
        for block in model.blocks:
            h = block(h)
            outs.append(h)
        return tuple(outs)

    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        _, tangents = torch.func.jvp(stack, (hidden[0],), (v0,))
    for layer, tangent in enumerate(tangents, start=1):
        expected = (tangent.pow(2).sum((-1, -2)).sqrt() / v0.pow(2).sum((-1, -2)).sqrt()).numpy()  # (S,)
        assert np.allclose(e2e[layer], expected, rtol=1e-9), (scheme, layer, e2e[layer], expected)
    assert np.all(e2e[0] == 1.0)
