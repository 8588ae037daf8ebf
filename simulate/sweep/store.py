"""A sweep on disk: one Parquet file per point (keyed by its config hash) and ``summary.csv``.

Layout of an output directory ``DIR``::

    DIR/points/KEY.parquet   the point's table; its Parquet metadata (key ``depth_workbench.point``)
                             holds the record: config, status (ok | failed: theory.verdicts.PointStatus),
                             error, wall time, device, headline numbers
    DIR/summary.csv          one row per point of the spec, rebuilt from the files at the end
    DIR/spec.toml            the spec of the latest run

Every file is written whole (:func:`theory.files.atomic_write`), so a point file exists only
once its point is finished: that is what lets an interrupted sweep resume. A file that
cannot be read (a damaged disk) counts as missing and is run again. No pickles: Parquet,
JSON and CSV only.

>>> import pandas as pd
>>> record = {"point": "abc", "status": "ok", "headline": {"final_var": float("nan")}}
>>> back, table = decode_point(encode_point(record, pd.DataFrame({"layer": [0, 1]})))
>>> back["headline"], table.layer.tolist()
({'final_var': None}, [0, 1])
>>> record_status(back) is PointStatus.OK, str(PointStatus.PENDING)
(True, 'pending')
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from theory.files import atomic_write
from theory.verdicts import PointStatus

__all__ = ["META_KEY", "POINTS_DIR", "SUMMARY", "record_status", "point_path", "encode_point", "decode_point",
           "write_point", "remove_partial", "read_record", "read_point", "finished_records", "summary_table",
           "write_summary", "read_summary"]

META_KEY = b"depth_workbench.point"
POINTS_DIR = "points"
SUMMARY = "summary.csv"


def record_status(record: dict) -> PointStatus:
    """The status of a point's record (ValueError naming the allowed words for an unknown one)."""
    return PointStatus.parse(record["status"])


def _json_ready(value):
    """NaN and infinities as null (plain JSON), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def point_path(out: str | Path, key: str) -> Path:
    """``DIR/points/KEY.parquet``."""
    return Path(out) / POINTS_DIR / f"{key}.parquet"


def encode_point(record: dict, table: pd.DataFrame, compression: str = "snappy") -> bytes:
    """The Parquet bytes of ``table`` with ``record`` (JSON) in the file's metadata (``compression``: Parquet's)."""
    arrow = pa.Table.from_pandas(table.reset_index(drop=True), preserve_index=False)
    metadata = {**(arrow.schema.metadata or {}), META_KEY: json.dumps(_json_ready(record), sort_keys=True)}
    sink = pa.BufferOutputStream()
    pq.write_table(arrow.replace_schema_metadata(metadata), sink, compression=compression)
    return sink.getvalue().to_pybytes()


def decode_point(data: bytes) -> tuple[dict, pd.DataFrame]:
    """Inverse of :func:`encode_point`: (record, table)."""
    arrow = pq.read_table(io.BytesIO(data))
    return json.loads(arrow.schema.metadata[META_KEY]), arrow.to_pandas()


def write_point(out: str | Path, key: str, data: bytes) -> Path:
    """Write a point's Parquet bytes to ``DIR/points/KEY.parquet`` atomically."""
    path = point_path(out, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda temp: Path(temp).write_bytes(data))


def remove_partial(out: str | Path) -> int:
    """Delete the temporary files of point writes that never finished (a terminated worker); returns how many.

    Only safe while no other process writes to ``out`` (the runner holds its lock).
    """
    removed = 0
    for temp in (Path(out) / POINTS_DIR).glob(".*.parquet"):
        temp.unlink(missing_ok=True)
        removed += 1
    return removed


def read_record(path: str | Path) -> dict | None:
    """The record in a point file's metadata (reads the footer only); None if unreadable."""
    try:
        metadata = pq.read_schema(path).metadata or {}
        return json.loads(metadata[META_KEY])
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None


def read_point(out: str | Path, key: str) -> tuple[dict, pd.DataFrame]:
    """(record, table) of one finished point."""
    return decode_point(point_path(out, key).read_bytes())


def finished_records(out: str | Path, keys) -> dict[str, dict]:
    """Records of the points among ``keys`` whose file is on disk and readable."""
    records = {}
    for key in keys:
        path = point_path(out, key)
        if path.is_file() and (record := read_record(path)) is not None and record.get("point") == key:
            records[key] = record
    return records


def summary_table(points, records: dict[str, dict], axis_fields) -> pd.DataFrame:
    """One row per point, in spec order: ``index, point, seed``, the swept fields, ``status, error,
    wall_s, device`` and the headline numbers (points not on disk: status ``pending``)."""
    rows, headline_names = [], {}
    for point in points:
        record = records.get(point.key)
        row = {"index": point.index, "point": point.key, "seed": point.seed,
               **{name: point.axes.get(name) for name in axis_fields}}
        if record is None:
            row.update(status=PointStatus.PENDING, error="", wall_s=math.nan, device="")
        else:
            row.update(status=record_status(record), error=" ".join(str(record.get("error") or "").split()),
                       wall_s=record.get("wall_s"), device=record.get("device", ""))
            for name, value in (record.get("headline") or {}).items():
                headline_names.setdefault(name, None)
                row[name] = math.nan if value is None else value
        rows.append(row)
    base = ["index", "point", "seed", *axis_fields, "status", "error", "wall_s", "device"]
    return pd.DataFrame(rows, columns=base + list(headline_names))


def write_summary(out: str | Path, table: pd.DataFrame) -> Path:
    """``DIR/summary.csv`` atomically."""
    return atomic_write(Path(out) / SUMMARY, lambda temp: table.to_csv(temp, index=False))


def read_summary(out: str | Path) -> pd.DataFrame:
    """``DIR/summary.csv`` as a DataFrame (``error`` as text, empty for none; ``status`` as :class:`PointStatus`)."""
    summary = pd.read_csv(Path(out) / SUMMARY, keep_default_na=True, dtype={"error": str, "device": str}).fillna(
        {"error": "", "device": ""})
    return summary.assign(status=pd.Series([PointStatus.parse(word) for word in summary["status"]],
                                           index=summary.index, dtype=object))
