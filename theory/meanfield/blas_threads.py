"""One BLAS thread for the theory's small matrices: numpy's OpenBLAS, for the length of a ``with`` block.

The recursions multiply ``T x T`` matrices (``T <= 256``) and, under the finite-width law, stacks of them in its
attention average. OpenBLAS splits a product over its threads from about ``2.6e5`` multiply-adds on (its
``GEMM_MULTITHREAD_THRESHOLD``), where a product of that size takes tens of microseconds: the threads then spin and
wait for each other more than they compute, and on a busy machine each product waits for a scheduler slice.
Measured on the 2-core workbench machine with a training beside it (load 4-5), one attention average of the llama
preset (T = 64): 1.2-4.6 s with numpy's default two threads, 0.10-0.12 s with one. :func:`one_blas_thread` sets
OpenBLAS to one thread and restores the count after; the numbers do not change (each product is the same sum in
the same order; the law's tests compare thread counts, ``tests/theory/test_finite_width.py``).

numpy does not expose its BLAS's thread count, so the library is found among the shared objects the process has
loaded (``/proc/self/maps``, numpy's bundled ``numpy.libs``) and called through ``ctypes`` with OpenBLAS's own entry
points (``openblas_set_num_threads``, in the names of scipy-openblas's 64-bit build too), as threadpoolctl does.
Where none is found (another BLAS, another system) the block runs unchanged: set ``OPENBLAS_NUM_THREADS=1`` (or the
BLAS's own variable) before numpy is imported instead. Source: OpenBLAS's ``interface/gemm.c`` (the threshold) and
its exported thread API.

>>> with one_blas_thread():
...     inside = blas_threads()
>>> inside in (None, 1)
True
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading
from functools import lru_cache
from typing import Iterator

import numpy as np

__all__ = ["one_blas_thread", "blas_threads"]

_ENTRY_POINTS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                 ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
                 ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                 ("openblas_get_num_threads", "openblas_set_num_threads"))
_LOCK = threading.Lock()
_STATE = {"open": 0, "previous": 1}  # blocks running, the count before the first


def _loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS libraries this process may have loaded: numpy's bundled ones, then the mapped ones."""
    base = os.path.dirname(np.__file__)
    paths = glob.glob(base + ".libs/*openblas*") + glob.glob(os.path.join(base, ".dylibs", "*openblas*"))
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            paths += [line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line]
    except OSError:  # not Linux
        pass
    return list(dict.fromkeys(paths))


@lru_cache(maxsize=1)
def _thread_api():
    """``(get, set)`` of numpy's OpenBLAS through ctypes, or None."""
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded by now
    for path in _loaded_openblas():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _ENTRY_POINTS:
            if hasattr(library, get_name) and hasattr(library, set_name):
                getter, setter = getattr(library, get_name), getattr(library, set_name)
                getter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
                return getter, setter
    return None


def blas_threads() -> int | None:
    """The thread count of numpy's OpenBLAS, or None where it is not found (module docstring)."""
    api = _thread_api()
    return None if api is None else int(api[0]())


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with numpy's OpenBLAS on one thread, the count from before the first of the blocks running at
    once (nested, or on other threads) restored when the last ends (module docstring); without OpenBLAS, unchanged."""
    api = _thread_api()
    if api is None:
        yield
        return
    with _LOCK:
        if not _STATE["open"]:
            _STATE["previous"] = int(api[0]())
            api[1](1)
        _STATE["open"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["open"] -= 1
            if not _STATE["open"]:
                api[1](_STATE["previous"])
