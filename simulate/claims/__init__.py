"""The papers' trained claims: each defined once, measured by one function, judged by two thin judges.

A newcomer finds every trained verdict here:

- :mod:`~simulate.claims.definitions`: every claim of P1 and P2 (one :class:`Claim` each, one
  id; its source, statistic, schemes, claimed sign and directions, :class:`Kind`);
- :mod:`~simulate.claims.statistics`: one model's statistics at one stage
  (:class:`ModelStatistics` from its :class:`ModelEvidence`);
- :mod:`~simulate.claims.verdicts`, :mod:`~simulate.claims.intervals`,
  :mod:`~simulate.claims.judgement`: the :class:`Verdict` words, the :class:`Interval` type
  with its one formatter, the :class:`Judgement` record;
- :mod:`~simulate.claims.growth`: growth classes of variance profiles and their verdicts;
- :mod:`~simulate.claims.trends`: slopes along an axis, zero crossings;
- :mod:`~simulate.claims.inference`: the confidence, multiplicity method and bootstrap resamples of a
  report (:class:`Inference`);
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
    from simulate.claims import (across_runs, along_axes, definitions, growth, inference, intervals,  # noqa: F401
                                 judgement, statistics, trends, verdicts)

_NAMES = {
    "simulate.claims.verdicts": ("Verdict",),
    "simulate.claims.intervals": ("Interval", "NO_INTERVAL", "Difference", "t_interval", "welch_interval",
                                   "difference_interval", "share_interval"),
    "simulate.claims.definitions": ("SIZE_AXES", "Kind", "GrowthRule", "KNOBS", "Claim", "CLAIMS",
                                    "applicable_claims", "growth_claim", "sparser"),
    "simulate.claims.judgement": ("Judgement",),
    "simulate.claims.inference": ("MULTIPLICITY_METHODS", "INFERENCE_FIELDS", "Inference"),
    "simulate.claims.statistics": ("REMOVABLE_FRACTION", "SHARE_STATISTICS", "STATISTICS", "ModelEvidence", "ModelStatistics", "halves",
                                   "model_statistics"),
    "simulate.claims.growth": ("EXPONENT_TOLERANCE", "FLAT_GROWTH", "GrowthSummary", "growth_summary",
                               "describe_growth", "judge_growth"),
    "simulate.claims.trends": ("LACK_OF_FIT_LEVEL", "Cells", "cells_of", "Trend", "fit_trend", "direction_verdict",
                               "holm", "Crossing", "cell_crossing", "describe_crossing"),
    "simulate.claims.across_runs": ("VERIFY_OPTIONS", "VERIFY_GROUPS", "JudgedRun", "RunJudgement", "judged_run",
                                    "judge_runs"),
    "simulate.claims.along_axes": ("LEVEL_COLUMNS", "TREND_COLUMNS", "claim_samples", "level_rows", "trend_rows"),
}
_HOMES = {name: module for module, names in _NAMES.items() for name in names}
__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports("simulate.claims", _HOMES, globals())
