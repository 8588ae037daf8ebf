"""Paper figures: theory curves over Monte-Carlo bands, one module per figure group.

``FIGURES`` maps a figure name to a function ``(out_dir, quick) -> list of written
paths`` (a PNG and a PDF per figure). Build them with ``python -m paper_figs
[--quick] [--only NAME] [--out DIR]``; Monte-Carlo runs go through the simulator's
cache, so a second build is fast. The figure modules share :mod:`paper_figs.style` (look,
bands, theory lines, what each line was drawn from), :mod:`paper_figs.legends` and
:mod:`paper_figs.profiles` (per-layer profile panels); :mod:`paper_figs.layout` checks a
rendered figure for overlapping or too small text. The ``study_*`` figures read the atlas's
shipped results (``results/atlas``, :mod:`paper_figs.studies`, :mod:`paper_figs.study_phase`). The notebooks
import their helpers from :mod:`paper_figs.notebook`, :mod:`paper_figs.explorer` and (what notebook 08 prints
about the atlases) :mod:`paper_figs.atlas_tables`.

>>> sorted(FIGURES)[:3]
['angular_heatmap', 'block_jacobians', 'gqa_groups']
"""

from __future__ import annotations

from paper_figs import angular, depth_profiles, jacobians, regimes, sparsity, studies, study_phase, sweep_growth
from paper_figs import trained_depth, trained_sparsity

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
    "sweep_growth": sweep_growth.sweep_growth,
    "trained_variance": trained_depth.trained_variance,
    "trained_pruning": trained_depth.trained_pruning,
    "trained_angular": trained_depth.trained_angular,
    "trained_sparsity": trained_sparsity.trained_sparsity,
    "trained_bridge": trained_depth.trained_bridge,
    "study_depth": studies.study_depth,
    "study_pruning": studies.study_pruning,
    "study_lns_gain": studies.study_lns_gain,
    "study_width": studies.study_width,
    "study_phase": study_phase.study_phase,
}
