"""The sweep's tasks by name: what one point of each does, and how a task of another package joins them.

:data:`TASKS` (:mod:`simulate.sweep.outcome`, the registry) maps a task name to a
:class:`~simulate.sweep.outcome.Task`; importing this module registers the sweep's own:

``predict``, ``run``
    the theory's curves and the Monte-Carlo engine (:mod:`simulate.sweep.simulator_tasks`);
``train``, ``scores``
    trainings and layer-effectiveness scores through :mod:`simulate.training` and
    :mod:`simulate.scores` (:mod:`simulate.sweep.training_tasks`: options, tables, headline);
``study``
    a training and every score of its model as one long table; the study's own task, which
    :mod:`simulate.study.train.point` registers (:func:`~simulate.sweep.outcome.register_task`) when it
    is imported (the sweep knows no study; a spawned worker imports the home module of every
    task, :func:`~simulate.sweep.outcome.task_modules`).

A task's run returns an :class:`~simulate.sweep.outcome.Outcome` (table, headline numbers,
device) or raises :class:`~simulate.sweep.outcome.PointFailed` (a failure with what was
measured) or any other exception (recorded as the point's error by
:mod:`simulate.sweep.engines`). Heavy imports (torch) happen inside the functions, so
validating a spec of ``predict`` points stays light.

>>> {"predict", "run", "train", "scores"} <= set(TASKS)  # and "study" once simulate.study.train.point is imported
True
>>> TASKS["train"].module
'simulate.sweep.training_tasks'
"""

from __future__ import annotations

from simulate.sweep import simulator_tasks, training_tasks  # noqa: F401 (each registers its tasks)
from simulate.sweep.outcome import TASKS, PointFailed, Task, register_task, task_modules
from simulate.sweep.simulator_tasks import RUN_OPTIONS

__all__ = ["Task", "TASKS", "RUN_OPTIONS", "PointFailed", "register_task", "task_modules"]
