"""Toy models whose law is fully known, with the cache API decoders must use (docs/design.md, the cache API).

A toy model's "KV" entry at a position is a 64-bit hash of the whole prefix up to that position, computed from the
previous entry and the new token — like attention KV, it depends on everything stored before it. The next-token
logits are a function of the last entry only. A decoder that leaves a rejected token in its cache, or crops the
wrong amount, reads a different entry and so a different law (a random table row: TV ≈ 0.3–0.6 from the right one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.oracles.toy_hash import (  # noqa: F401 (step_kv and _mix are this module's API too)
    _M1,
    _M2,
    _ROOT_KV,
    _STEP,
    _mix,
    _mix_in_place,
    _prefix_kv,
    step_kv,
)

__all__ = [
    "Vocab",
    "make_vocab",
    "ToyModel",
    "ToyCache",
    "BatchCache",
    "random_target",
    "draft_near",
    "draft_copy",
    "TOKEN_STRINGS",
    "TABLE_ROWS",
]

# Strings chosen so stop strings span tokens ("ab" = "a" + "b", " b" = " " + "b") and overlap.
TOKEN_STRINGS = ("a", "b", "ab", " ", "ba", "c", "b ", "aa", "ca", "bc", "  ", "cab", "d", "bd", "da")
TABLE_ROWS = 4096


@dataclass(frozen=True)
class Vocab:
    """Token strings by id; ``eos_token_id`` has text "". Token 0 is a real token."""

    strings: tuple[str, ...]
    eos_token_id: int

    def __post_init__(self):
        check(len(self.strings) >= 2, f"strings={self.strings!r} must hold at least 2 tokens (one of them EOS).")
        check(
            0 <= self.eos_token_id < len(self.strings) and self.strings[self.eos_token_id] == "",
            f"eos_token_id={self.eos_token_id!r} must index a token with text ''.",
        )

    @property
    def size(self) -> int:
        return len(self.strings)

    def text(self, tokens: Sequence[int]) -> str:
        return "".join(self.strings[t] for t in tokens)

    def check_tokens(self, tokens: Sequence[int], name: str = "tokens") -> None:
        size = len(self.strings)
        if all(type(t) is int and 0 <= t < size for t in tokens):  # the common case, without building a list
            return
        bad = [t for t in tokens if not (isinstance(t, (int, np.integer)) and 0 <= t < self.size)]
        check(not bad, f"{name}={tuple(tokens)!r} holds ids {bad[:5]!r} outside the vocabulary [0, {self.size}).")


def make_vocab(size: int) -> Vocab:
    """``size - 1`` toy strings (ids 0..size-2) and EOS as the last id."""
    check(
        isinstance(size, int) and 2 <= size <= len(TOKEN_STRINGS) + 1,
        f"size={size!r} must be an int in [2, {len(TOKEN_STRINGS) + 1}].",
    )
    return Vocab(strings=TOKEN_STRINGS[: size - 1] + ("",), eos_token_id=size - 1)


@dataclass(frozen=True, eq=False)
class ToyModel:
    """A deterministic toy language model over ``vocab``.

    Its logits after a prefix are row ``hash(prefix, seed) mod TABLE_ROWS`` of a table whose rows are permutations
    of evenly spaced levels (spacing ``scale * spacing``) plus a small jitter, so no two tokens are nearer than
    the spacing allows (docs/design.md margins). ``base`` and ``mix`` make a draft at a controlled distance:
    probs = (1 - mix) * base + mix * own. ``zero_rate`` sets that fraction of tokens to probability 0 per row
    (never the row's most likely token).
    """

    vocab: Vocab
    seed: int
    scale: float = 1.0
    spacing: float = 0.7
    base: Optional["ToyModel"] = None
    mix: float = 1.0
    zero_rate: float = 0.0
    eos_bias: float = 0.0
    tie_rate: float = 0.0
    _table: torch.Tensor = field(init=False, repr=False)
    _probs: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self):
        check(isinstance(self.seed, int) and self.seed >= 0, f"seed={self.seed!r} must be an int >= 0.")
        check(self.scale > 0 and np.isfinite(self.scale), f"scale={self.scale!r} must be a finite number > 0.")
        check(0 <= self.mix <= 1, f"mix={self.mix!r} must lie in [0, 1] (0 = exact copy of base).")
        check(0 <= self.zero_rate < 1, f"zero_rate={self.zero_rate!r} must lie in [0, 1).")
        check(0 <= self.tie_rate <= 1, f"tie_rate={self.tie_rate!r} must lie in [0, 1] (0 = no exact ties).")
        check(self.base is None or self.base.vocab == self.vocab, "base must share this model's vocab.")
        object.__setattr__(self, "_table", self._build_table())
        object.__setattr__(self, "_probs", torch.softmax(self._table, -1))

    def _build_table(self) -> torch.Tensor:
        rng = np.random.default_rng(self.seed)
        vocab = self.vocab.size
        levels = self.spacing * np.arange(vocab, dtype=np.float64)
        order = np.argsort(rng.random((TABLE_ROWS, vocab)), axis=1)
        table = levels[order] + rng.uniform(-0.15, 0.15, (TABLE_ROWS, vocab)) * self.spacing
        table[:, self.vocab.eos_token_id] += self.eos_bias
        # centred, not max-normalised: logits straddle 0, so a CTRL repetition penalty (divide positive, multiply
        # negative) can demote the top token, as it does in real models
        logits = torch.from_numpy(self.scale * (table - table.mean(1, keepdims=True)))
        if self.zero_rate > 0:
            drop = torch.from_numpy(rng.random((TABLE_ROWS, vocab)) < self.zero_rate)
            drop &= logits < logits.max(1, keepdim=True).values  # never the row's most likely token
            logits = logits.masked_fill(drop, float("-inf"))
        if self.tie_rate > 0:
            logits = _tied(logits, np.random.default_rng([self.seed, 1]), self.tie_rate)
        return logits

    # --- the pure function the oracle uses
    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """Float64 [B, V]: next-token logits after each full token history (pure; no cache)."""
        check(len(prefixes) > 0, "prefixes must hold at least one history.")
        kv = np.empty(len(prefixes), dtype=np.uint64)
        for row, prefix in enumerate(prefixes):
            self.vocab.check_tokens(prefix, "prefix")
            check(len(prefix) >= 1, "each prefix must hold at least one token.")
            kv[row] = _prefix_kv(int(t) for t in prefix)
        return self.head(kv)

    # --- the pieces caches use
    def head(self, kv: np.ndarray) -> torch.Tensor:
        """Logits [B, V] read from the last KV entry of each row."""
        with np.errstate(over="ignore"):
            rows = torch.from_numpy((_mix_in_place(kv ^ np.uint64(self.seed)) % np.uint64(TABLE_ROWS)).astype(np.int64))
        if self.base is None or self.mix == 1.0:
            return self._table[rows]
        probs = torch.lerp(self.base.head_probs(kv), self._probs[rows], self.mix)
        if self.zero_rate > 0:
            probs = torch.where(torch.isfinite(self._table[rows]), probs, torch.zeros_like(probs))
        return torch.log(probs)

    @property
    def groups_by_table(self) -> bool:
        """Whether ``head_distinct`` groups states by table row (cheap: a look-up over TABLE_ROWS), not by entry."""
        return (self.base is None or self.mix == 1.0) and type(self).head is ToyModel.head

    def head_distinct(self, kv: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:  # uint64 [n] -> [m, V], int [n]
        """``head(kv)`` once per distinct state: (logits [m, V], index [n]) with ``head(kv) == logits[index]``.
        A table model's logits are its table row, so rows reaching the same table row share one entry; otherwise
        (a mixed draft, a subclass with its own ``head``) one entry per distinct KV entry."""
        if self.groups_by_table:
            with np.errstate(over="ignore"):
                rows = (_mix_in_place(kv ^ np.uint64(self.seed)) % np.uint64(TABLE_ROWS)).astype(np.int64)
            present = np.zeros(TABLE_ROWS, dtype=bool)
            present[rows] = True
            used = np.flatnonzero(present)
            lookup = np.empty(TABLE_ROWS, dtype=np.int64)
            lookup[used] = np.arange(used.size)
            return self._table[torch.from_numpy(used)], lookup[rows]
        states, index = np.unique(kv, return_inverse=True)
        return self.head(states), index.reshape(-1)

    def head_probs(self, kv: np.ndarray) -> torch.Tensor:
        """softmax(head(kv)), from a precomputed table where possible."""
        if self.base is None or self.mix == 1.0:
            with np.errstate(over="ignore"):
                rows = (_mix_in_place(kv ^ np.uint64(self.seed)) % np.uint64(TABLE_ROWS)).astype(np.int64)
            return self._probs[torch.from_numpy(rows)]
        return torch.softmax(self.head(kv), -1)

    @property
    def root_kv(self) -> np.uint64:
        """The KV entry before the first token (what a cache holds when it is empty)."""
        return _ROOT_KV

    def step_kv(self, prev: np.ndarray, tokens: np.ndarray) -> np.ndarray:  # uint64 [n], int [n] -> uint64 [n]
        """The KV entry after each of ``tokens`` given the entry before it (part of the cache API: a paged pool
        stores these entries in its own slots; ``head`` turns the last one into logits)."""
        return step_kv(prev, tokens)

    def new_cache(self) -> "ToyCache":
        return ToyCache(self)

    def new_batch_cache(self, batch: int, capacity: int) -> "BatchCache":
        return BatchCache(self, batch, capacity)


class ToyCache:
    """One request's cache: ``forward(tokens)`` stores them and returns the logits after each; ``crop(n)`` keeps
    the first n entries. Logits come only from what is stored."""

    def __init__(self, model: ToyModel):
        self.model = model
        self.tokens: list[int] = []
        self.kv: list[np.uint64] = []

    def __len__(self) -> int:
        return len(self.tokens)

    def forward(self, tokens: Sequence[int]) -> torch.Tensor:  # [k] -> [k, V]
        check(len(tokens) > 0, "forward() needs at least one token.")
        self.model.vocab.check_tokens(tokens)
        prev = self.kv[-1] if self.kv else self.model.root_kv
        out = np.empty(len(tokens), dtype=np.uint64)
        for i, tok in enumerate(tokens):
            prev = step_kv(np.array([prev], dtype=np.uint64), np.array([tok]))[0]
            out[i] = prev
        self.tokens.extend(int(t) for t in tokens)
        self.kv.extend(out)
        return self.model.head(out)

    def crop(self, length: int) -> None:
        check(
            isinstance(length, int) and 0 <= length <= len(self.tokens),
            f"length={length!r} must lie in [0, {len(self.tokens)}] (the stored length).",
        )
        del self.tokens[length:], self.kv[length:]


def _grouped(entries: np.ndarray, groups: np.ndarray, tokens: np.ndarray, vocab: int) -> Optional[tuple]:
    """(distinct entries [m], index [n]) by (group, token), or None where a group's rows hold different entries."""
    codes = groups.astype(np.int64) * vocab + tokens
    size = int(codes.max(initial=0)) + 1
    present = np.zeros(size, dtype=bool)
    present[codes] = True
    values = np.flatnonzero(present)
    lookup = np.empty(size, dtype=np.int64)
    lookup[values] = np.arange(values.size)
    index = lookup[codes]
    states = np.empty(values.size, dtype=np.uint64)
    states[index] = entries  # one of each group's rows writes its entry
    if not np.array_equal(states[index], entries):
        return None
    return states, index


class BatchCache:
    """A cache over B rows in arrays (for vectorized decoders): ``kv`` uint64 [B, capacity], ``lengths`` [B]."""

    def __init__(self, model: ToyModel, batch: int, capacity: int):
        check(isinstance(batch, int) and batch >= 1, f"batch={batch!r} must be an int >= 1.")
        check(isinstance(capacity, int) and capacity >= 1, f"capacity={capacity!r} must be an int >= 1.")
        self.model = model
        self.tokens = np.zeros((batch, capacity), dtype=np.int64)
        self.kv = np.zeros((batch, capacity), dtype=np.uint64)
        self.lengths = np.zeros(batch, dtype=np.int64)

    def forward(self, rows: np.ndarray, tokens: np.ndarray) -> torch.Tensor:  # [n], [n, k] -> [n, k, V]
        n, k = tokens.shape
        return self.model.head(self._store(rows, tokens).reshape(-1)).reshape(n, k, -1)

    def forward_distinct(
        self, rows: np.ndarray, tokens: np.ndarray, groups: Optional[np.ndarray] = None
    ) -> tuple[torch.Tensor, np.ndarray]:
        """``forward`` with the logits once per distinct state: (logits [m, V], index int64 [n, k]) such that
        ``forward(rows, tokens)[i, j] == logits[index[i, j]]``. [n], [n, k] -> [m, V], [n, k].

        ``groups`` (int [n], one token per row): a hint that rows of equal ``groups`` held the same entry before
        ``tokens``, e.g. the index this method returned for them one token earlier. Rows are then grouped by
        (group, token) in O(n) instead of by sorting their new entries; the hint is checked against the stored
        entries (every row must hold its group's entry) and ignored where it does not hold, so the logits always
        come from what each row stores. Used where the model has no table to group by (a mixed draft)."""
        new = self._store(rows, tokens)  # [n, k]
        if groups is not None and tokens.shape[1] == 1 and not self.model.groups_by_table:
            grouped = _grouped(new[:, 0], groups, tokens[:, 0], self.model.vocab.size)
            if grouped is not None:
                states, index = grouped
                return self.model.head(states), index[:, None]
        logits, index = self.model.head_distinct(new.reshape(-1))
        return logits, index.reshape(tokens.shape)

    def fill(self, rows: np.ndarray, tokens: np.ndarray) -> None:  # [n], [k]
        """Store the same ``tokens`` (a prompt) in the empty rows ``rows``: ``forward(rows, tile(tokens))`` without
        the logits, the entries computed once for all rows."""
        check(
            bool(np.all(self.lengths[rows] == 0)),
            "fill() stores a prompt in empty rows: crop the rows to 0 first, or use forward().",
        )
        if rows.size == 0 or len(tokens) == 0:
            return
        one = self._store(rows[:1], np.asarray(tokens, dtype=np.int64)[None, :])  # [1, k]
        k = one.shape[1]
        if rows[-1] - rows[0] == rows.size - 1 and bool(np.all(np.diff(rows) == 1)):
            rows = slice(int(rows[0]), int(rows[-1]) + 1)  # consecutive rows (a whole group): a slice, ~10x cheaper
        self.kv[rows, :k] = one
        self.tokens[rows, :k] = tokens
        self.lengths[rows] = k

    def _store(self, rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:  # [n], [n, k] -> uint64 [n, k]
        """Append ``tokens`` to each row's entries; returns the new entries."""
        n, k = tokens.shape
        start = self.lengths[rows]
        if int((start + k).max(initial=0)) > self.kv.shape[1]:
            raise InvalidArgument(f"forward() past capacity={self.kv.shape[1]!r}; open the cache with more room.")
        first = rows * self.kv.shape[1] + start  # flat index of each row's first new entry: flat indexing is
        kv, stored = self.kv.reshape(-1), self.tokens.reshape(-1)  # ~2x cheaper than [rows, cols] pairs
        if int(start.min(initial=1)) > 0:
            prev = kv[first - 1]
        else:
            prev = np.where(start > 0, kv[np.where(start > 0, first - 1, first)], _ROOT_KV)
        if k == 1:  # a draft step: 1-D indices, no [n, 1] copies
            new = step_kv(prev, tokens[:, 0])
            kv[first], stored[first] = new, tokens[:, 0]
            self.lengths[rows] = start + 1
            return new[:, None]
        out = np.empty((n, k), dtype=np.uint64)
        for j in range(k):
            prev = step_kv(prev, tokens[:, j])
            out[:, j] = prev
        flat = first[:, None] + np.arange(k)
        kv[flat] = out
        stored[flat] = tokens
        self.lengths[rows] = start + k
        return out

    def crop(self, rows: np.ndarray, lengths: np.ndarray) -> None:
        check(
            bool(np.all(lengths <= self.lengths[rows])) and bool(np.all(lengths >= 0)),
            "crop() lengths must lie in [0, stored length] per row.",
        )
        self.lengths[rows] = lengths


# ------------------------------------------------------------------------------------------------------ families


def random_target(
    vocab: Vocab, *, seed: int, scale: float = 1.0, zero_rate: float = 0.0, eos_bias: float = 0.0, tie_rate: float = 0.0
) -> ToyModel:
    """A random target; larger ``scale`` is more deterministic (scale 8: near-deterministic rows); ``tie_rate`` of
    its rows have their two largest logits exactly equal (greedy ties: the lowest index wins)."""
    return ToyModel(vocab=vocab, seed=seed, scale=scale, zero_rate=zero_rate, eos_bias=eos_bias, tie_rate=tie_rate)


def _tied(logits: torch.Tensor, rng: np.random.Generator, rate: float) -> torch.Tensor:  # [R, V] -> [R, V]
    """``logits`` with the runner-up of a ``rate`` share of rows raised to exactly the row's maximum: the tie the
    canonical argmax breaks by the lowest index. Its own generator: the rows without a tie are unchanged."""
    rows = torch.from_numpy(np.flatnonzero(rng.random(logits.shape[0]) < rate))
    top = logits[rows].topk(2, dim=-1)
    out = logits.clone()
    out[rows, top.indices[:, 1]] = top.values[:, 0]
    return out


def draft_near(target: ToyModel, *, distance: float, seed: int, zero_rate: float = 0.0, scale: float = 1.0) -> ToyModel:
    """A draft mixing ``target`` with an independent random model: TV(target, draft) = distance × TV(target,
    independent row) per row (≈ 0.3–0.6 × distance). ``zero_rate`` > 0 gives q(x) = 0 where p(x) > 0."""
    check(0 <= distance <= 1, f"distance={distance!r} must lie in [0, 1] (0 = exact copy).")
    return ToyModel(vocab=target.vocab, seed=seed, scale=scale, base=target, mix=float(distance), zero_rate=zero_rate)


def draft_copy(target: ToyModel) -> ToyModel:
    """A draft equal to the target (every draft accepted)."""
    return ToyModel(vocab=target.vocab, seed=target.seed + 1, base=target, mix=0.0)
