"""A plan of some blocks (theory.meanfield.plan.build_plan with ``blocks``) against the plan of every block."""

import numpy as np
import pytest

from theory.meanfield.plan import build_plan
from theory.setting import BLOCKS, SCHEMES, Setting

_PER_STEP = ("kind", "block", "norm_input", "in_scale2", "norm_branch", "branch2", "stream_scale2", "norm_after",
             "alpha_in", "alpha_out", "alpha_qk", "gate2")  # SublayerPlan's (N,) fields


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_plan_of_some_blocks_holds_the_whole_plans_numbers(scheme, block):
    """Every per-step field at the planned blocks, the tables' ranges, the MoE gate moments (interpolated over the
    whole stack's router range) and ``additive_from`` are those of the plan of every block."""
    setting = Setting(scheme=scheme, block=block, depth=40, width=32, heads=4, tokens=4, experts=4, top_k=2)
    blocks = np.array([1, 2, 9, 17, 39, 40])
    whole, some = build_plan(setting), build_plan(setting, blocks=blocks)
    steps = np.concatenate([list(whole.steps(b)) for b in blocks])  # (6 P,) the planned blocks' steps
    for name in _PER_STEP:
        np.testing.assert_array_equal(getattr(some, name), getattr(whole, name)[steps], err_msg=name)
    assert (some.depth, some.additive_from, some.period) == (whole.depth, whole.additive_from, whole.period)
    assert some.blocks.tolist() == blocks.tolist()
    for table in ("attention", "kernel"):
        assert (getattr(some, table) is None) == (getattr(whole, table) is None), table
    if whole.attention is not None:
        np.testing.assert_array_equal(some.attention.tau2_grid, whole.attention.tau2_grid)
    if whole.kernel is not None:
        np.testing.assert_array_equal(some.kernel.log_q, whole.kernel.log_q)


def test_additive_from_names_the_first_block_of_the_additive_tail():
    """Mix-LN: Post-LN blocks first (not additive), then Pre-LN; Post-LN: no additive tail (depth + 1)."""
    mix = build_plan(Setting(scheme="mix", depth=8, mix_fraction=0.25, width=16), blocks=[1, 8])
    assert mix.additive_from == 3
    assert build_plan(Setting(scheme="post", depth=8, width=16)).additive_from == 9
    assert build_plan(Setting(scheme="lns", depth=8, width=16), blocks=[8]).additive_from == 1


@pytest.mark.parametrize("blocks", [[], [0, 3], [3, 2], [2, 2], [1, 9]])
def test_blocks_to_plan_are_checked(blocks):
    with pytest.raises(ValueError, match=r"increasing and distinct in 1\.\.8"):
        build_plan(Setting(depth=8, width=16), blocks=blocks)


def test_a_block_not_planned_is_named():
    with pytest.raises(ValueError, match="block 5 is not planned; planned: \\[1, 8\\]"):
        build_plan(Setting(depth=8, width=16), blocks=[1, 8]).steps(5)
