"""Layer-effectiveness scores of trained models and the trained claims of P1 and P2 (docs/scores.md).

- :mod:`~simulate.scores.stack`: what a score needs of a model (cut, replace, reorder blocks).
- :mod:`~simulate.scores.model`: the trainer's ``CausalLM`` as such a stack.
- :mod:`~simulate.scores.definitions`, :mod:`~simulate.scores.jacobian`: the scores.
- :mod:`~simulate.scores.compute`, :mod:`~simulate.scores.runs`, :mod:`~simulate.scores.cli`:
  ``python -m simulate scores DIR``.
- :mod:`~simulate.scores.growth_claims`, :mod:`~simulate.scores.trained_claims`: verdicts of
  P1's and P2's claims at init and after training (``python -m simulate verify --trained``).
- :mod:`~simulate.scores.training_cache`: tiny cached trainings for figures, notebooks, verify.

Names are loaded on first use (importing the package imports no torch).
"""

from __future__ import annotations

from simulate.runtime.lazy import lazy_exports

__all__ = ["SCORE_GROUPS", "ScoreOptions", "compute_scores", "score_run", "load_run_model", "RunError"]

_HOMES = {"SCORE_GROUPS": "simulate.scores.compute", "ScoreOptions": "simulate.scores.compute",
          "compute_scores": "simulate.scores.compute", "score_run": "simulate.scores.runs",
          "load_run_model": "simulate.scores.runs", "RunError": "simulate.scores.runs"}


__getattr__, __dir__ = lazy_exports("simulate.scores", _HOMES, globals())
