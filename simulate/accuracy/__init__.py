"""The accuracy map: every law of ``theory.predict`` against the Monte-Carlo over the workbench's settings.

- :mod:`~simulate.accuracy.grid`: :class:`MapGrid`, the cells (schemes x blocks x widths x lengths x
  causality, a star or the full factorial) and their sample budget, declared and checked;
- :mod:`~simulate.accuracy.measure`: one cell's rows, a class per curve (:data:`ACCURACY_CLASSES`);
- :mod:`~simulate.accuracy.figure`: the map at a glance;
- :mod:`~simulate.accuracy.mechanisms`: a cause isolated (the token cosines' finite-width fluctuations);
- :mod:`~simulate.accuracy.cli`: ``python -m simulate verify --map``.

The map reads the engine through the cache and :mod:`simulate.compare`, and is read by ``verify``
(tests/test_import_graph.py); what it means is in docs/accuracy.md. Names are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the package's modules to type checkers and to the source walker of
    # simulate.runtime.versions.import_closure (code versions, the import-graph test)
    from simulate.accuracy import cli, figure, grid, measure, mechanisms  # noqa: F401

_NAMES = {
    "simulate.accuracy.grid": ("MAP_BLOCKS", "DESIGNS", "MapGrid"),
    "simulate.accuracy.measure": ("ACCURACY_CLASSES", "MAP_COLUMNS", "accuracy_class", "is_paper", "measure_cell"),
    "simulate.accuracy.figure": ("plot_map",),
    "simulate.accuracy.mechanisms": ("gram_fluctuation_excess",),
    "simulate.accuracy.cli": ("run_map", "summary"),
}
_HOMES = {name: module for module, names in _NAMES.items() for name in names}
__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports("simulate.accuracy", _HOMES, globals())
