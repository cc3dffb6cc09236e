"""Zoo entries whose output law is exact but whose reported acceptance is wrong (docs/metrics.md, docs/bugs.md).

Each is the vectorized reference with its accepted counts rewritten after the decode (``run_group``, so the slow
path's ``Completion.accepted`` and the fast path's ``SampleCounts`` agree), or, for the mean of ratios, its
per-position counters. The rewrite stays within the protocol's bounds (0 <= accepted <= γ, accepted drafts summing
to no more than the tokens emitted: a decoder past them is invalid). The tokens are untouched, so the verdict is
exact; the certificate's ``metrics`` check fails (``ZooEntry.checks``).

The engine-counter entries keep every completion's counts right and get the engine's own aggregate counters wrong
(``decoder.reported_metrics()``, docs/adapters.md): the ``counters`` check fails, the ``metrics`` check passes.
:class:`CountingReference` is their control, the reference with correct counters (not an entry: it is the
reference; ``counting_reference`` is its factory).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.reference.finish import REASONS
from specverify.reference.outcomes import count_positions
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._counting import CountingReference
from specverify.zoo._registry import zoo_entry

__all__ = [
    "acceptance_counts_emitted_token",
    "acceptance_counts_drafts_after_eos",
    "acceptance_rate_mean_of_ratios",
    "acceptance_over_reported_when_rejected",
    "acceptance_per_position_from_one_dp_engine",
    "acceptance_rate_denominator_steps_plus_one",
    "acceptance_counted_past_stop",
    "acceptance_partial_accept_restore_replay",
    "acceptance_point_mass_fallback",
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
    def sample(self, request, n, start=0):
        counts = super().sample(request, n, start)
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


# ------------------------------------------------------------------ the engine's own counters (the counters check)


def counting_reference(target, draft, *, entropy=None) -> CountingReference:
    """The reference with correct engine counters (the counter entries' control; exact, every check passes)."""
    return CountingReference(target, draft, entropy=entropy)


class _OneEngineSeries(CountingReference):
    def __init__(self, target, draft, *, entropy=None):
        super().__init__(target, draft, entropy=entropy)
        self.engines = 2
        self.series = []  # per position, per engine: that engine's own counter

    def add_position(self, k, per_engine):
        while len(self.series) <= k:
            self.series.append([0] * self.engines)
        for e, n in enumerate(per_engine):
            self.series[k][e] += n
        self.per_position[k] = max(self.series[k])  # the parser kept one engine's series, not their sum


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-per-position-from-one-dp-engine", checks=("counters",))
def acceptance_per_position_from_one_dp_engine(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Per-position accepted counts come from the larger of two data-parallel engines' series, not their sum.

    vllm-project/speculators #1095 (fixed by PR #1096): with ``--data-parallel-size 2`` the per-position acceptance
    came out about half, so ``mean acceptance length = 1 + Σ_k rate_k`` broke while the totals were right. Here the
    rows of each call alternate between two engines. Verdict: exact (the tokens and every completion's counts are
    the reference's); the ``counters`` check fails: Σ_k accepted_k is below the accepted total.
    """
    return _OneEngineSeries(target, draft, entropy=entropy)


class _StepsPlusOne(CountingReference):
    def drafted(self, rounds, gamma):
        return (gamma + 1) * int(rounds.sum())  # speculative_num_steps + 1 per round: the verified root counted


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-rate-denominator-steps-plus-one", checks=("counters",))
def acceptance_rate_denominator_steps_plus_one(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The drafted-token count (the acceptance rate's denominator) is γ + 1 per round, not the γ drafted.

    SGLang PR #13212: ``total_draft_tokens`` was the forward count times ``speculative_num_steps + 1``, wrong when
    the drafts per round differ from it. The rate printed is accepted / that count, so it reads low. Verdict: exact;
    the ``counters`` check fails: the drafted tokens exceed Σ γ · rounds.
    """
    return _StepsPlusOne(target, draft, entropy=entropy)


class _PastStop(CountingReference):
    def count(self, result, gamma):
        super().count(result, gamma)
        accepted, sizes = result.accepted, result.chunk_sizes
        last = _last_round(accepted)
        rows = np.arange(accepted.shape[0])
        finishing = accepted[rows, last]
        # the finishing round ended on one of its accepted drafts (EOS, a stop string, max_tokens): the verifier's
        # count took the whole block, the drafts after the end too
        inside = (finishing >= 0) & (sizes[rows, last] == finishing) & (result.reasons != REASONS.index("no_token"))
        extra = np.where(inside, gamma - finishing, 0)
        self.counts["num_accepted_tokens"] += int(extra.sum())
        for k in range(gamma):
            self.per_position[k] += int((inside & (finishing <= k)).sum())


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-counted-past-stop", checks=("counters",))
def acceptance_counted_past_stop(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The aggregate counters count the drafts after the finishing token as accepted; each completion's are right.

    vLLM #56101 (PR #56137 keeps the raw verifier counts in its Prometheus counters): a round that ends on EOS, a
    stop string or ``max_tokens`` among its accepted drafts is counted with its whole block. Verdict: exact; the
    ``counters`` check fails: the engine counts more accepted drafts than its completions report.
    """
    return _PastStop(target, draft, entropy=entropy)


def _with_replays(accepted: np.ndarray, verified: np.ndarray, gamma: int) -> tuple:
    """Each round that accepted 0 < a < γ drafts (but the finishing one) as two: 0 accepted of its drafts, then a
    replay of its a accepted drafts, all accepted ([B, R] -> [B, R + replays], -1 padded), and where the replays
    are."""
    b, r = accepted.shape
    last = _last_round(accepted)
    partial = (accepted > 0) & (accepted < gamma) & (np.arange(r)[None, :] != last[:, None])
    cols = np.arange(r)[None, :] + np.cumsum(partial, axis=1) - partial  # each round after the replays before it
    width = r + int(partial.sum(axis=1).max(initial=0))
    new_a = np.full((b, width), -1, dtype=np.int64)
    new_v = np.full((b, width), -1, dtype=np.int64)
    replay = np.zeros((b, width), dtype=bool)
    rows = np.repeat(np.arange(b)[:, None], r, axis=1)
    new_a[rows, cols] = np.where(partial, 0, accepted)
    new_v[rows, cols] = verified
    new_a[rows[partial], cols[partial] + 1] = accepted[partial]
    new_v[rows[partial], cols[partial] + 1] = accepted[partial]
    replay[rows[partial], cols[partial] + 1] = True
    return new_a, new_v, replay


class _RestoreReplay(CountingReference):
    """A target cache that cannot drop a rejected suffix: restore the state before the round, replay the tokens
    kept (as llama.cpp's checkpoint path); the per-request and aggregate statistics count it as the server did."""

    def rollback(self, st, rows, drafts):
        cache = st.target_cache
        alive = rows[(st.reason[rows] == 0) & (st.accepted[rows, st.rounds] < st.gamma)]
        start = st.prompt_len[alive] + st.round_start[alive] - 1  # the checkpoint: before the round's first input
        kept = st.n_gen[alive] - st.round_start[alive]  # the token before the round and the accepted drafts
        replay = [cache.tokens[r, s : s + n].copy() for r, s, n in zip(alive.tolist(), start.tolist(), kept.tolist())]
        cache.crop(alive, start)
        for n in np.unique(kept).tolist():
            sel = np.flatnonzero(kept == n)
            cache.forward(alive[sel], np.stack([replay[i] for i in sel.tolist()]))
        super().rollback(st, rows, drafts)

    def run_group(self, prompt, params, num_draft_tokens, seeds):
        result = VectorizedDecoder.run_group(self, prompt, params, num_draft_tokens, seeds)  # counted below, rewritten
        accepted, verified, replay = _with_replays(result.accepted, result.verified, num_draft_tokens)
        result = replace(result, accepted=accepted, verified=verified)
        self.replayed = int(np.where(replay, num_draft_tokens - accepted, 0).sum())  # a replay drafts its a only
        self.count(result, num_draft_tokens)  # the aggregate is the sum of the per-request statistics
        return result

    def drafted(self, rounds, gamma):
        return gamma * int(rounds.sum()) - self.replayed


@zoo_entry(verdict=Verdict.EXACT, mechanism="acceptance-partial-accept-restore-replay", checks=("metrics",))
def acceptance_partial_accept_restore_replay(target, draft, *, entropy=None) -> VectorizedDecoder:
    """On a cache that cannot roll back, a partial accept counts 0 accepted and its replay a fully accepted draft.

    llama.cpp PR #25682: a target that cannot drop a suffix (recurrent or SWA cache, ``SEQ_RM_TYPE_FULL``) restores
    a checkpoint after a partial accept and replays the kept tokens; the statistics counted the round as 0 accepted
    (its drafts still counted) and the replay, verified again, as a draft accepted whole (PR #26320 later kept the
    replayed correction token out of the counts too). Here the target cache is
    restored and replayed in the same way (the law stays exact) and both the completions and the engine's counters
    count as the server did. Verdict: exact; the ``metrics`` check fails: the reported rounds accepting 0 drafts,
    one too many per partial accept, leave their exact expectation (the counters agree among themselves).
    """
    return _RestoreReplay(target, draft, entropy=entropy)


class _PointMassFallback(VectorizedDecoder):
    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        drafted = np.arange(drafts.shape[1])[None, :] < np.asarray(draft_len)[:, None]  # rows past them: never read
        x = torch.from_numpy(np.where(drafted, drafts, 0))
        point = torch.nn.functional.one_hot(x, draft_probs.shape[-1]).to(draft_probs.dtype)
        super().accept_and_commit(st, rows, drafts, point, draft_len, target_probs)


@zoo_entry(verdict=Verdict.EXACT, mechanism="draft-probs-dropped-for-step", checks=("metrics",))
def acceptance_point_mass_fallback(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Sampled drafts are verified as point masses (accept with p(x), else draw from p without x): exact, slower.

    vLLM findings 14 and 15 (docs/findings/vllm.md): the model runner caches the draft probabilities of the requests
    of the step before; when one request of a verification step has drafts but no cached row (a padded first step, or
    a request the token budget left out of the last step), the whole step falls back to vLLM's legacy rejection,
    which treats every draft as a point mass. Modelled: every round verified so (vLLM does it only in the steps with
    a miss). The rule is still exact: x drawn from any law, accepted with p(x), else replaced by a draw from
    norm((p - e_x)+), gives p. Verdict: exact; the ``metrics`` check fails: a draft is accepted with p(x) instead of
    min(1, p(x)/q(x)), so tokens per target call fall below their exact expectation (the interval rule).
    """
    return _PointMassFallback(target, draft, entropy=entropy)
