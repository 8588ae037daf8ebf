"""Every code version is the digest of an import closure: an edit that changes a result is a new version, an
edit that changes no number (a verdict's wording) is not.

The versions: the trainer's (:func:`simulate.training.loop.code_version`, the cached trainings and the
run directories), the scores' (:func:`simulate.scores.runs.scores_version`, the cached scores of
``verify --trained`` and the figures) and each sweep task's (:meth:`simulate.sweep.outcome.Task.code_version`,
part of a sweep point's key; recorded with a study point). Each is checked on a copy of the sources, edited
one file at a time.
"""

from __future__ import annotations

import pytest

import simulate.study.point  # noqa: F401 (registers the task "study")
from simulate.runtime.versions import closure_version
from simulate.sweep.tasks import TASKS

# The module whose import closure is each version.
VERSIONS = {"trainer": "simulate.training.loop", "scores": "simulate.scores.runs",
            **{f"task {name}": task.module for name, task in TASKS.items()}}


def _versions(root) -> dict[str, str]:
    return {name: closure_version(module, root=root) for name, module in VERSIONS.items()}


def test_the_versions_are_those_the_code_records():
    from simulate.scores.runs import scores_version
    from simulate.training.loop import code_version

    assert closure_version(VERSIONS["trainer"]) == code_version()
    assert closure_version(VERSIONS["scores"]) == scores_version()
    assert all(TASKS[name].code_version() == closure_version(TASKS[name].module) for name in TASKS)


@pytest.mark.parametrize("edited, changed", [
    # what computes a score, and the corpus it reads: the scores (once served stale from the cache); the train
    # task shares its module with the scores task, so its points move too
    ("simulate/scores/runs.py", {"scores", "task train", "task scores", "task study"}),
    ("simulate/training/data.py", {"trainer", "scores", "task train", "task scores", "task study"}),
    # the words of a verdict and the claims' judges: no training, no score, no point
    ("simulate/claims/verdicts.py", set()),
    ("simulate/claims/along_axes.py", set()),
    # the engine's tables: every task (the headline numbers of a sweep point, the trainer's statistics)
    ("simulate/engine/tables.py", {"trainer", "scores", "task predict", "task run", "task train", "task scores",
                                   "task study"}),
    ("theory/meanfield/prediction.py", {"task predict", "task run"}),
])
def test_an_edit_changes_the_versions_it_should_and_no_other(source_copy, edited, changed):
    before = _versions(source_copy)
    path = source_copy / edited
    path.write_text(path.read_text() + "\n# edited\n")
    after = _versions(source_copy)
    moved = {name for name in VERSIONS if after[name] != before[name]}
    assert moved == changed, f"editing {edited} changed {sorted(moved)}, expected {sorted(changed)}"
