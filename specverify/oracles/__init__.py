"""Oracles: models whose law is fully known, and the exact law of complete outputs by enumeration.

Names are re-exported lazily: ``from specverify.oracles.pairs import ToyPairSpec`` stays light, and torch is imported
only when a model or the law is used.
"""

from __future__ import annotations

from specverify._lazy import lazy_exports

_LAZY = {
    "ExactLaw": "specverify.oracles.law",
    "exact_law": "specverify.oracles.law",
    "greedy_outcome": "specverify.oracles.law",
    "boundary_margin": "specverify.oracles.law",
    "first_finish": "specverify.oracles.law",
    "visible_text": "specverify.oracles.law",
    "Vocab": "specverify.oracles.models",
    "make_vocab": "specverify.oracles.models",
    "ToyModel": "specverify.oracles.models",
    "ToyCache": "specverify.oracles.models",
    "BatchCache": "specverify.oracles.models",
    "random_target": "specverify.oracles.models",
    "draft_near": "specverify.oracles.models",
    "draft_copy": "specverify.oracles.models",
    "CheckpointSpec": "specverify.oracles.checkpoint_spec",
    "CheckpointPairSpec": "specverify.oracles.checkpoint_spec",
    "CheckpointModel": "specverify.oracles.checkpoint",
    "MimoSpec": "specverify.oracles.checkpoint_spec",
    "MimoPairSpec": "specverify.oracles.checkpoint_spec",
    "MimoModel": "specverify.oracles.checkpoint_mimo",
    "describe_pair": "specverify.oracles.checkpoint",
    "ModelPair": "specverify.oracles.pairs",
    "PairSpec": "specverify.oracles.pairs",
    "ToyPairSpec": "specverify.oracles.pairs",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
