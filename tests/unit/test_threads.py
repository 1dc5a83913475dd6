"""numpy's BLAS on the calling thread alone while the server runs, and back after."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info

from kefu.threads import one_blas_thread


def blas_threads() -> list[int]:
    return [int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_one_blas_thread_limits_numpys_blas_and_gives_the_limit_back() -> None:
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded
    before = blas_threads()
    assert before, "numpy's BLAS was not found: the limit would do nothing"
    restore = one_blas_thread()
    try:
        assert blas_threads() == [1] * len(before)
    finally:
        restore()
    assert blas_threads() == before
