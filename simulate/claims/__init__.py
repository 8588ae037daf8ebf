"""The papers' trained claims: each defined once, measured by one function, judged by two thin judges.

A newcomer finds every trained verdict here:

- :mod:`~simulate.claims.definitions`: every claim of P1 and P2 (one :class:`Claim` each, one
  id; its source, statistic, schemes, claimed sign and directions, :class:`Kind`, the papers'
  effect size where they give one);
- :mod:`~simulate.claims.statistics`: one model's statistics at one stage
  (:class:`ModelStatistics` from its :class:`ModelEvidence`);
- :mod:`~simulate.claims.judgement`: the :class:`Interval` (with its confidence and method), the
  :class:`Inference` settings of a report, the typed :class:`Judgement` and :class:`TrendJudgement`;
  their words are the enums of :mod:`theory.verdicts`;
- :mod:`~simulate.claims.growth`: growth classes of variance profiles (a profile over its blocks);
- :mod:`~simulate.claims.depth_laws`: laws of a whole-model statistic across depth;
- :mod:`~simulate.claims.width_laws`: laws across depth and width (a width study's prediction at a new width);
- :mod:`~simulate.claims.trends`: slopes along an axis, what a design can detect, zero crossings;
- :mod:`~simulate.claims.calibration`: a report's verdict rules simulated on its own design;
- :mod:`~simulate.claims.across_runs`: the judge of ``verify --trained`` (groups of runs);
- :mod:`~simulate.claims.along_axes`: the judge of a study (cells and trends of its axes).

Order among the services: the claims read the training and the scores, and are read by the
sweeps, the studies, ``verify``, the figures (tests/test_import_graph.py). Names are loaded on
first use (importing the package imports no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the package's modules to type checkers and to the source walker of
    # simulate.runtime.versions.import_closure (code versions, the import-graph test)
    from simulate.claims import (across_runs, along_axes, calibration, definitions, depth_laws,  # noqa: F401
                                 growth, judgement, statistics, trends, width_laws)

_NAMES = {
    "simulate.claims.judgement": ("POWER", "Interval", "NO_INTERVAL", "Difference", "t_interval", "welch_interval",
                                  "difference_interval", "share_interval", "level_label", "normal_quantile",
                                  "detectable_slope", "unless_unresolvable", "claimed_sign_verdict",
                                  "MULTIPLICITY_METHODS", "INFERENCE_FIELDS", "Inference", "Judgement", "TrendDesign",
                                  "TrendJudgement", "BlindTestJudgement", "blind_test_verdict", "size_verdict",
                                  "describe_size", "stability_verdict", "describe_stability"),
    "simulate.claims.definitions": ("SIZE_AXES", "Kind", "Reference", "perplexity_gain", "Margin", "MARGINS",
                                    "GrowthRule", "KNOBS", "Claim", "CLAIMS",
                                    "applicable_claims", "growth_claim", "sparser", "Question", "QUESTIONS"),
    "simulate.claims.statistics": ("NEGLIGIBLE_FRACTION", "RESOLVED_DROP", "SHARE_STATISTICS", "LOG_DROP_STATISTICS",
                                   "STATISTICS", "ModelEvidence", "ModelStatistics", "halves", "model_statistics",
                                   "drop_resolved"),
    "simulate.claims.growth": ("EXPONENT_TOLERANCE", "FLAT_GROWTH", "GrowthSummary", "growth_summary",
                               "describe_growth", "growth_verdict", "judge_growth"),
    "simulate.claims.depth_laws": ("DEPTH_LAWS", "MIN_LAW_DEPTHS", "DepthLaw", "fit_depth_law", "law_regressor",
                                   "new_cell_interval"),
    "simulate.claims.width_laws": ("WIDTH_LAWS", "WidthLaw", "width_law_design", "fit_width_law"),
    "simulate.claims.trends": ("Cells", "cells_of", "Trend", "cell_means_slope", "within_var", "lack_of_fit_p",
                               "fit_trend", "direction_verdict", "describe_shape", "SignChange", "Crossing",
                               "cell_crossing", "describe_crossing"),
    "simulate.claims.calibration": ("SCENARIOS", "CALIBRATION_COLUMNS", "calibrate"),
    "simulate.claims.across_runs": ("VERIFY_OPTIONS", "VERIFY_GROUPS", "JudgedRun", "RunJudgement", "judged_run",
                                    "judge_runs"),
    "simulate.claims.along_axes": ("IDENTIFIABLE_BLOCKS", "claim_samples", "unresolved_drops", "judge_levels",
                                   "judge_trends", "needs"),
}
_HOMES = {name: module for module, names in _NAMES.items() for name in names}
__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports("simulate.claims", _HOMES, globals())
