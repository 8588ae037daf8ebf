"""The atlas's width study (examples/studies/atlas/width.toml, docs/studies.md#the-atlas-across-width): its d = 64
cells are the depth study's models, the same keys, so nothing is trained twice and the two studies judge one set of
models; its other widths keep the depth study's recipe and head width."""

from __future__ import annotations

from pathlib import Path

from simulate.study.atlas import ATLAS_DIR
from simulate.study.plan.spec import load_study
from simulate.study.plan.tuning import planned_points, resolve_tuning

SPECS = Path(__file__).resolve().parents[2] / "examples" / "studies" / "atlas"


def test_the_d64_cells_are_the_depth_study_s_shipped_models():
    width = resolve_tuning(load_study(SPECS / "width.toml"), ATLAS_DIR)
    planned, _ = planned_points(width, ATLAS_DIR)
    at_64 = {p.key for p in planned if p.setting.width == 64}
    shipped = {path.stem for path in (ATLAS_DIR / "points").glob("*.parquet")}
    depth = load_study(SPECS / "depth.toml")
    depth_keys = {p.key for p in (depth.candidates or depth.sweep).points}
    assert at_64, "the width study plans no d = 64 model"
    assert at_64 <= depth_keys, sorted(at_64 - depth_keys)[:5]
    assert at_64 <= shipped, f"{len(at_64 - shipped)} d = 64 models of the width study would train again"
    # 3 depths x 2 schemes x (3 seeds x 2 lengths) at the chosen rate, and the tuning seed at the other rates
    assert {(p.setting.depth, p.setting.scheme) for p in planned if p.setting.width == 64} == \
        {(d, s) for d in (8, 16, 32) for s in ("pre", "lns")}


def test_every_width_keeps_the_recipe_and_a_head_width_of_16():
    width = load_study(SPECS / "width.toml")
    depth = load_study(SPECS / "depth.toml")
    reference = next(iter(depth.sweep.points))
    for point in width.sweep.points:
        assert point.setting.width // point.setting.heads == 16, point.setting
        for field in ("preset_name", "tokens", "weight_decay", "input_std", "init_std", "norm", "activation"):
            if hasattr(point.setting, field):
                assert getattr(point.setting, field) == getattr(reference.setting, field), field
        assert {k: v for k, v in point.options.items() if k != "steps"} == \
            {k: v for k, v in reference.options.items() if k != "steps"}
