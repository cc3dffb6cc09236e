"""Factories for the user-checkpoint tests: the reference decoders, loading the directories they are handed."""

from dataclasses import replace

from specverify.oracles.checkpoint import CheckpointModel
from specverify.reference import PlainDecoder, make_decoder
from specverify.reference.vectorized import VectorizedDecoder


def _models(target, draft):
    return CheckpointModel(target.path), CheckpointModel(draft.path)


def speculative(target, draft):
    return make_decoder(*_models(target, draft))


def plain(target, draft):
    return PlainDecoder(*_models(target, draft))


class _Hotter(VectorizedDecoder):
    """Samples at 1.3x the requested temperature, greedy kept."""

    def _hot(self, request):
        return replace(request, params=replace(request.params, temperature=request.params.temperature * 1.3))

    def __call__(self, requests):
        return super().__call__([self._hot(r) for r in requests])

    def sample(self, request, n):
        return super().sample(self._hot(request), n)


def hotter(target, draft):
    return _Hotter(*_models(target, draft))
