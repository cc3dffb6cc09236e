"""A toy target with a sliding attention window: its next-token law reads only the last ``window`` tokens.

``WindowToyModel`` is a :class:`~specverify.oracles.models.ToyModel` whose KV entry at a position is the hash of the
last ``window`` tokens up to it (not of the whole prefix), so outputs longer than the window make the context wrap.
Its cache, ``WindowBatchCache``, stores every token and computes each new entry from the stored tokens, so cropping
on rollback is exact; an engine's ring buffer of ``window`` slots is not (``specverify.zoo.window``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.oracles.models import BatchCache, ToyModel, Vocab
from specverify.oracles.toy_hash import _ROOT_KV, _prefix_kv, step_kv

__all__ = ["WindowToyModel", "WindowBatchCache", "window_target", "window_entries"]


@dataclass(frozen=True, eq=False)
class WindowToyModel(ToyModel):
    """A toy target whose logits after a prefix depend on its last ``window`` tokens only."""

    window: int = 4

    def __post_init__(self):
        check(isinstance(self.window, int) and self.window >= 1, f"window={self.window!r} must be an int >= 1.")
        super().__post_init__()

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """Float64 [B, V]: next-token logits after the last ``window`` tokens of each history (pure; no cache)."""
        check(len(prefixes) > 0, "prefixes must hold at least one history.")
        kv = np.empty(len(prefixes), dtype=np.uint64)
        for row, prefix in enumerate(prefixes):
            self.vocab.check_tokens(prefix, "prefix")
            check(len(prefix) >= 1, "each prefix must hold at least one token.")
            kv[row] = _prefix_kv(int(t) for t in prefix[-self.window :])
        return self.head(kv)

    def new_cache(self) -> "WindowBatchCache":
        """A one-row :class:`WindowBatchCache` (the single-request ``ToyCache`` reads a prefix chain, not a window)."""
        raise InvalidArgument(
            "a WindowToyModel has no single-request cache: use new_batch_cache(batch, capacity), a WindowBatchCache."
        )

    def new_batch_cache(self, batch: int, capacity: int) -> "WindowBatchCache":
        return WindowBatchCache(self, batch, capacity)


def window_entries(windows: np.ndarray) -> np.ndarray:  # int [n, w] -> uint64 [n]
    """The KV entry of each row of ``windows`` (its last tokens, oldest first): the chain from the root over them."""
    entry = np.full(windows.shape[0], _ROOT_KV, dtype=np.uint64)
    for j in range(windows.shape[1]):
        entry = step_kv(entry, windows[:, j])
    return entry


class WindowBatchCache(BatchCache):
    """A batch cache of a :class:`WindowToyModel`: every token stored, each entry the hash of the last ``window``
    stored tokens up to it (so a crop is exact). No distinct-state path: its entries are not a chain."""

    def __getattribute__(self, name):
        if name == "forward_distinct":  # the reference's distinct path groups chain entries: not these
            raise AttributeError(name)
        return super().__getattribute__(name)

    def _store(self, rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:  # [n], [n, k] -> uint64 [n, k]
        n, k = tokens.shape
        start = self.lengths[rows]
        check(int((start + k).max(initial=0)) <= self.kv.shape[1], "forward() past the cache's capacity.")
        out = np.empty((n, k), dtype=np.uint64)
        for j in range(k):
            pos = start + j
            self.tokens[rows, pos] = tokens[:, j]
            out[:, j] = self.entries(rows, pos)
            self.kv[rows, pos] = out[:, j]
        self.lengths[rows] = start + k
        return out

    def entries(self, rows: np.ndarray, pos: np.ndarray) -> np.ndarray:  # [n], [n] -> uint64 [n]
        """The entry at ``pos`` of each row from the tokens it stores at ``pos - window + 1 .. pos``."""
        w = self.model.window
        span = pos[:, None] + np.arange(1 - w, 1)[None, :]  # [n, w], oldest first
        short = span < 0
        windows = np.where(short, 0, self.tokens[rows[:, None], np.maximum(span, 0)])
        entries = window_entries(windows)
        for length in np.unique(pos[short.any(1)] + 1):  # fewer than w tokens so far: the chain over those only
            sel = (pos + 1 == length) & short.any(1)
            entries[sel] = window_entries(windows[sel][:, w - length :])
        return entries


def window_target(vocab: Vocab, *, seed: int, window: int, eos_bias: float = 0.0) -> WindowToyModel:
    """A random target with a sliding window of ``window`` tokens."""
    return WindowToyModel(vocab=vocab, seed=seed, eos_bias=eos_bias, window=window)
