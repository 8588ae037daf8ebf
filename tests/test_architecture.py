"""The simulator and the theory read one spec (theory.architecture): every scheme x block.

For each pair, a tiny simulation records what the simulator actually used (the placement
of every block it ran and the std of every weight it drew) and the theory's plan of the
same stack is built; the two must agree with each other and with the spec's own table of
what each scheme means (docs/design.md), written out here independently as the test's
expectation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import simulate.engine.stack as stack
from simulate import simulate as run_simulation
from theory import architecture
from theory.meanfield.plan import build_plan
from theory.setting import BLOCKS, SCHEMES, Setting

DEPTH = 4


def expected_wiring(setting: Setting, layer: int) -> dict:
    """The scheme table of docs/design.md, written out once more as the test's expectation."""
    scheme, depth = setting.scheme, setting.depth
    post = scheme == "post" or (scheme == "mix" and layer <= math.floor(setting.mix_fraction * depth))
    return {
        "norm_input": not (post or scheme in ("deepnorm", "skipinit", "none")),
        "input_scale": 1 / math.sqrt(layer) if scheme == "lns" else 1.0,
        "norm_branch": scheme in ("sandwich", "peri"),
        "branch_scale": {"layerscale": setting.layerscale_init, "skipinit": 0.0}.get(scheme, 1.0),
        "stream_scale": (2 * depth) ** 0.25 if scheme == "deepnorm" else 1.0,
        "norm_after_add": post or scheme == "deepnorm",
    }


def expected_std_factor(setting: Setting, layer: int, role: str) -> float:
    scheme, depth = setting.scheme, setting.depth
    if scheme == "deepnorm" and role in ("v", "o", "up", "gate", "down", "linear"):
        return (8 * depth) ** -0.25
    if scheme == "scaled-init" and role in ("o", "down", "linear"):
        return 1 / math.sqrt(2 * depth)
    if scheme == "depth-scaled-init":
        return 1 / math.sqrt(layer)
    return 1.0


def simulator_reads(setting: Setting, monkeypatch) -> tuple[dict, dict]:
    """(layer -> Placement used, (layer, role) -> std drawn) during one tiny simulation."""
    placements, stds = {}, {}
    real_placement, real_context = architecture.placement, stack.block_context

    def spy_placement(setting_, layer):
        placements[layer] = real_placement(setting_, layer)
        return placements[layer]

    def spy_context(setting_, sampler, layer, want_entropy=False):
        ctx = real_context(setting_, sampler, layer, want_entropy)
        std = ctx.std

        def recorded(role):
            stds[(layer, role)] = std(role)
            return stds[(layer, role)]
        ctx.std = recorded
        return ctx

    monkeypatch.setattr(architecture, "placement", spy_placement)
    monkeypatch.setattr(stack, "block_context", spy_context)
    run_simulation(setting, samples=1, seed=0, metrics="var", dtype="float64", device="cpu")
    return placements, stds


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_simulator_and_theory_read_the_same_spec(scheme, block, monkeypatch):
    setting = Setting(scheme=scheme, block=block, depth=DEPTH, width=8, heads=2, tokens=2, experts=2, top_k=1,
                      ffn_width=16)
    used, stds = simulator_reads(setting, monkeypatch)
    assert sorted(used) == list(range(1, DEPTH + 1)), f"{scheme}/{block}: the simulator placed blocks {sorted(used)}"
    plan = build_plan(setting)  # arrays over the N = DEPTH * sublayers steps
    per_block = len(architecture.SUBLAYERS[block])
    assert len(plan.kind) == DEPTH * per_block
    for layer in range(1, DEPTH + 1):
        want, got = expected_wiring(setting, layer), used[layer]
        for name, value in want.items():
            assert getattr(got, name) == pytest.approx(value), f"{scheme}/{block} block {layer}: simulator {name}"
        steps = np.flatnonzero(plan.block == layer)  # (per_block,)
        theory_reads = {"norm_input": plan.norm_input[steps], "input_scale": np.sqrt(plan.in_scale2[steps]),
                        "norm_branch": plan.norm_branch[steps],
                        "branch_scale": np.sqrt(plan.branch2[steps] / setting.mask_density),
                        "stream_scale": np.sqrt(plan.stream_scale2[steps]), "norm_after_add": plan.norm_after[steps]}
        for name, values in theory_reads.items():
            np.testing.assert_allclose(values.astype(float), float(want[name]), rtol=1e-12,
                                       err_msg=f"{scheme}/{block} block {layer}: theory {name}")
        for step in steps:  # the theory's second-moment factors: alpha * (std factor)^2
            kind = architecture.SUBLAYERS[block][step - steps[0]]
            roles = {"linear": ("linear", None), "attention": ("v", "o"), "mlp": ("up", "down"), "moe": ("up", "down")}
            role_in, role_out = roles[kind]
            want_in = setting.alpha * expected_std_factor(setting, layer, role_in) ** 2
            assert plan.alpha_in[step] == pytest.approx(want_in, rel=1e-12), f"{scheme}/{block}: theory {role_in}"
            if role_out is not None:
                want_out = setting.alpha * expected_std_factor(setting, layer, role_out) ** 2
                assert plan.alpha_out[step] == pytest.approx(want_out, rel=1e-12), f"{scheme}/{block}: theory {role_out}"
        for (std_layer, role), std in stds.items():
            if std_layer == layer:
                target = setting.resolved_init_std * expected_std_factor(setting, layer, role)
                assert std == pytest.approx(target, rel=1e-12), f"{scheme}/{block} block {layer}: std of {role}"
    drawn_roles = {role for _, role in stds}
    wanted_roles = {role for kind in architecture.SUBLAYERS[block] for role in architecture.ROLES[kind]}
    if setting.activation != "swiglu":
        wanted_roles.discard("gate")
    assert drawn_roles <= set(wanted_roles) | {"router"}, f"{scheme}/{block}: roles drawn {sorted(drawn_roles)}"
