"""Theory of depth in residual stacks: symbolic laws, a lemma registry and the mean-field predictions.

Imports no torch and nothing of ``simulate``.

- :mod:`theory.setting`: the :class:`Setting`; :mod:`theory.architecture`: the one spec of
  schemes and blocks; :mod:`theory.cli`: helpers shared by the command lines.
- :mod:`theory.symbolic`: symbols, exact closed forms (``recursions``, ``jacobians``), paper
  statements (``bounds``) and the lemma registry (``lemmas``: ``LEMMAS``, ``lemma(id)``,
  ``growth_class(id)``); the four modules are re-exported here.
- :mod:`theory.meanfield`: the numeric mean-field engine (Gaussian moments, softmax rows,
  the plan of a stack, the pair and T x T recursions) ending at
  :func:`~theory.meanfield.prediction.predict` (re-exported here with ``weight_decay_variance``
  and ``weight_decay_bound``).

>>> import theory
>>> theory.lemma("p2-thm-1").kind
'paper'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # never run: the homes of the names below, for type checkers and the import walkers
    from theory import architecture  # noqa: F401
    from theory.meanfield.prediction import predict, weight_decay_bound, weight_decay_variance  # noqa: F401
    from theory.setting import Setting, SettingError  # noqa: F401
    from theory.symbolic import bounds, jacobians, recursions, symbols  # noqa: F401
    from theory.symbolic.lemmas import LEMMA_IDS, LEMMAS, Lemma, derive_growth, growth_class, lemma  # noqa: F401

__all__ = [
    "Setting", "SettingError", "architecture", "Lemma", "LEMMAS", "LEMMA_IDS", "lemma", "growth_class",
    "derive_growth", "symbols", "recursions", "jacobians", "bounds",
    "predict", "weight_decay_variance", "weight_decay_bound",
]

# Loaded on first use (PEP 562): ``python -m theory predict`` needs neither sympy nor the lemma registry.
_HOMES = {"Setting": "theory.setting", "SettingError": "theory.setting",
          **dict.fromkeys(("Lemma", "LEMMAS", "LEMMA_IDS", "lemma", "growth_class", "derive_growth"),
                          "theory.symbolic.lemmas"),
          **dict.fromkeys(("predict", "weight_decay_variance", "weight_decay_bound"), "theory.meanfield.prediction")}
_MODULES = {"architecture": "theory.architecture", **{name: f"theory.symbolic.{name}" for name in
                                                      ("symbols", "recursions", "jacobians", "bounds")}}


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'theory' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
