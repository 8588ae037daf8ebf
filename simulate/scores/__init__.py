"""Layer-effectiveness scores of trained models (docs/scores.md); the claims they judge: :mod:`simulate.claims`.

- :mod:`~simulate.scores.stack`: what a score needs of a model (cut, replace, reorder blocks).
- :mod:`~simulate.scores.model`: the trainer's ``CausalLM`` as such a stack.
- :mod:`~simulate.scores.definitions`, :mod:`~simulate.scores.jacobian`: the scores.
- :mod:`~simulate.scores.compute`, :mod:`~simulate.scores.runs`, :mod:`~simulate.scores.cli`:
  ``python -m simulate scores DIR``.
- :mod:`~simulate.scores.training_cache`: tiny cached trainings for figures, notebooks, verify.

Names are loaded on first use (importing the package imports no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the homes of the names below to type checkers and to the source walker
    # of simulate.runtime.versions.import_closure (code versions, the import-graph tests)
    from simulate.scores import compute, runs  # noqa: F401
    from simulate.training import run_directory  # noqa: F401

__all__ = ["SCORE_GROUPS", "ScoreOptions", "compute_scores", "score_run", "load_run_model", "RunError"]

_HOMES = {"SCORE_GROUPS": "simulate.scores.compute", "ScoreOptions": "simulate.scores.compute",
          "compute_scores": "simulate.scores.compute", "score_run": "simulate.scores.runs",
          "load_run_model": "simulate.scores.runs", "RunError": "simulate.training.run_directory"}


__getattr__, __dir__ = lazy_exports("simulate.scores", _HOMES, globals())
