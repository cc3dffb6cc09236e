"""The llama.cpp adapter's named check beside its factories: "same seed, with and without draft"."""

from __future__ import annotations

from typing import Sequence

from specverify.errors import InvalidArgument
from specverify.protocol import Request

__all__ = ["same_seed_check"]


def same_seed_check(speculative, control, requests: Sequence[Request]) -> dict:
    """The named check "same seed, with and without draft": both decoders answer the same seeded requests and the
    outputs are compared. A path that draws one uniform per emitted token from one seeded stream (llama-cpp-python's
    generate(), llama-server: sample-and-compare) gives equal outputs up to float rounding of batched vs single-token
    logits; this is evidence about the RNG discipline, not the law (exactness does not need replay)."""
    requests = list(requests)
    if not requests or any(r.seed is None for r in requests):
        raise InvalidArgument("requests must be a non-empty list of seeded Requests (seed=int).")
    a, b = speculative(requests), control(requests)
    diff = [(r.prompt, r.seed, x.tokens, y.tokens) for r, x, y in zip(requests, a, b) if x.tokens != y.tokens]
    return {
        "check": "same-seed-with-and-without-draft",
        "n": len(requests),
        "equal": len(requests) - len(diff),
        "examples": diff[:3],
    }
