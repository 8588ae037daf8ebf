"""Text for the trained probe: a corpus every machine has, the user's own file, deterministic batches.

Tokens are bytes (vocabulary 256, no tokenizer). Two corpora every Python installation has
(:data:`CORPORA`), and the user's own file:

``docs``
    The standard library's own documentation, ``pydoc_data.topics.topics`` (about 0.47 M
    characters of English prose, PSF licence): its entries joined in key order, UTF-8,
    split by position (the first 90 % trains, the last 10 % is held out). 16 x 64-byte
    batches use it up in about 400 steps.
``stdlib``
    The standard library's own Python sources (about 11 MB on CPython 3.11; PSF licence):
    every ``*.py`` file under ``sysconfig.get_path("stdlib")`` except tests (a path part
    ``test``, ``tests``, ``idle_test`` or ``test_*``), installed packages
    (``site-packages``, ``dist-packages``) and ``pydoc_data`` (that is ``docs``). Split by
    file: a file is held out when the sha256 of its relative path (POSIX form) is 0 mod 10
    (:func:`held_out_file`), about 10 % of the files. Within each part the files are
    joined in the order of their relative paths, separated by a blank line. On one Python
    version the bytes are the same on every machine; another version has other files and
    other contents, so a corpus is named with its version (``stdlib`` of CPython 3.11.7
    records ``python 3.11.7`` in a run's ``config.json``) and a loss is comparable only
    within one version: the corpus digest (:func:`corpus_digest`) is part of every training's
    and every score's key (:func:`simulate.runtime.keys.result_key`), and so is the Python.
a path
    The user's UTF-8 text file, split by position like ``docs``; a missing, empty, binary
    (NUL bytes, or not UTF-8) or too short file raises :class:`DataError` with one line
    naming it.

Training batches are windows at random offsets
from a ``torch.Generator`` keyed by ``(seed, step)`` (so a resumed run draws exactly the
batches an uninterrupted one would); the probe batch is fixed: windows evenly spaced
over the held-out text.

>>> corpus = load_corpus("docs", tokens=64)
>>> corpus.name, corpus.train.dtype, len(corpus.held_out) > 65
('docs', torch.uint8, True)
>>> source = load_corpus("stdlib", tokens=64)
>>> len(source.train) > 5_000_000, 0.05 < len(source.held_out) / (len(source.train) + len(source.held_out)) < 0.2
(True, True)
>>> x, y = train_batch(corpus, batch=2, tokens=8, seed=0, step=3)
>>> tuple(x.shape), bool((x[:, 1:] == y[:, :-1]).all()), bool((train_batch(corpus, 2, 8, 0, 3)[0] == x).all())
((2, 8), True, True)
"""

from __future__ import annotations

import functools
import hashlib
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch

from simulate.engine import key_seed

__all__ = ["CORPORA", "HELD_OUT_FRACTION", "STREAMS", "DataError", "Corpus", "docs_bytes", "stdlib_files",
           "held_out_file", "corpus_digest", "load_corpus", "epochs_seen", "train_batch", "probe_batch",
           "step_generator"]

CORPORA = ("docs", "stdlib")  # the corpora every Python installation has (module docstring)
HELD_OUT_FRACTION = 0.1
# Keyed random streams of a training run (the 'part' of simulate.engine.noise.key_seed).
STREAMS = {"train_batch": 1, "jac_probe": 2, "e2e_probe": 3}


class DataError(ValueError):
    """The text given with ``--data`` cannot be used; the message is one line naming it."""


@dataclass(frozen=True)
class Corpus:
    """Bytes of a corpus split by position into a training part and a held-out part (uint8 tensors), and their
    :func:`corpus_digest` (``''`` for bytes that come from no corpus spec)."""

    name: str
    train: torch.Tensor  # (n_train,) uint8
    held_out: torch.Tensor  # (n_held_out,) uint8
    digest: str = ""

    def describe(self) -> dict:
        """What a run records of its corpus: name, bytes of each part, the digest and the Python it came with."""
        return {"name": self.name, "train_bytes": len(self.train), "held_out_bytes": len(self.held_out),
                "digest": self.digest, "python": platform.python_version()}


