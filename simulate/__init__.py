"""Monte-Carlo simulation of random-weight residual stacks (torch, CPU or CUDA).

Public API (CONTRACT.md): :func:`simulate`, :func:`cached_simulate`,
:class:`NumericalBlowUp`, :func:`weight_decay_process`, :func:`block_jacobian`,
:data:`METRICS`. Command line: ``python -m simulate run|verify|bench``.

Importing sets ``torch.set_num_threads`` to ``$DEPTH_WORKBENCH_THREADS`` (default 2), and,
when torch is not imported yet, ``OMP_WAIT_POLICY=PASSIVE`` (unless set): on a shared
machine spinning OpenMP threads made each op wait a scheduler slice (a 48-block LLaMA
run took 27 s instead of 4.8 s with 2 threads under load).
"""

import os
import sys

if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

torch.set_num_threads(int(os.environ.get("DEPTH_WORKBENCH_THREADS", "2")))

from simulate.jacobian import block_jacobian  # noqa: E402
from simulate.metrics import METRICS  # noqa: E402
from simulate.processes import weight_decay_process  # noqa: E402
from simulate.results import cached_simulate  # noqa: E402
from simulate.stack import NumericalBlowUp, simulate  # noqa: E402

__all__ = ["simulate", "cached_simulate", "NumericalBlowUp", "weight_decay_process", "block_jacobian", "METRICS"]
