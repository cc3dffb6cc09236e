"""Fault-injecting doubles (tests/certification/test_faults.py): the reference decoder until a call carries a
sampled request (temperature > 0), then the worker process dies the way engines die — a segfault, ``os._exit``, a
SIGKILL (what the kernel's OOM killer sends) — or hangs; and factories that die or hang while building the engine.
Greedy requests (temperature 0) never trigger the fault, so a greedy scenario run before it finishes."""

import ctypes
import os
import signal
import time

from specverify.reference import VectorizedDecoder


def _segfault():
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _exit():
    os._exit(7)


def _sigkill():
    os.kill(os.getpid(), signal.SIGKILL)


def _hang():
    time.sleep(3600)


FAULTS = {"segfault": _segfault, "exit": _exit, "sigkill": _sigkill, "hang": _hang}


class _Faulty(VectorizedDecoder):
    fault = None

    def _maybe(self, requests):
        if any(r.params.temperature > 0 for r in requests):
            FAULTS[self.fault]()

    def __call__(self, requests):
        self._maybe(requests)
        return super().__call__(requests)

    def sample(self, request, n, start=0):
        self._maybe([request])
        return super().sample(request, n, start=start)


def _decoder(fault):
    cls = type(f"Faulty_{fault}", (_Faulty,), {"fault": fault})
    return lambda target, draft: cls(target, draft)


segfault, exits, sigkill, hangs = (_decoder(f) for f in ("segfault", "exit", "sigkill", "hang"))


def factory_exits(target, draft):
    os._exit(3)


def factory_segfaults(target, draft):
    _segfault()


class _RaisesOnThirdCall(VectorizedDecoder):
    """The reference until its third ``__call__``, which raises (tests/certification/test_calls_at_once.py)."""

    calls = 0

    def __call__(self, requests):
        self.calls += 1
        if self.calls == 3:
            raise ValueError("engine error on call 3")
        return super().__call__(requests)


def raises_on_third_call(target, draft):
    return _RaisesOnThirdCall(target, draft)