def docs_bytes() -> bytes:
    """The standard library's documentation text (``pydoc_data.topics``), entries in key order, UTF-8."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics)).encode("utf-8")


_SKIPPED_PARTS = ("test", "tests", "idle_test", "__pycache__", "site-packages", "dist-packages")


def held_out_file(relative: str) -> bool:
    """Whether the stdlib file at ``relative`` (a POSIX path) is held out: its sha256 is 0 mod 10.

    >>> held_out_file("json/decoder.py"), held_out_file("json/encoder.py")
    (False, False)
    >>> sum(held_out_file(f"m{i}.py") for i in range(1000))
    101
    """
    return int(hashlib.sha256(relative.encode()).hexdigest(), 16) % 10 == 0


def stdlib_files(root: Path | None = None) -> list[str]:
    """Relative POSIX paths of the standard library's sources that make up ``stdlib``, sorted.

    ``root`` defaults to ``sysconfig.get_path("stdlib")`` (in a virtual environment: the
    base installation's library).
    """
    root = Path(sysconfig.get_path("stdlib") if root is None else root)
    names = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if parts[0] == "pydoc_data" or any(p in _SKIPPED_PARTS or p.startswith("test_") for p in parts):
            continue
        names.append(str(PurePosixPath(*parts)))
    return sorted(names)


@functools.lru_cache(maxsize=1)
def _stdlib_parts() -> tuple[bytes, bytes]:
    """(training bytes, held-out bytes) of ``stdlib``; read once per process."""
    root = Path(sysconfig.get_path("stdlib"))
    train, held_out = [], []
    for name in stdlib_files(root):
        (held_out if held_out_file(name) else train).append((root / name).read_bytes())
    if not train or not held_out:
        raise DataError(f"data='stdlib' is not allowed: no standard library sources under {root}")
    return b"\n\n".join(train), b"\n\n".join(held_out)


def _read_user_text(path: Path) -> bytes:
    if not path.exists():
        raise DataError(f"data={str(path)!r} is not allowed: no such file (give a UTF-8 text file, 'docs' or "
                        "'stdlib')")
    if path.is_dir():
        raise DataError(f"data={str(path)!r} is not allowed: it is a directory (give a UTF-8 text file, 'docs' or "
                        "'stdlib')")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise DataError(f"data={str(path)!r} is not allowed: cannot be read ({error.strerror})") from None
    if not raw:
        raise DataError(f"data={str(path)!r} is not allowed: the file is empty (give a UTF-8 text file)")
    if b"\x00" in raw:
        raise DataError(f"data={str(path)!r} is not allowed: the file is binary (NUL bytes), not UTF-8 text")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"data={str(path)!r} is not allowed: not UTF-8 text (invalid byte at offset "
                        f"{error.start})") from None
    return raw


def minimum_length(tokens: int) -> int:
    """Fewest bytes whose held-out part still holds one window of ``tokens + 1`` bytes.

    >>> minimum_length(64)
    650
    """
    return int(-(-(tokens + 1) // HELD_OUT_FRACTION))


def _tensor(raw: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)  # (n,)


def _parts(spec: str) -> tuple[bytes, bytes]:
    """(training bytes, held-out bytes) of ``'docs'``, ``'stdlib'`` or a path (:class:`DataError` for a file that
    cannot be used), before any length check."""
    if spec == "stdlib":
        return _stdlib_parts()
    raw = docs_bytes() if spec == "docs" else _read_user_text(Path(spec))
    cut = len(raw) - int(len(raw) * HELD_OUT_FRACTION)
    return raw[:cut], raw[cut:]


def _hash(train: bytes, held_out: bytes) -> str:
    digest = hashlib.sha256(len(train).to_bytes(8, "little"))  # where the held-out part starts
    digest.update(train)
    digest.update(held_out)
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=len(CORPORA))
def _named_digest(spec: str) -> str:
    """:func:`corpus_digest` of ``docs`` or ``stdlib``, once per process."""
    return _hash(*_parts(spec))


def corpus_digest(spec: str) -> str:
    """The data a run reads, as a digest: sha256 (first 16 hex digits) of the exact training and held-out bytes
    of ``spec`` (``'docs'``, ``'stdlib'`` or a path; :class:`DataError` as :func:`load_corpus`). That of ``docs``
    and ``stdlib`` is computed once per process; a file is read again each time (it may have changed).

    The digest of ``docs`` or ``stdlib`` changes with the Python whose standard library it is, that of a
    file with its contents, never with its name.

    >>> corpus_digest("docs") == load_corpus("docs", tokens=8).digest, len(corpus_digest("docs"))
    (True, 16)
    """
    return _named_digest(spec) if spec in CORPORA else _hash(*_parts(spec))


def load_corpus(spec: str, tokens: int) -> Corpus:
    """``'docs'``, ``'stdlib'`` or a path; both parts hold a window of ``tokens + 1`` bytes (else
    :class:`DataError`)."""
    train, held_out = _parts(spec)
    if spec == "stdlib":
        if len(held_out) < tokens + 1:
            raise DataError(f"data='stdlib' is not allowed: its held-out part ({len(held_out)} bytes) is shorter "
                            f"than one window of tokens={tokens}")
    elif len(train) + len(held_out) < minimum_length(tokens):
        raise DataError(f"data={spec!r} is not allowed: too short ({len(train) + len(held_out)} bytes; at least "
                        f"{minimum_length(tokens)} needed for tokens={tokens} with {HELD_OUT_FRACTION:.0%} held out)")
    digest = _named_digest(spec) if spec in CORPORA else _hash(train, held_out)  # a file: the bytes read here
    return Corpus(str(spec), _tensor(train), _tensor(held_out), digest)


def epochs_seen(corpus: Corpus, steps: int, batch: int, tokens: int) -> float:
    """How many times ``steps`` batches of ``batch x tokens`` bytes go through the training part.

    >>> epochs_seen(Corpus("x", torch.zeros(1000, dtype=torch.uint8), torch.zeros(10, dtype=torch.uint8)), 10, 5, 40)
    2.0
    """
    return steps * batch * tokens / len(corpus.train)


def step_generator(seed: int, step: int, stream: str) -> torch.Generator:
    """The CPU generator of random stream ``stream`` (:data:`STREAMS`) at ``step`` of a run with ``seed``."""
    return torch.Generator().manual_seed(key_seed(seed, step, STREAMS[stream]))


def _windows(data: torch.Tensor, starts: torch.Tensor, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    index = starts[:, None] + torch.arange(tokens + 1)[None, :]  # (B, T+1)
    window = data[index].long()  # (B, T+1)
    return window[:, :-1], window[:, 1:]  # inputs, next-byte targets: (B, T) each


def train_batch(corpus: Corpus, batch: int, tokens: int, seed: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets (B, T) int64 of training step ``step``: windows at keyed random offsets."""
    generator = step_generator(seed, step, "train_batch")
    starts = torch.randint(0, len(corpus.train) - tokens, (batch,), generator=generator)  # (B,)
    return _windows(corpus.train, starts, tokens)


def probe_batch(corpus: Corpus, batch: int, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed held-out batch: ``batch`` windows evenly spaced over the held-out text, (B, T) each."""
    last = len(corpus.held_out) - tokens - 1
    starts = torch.linspace(0, last, batch).round().long()  # (B,)
    return _windows(corpus.held_out, starts, tokens)
