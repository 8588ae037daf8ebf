"""Names of a package loaded on first use (PEP 562), so importing it imports nothing heavy.

>>> getattr_, dir_ = lazy_exports("simulate", {"METRICS": "simulate.engine.metrics"}, {})
>>> getattr_("METRICS")[0]  # simulate.engine.metrics loaded now
'var'
>>> "METRICS" in dir_()
True
"""

from __future__ import annotations

import importlib
from typing import Callable

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: dict[str, str], namespace: dict) -> tuple[Callable, Callable]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name of ``homes`` is read from its module.

    ``namespace`` is the package's ``globals()`` (its own names, listed by ``__dir__``).
    """

    def __getattr__(name: str):
        if name in homes:
            return getattr(importlib.import_module(homes[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(list(namespace) + list(homes))

    return __getattr__, __dir__
