"""Reference decoders with one extra seam each, so that a zoo entry stays a few-line mutation (private).

Each class here still *is* the exact reference (no entry is built on a behaviour change in this file): it only
exposes a finer hook than ``VectorizedDecoder`` has, and the zoo overrides that hook.
"""

from __future__ import annotations

import numpy as np

from specverify.reference.vectorized import VectorizedDecoder
from specverify.sampling import Purpose

__all__ = ["RowAware", "ParamsPerPosition", "DraftLaws", "DeferredFinish"]


class RowAware(VectorizedDecoder):
    """Lets ``recover`` / ``bonus`` know which request rows and position they draw for.

    ``accept_and_commit`` asks ``uniforms(st, rows, k, Purpose.TARGET)`` for exactly the rows of a recovered or bonus
    draw right before calling ``recover`` / ``bonus``; this records ``(st, rows, k)`` as ``self.draw``, and
    ``self.position_of[row]`` is a row's index into this round's ``target_probs`` / ``draft_probs``.
    """

    def uniforms(self, st, rows, offset, purpose):
        if purpose == Purpose.TARGET:
            self.draw = (st, rows, offset)
        return super().uniforms(st, rows, offset, purpose)

    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        self.position_of = np.full(st.b, -1, dtype=np.int64)
        self.position_of[rows] = np.arange(rows.size)
        self.round_probs = (target_probs, draft_probs)
        super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)


# The reference itself exposes these seams (``verify_params``, ``draft_laws``): entries subclass it directly.
ParamsPerPosition = DraftLaws = VectorizedDecoder


class DeferredFinish(VectorizedDecoder):
    """``commit`` that holds back the finish reasons in ``deferred`` and ``end_of_round`` that decides them.

    ``self.pending[row]`` is the held-back reason code (0: none). The reference defers nothing.
    """

    deferred: frozenset = frozenset()

    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        self.pending = np.zeros(st.b, dtype=np.int64)
        super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)
        self.end_of_round(st, rows)

    def commit(self, st, rows, tokens) -> None:
        super().commit(st, rows, tokens)
        # a reason held back at the length cap would let the next commit write past max_tokens: keep it
        held = np.isin(st.reason[rows], list(self.deferred)) & (st.n_gen[rows] < st.params.max_tokens)
        first = held & (self.pending[rows] == 0)
        self.pending[rows[first]] = st.reason[rows[first]]
        st.reason[rows[held]] = 0

    def end_of_round(self, st, rows) -> None:
        """Finish the rows still running with their held-back reason."""
        done = rows[(st.reason[rows] == 0) & (self.pending[rows] != 0)]
        st.reason[done] = self.pending[done]
