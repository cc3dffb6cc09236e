"""A toy paged KV pool shared by requests, with a minimal prefix cache.

``BlockPool`` owns fixed-size blocks of (token, KV entry) slots, a free list and per-block refcounts.
``PagedCache`` is one request's view of one model: a block table mapping positions to slots. A toy model's KV entry
is a hash of the whole prefix (the model's ``step_kv``: docs/design.md, the cache API), so a slot holding the wrong
entry changes every logit read after it — exactly the failure a real engine's paged KV bug produces.

Prefix cache (seed, 正确性契约 6: a provisional block is never visible to other requests): only *committed, full*
blocks are published, keyed by the model and every token of the prefix up to the block's end. A request that
prefills a prefix shares published blocks (refcount); a block whose refcount drops to 0 stays published on the free
list until it is reallocated (evicted). Writing into a shared block copies it first (copy-on-write); writing into an
unshared published block unpublishes it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Sequence

import numpy as np
import torch

from specverify.errors import SpecverifyError, check

__all__ = ["OutOfBlocks", "BlockPool", "PagedCache"]


class OutOfBlocks(SpecverifyError):
    """The pool has too few free blocks; the operation changed nothing (cache and pool are as before)."""


class BlockPool:
    """``num_blocks`` blocks of ``block_size`` slots: storage, free list (least recently freed first), refcounts
    and the prefix-cache index (key -> block). Shared by every ``PagedCache`` opened on it.

    Examples
    --------
    >>> pool = BlockPool(num_blocks=4, block_size=2)
    >>> block = pool.allocate()
    >>> pool.num_free, pool.refcount(block)
    (3, 1)
    >>> pool.release(block); pool.num_free
    4
    """

    def __init__(self, num_blocks: int, block_size: int):
        check(
            isinstance(num_blocks, int) and not isinstance(num_blocks, bool) and num_blocks >= 1,
            f"num_blocks={num_blocks!r} must be an int >= 1.",
        )
        check(
            isinstance(block_size, int) and not isinstance(block_size, bool) and block_size >= 1,
            f"block_size={block_size!r} must be an int >= 1 (slots per block).",
        )
        self.num_blocks, self.block_size = num_blocks, block_size
        self.tokens = np.zeros((num_blocks, block_size), dtype=np.int64)
        self.kv = np.zeros((num_blocks, block_size), dtype=np.uint64)
        self._refcount = [0] * num_blocks
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._block_of: dict = {}  # prefix key -> published block
        self._key_of: dict = {}  # published block -> prefix key

    @property
    def num_free(self) -> int:
        """Blocks with refcount 0 (published ones among them can still be revived by a prefix hit)."""
        return len(self._free)

    @property
    def num_published(self) -> int:
        return len(self._key_of)

    def refcount(self, block: int) -> int:
        return self._refcount[block]

    def is_published(self, block: int) -> bool:
        return block in self._key_of

    def reserve(self, count: int) -> None:
        """Raise ``OutOfBlocks`` unless ``count`` blocks are free (callers check before changing anything)."""
        if count > len(self._free):
            raise OutOfBlocks(
                f"count={count!r} blocks needed but num_free={len(self._free)!r} of "
                f"num_blocks={self.num_blocks!r}: free finished requests' caches or open the pool "
                "with more blocks."
            )

    def allocate(self) -> int:
        """A fresh block with refcount 1; evicts the least recently freed block's published prefix."""
        self.reserve(1)
        block, _ = self._free.popitem(last=False)
        self.unpublish(block)
        self._refcount[block] = 1
        return block

    def acquire(self, block: int) -> None:
        """Share ``block`` (a prefix hit): refcount + 1, reviving it from the free list."""
        if self._refcount[block] == 0:
            del self._free[block]
        self._refcount[block] += 1

    def release(self, block: int) -> None:
        check(self._refcount[block] > 0, f"block={block!r} has refcount 0: it was released twice.")
        self._refcount[block] -= 1
        if self._refcount[block] == 0:
            self._free[block] = None

    def lookup(self, key) -> Optional[int]:
        """The published block holding prefix ``key``, or None (changes nothing)."""
        return self._block_of.get(key)

    def publish(self, block: int, key) -> None:
        """Make a committed full block findable by ``key``; a key already published keeps its block."""
        if key not in self._block_of and block not in self._key_of:
            self._block_of[key] = block
            self._key_of[block] = key

    def unpublish(self, block: int) -> None:
        key = self._key_of.pop(block, None)
        if key is not None:
            del self._block_of[key]


