"""A study directory without its weights, small enough to commit: ``python -m simulate study ... --export DEST``.

The copy holds what the reports read and nothing else: each point file with its long table's
``value`` and ``sem`` stored as float32 (the trained models compute in float32; seven digits)
in zstd-compressed Parquet, ``summary.csv`` (one row per model the studies' next round would run,
finished or pending, and per other model copied; written from the points' records, not copied: the
study directory's is the last round's that ended, which an interrupted or partial run leaves stale),
each study's ``spec.toml`` (the text of the spec given, so a study folder holding only copied points
exports too); then the reports are
written again from the copy (:func:`simulate.study.write.report.write_reports`), so that they are
exactly what the copy gives. The run directories (weights, checkpoints, scores' CSVs) stay
behind. ``results/atlas`` is such a copy.

A tuned study ships every finished model of its grid but those superseded
(:func:`simulate.study.plan.tuning.unplanned_points`): a model trained at a rate its cell no longer
chooses (the cell went on past its grid's edge and chose there) is not shipped, and its file is
removed from an earlier copy; it stays in the study directory. A cell still tuning keeps its
models, whichever rate it will choose.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from simulate.study.plan.tuning import unplanned_points
from simulate.study.train.runner import round_sweep, write_specs
from simulate.sweep.store import (POINTS_DIR, encode_point, finished_records, point_path, read_point, summary_table,
                                  write_point, write_summary)

__all__ = ["export_study_points"]


def export_study_points(studies, out, dest) -> int:
    """Copy the finished points of ``studies`` in ``out`` compactly to ``dest`` (module docstring); how many."""
    out, dest = Path(out), Path(dest)
    keys, superseded = set(), set()
    for study in studies:  # a model one study superseded and another keeps is shipped
        dropped = {p.key for p in unplanned_points(study, out)[0]}
        keys |= {p.key for p in (study.candidates or study.sweep).points} - dropped
        superseded |= dropped
    for key in superseded - keys:
        point_path(dest, key).unlink(missing_ok=True)
    records = finished_records(out, sorted(keys))
    for key in records:
        record, table = read_point(out, key)
        compact = table.astype({"value": "float32", "sem": "float32"})
        write_point(dest, key, encode_point(record, compact, compression="zstd"))
    (dest / POINTS_DIR).mkdir(parents=True, exist_ok=True)
    # written for the copy (out's own may be an interrupted round's, or none): the next round's models, then the
    # copied ones no round plans yet (a tuning cell's seeds at a rate it has not yet chosen)
    sweep = round_sweep(studies, out)
    planned = {p.key for p in sweep.points}
    copied = {p.key: p for study in studies for p in (study.candidates or study.sweep).points
              if p.key in records and p.key not in planned}
    shown = [dataclasses.replace(p, index=i) for i, p in enumerate([*sweep.points, *copied.values()])]
    write_summary(dest, summary_table(shown, records, sweep.axis_fields))  # a model not copied reads pending
    write_specs(studies, dest)
    return len(records)
