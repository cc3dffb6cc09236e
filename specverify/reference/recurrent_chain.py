"""The vectorized chain reference on a recurrent target: the state checkpointed per verified position, and restored.

A recurrent target (``specverify.oracles.recurrent``) keeps one state per request that every fed token advances;
no crop undoes a rejected draft's input. Each round's verification feeds ``[last, x_0 .. x_{γ-1}]`` and keeps the
state after each of those γ + 1 positions (``forward_states``); after the accept walk the row is put back to the
state after its last kept token (``restore``), which is the state after the accepted prefix: the next round feeds
the recovered (or bonus) token on top of it. Everything else is the vectorized reference's round.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.reference.vectorized import VectorizedDecoder

__all__ = ["RecurrentChainDecoder"]


class RecurrentChainDecoder(VectorizedDecoder):
    """Exact chain speculative sampling whose target may be recurrent (declares ``recurrent``); on a target with
    a KV cache it is the vectorized reference (its per-row path)."""

    capabilities = VectorizedDecoder.capabilities | {"recurrent"}

    def target_forward(self, st, rows, feed) -> torch.Tensor:  # int [n, γ+1] -> [n, γ+1, V]
        cache = st.target_cache
        if not hasattr(cache, "forward_states"):  # a KV cache: cropped as usual
            return super().target_forward(st, rows, feed)
        if not hasattr(st, "checkpoints"):  # the state after each verified position, and the length before them
            st.checkpoints = np.zeros((st.b, feed.shape[1]), dtype=np.uint64)
            st.fed_from = np.zeros(st.b, dtype=np.int64)
        st.fed_from[rows] = cache.lengths[rows]
        logits, st.checkpoints[rows] = cache.forward_states(rows, feed)
        return logits

    def rollback(self, st, rows, drafts) -> None:
        if hasattr(st.target_cache, "forward_states"):
            alive = rows[st.reason[rows] == 0]
            self.restore_target(st, alive, st.prompt_len[alive] + st.n_gen[alive] - 1)
        super().rollback(st, rows, drafts)  # the draft's KV cache; the target's is at its kept length already

    def restore_target(self, st, rows, keep) -> None:
        """Put ``rows`` back to the state after ``keep`` tokens: the checkpoint of their last kept position."""
        cache = st.target_cache
        back = rows[keep < cache.lengths[rows]]  # a rejection (after full acceptance every fed token is kept)
        kept = keep[keep < cache.lengths[rows]]
        cache.restore(back, st.checkpoints[back, kept - st.fed_from[back] - 1], kept)
