"""Reference decoders with one extra seam each, so that a zoo entry stays a few-line mutation (private).

Each class here still *is* the exact reference (no entry is built on a behaviour change in this file): it only
exposes a finer hook than ``VectorizedDecoder`` has, and the zoo overrides that hook.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.reference.vectorized import VectorizedDecoder
from specverify.sampling import Purpose, process_logits, sample_from_uniforms

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


class ParamsPerPosition(VectorizedDecoder):
    """``verify`` with the sampling parameters of each position given by ``verify_params(params, k, gamma)``.

    Position ``k`` of the target call verifies draft ``k`` (k < γ) or yields the bonus (k = γ). Drafts keep using
    ``law`` with the request's own parameters.
    """

    def verify_params(self, params, k: int, gamma: int):
        return params

    def law_with(self, st, params, logits, prov, num_generated) -> torch.Tensor:  # [n, V] -> [n, V]
        seen, counts, gstate = prov
        allowed = None
        if st.grammar is not None and params.grammar is not None:
            allowed = st.grammar[0][torch.from_numpy(gstate)]
        return process_logits(logits, params, seen=seen, counts=counts, num_generated=torch.from_numpy(num_generated),
                              allowed=allowed, eos_token_id=self.vocab.eos_token_id)

    def verify(self, st, rows, drafts) -> torch.Tensor:  # -> [n, γ+1, V]
        feed = np.concatenate([st.last[rows][:, None], drafts], axis=1)
        logits = st.target_cache.forward(rows, feed)
        prov = self.provisional(st, rows)
        out = []
        for k in range(st.gamma + 1):
            params = self.verify_params(st.params, k, st.gamma)
            out.append(self.law_with(st, params, logits[:, k], prov, st.n_gen[rows] + k))
            if k < st.gamma:
                prov = self.advance(st, prov, drafts[:, k])
        return torch.stack(out, dim=1)


class DraftLaws(VectorizedDecoder):
    """``propose`` that samples each draft from one law and records another for the acceptance ratio.

    ``draft_laws(st, logits, prov, num_generated)`` returns ``(sample_from, recorded)`` [n, V] each; the reference
    returns the processed draft law twice.
    """

    def draft_laws(self, st, logits, prov, num_generated):
        q = self.law(st, logits, prov, num_generated)
        return q, q

    def propose(self, st, rows):
        n, gamma = rows.size, st.gamma
        drafts = np.zeros((n, gamma), dtype=np.int64)
        draft_probs = torch.zeros((n, gamma, self.vocab.size), dtype=torch.float64)
        draft_len = np.full(n, gamma, dtype=np.int64)
        prov = self.provisional(st, rows)
        feed = st.last[rows]
        for k in range(gamma):
            logits = st.draft_cache.forward(rows, feed[:, None])[:, 0]
            sample_from, recorded = self.draft_laws(st, logits, prov, st.n_gen[rows] + k)
            tok = sample_from_uniforms(sample_from, self.uniforms(st, rows, k, Purpose.DRAFT)).numpy()
            dead = (tok < 0) & (draft_len == gamma)
            draft_len[dead] = k
            tok = np.maximum(tok, 0)
            drafts[:, k], draft_probs[:, k] = tok, recorded
            prov = self.advance(st, prov, tok)
            feed = tok
        return drafts, draft_probs, draft_len


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
