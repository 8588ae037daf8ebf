"""At step 0, fed i.i.d. Gaussian embeddings, the trained probe's model agrees in law with ``simulate run``.

The simulator draws S independent stacks; the model is one weight draw per seed, so the
comparison draws ``MODELS`` models (seeds), feeds each ``SEQUENCES`` Gaussian sequences
(std ``input_std``) and takes one per-model mean per layer: independent samples of the
same law as the simulator's per-sample values. Per layer and metric (``var`` at layers
0..L, ``angular`` at 1..L) the two means agree within 4 combined standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulate import simulate
from simulate.engine.metrics import angular, stream_var
from simulate.training.model import CausalLM
from theory import Setting

MODELS, SEQUENCES, SIM_SAMPLES = 96, 4, 384
BASE = dict(depth=4, width=32, heads=4, tokens=8, init_std=0.2)  # alpha = 1.28: branches matter
CASES = {
    "pre": dict(scheme="pre"),
    "lns": dict(scheme="lns"),
    "post": dict(scheme="post"),
    "mix": dict(scheme="mix", mix_fraction=0.5),
    "deepnorm": dict(scheme="deepnorm"),
    "moe": dict(scheme="pre", block="moe", experts=4, top_k=2, shared_expert=True),
    "gqa": dict(scheme="lns", kv_heads=1),
}


def model_values(setting: Setting, seed: int) -> dict[str, np.ndarray]:
    """Per-model means (MODELS, L+1) of var and angular (angular[:, 0] is NaN)."""
    generator = torch.Generator().manual_seed(10_000 + seed)
    var, ang = [], []
    for m in range(MODELS):
        model = CausalLM(setting, seed=seed + m)
        x = torch.randn(SEQUENCES, setting.tokens, setting.width, generator=generator) * setting.input_std
        with torch.no_grad():
            hidden = model(embeddings=x, collect=True, logits=False).hidden  # L+1 x (S, T, d)
        var.append([float(stream_var(h).mean()) for h in hidden])
        ang.append([np.nan] + [float(angular(a, b).mean()) for a, b in zip(hidden[:-1], hidden[1:])])
    return {"var": np.array(var), "angular": np.array(ang)}


def z_scores(setting: Setting, measured: dict[str, np.ndarray], seed: int) -> dict[tuple[str, int], float]:
    table = simulate(setting, samples=SIM_SAMPLES, seed=seed, metrics=("var", "angular"), dtype="float64",
                     device="cpu")
    scores = {}
    for metric, values in measured.items():
        rows = table[table.metric == metric].set_index("layer")
        for layer in rows.index:
            sample = values[:, layer]
            sem = np.sqrt(sample.var(ddof=1) / sample.size + rows.loc[layer, "sem"] ** 2)
            scores[(metric, int(layer))] = float((sample.mean() - rows.loc[layer, "mean"]) / sem)
    return scores


@pytest.mark.parametrize("name", list(CASES))
def test_step0_model_matches_simulator(name):
    setting = Setting.preset("llama", **BASE, **CASES[name])
    scores = z_scores(setting, model_values(setting, seed=0), seed=1)
    worst = max(scores, key=lambda key: abs(scores[key]))
    print(f"{name}: max |z| = {abs(scores[worst]):.2f} at {worst} over {len(scores)} values")
    assert len(scores) == 2 * setting.depth + 1
    assert abs(scores[worst]) <= 4.0, (f"{name}: model vs simulate {worst[0]} at layer {worst[1]}: z = "
                                      f"{scores[worst]:.2f} > 4 (MODELS={MODELS}, SIM_SAMPLES={SIM_SAMPLES})")


def test_step0_comparison_detects_a_wrong_scheme():
    """The check has power: the Pre-LN model against the LNS simulation fails it (deep var differs)."""
    pre = Setting.preset("llama", **BASE, scheme="pre")
    scores = z_scores(pre.replace(scheme="lns"), model_values(pre, seed=0), seed=1)
    z = scores[("var", pre.depth)]
    assert z > 4.0, f"pre model vs lns simulation: final var z = {z:.2f}, expected > 4"
