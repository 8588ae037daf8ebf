"""Monte-Carlo simulation of random-weight residual stacks (torch, CPU or CUDA).

Public API (docs/formats.md): :func:`simulate`, :func:`cached_simulate`,
:class:`NumericalBlowUp`, :func:`weight_decay_process`, :func:`block_jacobian`,
:data:`METRICS`; :mod:`simulate.compare` puts a measurement beside the theory. Command
line: ``python -m simulate run|verify|bench|...``.

The engine (weights, implicit, noise, blocks, stack, metrics, tables, processes,
jacobian) ends at a statistics table; the services (cache, compare, verify, bench)
sit above it. Importing the package imports nothing heavy: the names above are loaded on
first use, so a command line can call :func:`simulate.runtime.process.configure_process`
before torch is loaded.

Importing it sets ``OMP_WAIT_POLICY=PASSIVE`` where the variable is unset and torch is not loaded yet
(:func:`simulate.runtime.process.set_wait_policy`): torch's OpenMP threads then sleep instead of spinning between
the small ops of a Monte-Carlo run, which on a shared machine made a library user's run 60 times slower
(docs/design.md#process-setup). Import :mod:`simulate` before torch, or set the variable yourself, to have it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.process import set_wait_policy

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the homes of the names below to type checkers and to the source walker
    # of simulate.runtime.versions.import_closure (code versions, the import-graph tests)
    from simulate import cache, engine  # noqa: F401 (the engine through its face)

__all__ = ["simulate", "cached_simulate", "NumericalBlowUp", "weight_decay_process", "block_jacobian", "METRICS"]

_HOMES = {"simulate": "simulate.engine.stack", "NumericalBlowUp": "simulate.engine.stack",
          "cached_simulate": "simulate.cache",
          "weight_decay_process": "simulate.engine.weight_decay", "block_jacobian": "simulate.engine.jacobian",
          "METRICS": "simulate.engine.metrics"}


set_wait_policy()
__getattr__, __dir__ = lazy_exports("simulate", _HOMES, globals())
