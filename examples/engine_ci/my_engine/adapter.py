"""my_engine behind specverify's protocol (docs/adapters.md): one factory per speculative mode, plus ``plain``.

specverify calls ``speculative(target, draft)`` once per model pair, then the decoder with batches of
``specverify.Request``; the decoder returns one ``specverify.Completion`` per request, in order. Everything
engine-specific sits in ``_Engine`` (here specverify's own reference decoder stands in for the engine): replace its
two methods with your engine's start-up and generate calls, keep the translation, and declare in ``capabilities``
only the sampling fields your engine honours exactly (the scenarios that need the others are reported as not
covered, never silently passed).
"""

from __future__ import annotations

from specverify import Completion
from specverify.reference import PlainDecoder, VectorizedDecoder

CAPABILITIES = frozenset(
    {"temperature", "top_k", "top_p", "min_p", "max_tokens", "min_tokens", "stop", "ignore_eos", "bad_token_ids"}
    | {"repetition_penalty", "frequency_penalty", "presence_penalty", "grammar", "stop_after_min_tokens"}
    | {"batch", "seed", "accepted"}  # several requests per call, per-request seeds, accepted drafts per round
)


class _Engine:
    """Stand-in for your engine: built once per model pair, then batched generate calls."""

    def __init__(self, target, draft, *, speculative: bool):
        self._impl = (VectorizedDecoder if speculative else PlainDecoder)(target, draft)

    def generate(self, requests):  # your engine's call; here: the reference decoder
        return self._impl(requests)

    def shutdown(self) -> None:
        self._impl = None


class Decoder:
    """The protocol's decoder: translate requests in, outputs out, and declare what is honoured."""

    capabilities = CAPABILITIES

    def __init__(self, engine: _Engine):
        self.engine = engine

    def __call__(self, requests):
        outputs = self.engine.generate(list(requests))
        return [Completion(tuple(o.tokens), o.finish_reason, accepted=o.accepted) for o in outputs]

    def close(self) -> None:  # specverify calls it when done with a model pair: release the engine's memory
        self.engine.shutdown()


def speculative(target, draft) -> Decoder:
    """Speculative decoding: the draft proposes, the target verifies."""
    return Decoder(_Engine(target, draft, speculative=True))


def plain(target, draft) -> Decoder:
    """Speculation off: the control (plain target sampling)."""
    return Decoder(_Engine(target, draft, speculative=False))
