"""Shared test fixtures: every test is seeded; GPU tests skip without CUDA; MC assertions.

``mc_close`` asserts a Monte-Carlo mean against an exact value within ``z`` standard
errors and, on failure, prints the statistic, the target, the z-score and the shape.
"""

from __future__ import annotations

import math
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

# tests/simulate and tests/theory would otherwise import as namespace packages that
# shadow the real ones (pytest puts tests/ on sys.path): the repository root goes first.
_ROOT = str(Path(__file__).resolve().parents[1])
# The test machine is shared: one torch thread per test process unless asked otherwise (tiny
# matmuls stall with two threads on a loaded 2-core machine); set before simulate is imported.
os.environ.setdefault("DEPTH_WORKBENCH_THREADS", "1")
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from simulate.process import configure_process  # noqa: E402

configure_process()


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def shared_cache(tmp_path_factory):
    """One simulator cache for the whole session, never the user's own cache."""
    path = tmp_path_factory.getbasetemp() / "depth-workbench-cache"
    path.mkdir(exist_ok=True)
    previous = os.environ.get("DEPTH_WORKBENCH_CACHE")
    os.environ["DEPTH_WORKBENCH_CACHE"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("DEPTH_WORKBENCH_CACHE", None)
    else:
        os.environ["DEPTH_WORKBENCH_CACHE"] = previous


@pytest.fixture(autouse=True)
def _seed_everything():
    random.seed(0)
    np.random.seed(0)
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:
        pass
    yield


def assert_mc_close(name: str, mean, sem, target, *, z: float = 4.0, shape=None, floor: float = 0.0) -> np.ndarray:
    """Assert |mean - target| <= z*sem + floor elementwise; return the z-scores.

    ``floor`` absorbs deterministic errors far below the MC error (e.g. float rounding).
    """
    mean, sem, target = (np.asarray(v, dtype=float) for v in (mean, sem, target))
    scores = (mean - target) / np.where(sem > 0, sem, math.inf)
    ok = np.abs(mean - target) <= z * sem + floor
    if not np.all(ok):
        worst = int(np.argmax(np.abs(scores) * ~ok)) if scores.ndim else 0
        raise AssertionError(
            f"{name}: statistic {np.ravel(mean)[worst]:.6g} +- {np.ravel(sem)[worst]:.3g} vs target "
            f"{np.ravel(target)[worst]:.6g} (z = {np.ravel(scores)[worst]:.2f} > {z}) at index {worst}, "
            f"shape {shape if shape is not None else mean.shape}")
    print(f"MC {name}: max |z| = {np.max(np.abs(scores)):.2f} over {scores.size} values "
          f"(shape {shape if shape is not None else mean.shape})")
    return scores


@pytest.fixture
def mc_close():
    """The :func:`assert_mc_close` helper."""
    return assert_mc_close
