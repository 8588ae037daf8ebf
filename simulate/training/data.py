"""Text for the trained probe: a corpus every machine has, the user's own file, deterministic batches.

Tokens are bytes (vocabulary 256, no tokenizer). ``docs`` is the standard library's own
documentation, ``pydoc_data.topics.topics`` (about 0.47 M characters of English prose, PSF
licence): its entries joined in key order, UTF-8. A path is the user's UTF-8 text file;
a missing, empty, binary (NUL bytes, or not UTF-8) or too short file raises
:class:`DataError` with one line naming it. The corpus is split by position: the first
90 % trains, the last 10 % is held out. Training batches are windows at random offsets
from a ``torch.Generator`` keyed by ``(seed, step)`` (so a resumed run draws exactly the
batches an uninterrupted one would); the probe batch is fixed: windows evenly spaced
over the held-out text.

>>> corpus = load_corpus("docs", tokens=64)
>>> corpus.name, corpus.train.dtype, len(corpus.held_out) > 65
('docs', torch.uint8, True)
>>> x, y = train_batch(corpus, batch=2, tokens=8, seed=0, step=3)
>>> tuple(x.shape), bool((x[:, 1:] == y[:, :-1]).all()), bool((train_batch(corpus, 2, 8, 0, 3)[0] == x).all())
((2, 8), True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from simulate.noise import key_seed

__all__ = ["HELD_OUT_FRACTION", "STREAMS", "DataError", "Corpus", "docs_bytes", "load_corpus", "train_batch",
           "probe_batch", "step_generator"]

HELD_OUT_FRACTION = 0.1
# Keyed random streams of a training run (the 'part' of simulate.noise.key_seed).
STREAMS = {"train_batch": 1, "jac_probe": 2, "e2e_probe": 3}


class DataError(ValueError):
    """The text given with ``--data`` cannot be used; the message is one line naming it."""


@dataclass(frozen=True)
class Corpus:
    """Bytes of a corpus split by position into a training part and a held-out part (uint8 tensors)."""

    name: str
    train: torch.Tensor  # (n_train,) uint8
    held_out: torch.Tensor  # (n_held_out,) uint8


def docs_bytes() -> bytes:
    """The standard library's documentation text (``pydoc_data.topics``), entries in key order, UTF-8."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics)).encode("utf-8")


def _read_user_text(path: Path) -> bytes:
    if not path.exists():
        raise DataError(f"data={str(path)!r} is not allowed: no such file (give a UTF-8 text file or 'docs')")
    if path.is_dir():
        raise DataError(f"data={str(path)!r} is not allowed: it is a directory (give a UTF-8 text file or 'docs')")
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


def load_corpus(spec: str, tokens: int) -> Corpus:
    """``'docs'`` or a path; both parts must hold a window of ``tokens + 1`` bytes (else :class:`DataError`)."""
    raw = docs_bytes() if spec == "docs" else _read_user_text(Path(spec))
    needed = minimum_length(tokens)
    if len(raw) < needed:
        raise DataError(f"data={spec!r} is not allowed: too short ({len(raw)} bytes; at least {needed} needed "
                        f"for tokens={tokens} with {HELD_OUT_FRACTION:.0%} held out)")
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)  # (n,)
    cut = len(raw) - int(len(raw) * HELD_OUT_FRACTION)
    return Corpus("docs" if spec == "docs" else str(spec), data[:cut].clone(), data[cut:].clone())


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
