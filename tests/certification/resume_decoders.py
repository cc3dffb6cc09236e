"""Doubles for runs in parts and resumed runs (test_parts.py, test_resume.py): the reference decoder on the slow path
only, with a ``sample`` that takes no draw offset, paced, or killing its own worker process once."""

import os
import signal
import time

from specverify.reference import VectorizedDecoder


class _SlowPath:
    """The reference decoder without its fast path: every draw is a completion (seeds by draw index)."""

    capabilities = VectorizedDecoder.capabilities

    def __init__(self, target, draft):
        self.inner = VectorizedDecoder(target, draft)

    def __call__(self, requests):
        return self.inner(requests)


class _NoOffset(VectorizedDecoder):
    """``sample(request, n)`` without the ``start`` offset: the certifier draws fixed chunks with their own seeds."""

    def sample(self, request, n):
        return super().sample(request, n)


class _Paced(VectorizedDecoder):
    """Sleeps ``SPECVERIFY_TEST_PACE`` seconds in every ``sample`` call of a sampled request (a slow engine)."""

    def sample(self, request, n, start=0):
        if request.params.temperature > 0:
            time.sleep(float(os.environ.get("SPECVERIFY_TEST_PACE", "0")))
        return super().sample(request, n, start=start)


class _KilledOnce(VectorizedDecoder):
    """SIGKILLs its own process (the worker) at its ``SPECVERIFY_TEST_KILL_AT``-th ``sample`` call, unless the file
    ``SPECVERIFY_TEST_KILL_MARK`` exists; it creates that file first, so the next run is not killed."""

    calls = 0

    def sample(self, request, n, start=0):
        type(self).calls += 1
        mark = os.environ.get("SPECVERIFY_TEST_KILL_MARK")
        if mark and type(self).calls >= int(os.environ["SPECVERIFY_TEST_KILL_AT"]) and not os.path.exists(mark):
            open(mark, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().sample(request, n, start=start)


class _FailsOnce(VectorizedDecoder):
    """Raises in its ``SPECVERIFY_TEST_FAIL_AT``-th ``sample`` call unless the file ``SPECVERIFY_TEST_FAIL_MARK``
    exists (it creates it first): a protocol violation in-process, once."""

    calls = 0

    def sample(self, request, n, start=0):
        type(self).calls += 1
        mark = os.environ.get("SPECVERIFY_TEST_FAIL_MARK")
        if mark and type(self).calls >= int(os.environ["SPECVERIFY_TEST_FAIL_AT"]) and not os.path.exists(mark):
            open(mark, "w").close()
            raise RuntimeError("engine lost its KV cache")
        return super().sample(request, n, start=start)


def fails_once(target, draft):
    return _FailsOnce(target, draft)


def slow_path(target, draft):
    return _SlowPath(target, draft)


def no_offset(target, draft):
    return _NoOffset(target, draft)


def paced(target, draft):
    return _Paced(target, draft)


def killed_once(target, draft):
    return _KilledOnce(target, draft)
