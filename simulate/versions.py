"""Code versions: a digest of the source files that decide a result (cache keys, run records).

Every record the workbench keeps (simulator cache entries and run directories, training
runs, sweep points, cached trainings) names the version of the code that made it, as
:func:`source_digest` of the files that decide its numbers; a change to any of them is a
new version. Imports nothing heavy.

>>> len(source_digest(["theory/setting.py"])), source_digest([]) == source_digest([], salt="")
(16, True)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["ROOT", "source_digest"]

ROOT = Path(__file__).resolve().parents[1]  # the repository root


def source_digest(names, salt: str = "") -> str:
    """sha256 (first 16 hex digits) of ``salt``, then each file's name and bytes, in the order given.

    ``names`` are paths relative to :data:`ROOT`; a missing file is an error.
    """
    digest = hashlib.sha256(salt.encode())
    for name in names:
        digest.update(str(name).encode())
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()[:16]
