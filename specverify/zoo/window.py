"""A zoo entry of the sliding-window axis: a ring buffer of ``window`` slots that a rollback cannot restore.

On a target with a sliding window (``specverify.oracles.window``), the reference's cache keeps every token and
crops exactly. An engine that keeps only ``window`` slots per request overwrites, when it verifies γ + 1 tokens, the
slots of the oldest tokens still inside the next positions' windows; a rejection crops the length but cannot bring
those tokens back, so once the output wraps the window the next rows read the rejected drafts' tokens.
"""

from __future__ import annotations

import numpy as np

from specverify.enums import Verdict
from specverify.oracles.window import WindowBatchCache, WindowToyModel, window_entries
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._registry import zoo_entry

__all__ = ["window_ring_not_restored"]


class _RingCache(WindowBatchCache):
    """``window`` token slots per row: position p lives in slot p mod window, whatever wrote it last."""

    def __init__(self, model, batch, capacity):
        super().__init__(model, batch, capacity)
        self.ring = np.zeros((batch, model.window), dtype=np.int64)

    def fill(self, rows, tokens):
        self.forward(rows, np.tile(np.asarray(tokens, dtype=np.int64), (rows.size, 1)))

    def entries(self, rows, pos):
        w = self.model.window
        self.ring[rows, pos % w] = self.tokens[rows, pos]
        span = pos[:, None] + np.arange(1 - w, 1)[None, :]
        if (span < 0).any():  # the window is not full yet: nothing was overwritten
            return super().entries(rows, pos)
        return window_entries(self.ring[rows[:, None], span % w])  # slots as they are now


class _RingTarget:
    """The target, opening ring caches where it has a sliding window (other targets are untouched)."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def new_batch_cache(self, batch, capacity):
        if isinstance(self._model, WindowToyModel):
            return _RingCache(self._model, batch, capacity)
        return self._model.new_batch_cache(batch, capacity)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="window-ring-not-restored-on-rollback")
def window_ring_not_restored(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A sliding-window target's cache is a ring of ``window`` slots, which a rollback after rejected drafts cannot
    restore.

    Verifying γ + 1 tokens overwrites the slots of the oldest tokens of the window; after a rejection the length is
    cropped but those slots keep the rejected drafts' tokens, so once the output is longer than the window the next
    rows read a context the committed tokens never had. Targets without a window are untouched (exact there): only a
    scenario on a windowed target with outputs longer than the window (``sliding-window``,
    ``greedy-sliding-window``) sees it.

    Verdict: approximate. At temperature 0 the rows after a rejection past the window's wrap come from a wrong
    context: greedy output differs.
    """
    return VectorizedDecoder(_RingTarget(target), draft, entropy=entropy)
