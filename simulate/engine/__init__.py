"""The engine: random-weight residual stacks run and measured, ending at a statistics table.

Modules: :mod:`~simulate.engine.weights` (keyed Gaussian weights), :mod:`~simulate.engine.implicit`
(the exact implicit Gaussian product), :mod:`~simulate.engine.noise` (prefetched draws),
:mod:`~simulate.engine.blocks` (the sublayers of every scheme, from :mod:`theory.architecture`),
:mod:`~simulate.engine.stack` (the streaming runner), :mod:`~simulate.engine.metrics` (the metrics,
defined once), :mod:`~simulate.engine.tables` (mean, sem, CI: the one table),
:mod:`~simulate.engine.weight_decay` (the weight-decay process of P2 Theorem 3),
:mod:`~simulate.engine.jacobian` (one block's full Jacobian), :mod:`~simulate.engine.memory_model`
(a run's peak memory). The engine imports :mod:`theory` and :mod:`simulate.runtime`, never a
service.

This module is the engine's face: the services (cache, compare, verify, bench, sweep,
training, scores, study) and the figures import these names from ``simulate.engine``,
never from its modules (``tests/test_import_graph.py``). Names are loaded on first use, so
importing the face imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the face's modules to type checkers and to the source walker of
    # simulate.runtime.versions.import_closure, so a service's code version covers the engine modules it reaches
    from simulate.engine import (blocks, implicit, jacobian, memory_model, metrics, noise, stack,  # noqa: F401
                                 tables, weight_decay, weights)

_NAMES = {
    "simulate.engine.stack": ("simulate", "NumericalBlowUp", "SimulationInterrupted", "resolve_device",
                              "resolve_dtype", "check_precision", "matmul_precision_context", "stream_states"),
    "simulate.engine.metrics": ("METRICS", "parse_metrics", "metrics_of_block", "angular", "kurtosis", "moments",
                                "norm_ratio", "rms_per_element", "stream_var", "token_cos"),
    "simulate.engine.tables": ("COLUMNS", "CONFIDENCE", "Z_CONFIDENCE", "table_from_stats", "summarise",
                               "confidence_interval", "interval_z"),
    "simulate.engine.blocks": ("ACTIVATIONS",),
    "simulate.engine.noise": ("key_seed",),
    "simulate.engine.weights": ("WeightSampler",),
    "simulate.engine.implicit": ("calibrate_costs",),
    "simulate.engine.weight_decay": ("weight_decay_process",),
    "simulate.engine.jacobian": ("block_jacobian",),
    "simulate.engine.memory_model": ("estimate_run_bytes", "naive_bytes", "check_run_fits"),
}
_HOMES = {name: module for module, names in _NAMES.items() for name in names}
__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports("simulate.engine", _HOMES, globals())
