"""Paper figures: theory curves over Monte-Carlo bands, one module per figure group.

``FIGURES`` maps a figure name to a function ``(out_dir, quick) -> list of written
paths`` (a PNG and a PDF per figure). Build them with ``python -m paper_figs
[--quick] [--only NAME] [--out DIR]``; Monte-Carlo runs go through the simulator's
cache, so a second build is fast.

>>> sorted(FIGURES)[:3]
['angular_heatmap', 'block_jacobians', 'gqa_groups']
"""

from __future__ import annotations

from paper_figs import angular, depth_profiles, jacobians, regimes, sparsity

__all__ = ["FIGURES"]

FIGURES = {
    "variance_by_scheme": depth_profiles.variance_by_scheme,
    "jac_dev_by_scheme": depth_profiles.jac_dev_by_scheme,
    "angular_heatmap": angular.angular_heatmap,
    "block_jacobians": jacobians.jacobian_heatmaps,
    "masked_linear": sparsity.masked_linear,
    "moe_topk": sparsity.moe_topk,
    "gqa_groups": sparsity.gqa_groups,
    "sequence_length": sparsity.sequence_length,
    "weight_decay": regimes.weight_decay,
    "token_cosine": depth_profiles.token_cosine,
    "regime_map": regimes.regime_map,
}
