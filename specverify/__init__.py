"""specverify: is your speculative decoder exact, greedy-only, approximate or invalid?

>>> import specverify as sv
>>> sv.Verdict.EXACT == "exact"
True

``sv.certify(factory)`` certifies ``factory(target, draft) -> decoder`` (docs/adapters.md). The public API is
re-exported here lazily: importing ``specverify`` (or touching ``sv.certify``) imports neither torch, triton nor
hypothesis. The sampling math (``verify_candidate``, ``residual_probs``, ``next_token_probs``, …) lives in
``specverify.sampling``.
"""

from __future__ import annotations

from specverify._lazy import lazy_exports
from specverify.enums import Level, Verdict
from specverify.errors import InvalidArgument, ProtocolViolation, SpecverifyError
from specverify.params import SamplingParams

__version__ = "0.1.0"

_LAZY = {
    "certify": "specverify.certification.execution.certify",
    "certify_configurations": "specverify.certification.execution.certify",
    "EngineConfig": "specverify.protocol",
    "RunConfig": "specverify.certification.config.run_config",
    "Certificate": "specverify.certification.results.evidence",
    "Request": "specverify.protocol",
    "Completion": "specverify.protocol",
    "SampleCounts": "specverify.protocol",
    "Decoder": "specverify.protocol",
    "ToyGrammar": "specverify.grammar",
    "exact_law": "specverify.oracles.law",
    "greedy_outcome": "specverify.oracles.law",
    "make_decoder": "specverify.reference",
    "draw_seeds": "specverify.keyed",
}

__all__ = [
    "InvalidArgument",
    "Level",
    "ProtocolViolation",
    "SamplingParams",
    "SpecverifyError",
    "Verdict",
    "__version__",
    *_LAZY,
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
