"""The one key builder: every cache entry, cached training, versioned sweep point and scores record is named by
:func:`result_key` of what was asked and of what makes the answer.

A result depends on more than its request (a Setting, options, a seed): on the code that computes it (a code
version, :func:`simulate.runtime.versions.closure_version`), on the text a model reads (the corpus digest,
:func:`simulate.training.data.corpus_digest`), and on the Python and torch that ran it (the standard library
*is* the ``stdlib`` corpus; torch decides the floats). :func:`key_inputs` gathers those four, what a record
keeps as ``versions``; :func:`result_key` hashes the request together with them (and takes nothing else), so
a result made by other code, other data, another Python or another torch is another key, and a record that
keeps its request and its ``versions`` names its own key. :func:`config_hash` is the hash below it,
:data:`KEY_LENGTH` hex digits of the sha256 of canonical JSON; a study's points are named by it alone (their
key leaves the versions out on purpose, docs/studies.md, and their records keep them).
:func:`first_difference` names what differs between two records, for the one-line refusals and warnings.

Imports nothing heavy (the torch version is read from the installed package's metadata).

>>> config_hash({"b": 1, "a": [1.0, None]}) == config_hash({"a": [1.0, None], "b": 1})
True
>>> sorted(key_inputs("c0de"))
['code', 'data', 'python', 'torch']
>>> len(result_key({"depth": 4}, key_inputs("c0de"))) == KEY_LENGTH
True
>>> result_key({"depth": 4}, key_inputs("c0de")) != result_key({"depth": 4}, key_inputs("c0de", data="d1g3"))
True
>>> first_difference({"depth": 4, "width": 8}, {"depth": 4, "width": 16})
'width=8 there, 16 here'
"""

from __future__ import annotations

import hashlib
import json
import platform
from functools import lru_cache
from importlib import metadata

__all__ = ["KEY_LENGTH", "config_hash", "environment", "key_inputs", "result_key", "first_difference"]

KEY_LENGTH = 16  # hex digits of every key (64 bits)
_INPUTS = ["code", "data", "python", "torch"]  # what key_inputs gathers, sorted


def config_hash(config: dict) -> str:
    """First :data:`KEY_LENGTH` hex digits of the sha256 of ``config`` as canonical JSON (sorted keys)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


@lru_cache(maxsize=1)
def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def environment() -> dict:
    """The versions of this process that decide a result: ``python`` (``platform.python_version()``) and
    ``torch`` (the installed package's version, ``none`` without it)."""
    return {"python": platform.python_version(), "torch": _torch_version()}


def key_inputs(code: str, data: str = "") -> dict:
    """What a key covers besides the request: ``code`` (a code version), ``data`` (a corpus digest, ``''`` for a
    result that reads no corpus) and :func:`environment`. A record keeps this dict as ``versions``."""
    return {"code": code, "data": data, **environment()}


def result_key(what: dict, versions: dict) -> str:
    """The key of a result: :func:`config_hash` of the request ``what`` and ``versions``, the :func:`key_inputs`
    of the process that makes (or made) it; ``versions`` of other names is a ValueError."""
    if sorted(versions) != _INPUTS:
        raise ValueError(f"versions={sorted(versions)} is not allowed: a key covers exactly {_INPUTS} (key_inputs)")
    return config_hash({"what": what, **versions})


def first_difference(there: dict | None, here: dict) -> str | None:
    """The first entry of ``here`` (in its order) that ``there`` holds otherwise, as ``'name=A there, B here'``
    (``not recorded there`` for a missing one); None when every entry agrees."""
    there = there if isinstance(there, dict) else {}
    for name, value in here.items():
        if name not in there:
            return f"{name} not recorded there, {value!r} here"
        if there[name] != value:
            return f"{name}={there[name]!r} there, {value!r} here"
    return None
