"""Sweeps: a grid of Settings x seeds x task, one Parquet file per point, resumable, a summary.

``python -m simulate sweep SPEC.toml --out DIR [--engine local|ray]`` (:mod:`simulate.sweep.cli`).
The modules, one idea each: :mod:`~simulate.sweep.spec` (parse, validate, expand, config
hash), :mod:`~simulate.sweep.tasks` (what a point of each task does),
:mod:`~simulate.sweep.headline` (final values, growth exponent), :mod:`~simulate.sweep.store`
(the files), :mod:`~simulate.sweep.engines` (inline, process pool, Ray),
:mod:`~simulate.sweep.runner` (skip what is done, run the rest, rebuild the summary),
:mod:`~simulate.sweep.plot` (a summary as a picture); the engines' speed: :mod:`simulate.bench.sweep`.

From Python::

    from simulate.sweep import load_spec, run_sweep, read_summary
    report = run_sweep(load_spec("examples/depth_by_scheme.toml"), "sweeps/demo")
    summary = read_summary("sweeps/demo")

Names are loaded on first use, so that a module of the package (the task outcomes a study
point imports) can be imported without the runner and its engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the homes of the names below to type checkers and to the source walker
    # of simulate.runtime.versions.import_closure (code versions, the import-graph tests)
    from simulate.sweep import runner, spec, store  # noqa: F401

__all__ = ["read_spec", "load_spec", "parse_spec", "run_sweep", "read_summary", "read_point", "Point", "Sweep",
           "SpecError", "SweepReport"]

_HOMES = {"SweepReport": "simulate.sweep.runner", "run_sweep": "simulate.sweep.runner",
          **{name: "simulate.sweep.spec" for name in ("Point", "SpecError", "Sweep", "load_spec", "parse_spec",
                                                      "read_spec")},
          "read_point": "simulate.sweep.store", "read_summary": "simulate.sweep.store"}

__getattr__, __dir__ = lazy_exports("simulate.sweep", _HOMES, globals())
