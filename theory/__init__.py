"""Symbolic theory of depth in residual stacks: recursions, bounds and a lemma registry.

Imports no torch and nothing of ``simulate``.

- :mod:`theory.symbols`: every symbol once, with its sympy assumptions.
- :mod:`theory.recursions`: exact random-init laws (THEORY.md B) and the bridge (C);
  :mod:`theory.jacobians`: the block-Jacobian laws (re-exported by ``recursions``).
- :mod:`theory.bounds`: paper statements (THEORY.md A) and their derived growth.
- :mod:`theory.lemmas`: ``LEMMAS`` (id -> :class:`Lemma`), ``lemma(id)``, ``growth_class(id)``.
- :mod:`theory.prediction`: ``predict(setting)``, ``weight_decay_variance``,
  ``weight_decay_bound``, numeric per-layer curves (re-exported here).

>>> import theory
>>> theory.lemma("p2-thm-1").kind
'paper'
"""

from theory.setting import Setting, SettingError
from theory import bounds, jacobians, recursions, symbols
from theory.lemmas import LEMMA_IDS, LEMMAS, Lemma, derive_growth, growth_class, lemma
from theory.prediction import predict, weight_decay_bound, weight_decay_variance

__all__ = [
    "Setting", "SettingError", "Lemma", "LEMMAS", "LEMMA_IDS", "lemma", "growth_class",
    "derive_growth", "symbols", "recursions", "jacobians", "bounds",
    "predict", "weight_decay_variance", "weight_decay_bound",
]
