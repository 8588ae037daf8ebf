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

from simulate.runtime.process import configure_process  # noqa: E402

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


@pytest.fixture
def source_copy(tmp_path) -> Path:
    """The packages' ``.py`` files copied under a temporary directory (a repository of sources only), to edit
    and digest (:mod:`simulate.runtime.versions`)."""
    from simulate.runtime.versions import PACKAGES, ROOT

    target = tmp_path / "repo"
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "__pycache__" not in path.parts:
                copy = target / path.relative_to(ROOT)
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(path.read_bytes())
    return target


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


# Items some list's item constraint accepts (a number, a rate, an axis, a claim): a list too short or repeating
# one is drawn from those its item constraint accepts.
_LIST_ITEMS = [0, 1, 1e-3, "depth", "p1-lns-loss"]


def invalid_strategy(constraint):
    """Hypothesis values that ``constraint`` refuses, generated from its declaration (theory.constraints).

    Below or above an interval (its open ends included), non-finite and wrongly typed values, choices that
    are not among the allowed ones, lists too short, repeating an item or holding a bad one; every value drawn
    is checked to be one the constraint refuses.
    """
    from hypothesis import strategies as st

    from theory.constraints import AnyOf, Boolean, Choice, Integer, ListOf, Optional, Real, Text

    wrong_types = st.sampled_from([True, False, None, "1", [1], 1.5])
    if isinstance(constraint, Integer):
        parts = [wrong_types, st.floats(allow_nan=True)]
        if constraint.low is not None:
            parts.append(st.integers(max_value=constraint.low - 1))
        if constraint.high is not None:
            parts.append(st.integers(min_value=constraint.high + 1))
    elif isinstance(constraint, Real):
        parts = [wrong_types, st.sampled_from([math.nan, math.inf, -math.inf])]
        if math.isfinite(constraint.low):
            parts.append(st.floats(max_value=constraint.low, exclude_max=not constraint.low_open,
                                   allow_infinity=False))
        if math.isfinite(constraint.high):
            parts.append(st.floats(min_value=constraint.high, exclude_min=not constraint.high_open,
                                   allow_infinity=False))
    elif isinstance(constraint, Choice):
        parts = [st.text(max_size=12), st.sampled_from([3, 1.5, None, True])]
    elif isinstance(constraint, Boolean):
        parts = [st.sampled_from([0, 1, "true", None, 1.0])]
    elif isinstance(constraint, Text):
        parts = [st.sampled_from([None, 1, 1.5, True, ["depth"]])]
    elif isinstance(constraint, ListOf):
        valid = [item for item in _LIST_ITEMS if constraint.item.accepts(item)]
        parts = [st.sampled_from([None, "depth", 1, 1.5, True, (1e-3, 1e-2)]),  # not a list
                 st.lists(invalid_strategy(constraint.item), min_size=1, max_size=3)]  # a bad item
        if constraint.min_length:
            parts.append(st.lists(st.sampled_from(valid), max_size=constraint.min_length - 1))  # too short
        if constraint.distinct:
            parts.append(st.sampled_from(valid).map(lambda item: [item, item]))  # an item twice
    elif isinstance(constraint, Optional):
        parts = [invalid_strategy(constraint.inner)]
    elif isinstance(constraint, AnyOf):
        parts = [invalid_strategy(option) for option in constraint.options]
    else:
        raise AssertionError(f"no invalid values known for {constraint!r}: add them to tests/conftest.py")
    return st.one_of(parts).filter(lambda value: not constraint.accepts(value))


@pytest.fixture
def invalid_values():
    """:func:`invalid_strategy`: the values a declared constraint refuses, for property tests."""
    return invalid_strategy
