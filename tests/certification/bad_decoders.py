"""Decoders that break the protocol in one way each (importable, so the worker process can load them)."""

import time
from dataclasses import replace

from specverify.protocol import Completion
from specverify.reference import VectorizedDecoder


class _Wrap:
    capabilities = VectorizedDecoder.capabilities

    def __init__(self, target, draft):
        self.inner = VectorizedDecoder(target, draft)
        self.vocab = target.vocab

    def __call__(self, requests):
        return [self.mutate(c) for c in self.inner(requests)]

    def mutate(self, completion):
        return completion


class Raises(_Wrap):
    def __call__(self, requests):
        raise RuntimeError("engine exploded")


class WrongCount(_Wrap):
    def __call__(self, requests):
        return self.inner(requests)[:-1]


class OutOfVocab(_Wrap):
    def mutate(self, c):
        return replace(c, tokens=c.tokens[:-1] + (self.vocab.size + 3,), stream=None)


class TokensAfterEos(_Wrap):
    def mutate(self, c):
        if c.finish_reason == "eos":
            return replace(c, tokens=c.tokens + (0,), stream=None)
        return c


class WrongReason(_Wrap):
    def mutate(self, c):
        return replace(c, finish_reason="length" if c.finish_reason == "eos" else c.finish_reason)


class BrokenStream(_Wrap):
    def mutate(self, c):
        return replace(c, stream=c.stream + (c.tokens[:1],))


class Hangs(_Wrap):
    def __call__(self, requests):
        time.sleep(3600)


class NotACompletion(_Wrap):
    def __call__(self, requests):
        return [{"tokens": (0,), "finish_reason": "eos"} for _ in requests]


class _Minimal:
    """Declares only batching on top of the minimum; no fast path, no seeds, no stream, no accepted counts."""

    capabilities = frozenset({"temperature", "max_tokens", "batch"})

    def __init__(self, target, draft):
        self.inner = VectorizedDecoder(target, draft)

    def __call__(self, requests):
        return [Completion(c.tokens, c.finish_reason) for c in self.inner(requests)]


def minimal(target, draft):
    return _Minimal(target, draft)


def make(cls):
    return lambda target, draft: cls(target, draft)


raises, wrong_count, out_of_vocab = make(Raises), make(WrongCount), make(OutOfVocab)
tokens_after_eos, wrong_reason, broken_stream = make(TokensAfterEos), make(WrongReason), make(BrokenStream)
hangs, not_a_completion = make(Hangs), make(NotACompletion)


class UnseededHotter(VectorizedDecoder):
    """Seeded requests are exact; unseeded ones sample at 1.5× the temperature (another code path, BUGS-style)."""

    def _hotter(self, request):
        if request.seed is not None or request.params.temperature == 0:
            return request
        return replace(request, params=replace(request.params, temperature=request.params.temperature * 1.5))

    def __call__(self, requests):
        return super().__call__([self._hotter(r) for r in requests])

    def sample(self, request, n):
        return super().sample(self._hotter(request), n)


class Slow(VectorizedDecoder):
    """Exact, but costs ``SECONDS_PER_OUTCOME`` per outcome (a slow engine for the budget tests)."""

    SECONDS_PER_OUTCOME = 2e-4

    def sample(self, request, n):
        time.sleep(n * self.SECONDS_PER_OUTCOME)
        return super().sample(request, n)


def factory_raises(target, draft):
    """A factory that cannot build its engine: a set-up failure (verdict error), not a decoder bug."""
    raise RuntimeError("no GPU here")


class CapabilityTypo(_Wrap):
    capabilities = frozenset({"temperature", "max_tokens", "top-k"})


class NumpyTokens(_Wrap):
    """Exact, but its tokens are numpy integers (as argmax gives them)."""

    def mutate(self, c):
        import numpy as np

        return replace(c, tokens=tuple(np.int64(t) for t in c.tokens), stream=None, accepted=None)


class BoolTokens(_Wrap):
    def mutate(self, c):
        return replace(c, tokens=tuple(bool(t % 2) for t in c.tokens), stream=None)


class SeedNoBatch:
    """Exact and seeded, one request per call (it does not declare ``batch``): more requests per call raise."""

    capabilities = frozenset({"temperature", "max_tokens", "seed"})

    def __init__(self, target, draft):
        self.inner = VectorizedDecoder(target, draft)

    def __call__(self, requests):
        if len(requests) != 1:
            raise RuntimeError(f"one request per call, got {len(requests)}")
        return [Completion(c.tokens, c.finish_reason) for c in self.inner(requests)]


class SlowsDown(_Minimal):
    """Exact, one request per call, no fast path: fast through the budget's pilot, then 0.2 s per call."""

    capabilities = frozenset({"temperature", "max_tokens"})
    FAST_CALLS = 600

    def __init__(self, target, draft):
        super().__init__(target, draft)
        self.calls = 0

    def __call__(self, requests):
        self.calls += 1
        if self.calls > self.FAST_CALLS:
            time.sleep(0.2)
        return super().__call__(requests)


capability_typo, numpy_tokens, bool_tokens = make(CapabilityTypo), make(NumpyTokens), make(BoolTokens)
seed_no_batch, slows_down = make(SeedNoBatch), make(SlowsDown)


def thread_checked(target, draft):
    """Builds only when the worker runs the threads SPECVERIFY_TEST_THREADS names (torch and OMP_NUM_THREADS)."""
    import os

    import torch

    want = os.environ["SPECVERIFY_TEST_THREADS"]
    got = (str(torch.get_num_threads()), os.environ.get("OMP_NUM_THREADS"))
    if got != (want, want):
        raise RuntimeError(f"threads {got}, expected {want}")
    return VectorizedDecoder(target, draft)
