"""Block verification (Sun et al. 2024, arXiv 2403.10444): lossless in the joint law of the block, for any chain
draft family, probabilistic or deterministic.

With drafts x_1..x_L (L ≤ γ), w_0 = 1 and w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)), the stop weight of position
i < L is h_i = Z_i / (Z_i + 1 - w_i) with Z_i = Σ_x [w_i p_{i+1}(x) - q_{i+1}(x)]_+ (1 where that is 0/0), and
h_L = w_L. One coin per position (keyed ACCEPT); τ is the last position whose coin is below its weight (0 if none).
The round commits x_1..x_τ and then a draw from [w_τ p_{τ+1} - q_{τ+1}]_+ normalised (τ < L) or the bonus
p_{L+1} (keyed TARGET at the token's position). The block is cut at a draft that finishes the request (then τ = L
commits nothing more) and before a target row without mass (τ = L then ends the request with ``no_token``).
A token-wise rule cannot tell these laws apart per position: only the joint law of the block is preserved.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.reference.chain_families import FamilyChainDecoder
from specverify.reference.finish import NO_TOKEN, finish_codes, stop_step
from specverify.sampling import Purpose, keyed_uniforms, residual_probs, sample_from_uniforms

__all__ = ["BlockDecoder"]


_ROUND = 2**32  # key offset per round start (positions stay far below it)


class BlockDecoder(FamilyChainDecoder):
    """The vectorized reference with block verification (any chain draft family; ``sample`` fast path).

    Drafts and coins are keyed by (position, round start): a block consumes them past its stop point τ, and τ
    depends on them, so the next round, which starts inside that span, must not reuse them (keyed by position
    alone, the law is biased; the chain rule never looks past its first rejection)."""

    def uniforms(self, st, rows, offset, purpose) -> torch.Tensor:
        if purpose not in (Purpose.DRAFT, Purpose.ACCEPT):
            return super().uniforms(st, rows, offset, purpose)
        start = st.round_start[rows]
        return torch.from_numpy(keyed_uniforms(st.seeds[rows], start + offset + (start + 1) * _ROUND, purpose))

    def block_length(self, st, rows, drafts, draft_len, target_probs) -> tuple:
        """(L [n], finished [n]: draft L ends the request, no_token [n]: the row after draft L has no mass)."""
        gamma = st.gamma
        dead = (target_probs.sum(-1) <= 0).numpy()  # [n, γ+1]
        first_dead = np.where(dead.any(1), dead.argmax(1), gamma + 1)
        fin = np.full(rows.size, gamma + 1, dtype=np.int64)
        sstate = st.sstate[rows].copy()
        for k in range(gamma):
            count = st.n_gen[rows] + k + 1
            hit, sstate = stop_step(st.stops, sstate, drafts[:, k], count, st.params)
            code = finish_codes(drafts[:, k], hit, count, st.params, self.vocab.eos_token_id)
            fin = np.where((code != 0) & (fin > gamma), k + 1, fin)
        before = np.minimum(draft_len, first_dead)
        finished = fin <= before
        return np.where(finished, fin, before), finished, ~finished & (first_dead <= draft_len)

    def draft_token_probs(self, drafts, draft_probs) -> torch.Tensor:  # int [n, γ], [n, γ, V] -> [n, γ]
        """q_i(x_i): the probability of each draft under the law that drew it."""
        return draft_probs.gather(2, torch.from_numpy(drafts)[..., None])[..., 0]

    def block_weights(self, drafts, draft_probs, target_probs, size) -> tuple:  # -> w [n, γ+1], h [n, γ+1]
        n, gamma = drafts.shape
        x = torch.from_numpy(drafts)[..., None]
        p_x = target_probs[:, :gamma].gather(2, x)[..., 0]
        q_x = self.draft_token_probs(drafts, draft_probs)
        ratio = torch.where(q_x > 0, p_x / q_x.clamp_min(1e-300), torch.zeros_like(p_x))
        w = torch.ones((n, gamma + 1), dtype=torch.float64)
        for i in range(1, gamma + 1):
            w[:, i] = torch.clamp(w[:, i - 1] * ratio[:, i - 1], max=1.0)
        h = torch.ones_like(w)
        for i in range(1, gamma):
            z = (w[:, i : i + 1] * target_probs[:, i] - draft_probs[:, i]).clamp_min(0).sum(-1)
            denom = z + 1.0 - w[:, i]
            h[:, i] = torch.where(denom > 0, z / denom.clamp_min(1e-300), torch.ones_like(z))
        last = torch.from_numpy(size)
        h[torch.arange(n), last] = w[torch.arange(n), last]
        return w, h

    def stop_residual(self, target_row, draft_row, weight) -> torch.Tensor:  # [m, V], [m, V], [m] -> [m, V]
        return residual_probs(weight[:, None] * target_row, draft_row)

    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs) -> None:
        n, gamma = rows.size, st.gamma
        size, finished, no_token = self.block_length(st, rows, drafts, draft_len, target_probs)
        w, h = self.block_weights(drafts, draft_probs, target_probs, size)
        tau = np.zeros(n, dtype=np.int64)
        for i in range(1, gamma + 1):
            coin = self.uniforms(st, rows, i - 1, Purpose.ACCEPT)
            tau = np.where((coin < h[:, i]).numpy() & (i <= size), i, tau)
        for k in range(gamma):
            take = np.flatnonzero(tau > k)
            if take.size:
                self.commit(st, rows[take], drafts[take, k])
        end = tau == size
        self.finish(st, rows[end & no_token], NO_TOKEN)
        draw = np.flatnonzero(~(end & (finished | no_token)))
        if draw.size:
            at = torch.from_numpy(tau[draw])
            target_row = target_probs[torch.from_numpy(draw), at]
            bonus = torch.from_numpy(end[draw])[:, None]
            draft_row = draft_probs[torch.from_numpy(draw), at.clamp(max=gamma - 1)]
            row = torch.where(bonus, target_row, self.stop_residual(target_row, draft_row, w[draw, at]))
            u = self.uniforms(st, rows[draw], tau[draw], Purpose.TARGET)
            self.commit(st, rows[draw], sample_from_uniforms(row, u).numpy())
        committed = tau.copy()
        committed[draw] += 1
        self.store_round(st, rows, tau, size, committed)
