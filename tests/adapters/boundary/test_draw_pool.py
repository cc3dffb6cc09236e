"""The draw pool's worker processes (``specverify.adapters.boundary.draw_pool``) without an engine: a worker's failure
reaches the certifier as an engine error. The draws themselves: tests/adapters/transformers/test_sample_engine.py."""

import os

import pytest

from specverify.adapters.boundary import draw_pool
from specverify.errors import InvalidArgument
from specverify.params import SamplingParams
from specverify.protocol import Request


def test_a_worker_failure_is_an_engine_error():
    """A worker whose decoder cannot be built, or that dies, raises RuntimeError with its message; the pool is
    closed (its processes ended) and starts afresh on the next call."""
    pool = draw_pool.DrawPool(1)
    request = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=3))
    with pytest.raises(RuntimeError, match="invalid literal for int"):
        pool.counts("a", int, ("not a number",), request, [1, 2])
    assert pool._procs == []
    with pytest.raises(RuntimeError, match="died during set-up"):
        pool.counts("b", os._exit, (3,), request, [1])
    assert pool._procs == []
    with pytest.raises(InvalidArgument, match="workers="):
        draw_pool.DrawPool(0)
