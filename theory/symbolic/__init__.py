"""The symbolic layer: symbols, exact closed forms, paper statements and the lemma registry (sympy).

- :mod:`theory.symbolic.symbols`: every symbol once, with its sympy assumptions.
- :mod:`theory.symbolic.recursions`: exact random-init laws and the bridge (docs/derivations.md);
  :mod:`theory.symbolic.jacobians`: the block-Jacobian laws (re-exported by ``recursions``).
- :mod:`theory.symbolic.bounds`: paper statements (docs/derivations.md#paper-statements) and their derived growth.
- :mod:`theory.symbolic.lemmas`: ``LEMMAS`` (id -> :class:`~theory.symbolic.lemmas.Lemma`),
  ``lemma(id)``, ``growth_class(id)``.

Imports nothing of :mod:`theory.meanfield`.
"""
