"""Files written whole: a reader never sees half a file, a failure leaves nothing behind.

Every file the workbench writes (tables, reports, checkpoints, run and cache entries) goes
through :func:`atomic_write`; :func:`write_text_atomic` is its form for text.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["atomic_write", "write_text_atomic"]


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Create ``path`` all at once: ``write(temp_path)`` fills a temporary file beside it,
    which then replaces ``path`` (``os.replace``), so no reader sees half a file and a
    failure leaves nothing behind.

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> atomic_write(target, lambda temp: pathlib.Path(temp).write_text("done")).read_text()
    'done'
    """
    path = Path(path)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(handle)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(temp)
        os.chmod(temp, 0o666 & ~umask)  # mkstemp's 0600 -> the permissions of an ordinary new file
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` all at once (:func:`atomic_write`).

    >>> import tempfile, pathlib
    >>> write_text_atomic(pathlib.Path(tempfile.mkdtemp()) / "b.txt", "whole").read_text()
    'whole'
    """
    return atomic_write(path, lambda temp: Path(temp).write_text(text))
