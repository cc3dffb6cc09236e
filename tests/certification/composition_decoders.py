"""Decoders whose law depends on the size of the call (importable, so the worker process can load them).

``small_calls_nearby_law`` is the blind spot of issue #23 item 3: exact in calls of three or more requests and in
``sample()``, greedy exact everywhere, while sampled requests in calls of one or two take another numeric path whose
law is a nearby one — TV ≈ 0.04 on the small-call shape of the toy batch-composition scenario
(``checks.composition.small_call_shape``), below the 0.2 the small calls used to be planned at.
"""

from specverify.oracles.models import draft_near
from specverify.reference import VectorizedDecoder

SMALL_CALL = 2  # calls of at most this many requests take the other path
DISTANCE = 0.062  # TV(exact, nearby) on the toy small-call shape ≈ 0.040 (tests/certification/test_composition.py)
STRONG_DISTANCE = 0.4  # the fast cousin's defect: TV ≈ 0.23, caught at quick


class _SmallCallsNearby(VectorizedDecoder):
    def __init__(self, target, draft, *, distance, entropy=None):
        super().__init__(target, draft, entropy=entropy)
        self.exact_target = target
        self.small_call_target = draft_near(target, distance=distance, seed=991)  # "another kernel": a nearby law

    def __call__(self, requests):
        requests = list(requests)
        sampled = all(r.params.temperature > 0 for r in requests)  # a greedy fast path stays exact
        self.target = self.small_call_target if sampled and len(requests) <= SMALL_CALL else self.exact_target
        try:
            return super().__call__(requests)
        finally:
            self.target = self.exact_target


def small_calls_nearby_law(target, draft, *, entropy=None):
    """Sampled requests in calls of one or two requests follow a nearby target law (TV ≈ 0.04)."""
    return _SmallCallsNearby(target, draft, distance=DISTANCE, entropy=entropy)


def small_calls_far_law(target, draft, *, entropy=None):
    """The same path with a larger defect (TV ≈ 0.23 on the small-call shape): the fast suite's cousin."""
    return _SmallCallsNearby(target, draft, distance=STRONG_DISTANCE, entropy=entropy)


class _Seedless(VectorizedDecoder):
    """The reference without the ``seed`` capability, refusing any request that carries a seed (as an engine whose
    seeded path is broken is certified: chunked-prefill-unseeded)."""

    capabilities = VectorizedDecoder.capabilities - {"seed"}

    def __call__(self, requests):
        seeded = [r for r in requests if r.seed is not None]
        if seeded:
            raise RuntimeError(f"{len(seeded)} of {len(requests)} requests carry a seed, which this decoder refuses")
        return super().__call__(requests)

    def sample(self, request, n, start=0):
        if request.seed is not None:
            raise RuntimeError("a seeded request sent to sample(), which this decoder refuses")
        return super().sample(request, n, start)


def seedless(target, draft, *, entropy=None):
    """The reference, declared without ``seed``: the certifier must send it no seed (its neighbours included)."""
    return _Seedless(target, draft, entropy=entropy)
