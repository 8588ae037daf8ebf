"""A study directory without its weights, small enough to commit: ``python -m simulate study ... --export DEST``.

The copy holds what the reports read and nothing else: each point file with its long table's
``value`` and ``sem`` stored as float32 (the trained models compute in float32; seven digits)
in zstd-compressed Parquet, ``summary.csv``, each study's ``spec.toml`` (the text of the spec
given, so a study folder holding only copied points exports too); then the reports are
written again from the copy (:func:`simulate.study.report.write_reports`), so that they are
exactly what the copy gives. The run directories (weights, checkpoints, scores' CSVs) stay
behind. ``results/atlas`` is such a copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from simulate.study.runner import write_specs
from simulate.sweep.store import POINTS_DIR, SUMMARY, encode_point, finished_records, read_point, write_point

__all__ = ["export_study_points"]


def export_study_points(studies, out, dest) -> int:
    """Copy the finished points of ``studies`` in ``out`` compactly to ``dest`` (module docstring); how many."""
    out, dest = Path(out), Path(dest)
    keys = sorted({p.key for study in studies for p in (study.candidates or study.sweep).points})  # tuning too
    records = finished_records(out, keys)
    for key in records:
        record, table = read_point(out, key)
        compact = table.astype({"value": "float32", "sem": "float32"})
        write_point(dest, key, encode_point(record, compact, compression="zstd"))
    (dest / POINTS_DIR).mkdir(parents=True, exist_ok=True)
    if (out / SUMMARY).is_file():  # a sweep writes it when it ends (an interrupted study may have none yet)
        shutil.copy2(out / SUMMARY, dest / SUMMARY)
    write_specs(studies, dest)
    return len(records)
