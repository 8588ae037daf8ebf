"""Every code version is the digest of an import closure: an edit that changes a result is a new version, an
edit that changes no number (a verdict's wording) is not.

The versions: the trainer's (:data:`simulate.training.identity.TRAINER`'s closure, the cached trainings and
the run directories), the scores' (``simulate.scores.runs``'s, the cached scores of ``verify --trained``, the
figures and a study point's scores) and each sweep task's (its home module's, part of a sweep point's key;
recorded with a study point). Each is checked on a copy of the sources, edited one file at a time.
"""

from __future__ import annotations

import pytest

import simulate.study.train.point  # noqa: F401 (registers the task "study")
from simulate.runtime.versions import closure_version
from simulate.sweep.tasks import TASKS

# The module whose import closure is each version.
VERSIONS = {"trainer": "simulate.training.loop", "scores": "simulate.scores.runs",
            **{f"task {name}": task.module for name, task in TASKS.items()}}


def _versions(root) -> dict[str, str]:
    return {name: closure_version(module, root=root) for name, module in VERSIONS.items()}


def test_the_versions_are_those_the_code_records(tmp_path):
    from simulate.scores.runs import scores_request
    from simulate.sweep.spec import parse_spec
    from simulate.training.identity import TRAINER, run_versions

    assert VERSIONS["trainer"] == TRAINER and run_versions("")["code"] == closure_version(TRAINER)
    run = tmp_path / "run"  # a run's Setting is all that the scores at init need
    run.mkdir()
    (run / "config.json").write_text('{"setting": {"depth": 2, "width": 8}}')
    assert scores_request(run, at_init=True)[1]["code"] == closure_version(VERSIONS["scores"])
    point = parse_spec({"task": "train", "setting": {"depth": 2, "width": 8}}).points[0]
    assert point.code == point.versions["code"] == closure_version(VERSIONS["task train"])


@pytest.mark.parametrize("edited, changed", [
    # what computes a score, and the corpus it reads: the scores (once served stale from the cache); the train
    # task shares its module with the scores task, so its points move too
    ("simulate/scores/runs.py", {"scores", "task train", "task scores", "task study"}),
    ("simulate/training/data.py", {"trainer", "scores", "task train", "task scores", "task study"}),
    # the claims' judges: no training, no score, no point
    ("simulate/claims/judgement.py", set()),
    # the words of a judgement: the trainer writes a profile's growth class into growth.csv and the theory's
    # growth fits name their class (theory.meanfield.bridge.var_growth), so its words are in their output
    ("theory/verdicts.py", {"trainer", "scores", "task predict", "task run", "task train", "task scores",
                            "task study"}),
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
