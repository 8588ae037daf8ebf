"""The batched, streaming simulator against a plain per-sample reference (same generators).

The reference materialises every weight with :meth:`WeightSampler.draw`, runs one sample
at a time with textbook ops (per-head loop, pairwise RoPE), and gets tangents from
``torch.func.jvp`` of the whole block (so (J - I) v by subtraction, fine in float64).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from simulate import simulate
from simulate.engine.weights import PART, WeightSampler, expert_part
from theory.setting import Setting

REFERENCE_METRICS = ("var", "var_attn", "var_mlp", "angular", "jac_dev", "e2e_gain", "kurtosis", "token_cos",
                     "attn_entropy")


def make(**fields) -> Setting:
    return Setting(**fields)


def rms_normalise(x, kind):
    if kind == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    return x / x.pow(2).mean(-1, keepdim=True).sqrt()


def rope_pairs(x):
    tokens, head_dim = x.shape
    half = head_dim // 2
    theta = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    angle = torch.arange(tokens, dtype=torch.float64)[:, None] * theta  # (T, hd/2)
    first, second = x[:, :half], x[:, half:]
    return torch.cat([first * angle.cos() - second * angle.sin(), second * angle.cos() + first * angle.sin()], -1)


class Reference:
    """One sample's stack with every weight materialised."""

    def __init__(self, setting, sampler, sample):
        self.setting, self.sampler, self.sample = setting, sampler, sample

    def weight(self, layer, part, d_in, d_out):
        return self.sampler.draw((layer, part), d_in, d_out, self.setting.resolved_init_std)[self.sample]

    def attention(self, h, layer, entropies):
        st = self.setting
        d, heads, hd, group = st.width, st.heads, st.head_dim, st.group_size
        q = h @ self.weight(layer, PART["q"], d, heads * hd)
        k = h @ self.weight(layer, PART["k"], d, st.resolved_kv_heads * hd)
        v = h @ self.weight(layer, PART["v"], d, st.resolved_kv_heads * hd)
        outs = []
        for head in range(heads):
            kv = head // group
            qh, kh, vh = q[:, head * hd:(head + 1) * hd], k[:, kv * hd:(kv + 1) * hd], v[:, kv * hd:(kv + 1) * hd]
            if st.rope:
                qh, kh = rope_pairs(qh), rope_pairs(kh)
            scores = qh @ kh.T / math.sqrt(hd)
            if st.causal:
                allowed = torch.ones(st.tokens, st.tokens, dtype=torch.bool).tril()
                scores = torch.where(allowed, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
            weights = torch.softmax(scores, -1)
            entropies.append(-(torch.where(weights > 0, weights * weights.log(), weights * 0)).sum(-1).mean())
            outs.append(weights @ vh)
        return torch.cat(outs, -1) @ self.weight(layer, PART["o"], heads * hd, d)

    def expert(self, h, layer, parts):
        st = self.setting
        up = h @ self.weight(layer, parts[0], st.width, st.resolved_ffn_width)
        gate = h @ self.weight(layer, parts[1], st.width, st.resolved_ffn_width)
        return (F.silu(up) * gate) @ self.weight(layer, parts[2], st.resolved_ffn_width, st.width)

    def mlp(self, h, layer):
        st = self.setting
        if st.block != "moe":
            return self.expert(h, layer, (PART["up"], PART["gate"], PART["down"]))
        logits = h @ self.weight(layer, PART["router"], st.width, st.experts)
        chosen = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(st.top_k, -1).indices, True)
        gates = torch.softmax(logits.masked_fill(~chosen, float("-inf")), -1)
        total = sum(gates[:, e:e + 1] * self.expert(h, layer, [expert_part(e, r) for r in ("up", "gate", "down")])
                    for e in range(st.experts))
        if st.shared_expert:
            total = total + self.expert(h, layer, (PART["shared_up"], PART["shared_gate"], PART["shared_down"]))
        return total

    def block(self, x, layer, record):
        st = self.setting
        scale = 1 / math.sqrt(layer) if st.scheme == "lns" else 1.0
        mask = 1.0
        if st.mask_density < 1:
            mask = self.sampler.bernoulli((layer, PART["mask"]), (self.sampler.samples, 1, st.width),
                                          st.mask_density)[self.sample]
        entropies = []
        branch = mask * self.attention(rms_normalise(x, st.norm) * scale, layer, entropies)
        branch = branch + st.alignment * rms_normalise(x, "rmsnorm")
        record["var_attn"], record["attn_entropy"] = branch.var(-1).mean(), entropies
        x = x + branch
        branch = mask * self.mlp(rms_normalise(x, st.norm) * scale, layer) + st.alignment * rms_normalise(x, "rmsnorm")
        record["var_mlp"] = branch.var(-1).mean()
        return x + branch


