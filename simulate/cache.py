"""Run directories and the on-disk cache of simulator runs (a service above the engine).

A run is stored as a directory with ``config.json`` (setting, Monte-Carlo config, code
version, anything else) and ``layers.csv`` (columns :data:`COLUMNS`), CSV and JSON only.
``config.json`` also records the :data:`FORMAT_VERSION` of the directory and the sha256 of
``layers.csv``; :func:`load_run` checks both, so a truncated or edited table, or a directory
written by an older version of this code, raises :class:`CorruptRun` instead of being
misread. Every file is written to a temporary file in the same directory and moved into
place (:func:`theory.files.atomic_write`), so a reader never sees half a file.

A cache entry is built whole in a temporary directory beside it and renamed into place
(one ``rename``, atomic on a POSIX file system): two processes filling the same entry at
once leave one complete entry, whichever finished first. A bad entry (corrupt, truncated,
older format) is reported in one warning line (logger ``simulate.cache``) and recomputed.
Build directories left by a process killed outright are removed by the next fill after
an hour (:data:`STALE_BUILD_SECONDS`).

>>> sorted(_mc_config(4, 0, "var", "cpu", "float32", "auto"))
['device', 'dtype', 'metrics', 'samples', 'seed', 'weights']
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

from simulate.engine import COLUMNS, parse_metrics, resolve_device, resolve_dtype, simulate
from simulate.runtime.keys import key_inputs, result_key
from simulate.runtime.versions import ROOT, closure_version, import_closure
from theory.files import atomic_write, write_text_atomic
from theory.setting import Setting

__all__ = ["FORMAT_VERSION", "ENGINE_ENTRIES", "CorruptRun", "save_run", "load_run", "engine_sources",
           "engine_versions", "cache_dir", "cache_key", "cached_simulate"]

# Version of the run-directory layout. 1: config.json without format_version/layers_sha256
# (before issue 12); 2: both recorded and checked on load.
FORMAT_VERSION = 2
_LOG = logging.getLogger(__name__)

# What decides what a run measures: the module of the function a run calls, that of its Setting, and every
# module they import (simulate.runtime.versions.import_closure), so a new engine module is in the key without being
# listed. A change to any of them is a new code version (closure_version(*ENGINE_ENTRIES)); the services built on
# runs (verify, bench, figures, this cache) are not imported by the engine, so editing them keeps the cache.
ENGINE_ENTRIES = (simulate.__module__, Setting.__module__)


class CorruptRun(ValueError):
    """A run directory that cannot be trusted: a missing or unreadable file, a table that does not
    match its checksum (truncated, edited), or an older :data:`FORMAT_VERSION`."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_run(out_dir, config: dict, table: pd.DataFrame) -> Path:
    """Save ``layers.csv`` and then ``config.json`` (with ``format_version`` and ``layers_sha256``)
    into ``out_dir`` (created), each atomically.

    >>> import tempfile
    >>> table = pd.DataFrame([[0, "var", 1.0, 0.1, 0.8, 1.2, 4]], columns=COLUMNS)
    >>> run = save_run(Path(tempfile.mkdtemp()) / "run", {"mc": {"samples": 4}}, table)
    >>> config, loaded = load_run(run)
    >>> config["format_version"] == FORMAT_VERSION, loaded["mean"].tolist()
    (True, [1.0])
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = table[COLUMNS].to_csv(index=False).encode()
    record = {**config, "format_version": FORMAT_VERSION, "layers_sha256": _sha256(data)}
    atomic_write(out / "layers.csv", lambda temp: Path(temp).write_bytes(data))
    write_text_atomic(out / "config.json", json.dumps(record, indent=2, sort_keys=True) + "\n")
    return out


def load_run(run_dir) -> tuple[dict, pd.DataFrame]:
    """Inverse of :func:`save_run`: (config dict, table); :class:`CorruptRun` when it cannot be trusted.

    A directory without ``config.json`` raises :class:`FileNotFoundError` (nothing there).
    """
    run = Path(run_dir)
    if not (run / "config.json").exists() and not (run / "layers.csv").exists():
        raise FileNotFoundError(f"{run} holds no run (no config.json, no layers.csv)")
    try:
        config = json.loads((run / "config.json").read_text())
        data = (run / "layers.csv").read_bytes()
    except (OSError, ValueError) as error:
        raise CorruptRun(f"{run}: {type(error).__name__}: {error}") from error
    if not isinstance(config, dict):
        raise CorruptRun(f"{run}: config.json does not hold an object")
    version = config.get("format_version", 1)
    if version != FORMAT_VERSION:
        raise CorruptRun(f"{run}: format version {version}, this code reads version {FORMAT_VERSION}")
    if config.get("layers_sha256") != _sha256(data):
        raise CorruptRun(f"{run}: layers.csv does not match the sha256 in config.json (truncated or changed)")
    try:
        table = pd.read_csv(io.BytesIO(data))[COLUMNS]
    except (ValueError, KeyError, pd.errors.ParserError) as error:
        raise CorruptRun(f"{run}: layers.csv cannot be read: {error}") from error
    return config, table


def engine_sources(root: Path = ROOT) -> list[str]:
    """The files (relative to ``root``) that decide what a run measures: the engine's import closure.

    >>> {"simulate/engine/stack.py", "simulate/engine/implicit.py", "theory/setting.py"} <= set(engine_sources())
    True
    >>> "simulate/verify.py" in engine_sources()
    False
    """
    return import_closure(ENGINE_ENTRIES, root)


def engine_versions() -> dict:
    """What makes a run besides its request (:func:`simulate.runtime.keys.key_inputs`): the engine's code
    version (the digest of :func:`engine_sources`), Python and torch; no corpus."""
    return key_inputs(closure_version(*ENGINE_ENTRIES))


def cache_dir() -> Path:
    """``$DEPTH_WORKBENCH_CACHE`` or ``~/.cache/depth-workbench``."""
    return Path(os.environ.get("DEPTH_WORKBENCH_CACHE") or Path.home() / ".cache" / "depth-workbench")


def _mc_config(samples, seed, metrics, device, dtype, weights) -> dict:
    return {"samples": samples, "seed": seed, "metrics": list(parse_metrics(metrics)),
            "device": resolve_device(device).type, "dtype": str(resolve_dtype(dtype)).replace("torch.", ""),
            "weights": weights}


def cache_key(setting, mc_config: dict) -> str:
    """The entry's key (:func:`simulate.runtime.keys.result_key`) of the Setting's fields and the Monte-Carlo
    config with :func:`engine_versions`."""
    return result_key({"setting": setting.to_dict(), "mc": mc_config}, engine_versions())


def _read_entry(entry: Path) -> pd.DataFrame | None:
    """The table of a valid entry; None when there is none; a bad one is reported (one line)."""
    try:
        return load_run(entry)[1]
    except FileNotFoundError:
        return None
    except CorruptRun as error:
        _LOG.warning("depth-workbench cache: entry %s cannot be used (%s); recomputing it", entry.name,
                     str(error).removeprefix(f"{entry}: "))
        return None


def _install(built: Path, entry: Path) -> None:
    """Move the complete directory ``built`` to ``entry``; keep a valid entry another process installed first."""
    try:
        os.rename(built, entry)  # atomic; fails when entry exists and is not empty
        return
    except OSError:
        pass
    try:
        load_run(entry)
        return  # another process's complete entry: ours is dropped
    except (FileNotFoundError, CorruptRun):
        pass
    aside = Path(tempfile.mkdtemp(prefix=f".{entry.name}.bad-", dir=entry.parent))
    try:
        os.rename(entry, aside / "entry")  # the bad entry out of the way (another process may have done it)
    except OSError:
        pass
    try:
        os.rename(built, entry)
    except OSError:
        pass  # a third process installed a complete entry in between
    shutil.rmtree(aside, ignore_errors=True)


# A build directory lives for the seconds that save_run takes (the simulation runs before it is
# made); one an hour old was left by a process killed outright (SIGKILL, a machine that went down).
STALE_BUILD_SECONDS = 3600


def _remove_stale_builds(root: Path) -> None:
    """Delete the hidden build directories in ``root`` older than :data:`STALE_BUILD_SECONDS`."""
    now = time.time()
    for path in root.glob(".*"):
        try:
            if path.is_dir() and now - path.stat().st_mtime > STALE_BUILD_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:  # removed by another process meanwhile
            pass


def cached_simulate(setting, *, samples: int = 8, seed: int = 0, metrics=("var",), device="auto",
                    dtype="float32", weights: str = "auto", progress: bool = False) -> pd.DataFrame:
    """:func:`simulate.simulate` through the on-disk cache (blow-ups and interruptions are not cached).

    A valid entry is read; a missing one is computed; a corrupt, truncated or older-format
    one is reported in one warning line and recomputed. The new entry is built in a
    temporary directory and renamed into place, so concurrent fills leave one valid entry.
    """
    mc = _mc_config(samples, seed, metrics, device, dtype, weights)
    root = cache_dir()
    entry = root / cache_key(setting, mc)
    table = _read_entry(entry)
    if table is not None:
        return table
    table = simulate(setting, samples=samples, seed=seed, metrics=metrics, device=device, dtype=dtype,
                     weights=weights, progress=progress)
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(root)
    built = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=root))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(built, 0o777 & ~umask)  # mkdtemp's 0700 -> an ordinary new directory
        versions = engine_versions()
        save_run(built, {"setting": setting.to_dict(), "mc": mc, "code": versions["code"], "versions": versions}, table)
        _install(built, entry)
    finally:
        shutil.rmtree(built, ignore_errors=True)
    return table
