"""What every sweep task returns or raises, and the helpers the tasks share (no task logic here).

>>> merge_options({"samples": 4}, {"samples": 8, "seed": 0}, "run")
{'samples': 4, 'seed': 0}
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

__all__ = ["Outcome", "PointFailed", "merge_options"]



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
