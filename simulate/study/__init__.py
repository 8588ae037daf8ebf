"""Studies: trained and scored models along an axis (depth, width, training length, learning rate), trend verdicts.

``python -m simulate study SPEC.toml ... --out DIR`` (:mod:`simulate.study.cli`). The folders are the pipeline's
stages, each importing only from those before it (one declared exception: a spec's recipe is the task's,
``tests/test_import_graph.py::STAGE_EXCEPTIONS``):

- :mod:`~simulate.study.plan`: the spec and the rates tuned per cell;
- :mod:`~simulate.study.train`: what one model computes, each distinct model once (resumable), the copy to commit;
- :mod:`~simulate.study.read`: the models read back from disk;
- :mod:`~simulate.study.judge`: ``judge_study(study, models) -> StudyJudgement``, a row in words, and the
  judgements beside it (laws across depth and width, the predictions committed before the models they predict,
  variance laws tested blind, two runs compared);
- :mod:`~simulate.study.write`: one module per document (``study.md``, the results README, the extrapolation
  report), each formatting the judgement it is given.

:mod:`simulate.study.atlas` reads the shipped atlas for the figures and notebooks. Formats: docs/formats.md; the
recipe and the atlas: docs/studies.md.

Names are loaded on first use (importing the package imports no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.runtime.lazy import lazy_exports

if TYPE_CHECKING:  # never run; it shows the homes of the names below to type checkers and to the source walker
    # of simulate.runtime.versions.import_closure (code versions, the import-graph tests)
    from simulate.study.judge import analysis, tables  # noqa: F401
    from simulate.study.plan import spec  # noqa: F401
    from simulate.study.train import runner  # noqa: F401
    from simulate.study.write import report  # noqa: F401

__all__ = ["Study", "StudyError", "load_study", "parse_study", "run_studies", "judge_study", "StudyJudgement",
           "write_reports", "read_study"]

_HOMES = {"Study": "simulate.study.plan.spec", "StudyError": "simulate.study.plan.spec",
          "load_study": "simulate.study.plan.spec", "parse_study": "simulate.study.plan.spec",
          "run_studies": "simulate.study.train.runner",
          "judge_study": "simulate.study.judge.analysis", "StudyJudgement": "simulate.study.judge.tables",
          "write_reports": "simulate.study.write.report", "read_study": "simulate.study.judge.tables"}

__getattr__, __dir__ = lazy_exports("simulate.study", _HOMES, globals())
