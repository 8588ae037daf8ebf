"""theory.meanfield.blas_threads: one OpenBLAS thread inside the block, the count restored after, nested or not."""

from __future__ import annotations

import threading

import pytest

from theory.meanfield.blas_threads import blas_threads, one_blas_thread


def test_one_thread_inside_and_the_count_restored():
    before = blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS is not OpenBLAS here")
    with one_blas_thread():
        assert blas_threads() == 1
        with one_blas_thread():
            assert blas_threads() == 1
        assert blas_threads() == 1  # the inner block does not restore while the outer runs
    assert blas_threads() == before


def test_blocks_on_two_threads_restore_once():
    before = blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS is not OpenBLAS here")
    inside, release = threading.Event(), threading.Event()

    def hold():
        with one_blas_thread():
            inside.set()
            release.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(10)
    with one_blas_thread():
        pass
    assert blas_threads() == 1  # the other block still runs
    release.set()
    other.join(10)
    assert blas_threads() == before