class PagedCache:
    """One request's KV cache for ``model`` in ``pool``: ``forward`` appends provisional entries and returns logits,
    ``commit`` marks a prefix committed (publishing its full blocks), ``prefill`` appends committed tokens reusing
    published blocks, ``crop`` keeps a prefix and releases whole blocks, ``free`` releases everything.

    Examples
    --------
    >>> from specverify.oracles import make_vocab, random_target
    >>> cache = PagedCache(BlockPool(8, 2), random_target(make_vocab(4), seed=0))
    >>> cache.forward([0, 1, 2]).shape, cache.block_table
    (torch.Size([3, 4]), (0, 1))
    >>> cache.crop(2); cache.tokens, cache.block_table
    ([0, 1], (0,))
    """

    def __init__(self, pool: BlockPool, model):
        check(isinstance(pool, BlockPool), f"pool={pool!r} must be a BlockPool.")
        check(
            all(hasattr(model, a) for a in ("vocab", "head", "root_kv", "step_kv")),
            f"model={model!r} must be a toy model with the paged cache API (vocab, head, root_kv, step_kv; "
            "docs/design.md). Checkpoint models do not provide it: use the vectorized reference.",
        )
        self.pool, self.model = pool, model
        self._table: list[int] = []
        self._length = 0
        self._committed = 0
        self._keys: list = []  # prefix keys of the committed full blocks, in order

    # ------------------------------------------------------------------------------------------- reading
    def __len__(self) -> int:
        return self._length

    @property
    def block_table(self) -> tuple[int, ...]:
        return tuple(self._table)

    @property
    def num_committed(self) -> int:
        return self._committed

    @property
    def tokens(self) -> list[int]:
        return self._gather(self.pool.tokens).tolist()

    @property
    def kv(self) -> np.ndarray:  # uint64 [len]
        return self._gather(self.pool.kv)

    def entries(self) -> tuple[tuple[int, int], ...]:
        """(token, KV entry) per stored position, read through the block table (block ids play no part)."""
        return tuple(zip(self.tokens, (int(v) for v in self.kv)))

    def _gather(self, storage: np.ndarray) -> np.ndarray:
        if not self._table:
            return storage[:0, 0].copy()
        return storage[self._table].reshape(-1)[: self._length].copy()

    # ------------------------------------------------------------------------------------------- writing
    def forward(self, tokens: Sequence[int]) -> torch.Tensor:  # [k] -> logits [k, V]
        """Append ``tokens`` as provisional entries; row i holds the logits after ``tokens[: i + 1]``."""
        tokens = self._checked(tokens)
        self.pool.reserve(self._blocks_to_allocate(len(tokens)))
        return self.model.head(self._append(tokens))

    def prefill(self, tokens: Sequence[int]) -> None:
        """Append committed ``tokens``, sharing published full blocks of the same prefix where they exist."""
        tokens = self._checked(tokens)
        check(
            self._committed == self._length,
            f"prefill() after {self._length - self._committed} provisional entries: prefill appends committed "
            "tokens, so commit() or crop() the provisional ones first.",
        )
        hits = self._prefix_hits(tokens)
        revived = sum(self.pool.refcount(block) == 0 for block, _ in hits)
        self.pool.reserve(revived + self._blocks_to_allocate(len(tokens)) - len(hits))
        for block, key in hits:
            self.pool.acquire(block)
            self._table.append(block)
            self._keys.append(key)
        self._length += self.pool.block_size * len(hits)
        rest = tokens[self.pool.block_size * len(hits) :]
        if rest:
            self._append(rest)
        self.commit()

    def commit(self, length: Optional[int] = None) -> None:
        """Mark the first ``length`` entries (default: all) committed and publish the full blocks among them."""
        length = self._length if length is None else length
        check(
            isinstance(length, int) and self._committed <= length <= self._length,
            f"length={length!r} must lie in [{self._committed}, {self._length}] (committed .. stored); "
            "crop() to drop committed entries.",
        )
        self._committed = length
        size = self.pool.block_size
        for i in range(len(self._keys), length // size):
            parent = self._keys[-1] if self._keys else ("root", self.model)
            key = (parent, tuple(self.pool.tokens[self._table[i]].tolist()))
            self.pool.publish(self._table[i], key)
            self._keys.append(key)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` entries; release blocks that hold none of them."""
        check(
            isinstance(length, int) and not isinstance(length, bool) and 0 <= length <= self._length,
            f"length={length!r} must be an int in [0, {self._length}] (the stored length).",
        )
        keep = -(-length // self.pool.block_size)
        for block in reversed(self._table[keep:]):
            self.pool.release(block)
        del self._table[keep:]
        self._length = length
        self._committed = min(self._committed, length)
        del self._keys[self._committed // self.pool.block_size :]

    def free(self) -> None:
        """Release every block (the request finished)."""
        self.crop(0)

    # ------------------------------------------------------------------------------------------- internals
    def _checked(self, tokens) -> list[int]:
        tokens = list(tokens)
        check(len(tokens) > 0, f"tokens={tokens!r} must hold at least one token.")
        self.model.vocab.check_tokens(tokens)
        return [int(t) for t in tokens]

    def _needs_copy(self) -> bool:
        """Whether the next write lands in a partly filled block that another cache shares."""
        return self._length % self.pool.block_size != 0 and self.pool.refcount(self._table[-1]) > 1

    def _blocks_to_allocate(self, count: int) -> int:
        blocks = -(-(self._length + count) // self.pool.block_size)
        return blocks - len(self._table) + int(self._needs_copy())

    def _prefix_hits(self, tokens: list[int]) -> list:
        """Published blocks continuing this cache's committed prefix with ``tokens`` (whole blocks only)."""
        size, hits = self.pool.block_size, []
        if self._length % size != 0:
            return hits
        parent = self._keys[-1] if self._keys else ("root", self.model)
        for start in range(0, len(tokens) - size + 1, size):
            key = (parent, tuple(tokens[start : start + size]))
            block = self.pool.lookup(key)
            if block is None:
                break
            hits.append((block, key))
            parent = key
        return hits

    def _make_last_block_writable(self) -> None:
        if self._length % self.pool.block_size == 0:
            return  # the next write opens a fresh block
        block = self._table[-1]
        if self.pool.refcount(block) > 1:  # copy-on-write: the other holders keep the old contents
            copy = self.pool.allocate()
            self.pool.tokens[copy], self.pool.kv[copy] = self.pool.tokens[block], self.pool.kv[block]
            self.pool.release(block)
            self._table[-1] = copy
        else:
            self.pool.unpublish(block)  # ours alone, but its published contents are about to change

    def _append(self, tokens: list[int]) -> np.ndarray:  # -> uint64 [k], capacity already reserved
        self._make_last_block_writable()
        size = self.pool.block_size
        prev = self._last_kv()
        out = np.empty(len(tokens), dtype=np.uint64)
        for i, tok in enumerate(tokens):
            if self._length % size == 0:
                self._table.append(self.pool.allocate())
            prev = self.model.step_kv(prev, np.array([tok]))
            block, slot = self._table[-1], self._length % size
            self.pool.tokens[block, slot], self.pool.kv[block, slot] = tok, prev[0]
            out[i] = prev[0]
            self._length += 1
        return out

    def _last_kv(self) -> np.ndarray:  # uint64 [1]
        if self._length == 0:
            return np.array([self.model.root_kv], dtype=np.uint64)
        block, slot = divmod(self._length - 1, self.pool.block_size)
        return np.array([self.pool.kv[self._table[block], slot]], dtype=np.uint64)