def reference_values(setting, samples, seed):
    """(layers, metrics, samples) array of the reference."""
    sampler = WeightSampler(seed, samples, "cpu", torch.float64, "dense")
    shape = (samples, setting.tokens, setting.width)
    inputs = sampler.normal((0, PART["input"]), shape) * setting.input_std
    e2e_probes = sampler.normal((0, PART["e2e_probe"]), shape)
    values = np.full((setting.depth + 1, len(REFERENCE_METRICS), samples), np.nan)
    index = {m: i for i, m in enumerate(REFERENCE_METRICS)}
    for sample in range(samples):
        ref = Reference(setting, sampler, sample)
        x, tangent = inputs[sample], e2e_probes[sample]

        def put(layer, name, value):
            values[layer, index[name], sample] = float(value)

        def stream_stats(layer, x):
            put(layer, "var", x.var(-1).mean())
            centred = x - x.mean(-1, keepdim=True)
            put(layer, "kurtosis", (centred.pow(4).mean(-1) / centred.pow(2).mean(-1) ** 2).mean())
            unit = x / x.norm(dim=-1, keepdim=True)
            gram = unit @ unit.T
            put(layer, "token_cos", (gram.sum() - gram.diagonal().sum()) / (setting.tokens * (setting.tokens - 1)))

        stream_stats(0, x)
        put(0, "e2e_gain", 1.0)
        for layer in range(1, setting.depth + 1):
            record = {}
            probe = sampler.normal((layer, PART["jac_probe"]), shape)[sample]
            new_x, jv = torch.func.jvp(lambda z: ref.block(z, layer, {}), (x,), (probe,))
            _, tangent = torch.func.jvp(lambda z: ref.block(z, layer, {}), (x,), (tangent,))
            ref.block(x, layer, record)
            put(layer, "jac_dev", (jv - probe).pow(2).mean().sqrt())
            put(layer, "e2e_gain", tangent.norm() / e2e_probes[sample].norm())
            cos = F.cosine_similarity(x, new_x, dim=-1).clamp(-1, 1)
            put(layer, "angular", (torch.arccos(cos) / math.pi).mean())
            for name in ("var_attn", "var_mlp"):
                put(layer, name, record[name])
            put(layer, "attn_entropy", torch.stack(record["attn_entropy"]).mean())
            x = new_x
            stream_stats(layer, x)
    return values


CASES = {
    "pre": dict(scheme="pre"),
    "lns-gqa-mask-aligned": dict(scheme="lns", kv_heads=1, mask_density=0.6, alignment=0.2, norm="layernorm"),
    "pre-moe-noncausal": dict(scheme="pre", block="moe", experts=3, top_k=2, shared_expert=True, causal=False,
                              rope=False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_simulator_matches_per_sample_reference(case):
    base = dict(block="transformer", activation="swiglu", depth=3, width=16, ffn_width=24, heads=4, kv_heads=2,
                tokens=5, init_std=0.3)
    setting = make(**{**base, **CASES[case]})
    samples = 2
    table = simulate(setting, samples=samples, seed=11, dtype="float64", weights="dense", metrics="all")
    values = reference_values(setting, samples, seed=11)
    for m, name in enumerate(REFERENCE_METRICS):
        rows = table[table.metric == name].sort_values("layer")
        expected = values[rows.layer.to_numpy(), m, :]  # (layers, S)
        np.testing.assert_allclose(rows["mean"], expected.mean(-1), rtol=1e-9, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(rows["sem"], expected.std(-1, ddof=1) / math.sqrt(samples), rtol=1e-7,
                                   atol=1e-12, err_msg=name)
        assert set(rows.layer) == {lay for lay in range(setting.depth + 1) if np.isfinite(values[lay, m, 0])}
