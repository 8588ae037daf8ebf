"""Monte-Carlo simulation of random-weight residual stacks (torch, CPU or CUDA).

Public API (CONTRACT.md): :func:`simulate`, :func:`cached_simulate`,
:class:`NumericalBlowUp`, :func:`weight_decay_process`, :func:`block_jacobian`,
:data:`METRICS`. Command line: ``python -m simulate run|verify|bench``.

Importing sets ``torch.set_num_threads`` to ``$DEPTH_WORKBENCH_THREADS`` where it is set, and,
when torch is not imported yet, ``OMP_WAIT_POLICY=PASSIVE`` (unless set): on a shared
machine spinning OpenMP threads made each op wait a scheduler slice (a 48-block LLaMA
run took 27 s instead of 4.8 s with 2 threads under load). On Linux (glibc) it also asks
malloc to keep freed memory (``mallopt``: no mmap below 256 MiB, trim above 1 GiB) unless
``$DEPTH_WORKBENCH_MALLOC=0``: torch's CPU allocator has no cache, so every large
temporary of the depth loop was fresh pages from the kernel (~1e5 page faults and
~10% of a LLaMA run's CPU time); the resident set then stays at its peak.
"""

import ctypes
import os
import sys

if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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


_keep_freed_memory()

import torch  # noqa: E402

if "DEPTH_WORKBENCH_THREADS" in os.environ:
    torch.set_num_threads(int(os.environ["DEPTH_WORKBENCH_THREADS"]))

from simulate.jacobian import block_jacobian  # noqa: E402
from simulate.metrics import METRICS  # noqa: E402
from simulate.processes import weight_decay_process  # noqa: E402
from simulate.results import cached_simulate  # noqa: E402
from simulate.stack import NumericalBlowUp, simulate  # noqa: E402

__all__ = ["simulate", "cached_simulate", "NumericalBlowUp", "weight_decay_process", "block_jacobian", "METRICS"]
