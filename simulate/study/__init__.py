"""Studies: trained and scored models along an axis (depth, width, training length, learning rate), trend verdicts.

``python -m simulate study SPEC.toml ... --out DIR`` (:mod:`simulate.study.cli`). The modules by stage:

- plan: :mod:`~simulate.study.spec` (the spec, by declared constraints), :mod:`~simulate.study.tuning` (the
  rates tuned per cell), :mod:`~simulate.study.preregistration` (the
  predictions committed before the models they predict, and their judgement);
- train: :mod:`~simulate.study.point` (what one model computes), :mod:`~simulate.study.runner` (each distinct
  model once, resumable), :mod:`~simulate.study.export` (a float32 copy to commit);
- read: :mod:`~simulate.study.point_table` (a point's long table as the claims' evidence);
- judge: :mod:`~simulate.study.analysis` (``judge_study(study, models) -> StudyJudgement``, by
  :mod:`simulate.claims`), :mod:`~simulate.study.tables` (the judgement object, its tables' writer and reader),
  :mod:`~simulate.study.across_depth` (laws across depth), :mod:`~simulate.study.extrapolation` (variance laws
  tested blind), :mod:`~simulate.study.changes` (two runs' verdicts compared);
- write: :mod:`~simulate.study.rows` (a row in words), :mod:`~simulate.study.report` (``study.md``),
  :mod:`~simulate.study.headline` and :mod:`~simulate.study.provenance` (the results README),
  :mod:`~simulate.study.extrapolation_report`, :mod:`~simulate.study.atlas` (the shipped atlas for notebooks).

Formats: docs/formats.md; the recipe and the atlas: docs/studies.md.

Names are loaded on first use (importing the package imports no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the homes of the names below to type checkers and to the source walker
    # of simulate.runtime.versions.import_closure (code versions, the import-graph tests)
    from simulate.study import analysis, report, runner, spec, tables  # noqa: F401

__all__ = ["Study", "StudyError", "load_study", "parse_study", "run_studies", "judge_study", "StudyJudgement",
           "write_reports", "read_study"]

_HOMES = {"Study": "simulate.study.spec", "StudyError": "simulate.study.spec", "load_study": "simulate.study.spec",
          "parse_study": "simulate.study.spec", "run_studies": "simulate.study.runner",
          "judge_study": "simulate.study.analysis", "StudyJudgement": "simulate.study.tables",
          "write_reports": "simulate.study.report", "read_study": "simulate.study.tables"}

__getattr__, __dir__ = lazy_exports("simulate.study", _HOMES, globals())
