"""Process set-up for the command lines: threads, OpenMP wait policy, malloc (an explicit call).

:func:`configure_process` is called first by ``python -m simulate`` and ``python -m
paper_figs`` (and by the test suite's conftest), before torch is imported:

- ``OMP_WAIT_POLICY=PASSIVE`` (unless set), when torch is not imported yet: on a shared
  machine spinning OpenMP threads made each op wait a scheduler slice (a 48-block LLaMA
  run took 27 s instead of 4.8 s with 2 threads under load).
- On Linux (glibc) malloc keeps freed memory (``mallopt``: no mmap below 256 MiB, trim
  above 1 GiB) unless ``$DEPTH_WORKBENCH_MALLOC=0``: torch's CPU allocator has no cache,
  so every large temporary of the depth loop was fresh pages from the kernel (~1e5 page
  faults and ~10% of a LLaMA run's CPU time); the resident set then stays at its peak.
- ``torch.set_num_threads($DEPTH_WORKBENCH_THREADS)`` where that variable is set.

A library user who imports :mod:`simulate` gets the wait policy (:func:`set_wait_policy`, called by the package's
``__init__``) and none of the rest unless they call :func:`configure_process`.

>>> configure_process() is None
True
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["configure_process", "set_wait_policy"]


def _keep_freed_memory() -> None:
    """glibc mallopt(M_MMAP_THRESHOLD=256 MiB, M_TRIM_THRESHOLD=1 GiB); a no-op elsewhere."""
    if os.environ.get("DEPTH_WORKBENCH_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 256 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # not glibc
        pass


def set_wait_policy() -> bool:
    """``OMP_WAIT_POLICY=PASSIVE`` unless the variable is set or torch is loaded (OpenMP reads it once, when torch
    starts its threads); True when the policy in effect is PASSIVE.

    >>> set_wait_policy() == (os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE")
    True
    """
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE"


def configure_process() -> None:
    """Set the OpenMP wait policy, malloc thresholds and torch's thread count (module docstring)."""
    set_wait_policy()
    _keep_freed_memory()
    if "DEPTH_WORKBENCH_THREADS" in os.environ:
        import torch

        torch.set_num_threads(int(os.environ["DEPTH_WORKBENCH_THREADS"]))
