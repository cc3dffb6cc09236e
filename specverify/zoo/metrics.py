"""Zoo entries whose output law is exact but whose reported acceptance is wrong (docs/metrics.md, docs/bugs.md).

Each is the vectorized reference with its accepted counts rewritten after the decode (``run_group``, so the slow
path's ``Completion.accepted`` and the fast path's ``SampleCounts`` agree), or, for the mean of ratios, its
per-position counters. The rewrite stays within the protocol's bounds (0 <= accepted <= γ, accepted drafts summing
to no more than the tokens emitted: a decoder past them is invalid). The tokens are untouched, so the verdict is
exact; the certificate's ``metrics`` check fails (``ZooEntry.checks``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specverify.enums import Verdict
from specverify.reference.finish import REASONS
from specverify.reference.outcomes import count_positions
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._registry import zoo_entry

__all__ = [
    "acceptance_counts_emitted_token",
    "acceptance_counts_drafts_after_eos",
    "acceptance_rate_mean_of_ratios",
    "acceptance_over_reported_when_rejected",
]

_FINISHED_BY_TOKEN = [REASONS.index("eos"), REASONS.index("stop")]


def _last_round(accepted: np.ndarray) -> np.ndarray:
    """Index of each row's last round (accepted is -1 padded)."""
    return np.maximum((accepted >= 0).sum(axis=1) - 1, 0)


class _Rewritten(VectorizedDecoder):
    def rewrite(self, result, gamma: int) -> np.ndarray:  # -> accepted [B, R]
        raise NotImplementedError

    def run_group(self, prompt, params, num_draft_tokens, seeds):
        result = super().run_group(prompt, params, num_draft_tokens, seeds)
        rewritten = self.rewrite(result, num_draft_tokens)
        return replace(result, accepted=_within_protocol(result.accepted, rewritten, result))


def _within_protocol(before: np.ndarray, after: np.ndarray, result) -> np.ndarray:
    """``after`` lowered, last rounds first, back towards ``before`` until no row's accepted drafts sum past its
    tokens (the protocol's own bound, which makes a decoder invalid): what is left breaks only the metrics check."""
    after = after.copy()
    excess = np.where(after >= 0, after, 0).sum(axis=1) - result.lengths
    for row in np.flatnonzero(excess > 0).tolist():
        for r in range(after.shape[1] - 1, -1, -1):
            cut = min(int(excess[row]), int(after[row, r] - before[row, r]))
            if cut > 0:
                after[row, r] -= cut
                excess[row] -= cut
    return after


class _CountsEmitted(_Rewritten):
    def rewrite(self, result, gamma):
        a = result.accepted
        return np.where(a >= 0, np.minimum(a + 1, gamma), a)  # the emitted token counted (within the bound γ)


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-counts-emitted-token", checks=("metrics",))
def acceptance_counts_emitted_token(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Every round counts the token it emitted after its drafts as one more accepted draft (SGLang's rate above 1).

    SGLang PR #11572 fixed an acceptance rate above 1. Verdict: exact (the tokens are the reference's); the
    ``metrics`` check fails: Σ(accepted + 1) exceeds the tokens emitted (the consistency rule). The count is kept
    within γ: a round reporting γ + 1 accepted drafts breaks the protocol (``accepted`` lies in [0, γ]) and is
    invalid, whatever its law.
    """
    return _CountsEmitted(target, draft, entropy=entropy)


class _AfterEos(_Rewritten):
    def rewrite(self, result, gamma):
        a = result.accepted.copy()
        rows = np.flatnonzero(np.isin(result.reasons, _FINISHED_BY_TOKEN))
        last = _last_round(a)[rows]
        a[rows, last] = gamma  # the drafts judged after the finishing token counted as accepted
        return a


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-counts-drafts-after-eos", checks=("metrics",))
def acceptance_counts_drafts_after_eos(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The round that finishes on EOS or a stop string reports all γ drafts accepted, those after the end included.

    vLLM #56101 (fixed by PR #56137): tokens after EOS counted in the mean acceptance length. Verdict: exact (the
    tokens are the reference's); the ``metrics`` check fails: the finishing round claims more tokens than were
    emitted (the consistency rule), and the mean acceptance length is inflated.
    """
    return _AfterEos(target, draft, entropy=entropy)


class _RejectedRounds(_Rewritten):
    def rewrite(self, result, gamma):
        a = result.accepted.copy()
        rejected = (a >= 0) & (a < gamma)
        rejected[np.arange(a.shape[0]), _last_round(a)] = False  # the finishing round is left alone
        a[rejected] = gamma  # the drafts proposed counted as accepted
        return a


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-over-reported-in-rejected-rounds", checks=("metrics",))
def acceptance_over_reported_when_rejected(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A round that rejected a draft reports all γ drafts accepted (the drafts proposed), except the finishing round.

    Verdict: exact (the tokens are the reference's); the ``metrics`` check fails: Σ(accepted + 1) exceeds the tokens
    emitted (the consistency rule), or, where requests are short, the all-round histogram leaves its interval.
    """
    return _RejectedRounds(target, draft, entropy=entropy)


class _MeanOfRatios(VectorizedDecoder):
    def sample(self, request, n):
        counts = super().sample(request, n)
        result = self._last
        gamma = request.num_draft_tokens
        positions = []
        for k, (verified, accepted) in enumerate(count_positions(result, gamma)):
            per_row_verified = (result.verified > k).sum(axis=1)
            per_row_accepted = (result.accepted > k).sum(axis=1)
            seen = per_row_verified > 0
            rate = float(np.mean(per_row_accepted[seen] / per_row_verified[seen])) if seen.any() else 0.0
            # the counters keep the accepted total and report a "verified" that makes accepted / verified the mean
            positions.append((max(accepted, int(round(accepted / rate))) if rate > 0 else verified, accepted))
        return replace(counts, positions=tuple(positions))

    def run_group(self, prompt, params, num_draft_tokens, seeds):
        self._last = super().run_group(prompt, params, num_draft_tokens, seeds)
        return self._last


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-rate-mean-of-ratios", checks=("metrics",))
def acceptance_rate_mean_of_ratios(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The per-position acceptance rate it reports is the mean of per-request rates, not accepted / verified overall.

    Relax PR #345 replaced such a mean of ratios with the ratio of sums. Verdict: exact (the tokens are the
    reference's); the ``metrics`` check fails: the per-position rate lies outside its exact expectation's interval
    (short requests weigh as much as long ones).
    """
    return _MeanOfRatios(target, draft, entropy=entropy)
