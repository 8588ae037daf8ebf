"""Studies: trained and scored models along an axis (depth, width, training length, learning rate), trend verdicts.

``python -m simulate study SPEC.toml ... --out DIR`` (:mod:`simulate.study.cli`). Modules:
:mod:`~simulate.study.spec` (the spec: a sweep of task ``study`` plus its trend axes and
claims), :mod:`~simulate.study.point` (what one model computes), :mod:`~simulate.study.runner`
(each distinct model once, resumable), :mod:`~simulate.study.point_table` (a point's long table
as the claims' evidence), :mod:`~simulate.study.analysis` (the models read back, judged along the
axes by :mod:`simulate.claims`), :mod:`~simulate.study.report` (the files),
:mod:`~simulate.study.export` and :mod:`~simulate.study.provenance` (a copy to commit and its
README). Formats: docs/formats.md; the recipe and the atlas: docs/studies.md.

Names are loaded on first use (importing the package imports no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the homes of the names below to type checkers and to the source walker
    # of simulate.runtime.versions.import_closure (code versions, the import-graph tests)
    from simulate.study import report, runner, spec, tables  # noqa: F401

__all__ = ["Study", "StudyError", "load_study", "parse_study", "run_studies", "write_reports", "read_study"]

_HOMES = {"Study": "simulate.study.spec", "StudyError": "simulate.study.spec", "load_study": "simulate.study.spec",
          "parse_study": "simulate.study.spec", "run_studies": "simulate.study.runner",
          "write_reports": "simulate.study.report", "read_study": "simulate.study.tables"}

__getattr__, __dir__ = lazy_exports("simulate.study", _HOMES, globals())
