"""What a sweep task is (:class:`Task`), the tasks known by name (:data:`TASKS`, :func:`register_task`), what a
task returns or raises, and the helpers the tasks share (no task logic here).

Each task's home module registers it when it is imported: the sweep's own in
:mod:`simulate.sweep.simulator_tasks` and :mod:`simulate.sweep.training_tasks` (which
:mod:`simulate.sweep.tasks` imports), the study's in :mod:`simulate.study.train.point`. A task's home
imports only this module of the registry, so its code version (its import closure) holds no
other task's code.

>>> merge_options({"samples": 4}, {"samples": 8, "seed": 0}, "run")
{'samples': 4, 'seed': 0}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import pandas as pd

__all__ = ["Task", "TASKS", "register_task", "task_modules", "Outcome", "PointFailed", "merge_options"]

class Outcome(NamedTuple):
    """What a finished point gives: its table, its headline numbers and the device it ran on."""

    table: pd.DataFrame
    headline: dict
    device: str


class PointFailed(Exception):
    """A point that failed but measured something (a blow-up, a NaN loss): kept with its error."""

    def __init__(self, message: str, table: pd.DataFrame | None = None, headline: dict | None = None,
                 device: str = ""):
        super().__init__(message)
        self.table = table if table is not None else pd.DataFrame()
        self.headline = headline or {}
        self.device = device


def merge_options(options: dict, defaults: dict, task: str) -> dict:
    """``defaults`` updated by ``options``; an unknown option is a ValueError naming it and the allowed ones."""
    unknown = [name for name in options if name not in defaults]
    if unknown:
        allowed = ", ".join(defaults) or "none (leave [options] out)"
        raise ValueError(f"unknown option {unknown[0]!r} of task {task}: choose from {allowed}")
    return {**defaults, **options}


def _no_check(setting, options: dict) -> None:
    return None


def _no_corpus(options: dict) -> str:
    return ""


@dataclass(frozen=True)
class Task:
    """One task: option checks (defaults filled in), the run of a point, what its points read.

    The module that defines ``run`` is the task's home (:attr:`module`): its import closure is the
    task's code version (``closure_version(task.module)``, :func:`simulate.runtime.versions.closure_version`),
    and a spawned worker imports it to find the task (:data:`simulate.sweep.tasks.TASKS`).
    ``needs_gpu(options)`` says whether a point asks for CUDA (``device = "cuda"``): the Ray engine
    requests a GPU for it. ``corpus_digest(options)`` is the digest of the text a point reads
    (:func:`simulate.training.data.corpus_digest`; ``''`` for a task that reads none). A
    ``versioned`` task's points are keyed by the one key builder
    (:func:`simulate.runtime.keys.result_key`) with the code version, the corpus digest, Python and
    torch (a change of any means new points); a task that is not (``study``: hours of training
    per spec) is keyed by its config alone and records those with each result instead.
    """

    name: str
    seeded: bool
    check_options: Callable[[dict], dict]
    run: Callable[[Any], Outcome]
    check_setting: Callable[[Any, dict], None] = _no_check
    needs_gpu: Callable[[dict], bool] = field(default=lambda options: options.get("device") == "cuda")
    versioned: bool = True
    corpus_digest: Callable[[dict], str] = _no_corpus

    @property
    def module(self) -> str:
        """The module that defines the task's run."""
        return self.run.__module__


TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    """Add ``task`` to :data:`TASKS` (registering the same name twice is an error unless it is the same task,
    as when its module is imported again)."""
    known = TASKS.get(task.name)
    if known is not None and known.module != task.module:
        raise ValueError(f"task={task.name!r} is not allowed here: {known.module} defines it already")
    TASKS[task.name] = task
    return task


def task_modules() -> list[str]:
    """The home modules of the registered tasks: what a fresh worker process imports to know them all."""
    return sorted({task.module for task in TASKS.values()})
