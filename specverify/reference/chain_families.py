"""Chain verification for every draft family (docs/design.md; the families of ``specverify.oracles.drafts``).

The draft object is duck-typed: its ``new_batch_cache`` returns a cache with ``propose(rows, k, token)`` (the raw
logits of draft position k given the token before it) besides ``forward`` / ``crop`` / ``lengths``; an AR toy model
has none and is drafted as in the vectorized reference. The acceptance ratio divides by the law each candidate was
actually drawn from given the candidates before it, whatever the family.

Deterministic drafts (n-gram, point masses) use the *sampler-match* rule: draw the target's own token at each
position and accept while it equals the draft; the first mismatch is emitted. Its law equals the ratio rule's
(accept with probability p(x), else a draw from p without x), and certification says so.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.reference.vectorized import VectorizedDecoder, _State
from specverify.sampling import Purpose, sample_from_uniforms

__all__ = ["FamilyChainDecoder", "sync_cache"]


def sync_cache(cache, st: _State, rows: np.ndarray) -> None:
    """Make ``cache`` hold exactly the committed tokens but the last (fed first next round): crop what it holds
    beyond, forward what it lacks (a family cache stores no drafts, so it may lack a whole round)."""
    keep = st.prompt_len[rows] + st.n_gen[rows] - 1
    stored = cache.lengths[rows]
    cache.crop(rows, np.minimum(stored, keep))
    missing = keep - np.minimum(stored, keep)
    for count in np.unique(missing[missing > 0]).tolist():
        sel = rows[missing == count]
        start = cache.lengths[sel] - st.prompt_len[sel]  # generated index of the first missing token
        cols = start[:, None] + np.arange(count)
        cache.forward(sel, st.out[sel[:, None], cols])


class FamilyChainDecoder(VectorizedDecoder):
    """The vectorized reference for any chain draft family: AR, parallel heads, semi-AR Markov, MTP chain, n-gram.

    ``decoder(requests)`` and ``decoder.sample(request, n)`` as :class:`VectorizedDecoder` (docs/adapters.md).
    """

    def __init__(self, target, draft, *, entropy=None):
        super().__init__(target, draft, entropy=entropy)
        self.family = getattr(draft, "family", "ar")
        self.deterministic = self.family == "ngram"

    def draft_step(self, st: _State, rows: np.ndarray, k: int, feed: np.ndarray) -> torch.Tensor:  # -> [n, V]
        if hasattr(st.draft_cache, "propose"):
            return st.draft_cache.propose(rows, k, feed)
        return super().draft_step(st, rows, k, feed)

    def rollback(self, st: _State, rows: np.ndarray, drafts: np.ndarray) -> None:
        alive = rows[st.reason[rows] == 0]
        if alive.size:
            sync_cache(st.target_cache, st, alive)
            sync_cache(st.draft_cache, st, alive)

    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs) -> None:
        if not self.deterministic:
            return super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)
        return self.sampler_match(st, rows, drafts, draft_len, target_probs)

    def sampler_match(self, st, rows, drafts, draft_len, target_probs) -> None:
        """Each position: the target's own draw (keyed TARGET); accepted while it equals the draft."""
        live = np.ones(rows.size, dtype=bool)
        accepted = np.zeros(rows.size, dtype=np.int64)
        verified = np.zeros(rows.size, dtype=np.int64)
        committed = np.zeros(rows.size, dtype=np.int64)
        for k in range(st.gamma + 1):
            sel, p_row = self.live_rows(st, rows, live, target_probs, k)
            if sel is None:
                break
            tok = sample_from_uniforms(p_row, self.uniforms(st, rows[sel], k, Purpose.TARGET)).numpy()
            match = (draft_len[sel] > k) & (tok == drafts[sel, np.minimum(k, st.gamma - 1)])
            accepted[sel[match]] += 1
            verified[sel[draft_len[sel] > k]] += 1
            self.commit_step(st, rows, sel, tok, ~match, live, committed)
        self.store_round(st, rows, accepted, verified, committed)
