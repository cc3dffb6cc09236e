"""A toy target whose law depends on positions as well as tokens (a rotary-position stand-in).

A plain toy model's KV entry hashes the prefix, so a position is implied by the tokens before it and a decoder
cannot give a token a wrong position. ``PositionalToyModel`` mixes each token's position into its entry explicitly
(``step_kv(prev, tokens, positions)``), the way a rotary embedding rotates a token's key by the position it is given:
a tree verified with the wrong position per node reads a wrong law (``specverify.zoo.drafts``). Its pure
``logits(prefixes)`` gives token i the position i.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.oracles.models import BatchCache, ToyModel, Vocab
from specverify.oracles.toy_hash import _ROOT_KV, _mix, step_kv

__all__ = ["PositionalToyModel", "PositionalBatchCache", "positional_step", "positional_target"]

_POSITION = np.uint64(0xD6E8FEB86659FD93)


def positional_step(prev: np.ndarray, tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The entry after ``tokens`` at ``positions`` given the previous entries (uint64 [n], int [n], int [n])."""
    with np.errstate(over="ignore"):
        key = _mix((np.asarray(positions).astype(np.uint64) + np.uint64(1)) * _POSITION)
    return step_kv(np.asarray(prev, dtype=np.uint64) ^ key, tokens)


@dataclass(frozen=True, eq=False)
class PositionalToyModel(ToyModel):
    """A toy target whose entry at each position hashes the entry before it, the token and the position."""

    positional = True

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """Float64 [B, V]: next-token logits after each full history, token i at position i (pure; no cache)."""
        check(len(prefixes) > 0, "prefixes must hold at least one history.")
        kv = np.empty(len(prefixes), dtype=np.uint64)
        for row, prefix in enumerate(prefixes):
            self.vocab.check_tokens(prefix, "prefix")
            check(len(prefix) >= 1, "each prefix must hold at least one token.")
            entry = np.array([_ROOT_KV], dtype=np.uint64)
            for i, tok in enumerate(prefix):
                entry = positional_step(entry, np.array([tok]), np.array([i]))
            kv[row] = entry[0]
        return self.head(kv)

    def step_kv(self, prev: np.ndarray, tokens: np.ndarray, positions=None) -> np.ndarray:
        """The entry after ``tokens`` at ``positions`` (required: the position is part of the entry)."""
        if positions is None:
            raise InvalidArgument("positions=None: a PositionalToyModel's entry needs each token's position.")
        return positional_step(prev, tokens, positions)

    def new_cache(self) -> "PositionalBatchCache":
        """Refused: the single-request cache reads a prefix chain without positions."""
        raise InvalidArgument("a PositionalToyModel has no single-request cache: use new_batch_cache(batch, capacity).")

    def new_batch_cache(self, batch: int, capacity: int) -> "PositionalBatchCache":
        return PositionalBatchCache(self, batch, capacity)


class PositionalBatchCache(BatchCache):
    """A batch cache of a :class:`PositionalToyModel`: token j of a row stored at position ``length + j``. No
    distinct-state path (its entries are not the plain chain)."""

    def __getattribute__(self, name):
        if name == "forward_distinct":
            raise AttributeError(name)
        return super().__getattribute__(name)

    def _store(self, rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:  # [n], [n, k] -> uint64 [n, k]
        n, k = tokens.shape
        start = self.lengths[rows]
        check(int((start + k).max(initial=0)) <= self.kv.shape[1], "forward() past the cache's capacity.")
        prev = np.where(start > 0, self.kv[rows, np.maximum(start - 1, 0)], _ROOT_KV).astype(np.uint64)
        out = np.empty((n, k), dtype=np.uint64)
        for j in range(k):
            prev = positional_step(prev, tokens[:, j], start + j)
            out[:, j] = prev
        cols = start[:, None] + np.arange(k)
        self.kv[rows[:, None], cols] = out
        self.tokens[rows[:, None], cols] = tokens
        self.lengths[rows] = start + k
        return out


def positional_target(vocab: Vocab, *, seed: int, eos_bias: float = 0.0) -> PositionalToyModel:
    """A random target whose law depends on positions."""
    return PositionalToyModel(vocab=vocab, seed=seed, eos_bias=eos_bias)
