"""Ctrl-C and SIGTERM during a long command: one line, what was kept, exit code 128 + signal.

A long command (``simulate run``, ``verify``, ``train``, ``sweep``) wraps its work in
:func:`handle_signals`: SIGINT (Ctrl-C) and SIGTERM then both raise :class:`Interrupted`,
a :class:`KeyboardInterrupt` that carries the signal number, so every ``finally`` and every
:func:`theory.files.atomic_write` clean-up runs (an unhandled SIGTERM would end the process
with temporary files left behind). What the command has measured is written inside
:func:`deferred_signals`, where a further signal waits until the files are complete. The
command then prints one line (:func:`interrupted_line`) and returns
:func:`exit_code` (130 for SIGINT, 143 for SIGTERM, the shell's convention).

>>> import os, signal
>>> with handle_signals():
...     try:
...         os.kill(os.getpid(), signal.SIGTERM)
...     except Interrupted as stop:
...         print(stop.signum == signal.SIGTERM, exit_code(stop))
True 143
>>> interrupted_line("prog", signal.SIGINT, "after block 3 of 8", "layers 0..3 kept in out/", "rerun it")
'prog: interrupted by SIGINT after block 3 of 8; layers 0..3 kept in out/; rerun it'
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

__all__ = ["SIGNALS", "Interrupted", "signal_of", "exit_code", "signal_name", "handle_signals",
           "deferred_signals", "interrupted_line"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived inside :func:`handle_signals`; ``signum`` says which."""

    def __init__(self, signum: int = signal.SIGINT):
        self.signum = int(signum)
        super().__init__(signal_name(signum))


def signal_of(error: BaseException) -> int:
    """The signal behind an interruption: its ``signum``, else SIGINT (a plain KeyboardInterrupt)."""
    return int(getattr(error, "signum", signal.SIGINT))


def exit_code(error_or_signum) -> int:
    """128 + the signal number: 130 for SIGINT, 143 for SIGTERM."""
    signum = error_or_signum if isinstance(error_or_signum, int) else signal_of(error_or_signum)
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    """'SIGINT', 'SIGTERM', ... (the number itself for an unknown signal)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def handle_signals():
    """Within the block SIGINT and SIGTERM raise :class:`Interrupted`; the old handlers come back after.

    Signal handlers can only be set from the main thread; elsewhere this does nothing.
    """
    if not _main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Interrupted(signum)

    previous = {number: signal.signal(number, interrupt) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def deferred_signals():
    """Within the block SIGINT and SIGTERM are noted, not raised: results being written stay whole.

    Yields the list of signal numbers that arrived (in order); the caller decides what to
    report after the block. Elsewhere than in the main thread the list stays empty.
    """
    pending: list[int] = []
    if not _main_thread():
        yield pending
        return
    previous = {number: signal.signal(number, lambda signum, frame: pending.append(signum)) for number in SIGNALS}
    try:
        yield pending
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def interrupted_line(prog: str, signum: int, where: str, kept: str, resume: str) -> str:
    """The one line an interrupted command prints: where it stopped, what was kept, how to resume."""
    return f"{prog}: interrupted by {signal_name(signum)} {where}; {kept}; {resume}"
