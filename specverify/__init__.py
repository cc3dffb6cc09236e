"""specverify: is your speculative decoder exact, greedy-only, approximate or invalid?

The public API is re-exported here lazily: importing ``specverify`` imports neither torch, triton nor hypothesis.
"""

from __future__ import annotations

import importlib

from specverify.errors import InvalidArgument, ProtocolViolation, SpecverifyError
from specverify.params import SamplingParams

__version__ = "0.1.0"

_LAZY = {
    "Request": "specverify.protocol",
    "Completion": "specverify.protocol",
    "ToyGrammar": "specverify.grammar",
    "next_token_probs": "specverify.sampling",
    "verify_candidate": "specverify.sampling",
    "residual_probs": "specverify.sampling",
    "sample_from_uniforms": "specverify.sampling",
    "exact_law": "specverify.oracles",
    "greedy_outcome": "specverify.oracles",
    "make_decoder": "specverify.reference",
    "decode_plain": "specverify.reference",
}

__all__ = ["SpecverifyError", "InvalidArgument", "ProtocolViolation", "SamplingParams", "__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'specverify' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
