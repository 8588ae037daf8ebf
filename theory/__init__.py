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

from theory.setting import Setting, SettingError
from theory import architecture
from theory.symbolic import bounds, jacobians, recursions, symbols
from theory.symbolic.lemmas import LEMMA_IDS, LEMMAS, Lemma, derive_growth, growth_class, lemma
from theory.meanfield.prediction import predict, weight_decay_bound, weight_decay_variance

__all__ = [
    "Setting", "SettingError", "architecture", "Lemma", "LEMMAS", "LEMMA_IDS", "lemma", "growth_class",
    "derive_growth", "symbols", "recursions", "jacobians", "bounds",
    "predict", "weight_decay_variance", "weight_decay_bound",
]
