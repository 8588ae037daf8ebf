"""Command-line plumbing shared by ``python -m theory`` and ``python -m simulate``.

Bad input on the command line ends with exit code 2 and exactly one line on stderr.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, NoReturn

import numpy as np

from theory.constraints import Integer

if TYPE_CHECKING:  # pandas is imported where a table is written, not by every command line
    import pandas

__all__ = ["CliParser", "fail", "output_path", "write_csv", "write_table", "table_format",
           "estimated_size", "format_bytes", "markdown_table", "add_progress_argument", "progress_enabled"]


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    """Print ``prog: error: message`` as one line on stderr and exit with ``code``."""
    one_line = " ".join(str(message).split())
    print(f"{prog}: error: {one_line}", file=sys.stderr)
    raise SystemExit(code)


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, exit code 2.

    Abbreviated flags are refused (``--dept`` is not ``--depth``): a typo must not run.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(self.prog, f"{message} (see --help)")


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``low``, checked by :class:`theory.constraints.Integer`.

    >>> int_at_least(1)("3")
    3
    >>> int_at_least(1)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '0' is not allowed: an integer >= 1
    """
    return Integer(low).argparse_type(int)


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress/--no-progress``: a progress bar on stderr (default: only when stderr is a terminal)."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="a progress bar on stderr (default: on when stderr is a terminal)")


def progress_enabled(choice: bool | None) -> bool:
    """The value of ``--progress/--no-progress``, else whether stderr is a terminal."""
    return sys.stderr.isatty() if choice is None else bool(choice)


def output_path(prog: str, text: str, *, directory: bool) -> Path:
    """Check an ``--out`` path before any work is done; exit 2 with one line if it cannot be written.

    A file needs an existing, writable parent directory and must not be a directory. A
    directory may be missing (it is created, with its parents, when the results are
    written) but must not be a file, and its nearest existing ancestor must be writable.
    """
    if not text:
        fail(prog, "--out is empty: give a " + ("directory" if directory else "file") + " path")
    path = Path(text)
    if directory and path.exists() and not path.is_dir():
        fail(prog, f"--out {path} exists and is not a directory")
    if not directory and path.is_dir():
        fail(prog, f"--out {path} is a directory: give a file path")
    if directory:
        ancestor = path.absolute()
        while not ancestor.exists():
            ancestor = ancestor.parent
    else:
        ancestor = path.absolute().parent
        if not ancestor.is_dir():
            fail(prog, f"--out: directory {ancestor} does not exist")
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        fail(prog, f"--out: {ancestor} is not a writable directory")
    return path


def write_csv(table: pandas.DataFrame, path: str | os.PathLike | BinaryIO) -> None:
    """Write ``table`` as plain CSV (no quotes, full float precision) with pyarrow, to a path or a binary stream.

    pyarrow's multi-threaded writer takes about 2 s for the 9e6 rows of depth 10^6,
    where ``DataFrame.to_csv`` takes about 30 s.

    >>> import pathlib, tempfile, pandas as pd
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> write_csv(pd.DataFrame({"layer": [0, 1], "value": [1.0, 0.1]}), str(target))
    >>> target.read_text().splitlines()
    ['layer,value', '0,1', '1,0.1']
    """
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    if isinstance(path, (str, os.PathLike)):
        with open(path, "wb") as stream:
            return write_csv(table, stream)
    stream = path
    stream.write((",".join(table.columns) + "\n").encode())  # pyarrow quotes a header it writes itself
    pa_csv.write_csv(pa.Table.from_pandas(table, preserve_index=False), stream,
                     pa_csv.WriteOptions(include_header=False, quoting_style="none"))


def table_format(path: str | os.PathLike) -> str:
    """``"parquet"`` for a path ending in ``.parquet`` (any case), else ``"csv"``.

    >>> table_format("p.parquet"), table_format("p.csv"), table_format("p.txt")
    ('parquet', 'csv', 'csv')
    """
    return "parquet" if Path(path).suffix.lower() == ".parquet" else "csv"


def write_table(table: pandas.DataFrame, target: str | os.PathLike | BinaryIO, fmt: str) -> None:
    """Write ``table`` as ``fmt`` (:func:`table_format`): Parquet (pyarrow, snappy) or plain CSV (:func:`write_csv`).

    >>> import io, pandas as pd
    >>> stream = io.BytesIO()
    >>> write_table(pd.DataFrame({"layer": [0, 1]}), stream, "parquet")
    >>> pd.read_parquet(io.BytesIO(stream.getvalue())).layer.tolist()
    [0, 1]
    """
    if fmt == "parquet":
        table.to_parquet(target, index=False, engine="pyarrow")
    else:
        write_csv(table, target)


def estimated_size(table: pandas.DataFrame, fmt: str, sample_rows: int = 20_000) -> int:
    """Bytes :func:`write_table` writes for ``table``: exact up to ``sample_rows`` rows, else estimated.

    A larger table is estimated from ``sample_rows`` evenly spaced rows written to memory: the
    bytes of an empty table (header, Parquet footer) plus the sample's bytes per row times the
    rows. For CSV this is within a few per cent (rows differ only in their digits); Parquet
    compresses a whole column better than a sample, so its estimate errs high.

    >>> import pandas as pd
    >>> estimated_size(pd.DataFrame({"layer": [0, 10], "value": [1.0, 0.5]}), "csv")  # layer,value 0,1 10,0.5
    23
    """
    def size(frame) -> int:
        stream = io.BytesIO()
        write_table(frame, stream, fmt)
        return stream.getbuffer().nbytes

    if len(table) <= sample_rows:
        return size(table)
    sample = table.iloc[np.linspace(0, len(table) - 1, sample_rows).round().astype(np.int64)]  # (sample_rows,)
    overhead = size(table.iloc[:0])
    return int(round(overhead + (size(sample) - overhead) * len(table) / sample_rows))


def format_bytes(count: float) -> str:
    """Bytes in decimal units with three significant digits: 1.2 GB, 340 MB, 51.2 GB.

    >>> format_bytes(576_000_000), format_bytes(1234), format_bytes(12)
    ('576 MB', '1.23 kB', '12 B')
    """
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{int(count)} B"


def markdown_table(frame: pandas.DataFrame) -> str:
    """A Markdown table of ``frame``: floats to 4 significant digits, NaN as an empty cell, ``|`` escaped.

    >>> import pandas as pd
    >>> print(markdown_table(pd.DataFrame({"id": ["a|b"], "value": [0.123456], "n": [float("nan")]})))
    | id | value | n |
    |---|---|---|
    | a\\|b | 0.1235 |  |
    """
    import math

    def cell(value) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.4g}"
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
