"""Zoo entries whose law is exact: controls, and real bugs that docs/design.md's rules call exact."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._hooks import RowAware
from specverify.zoo._registry import zoo_entry

__all__ = [
    "reference",
    "never_speculate",
    "drop_bonus",
    "draft_bonus_kv_missing",
    "seed_ignored",
    "drafter_kv_rewound_one_round",
    "placeholder_fed_to_drafter",
]


@zoo_entry(verdict=Verdict.EXACT, mechanism="reference-unchanged")
def reference(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The vectorized reference decoder itself, unchanged.

    Verdict: exact (it is the specification, tested against ``exact_law`` in ``tests/reference``).
    """
    return VectorizedDecoder(target, draft, entropy=entropy)


class _NeverSpeculate(VectorizedDecoder):
    capabilities = VectorizedDecoder.capabilities - {"accepted"}

    def propose(self, st, rows):
        drafts, draft_probs, _ = super().propose(st, rows)
        return drafts, draft_probs, np.zeros(rows.size, dtype=np.int64)  # every draft treated as missing

    def __call__(self, requests):
        return [replace(c, accepted=None) for c in super().__call__(requests)]

    def sample(self, request, n, start=0):
        return replace(super().sample(request, n, start), accepted=None)


@zoo_entry(verdict=Verdict.EXACT, mechanism="speculation-off")
def never_speculate(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Drafts are computed and thrown away: every round is one plain target draw.

    Verdict: exact. With no draft, position 0 of each round is the bonus position, and the bonus is an inverse-CDF
    draw from the processed target row: plain target sampling. It does not report ``accepted`` (docs/design.md: "a
    decoder that never speculates is exact, and says so" — the certificate says "speculation not observed").
    """
    return _NeverSpeculate(target, draft, entropy=entropy)


class _DropBonus(RowAware):
    def bonus(self, target_row, u):
        st, _, k = self.draw
        if k == st.gamma:
            return torch.full(u.shape, -1, dtype=torch.int64)  # the bonus is drawn but never emitted
        return super().bonus(target_row, u)

    def commit(self, st, rows, tokens):
        keep = tokens >= 0
        super().commit(st, rows[keep], tokens[keep])

    def accept_and_commit(self, st, rows, *args):
        super().accept_and_commit(st, rows, *args)
        st.chunks[rows, st.rounds] = st.n_gen[rows] - st.round_start[rows]


@zoo_entry(verdict=Verdict.EXACT, mechanism="bonus-dropped")
def drop_bonus(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After every draft is accepted the round ends without the bonus token (the seed's wasteful-but-exact case).

    Verdict: exact. Given the committed prefix, accepting draft k is the exact rule's event and emits a token with
    the target's conditional law; stopping after γ accepted drafts decides nothing about later tokens, which the next
    round draws afresh from the same committed history (caches cropped to it). Only speed is lost.
    """
    return _DropBonus(target, draft, entropy=entropy)


class _DraftBonusKVMissing(VectorizedDecoder):
    def rollback(self, st, rows, drafts):
        alive = rows[st.reason[rows] == 0]
        if alive.size == 0:
            return
        keep = st.prompt_len[alive] + st.n_gen[alive] - 1
        for cache in (st.target_cache, st.draft_cache):
            cache.crop(alive, np.minimum(cache.lengths[alive], keep))
        short = alive[st.target_cache.lengths[alive] < keep]  # mutation: only the target cache is topped up
        if short.size:
            st.target_cache.forward(short, st.out[short, st.n_gen[short] - 2][:, None])


@zoo_entry(verdict=Verdict.EXACT, mechanism="draft-kv-missing-bonus-entry")
def draft_bonus_kv_missing(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After full acceptance the draft cache never receives the last accepted draft's entry (vLLM #3951).

    The draft then proposes from a context missing a token, so its proposals get worse.

    Verdict: exact. A stale draft cache changes only q, and each draft is still sampled from the very q the
    acceptance ratio divides by (docs/design.md, "Draft law": a draft that uses another law is not a bug; mixing laws
    is). The target cache is right, so every target row is the true conditional. Only the acceptance rate drops.
    """
    return _DraftBonusKVMissing(target, draft, entropy=entropy)


class _SeedIgnored(VectorizedDecoder):
    def run_group(self, prompt, params, num_draft_tokens, seeds):
        fresh = self._rng.integers(0, 2**63, size=len(seeds), dtype=np.int64).astype(np.uint64)
        return super().run_group(prompt, params, num_draft_tokens, fresh)


@zoo_entry(verdict=Verdict.EXACT, mechanism="request-seed-ignored")
def seed_ignored(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Per-request seeds are ignored: every request, seeded or not, draws from fresh entropy (vLLM #6038, #6743).

    Verdict: exact. Each request (and each of ``sample``'s draws) gets an independent fresh seed, so every request's
    law and the joint law of independent requests are exact. What breaks is reproducibility, which docs/design.md keeps
    out of the law: the certifier reports it as its own check, and only ``--require-reproducible`` makes it count.
    """
    return _SeedIgnored(target, draft, entropy=entropy)


class _DrafterRewound(VectorizedDecoder):
    def rollback(self, st, rows, drafts):
        super().rollback(st, rows, drafts)
        alive = rows[st.reason[rows] == 0]
        start = st.prompt_len[alive] + st.round_start[alive] - 1  # the draft cache's length when the round began
        st.draft_cache.crop(alive, np.minimum(st.draft_cache.lengths[alive], start))  # one round too far


@zoo_entry(verdict=Verdict.EXACT, mechanism="drafter-kv-rewound-one-round-too-far", checks=("metrics",))
def drafter_kv_rewound_one_round(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After each round the drafter's cache is rewound to where the round began: one round too far (mlxcel #994).

    The drafter then proposes from a context missing the round's committed tokens (but the last), so few drafts
    are accepted.

    Verdict: exact. Only q changes, and each draft is still sampled from the q the ratio divides by (docs/design.md,
    "Draft law"); the target cache is right. The law is exact and the acceptance rate low: the metrics check fails
    (the acceptance it reports lies below its exact expectation's interval), the verdict does not.
    """
    return _DrafterRewound(target, draft, entropy=entropy)


class _PlaceholderToDrafter(VectorizedDecoder):
    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)
        if not hasattr(st, "rejected"):
            st.rejected = np.zeros(st.b, dtype=bool)
        st.rejected[rows] = st.accepted[rows, st.rounds] < st.verified[rows, st.rounds]

    def draft_step(self, st, rows, k, feed):
        if k == 0 and hasattr(st, "rejected"):  # the rejected slot's placeholder -1, read as the last id
            feed = np.where(st.rejected[rows], self.vocab.size - 1, feed)
        return super().draft_step(st, rows, k, feed)


@zoo_entry(verdict=Verdict.EXACT, mechanism="rejected-placeholder-fed-to-drafter", checks=("metrics",))
def placeholder_fed_to_drafter(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After a rejection the drafter is fed the placeholder id -1 (read as the last id) in place of the recovered
    token (TensorRT-LLM PR #15233).

    The rejected slot's placeholder reaches the drafter's input, so its cache holds a wrong entry from then on.

    Verdict: exact. As with any stale draft context, each draft is sampled from the q its ratio divides by and the
    target's cache is right: the law is exact, the acceptance rate lower, below its exact expectation's interval (the
    metrics check fails). In the engine the id -1 could also read out of bounds; the toy's embedding wraps it.
    """
    return _PlaceholderToDrafter(target, draft, entropy=entropy)
