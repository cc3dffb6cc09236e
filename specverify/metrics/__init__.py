"""Acceptance metrics and the seed's speed model.

``acceptance`` (numpy and scipy) measures acceptance over every round beside its exact expectation and checks the
law-free consistency of reported counts (docs/metrics.md); ``prefill`` (the oracles) gives the exact law of an engine
whose first tokens precede its first round. ``speed`` (no torch) turns acceptance and per-call costs into the
expected tokens per target call, the speed-up and the best γ, with the seed's "when not to use speculation"
conditions as explicit warnings.
"""

from specverify.metrics.acceptance import (
    AcceptanceCounts,
    Metric,
    MetricsReport,
    acceptance_metrics,
    completion_violation,
    consistency_violation,
    counts_from_completions,
)
from specverify.metrics.speed import (
    SpeedModel,
    SpeedWarning,
    expected_tokens_per_call,
    speed_model,
)

__all__ = [
    "AcceptanceCounts",
    "Metric",
    "MetricsReport",
    "acceptance_metrics",
    "completion_violation",
    "consistency_violation",
    "counts_from_completions",
    "SpeedModel",
    "SpeedWarning",
    "expected_tokens_per_call",
    "speed_model",
]
