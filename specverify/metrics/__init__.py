"""Acceptance metrics and the seed's speed model.

``speed`` (no torch) turns acceptance and per-call costs into the expected tokens per target call, the speed-up and
the best γ, with the seed's "when not to use speculation" conditions as explicit warnings.
"""

from specverify.metrics.speed import (
    SpeedModel,
    SpeedWarning,
    expected_tokens_per_call,
    speed_model,
)

__all__ = ["SpeedModel", "SpeedWarning", "expected_tokens_per_call", "speed_model"]
