"""Zoo entries that compute or read the wrong verify row: a multi-row kernel that reads row 0's candidate, rows past a
cap left stale, a stale row after a partial accept, the boundary token duplicated in the target's context (issue 45's
field reports; the tree walked against a shifted logits slice is ``specverify.zoo.drafts``).

A verify call over ``[last, x_0 .. x_{γ-1}]`` computes γ + 1 rows: row r is the target's law after ``feed[r]``. The
entries change which tokens or rows a round reads, so the target law of later positions is computed from a context
the committed tokens never had: at temperature 0 that moves argmaxes (a toy model's wrong context is a random table
row), so each is approximate.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._registry import zoo_entry

__all__ = [
    "later_rows_read_first_candidate",
    "verify_rows_capped_at_four",
    "stale_row_after_partial_accept",
    "boundary_token_duplicated",
]

MULTI_ROW_FROM = 3  # the multi-row kernel serves γ >= 3; γ 1 and 2 take an unrolled path without the bug
ROW_CAP = 4  # drafts whose KV the verifier writes


def _forward_in_place_of(cache, rows, feed, wrong) -> torch.Tensor:
    """Logits of ``wrong`` (what the kernel computed) while ``cache`` ends up holding ``feed`` (what it stored)."""
    stored = cache.lengths[rows].copy()
    logits = cache.forward(rows, wrong)
    cache.crop(rows, stored)
    cache.forward(rows, feed)
    return logits


class _FirstCandidate(VectorizedDecoder):
    def target_forward(self, st, rows, feed):
        if st.gamma < MULTI_ROW_FROM:
            return super().target_forward(st, rows, feed)
        wrong = feed.copy()
        wrong[:, 2:] = feed[:, 1:2]  # rows after the first read row 0's candidate x_0 (swapped dimensions)
        return _forward_in_place_of(st.target_cache, rows, feed, wrong)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="multi-row-verify-reads-first-candidate", tv=0.21)
def later_rows_read_first_candidate(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A multi-row verify kernel (γ ≥ 3) gives every row after the first row 0's candidate x_0 as input (ds4 PR #358).

    The kernel's token and row dimensions were swapped, so rows 2 .. γ are computed after x_0 repeated instead of
    after x_1 .. x_{γ-1}; γ 1 and 2 take another path and are exact (the bug was latent there).

    Verdict: approximate. At temperature 0 a round that accepts x_0 and x_1 judges x_2 against the argmax of a wrong
    context: greedy output differs at γ ≥ 3 (the greedy scenarios send γ 1 to 4).
    """
    return _FirstCandidate(target, draft, entropy=entropy)


class _CappedRows(VectorizedDecoder):
    def target_forward(self, st, rows, feed):
        if feed.shape[1] <= ROW_CAP + 1:
            return super().target_forward(st, rows, feed)
        if not hasattr(st, "slots"):  # the verifier's slot buffer: zeros until a round writes it
            st.slots = np.zeros((st.b, st.out.shape[1] + int(st.prompt_len.max()) + st.gamma + 1), dtype=np.int64)
        start = st.prompt_len[rows] + st.n_gen[rows] - 1  # slot of feed[:, 0] (the last committed token)
        span = start[:, None] + np.arange(feed.shape[1])[None, :]
        wrong = feed.copy()
        wrong[:, ROW_CAP + 1 :] = st.slots[rows[:, None], span[:, ROW_CAP + 1 :]]  # never rewritten: stale
        st.slots[rows[:, None], span[:, : ROW_CAP + 1]] = feed[:, : ROW_CAP + 1]
        return super().target_forward(st, rows, wrong)  # the cache keeps the stale entries too


@zoo_entry(
    verdict=Verdict.APPROXIMATE, mechanism="verify-state-capped-at-four-rows", showcases=("gamma_sweep",), tv=0.073
)
def verify_rows_capped_at_four(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The verifier writes the state of at most four drafts; drafts past the cap keep a stale entry (SGLang PR #32183).

    With γ ≥ 5 the KV slots of x_4 .. x_{γ-1} hold what an earlier round wrote there (zeros at first), so rows 5 .. γ
    of the verify, and every later round that keeps those entries, read a wrong context. γ ≤ 4 is exact: a matrix
    whose largest γ is 4 or 5 with short outputs never sees it (``greedy-gamma-sweep``, γ 5 to 8, does).

    Verdict: approximate. At temperature 0 a round that accepts five drafts judges the sixth against a wrong
    argmax: greedy output differs.
    """
    return _CappedRows(target, draft, entropy=entropy)


class _StaleRow(VectorizedDecoder):
    def verify(self, st, rows, drafts):
        target_probs = super().verify(st, rows, drafts)
        if hasattr(st, "stale_row"):
            stale = torch.from_numpy(st.stale[rows])
            target_probs[stale, 0] = st.stale_row[torch.from_numpy(rows)][stale]  # row 0 from last round's buffer
        return target_probs

    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)
        if not hasattr(st, "stale_row"):
            st.stale_row = torch.zeros((st.b, self.vocab.size), dtype=torch.float64)
            st.stale = np.zeros(st.b, dtype=bool)
        accepted = st.accepted[rows, st.rounds]
        partial = (accepted > 0) & (accepted < draft_len) & (st.reason[rows] == 0)
        st.stale[rows] = partial
        at = torch.from_numpy(np.minimum(accepted, st.gamma))
        st.stale_row[torch.from_numpy(rows)] = target_probs[torch.arange(rows.size), at]  # the row of the rejection


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="stale-row-after-partial-accept", tv=0.079)
def stale_row_after_partial_accept(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After a partial accept the next round's first row is the previous round's row at the rejection (ds4 #750).

    The row that decided the rejection (the law the recovered token came from) is read again as the law of the next
    position: the next round judges its first draft, or draws its first token, from a row one position stale.

    Verdict: approximate. At temperature 0 that row is one-hot at the recovered token y, so the next round emits y
    again: greedy output differs after every partial accept.
    """
    return _StaleRow(target, draft, entropy=entropy)


class _BoundaryDuplicated(VectorizedDecoder):
    def rollback(self, st, rows, drafts):
        super().rollback(st, rows, drafts)
        accepted, verified = st.accepted[rows, st.rounds], st.verified[rows, st.rounds]
        dup = rows[(accepted > 0) & (accepted < verified) & (st.reason[rows] == 0)]
        if dup.size:  # the last accepted draft written again at the accept boundary
            st.target_cache.forward(dup, st.out[dup, st.n_gen[dup] - 2][:, None])


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="committed-token-duplicated-at-boundary", tv=0.17)
def boundary_token_duplicated(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After a partial accept the last accepted token is committed to the target's context twice (imp #667).

    The accept boundary's token is written once as an accepted draft and once more when the round's tokens are
    committed, so every later target row reads a context with that token doubled.

    Verdict: approximate. At temperature 0 the rows after the first partial accept come from a wrong context:
    greedy output differs.
    """
    return _BoundaryDuplicated(target, draft, entropy=entropy)
