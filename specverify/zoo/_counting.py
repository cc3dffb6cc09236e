"""The reference with an engine's aggregate counters (``decoder.reported_metrics()``, docs/adapters.md), counted
right: the base and the control of the engine-counter entries of ``specverify.zoo.metrics`` (private)."""

from __future__ import annotations

import numpy as np

from specverify.metrics.counters import ReportedMetrics
from specverify.reference.vectorized import VectorizedDecoder

__all__ = ["CountingReference"]


class CountingReference(VectorizedDecoder):
    """The vectorized reference with an engine's aggregate counters, counted right: ``reported_metrics()`` gives
    rounds with drafts, drafted tokens (γ a round), accepted drafts and accepted per position, cumulative since the
    decoder was made, with the rates an engine prints (docs/adapters.md, "Engine counters")."""

    def __init__(self, target, draft, *, entropy=None):
        super().__init__(target, draft, entropy=entropy)
        self.counts = dict(num_drafts=0, num_draft_tokens=0, num_accepted_tokens=0)
        self.per_position = [0]
        self.engines = 1  # data-parallel engines the counters are kept on (rows alternate between them)

    def run_group(self, prompt, params, num_draft_tokens, seeds):
        result = super().run_group(prompt, params, num_draft_tokens, seeds)
        self.count(result, num_draft_tokens)
        return result

    def count(self, result, gamma: int) -> None:
        """Add one group's rounds to the counters (``result.accepted``: -1 padded, [B, R])."""
        accepted = result.accepted
        rounds = accepted >= 0
        self.counts["num_drafts"] += int(rounds.sum())
        self.counts["num_draft_tokens"] += self.drafted(rounds, gamma)
        self.counts["num_accepted_tokens"] += int(accepted[rounds].sum())
        if len(self.per_position) < gamma:
            self.per_position += [0] * (gamma - len(self.per_position))
        engine = np.arange(accepted.shape[0]) % self.engines
        for k in range(gamma):
            self.add_position(k, [int((accepted[engine == e] > k).sum()) for e in range(self.engines)])

    def drafted(self, rounds: np.ndarray, gamma: int) -> int:
        return gamma * int(rounds.sum())

    def add_position(self, k: int, per_engine: list) -> None:
        self.per_position[k] += sum(per_engine)

    def reported_metrics(self) -> ReportedMetrics:
        c = self.counts
        drafts, tokens, accepted = c["num_drafts"], c["num_draft_tokens"], c["num_accepted_tokens"]
        per = tuple(self.per_position)
        return ReportedMetrics(
            **c,
            accepted_per_position=per,
            mean_acceptance_length=1 + accepted / drafts if drafts else None,
            acceptance_rate=accepted / tokens if tokens else None,
            acceptance_rate_per_position=tuple(a / drafts for a in per) if drafts else None,
        )
