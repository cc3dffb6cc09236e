"""Toy draft families: proposals that do not come from an independent autoregressive draft (docs/design.md).

A *draft object* is what ``factory(target, draft)`` receives. It carries its ``family`` and what the family needs;
every family offers the same two faces as a toy model:

- a pure ``proposal_logits(history, drafted) -> [V]`` (float64): the raw logits of draft position
  k = ``len(drafted)`` after the committed ``history`` (prompt + generated) and the block's drafts so far. The exact
  acceptance oracle (``acceptance_rounds.py``) uses only this;
- a cache, ``new_batch_cache(batch, capacity)``, for decoders: ``forward(rows, tokens)`` stores committed tokens,
  ``crop(rows, lengths)`` rolls back, ``lengths`` per row, and ``propose(rows, k, token) -> [n, V]`` the raw logits
  of draft position k, where ``token`` is the token before that position (k = 0: the last committed token, which
  ``propose`` stores; k >= 1: draft k-1, never stored). Logits come only from what the cache stores.

Families (``DRAFT_FAMILIES``): ``ar`` (a :class:`~specverify.oracles.models.ToyModel`, whose ``family`` is "ar");
``heads`` (Medusa-like: position k's law depends only on the committed prefix and k); ``markov`` (DSpark-like
semi-autoregressive: parallel base logits plus a low-rank correction indexed by the previous draft token); ``mtp``
(one shared module applied k times, starting from the committed prefix's feature); ``ngram`` (prompt lookup over
prompt + history: point masses, possibly fewer than γ); ``tree`` (an AR draft with a tree shape, children per
depth, and a sibling rule: ``iid``, ``without-replacement`` or ``top-k``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np
import torch

from specverify.enums import DraftFamily
from specverify.errors import check
from specverify.oracles.models import BatchCache, ToyModel, step_kv

__all__ = [
    "DRAFT_FAMILIES",
    "SIBLING_RULES",
    "draft_family",
    "HeadsDraft",
    "MarkovDraft",
    "MtpDraft",
    "NgramDraft",
    "TreeDraft",
    "history_kv",
    "ngram_proposal",
]

DRAFT_FAMILIES = tuple(f.value for f in DraftFamily)
SIBLING_RULES = ("iid", "without-replacement", "top-k")
_MTP_SALT = np.uint64(0xD1B54A32D192ED03)


def draft_family(draft: object) -> str:
    """The family a draft object declares (``family`` attribute); a model without one is an AR draft."""
    family = getattr(draft, "family", "ar")
    check(family in DRAFT_FAMILIES, f"draft.family={family!r} must be one of {DRAFT_FAMILIES!r}.")
    return family


def history_kv(model: ToyModel, histories: Sequence[Sequence[int]]) -> np.ndarray:  # -> uint64 [B]
    """The last KV entry after each full history (pure: hashed from the root)."""
    out = np.empty(len(histories), dtype=np.uint64)
    for row, history in enumerate(histories):
        check(len(history) >= 1, "each history must hold at least one token.")
        h = np.array([model.root_kv], dtype=np.uint64)
        for tok in history:
            h = step_kv(h, np.array([tok]))
        out[row] = h[0]
    return out


class _Committed:
    """Committed tokens of B rows in a toy ``BatchCache`` (the KV stream the family's heads read)."""

    def __init__(self, backbone: ToyModel, batch: int, capacity: int):
        self.inner = BatchCache(backbone, batch, capacity)

    @property
    def lengths(self) -> np.ndarray:
        return self.inner.lengths

    @property
    def tokens(self) -> np.ndarray:
        return self.inner.tokens

    def forward(self, rows: np.ndarray, tokens: np.ndarray) -> torch.Tensor:  # [n], [n, k] -> [n, k, V]
        return self.inner.forward(rows, tokens)

    def crop(self, rows: np.ndarray, lengths: np.ndarray) -> None:
        self.inner.crop(rows, lengths)

    def last_kv(self, rows: np.ndarray) -> np.ndarray:  # -> uint64 [n]
        return self.inner.kv[rows, self.inner.lengths[rows] - 1]


def _check_heads(heads: tuple, what: str) -> None:
    check(len(heads) >= 1 and all(isinstance(h, ToyModel) for h in heads), f"{what} must be a tuple of ToyModels.")
    check(len({h.vocab for h in heads}) == 1, f"{what} must share one vocabulary.")


# ------------------------------------------------------------------------------------------------------ heads


@dataclass(frozen=True, eq=False)
class HeadsDraft:
    """Parallel heads (Medusa-like): head ``min(k, H-1)`` reads the committed prefix's last KV entry; the law at
    position k depends on the committed prefix and k only, never on the drafts before it."""

    family: ClassVar[str] = "heads"
    heads: tuple

    def __post_init__(self):
        _check_heads(self.heads, "heads")

    @property
    def vocab(self) -> object:
        return self.heads[0].vocab

    def head(self, k: int) -> ToyModel:
        return self.heads[min(k, len(self.heads) - 1)]

    def proposal_logits(self, history: Sequence[int], drafted: Sequence[int]) -> torch.Tensor:  # -> [V]
        return self.head(len(drafted)).head(history_kv(self.heads[0], [history]))[0]

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:  # [B, V]: position 0 after each prefix
        return self.heads[0].logits(prefixes)

    def new_batch_cache(self, batch: int, capacity: int) -> "HeadsCache":
        return HeadsCache(self, batch, capacity)


class HeadsCache(_Committed):
    def __init__(self, draft: HeadsDraft, batch: int, capacity: int):
        super().__init__(draft.heads[0], batch, capacity)
        self.draft = draft

    def propose(self, rows: np.ndarray, k: int, token: np.ndarray) -> torch.Tensor:  # [n], int, [n] -> [n, V]
        if k == 0:
            self.forward(rows, token[:, None])
        return self.draft.head(k).head(self.last_kv(rows))


# ------------------------------------------------------------------------------------------------------ markov


@dataclass(frozen=True, eq=False)
class MarkovDraft:
    """Semi-autoregressive block draft (DSpark-like): logits_k = U_k(committed prefix) + strength · W1[x_{k-1}] W2,
    parallel base logits from ``heads`` plus a rank-``rank`` correction indexed by the previous token (the last
    committed token at k = 0). ``offset`` is added to every logit: the law is unchanged, only a lower-precision
    copy of the logits sees it (real logits are tens, not units: where bf16 rounding moves probabilities)."""

    family: ClassVar[str] = "markov"
    heads: tuple
    rank: int = 2
    strength: float = 1.5
    seed: int = 0
    offset: float = 0.0
    _w: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self):
        _check_heads(self.heads, "heads")
        check(isinstance(self.rank, int) and self.rank >= 1, f"rank={self.rank!r} must be an int >= 1.")
        check(np.isfinite(self.strength), f"strength={self.strength!r} must be finite.")
        rng = np.random.default_rng(self.seed)
        size = self.vocab.size
        w = rng.normal(size=(size, self.rank)) @ rng.normal(size=(self.rank, size)) / np.sqrt(self.rank)
        object.__setattr__(self, "_w", torch.from_numpy(self.strength * w))  # [V_prev, V]

    @property
    def vocab(self) -> object:
        return self.heads[0].vocab

    def correction(self, previous: np.ndarray) -> torch.Tensor:  # int [n] -> [n, V]
        return self._w[torch.as_tensor(np.asarray(previous), dtype=torch.long)]

    def proposal_logits(self, history: Sequence[int], drafted: Sequence[int]) -> torch.Tensor:  # -> [V]
        k = len(drafted)
        base = self.heads[min(k, len(self.heads) - 1)].head(history_kv(self.heads[0], [history]))[0]
        previous = drafted[-1] if drafted else history[-1]
        return base + self.correction(np.array([previous]))[0] + self.offset

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        return torch.stack([self.proposal_logits(p, ()) for p in prefixes])

    def new_batch_cache(self, batch: int, capacity: int) -> "MarkovCache":
        return MarkovCache(self, batch, capacity)


class MarkovCache(_Committed):
    def __init__(self, draft: MarkovDraft, batch: int, capacity: int):
        super().__init__(draft.heads[0], batch, capacity)
        self.draft = draft

    def propose(self, rows: np.ndarray, k: int, token: np.ndarray) -> torch.Tensor:  # [n], int, [n] -> [n, V]
        if k == 0:
            self.forward(rows, token[:, None])
        heads = self.draft.heads
        base = heads[min(k, len(heads) - 1)].head(self.last_kv(rows))
        return base + self.draft.correction(token) + self.draft.offset


# ------------------------------------------------------------------------------------------------------ mtp


@dataclass(frozen=True, eq=False)
class MtpDraft:
    """A model-native MTP chain (GLM-5-like): one shared ``module`` applied k times. Its state starts from the
    committed prefix's feature (last KV entry, salted) and steps once per draft token."""

    family: ClassVar[str] = "mtp"
    module: ToyModel

    @property
    def vocab(self) -> object:
        return self.module.vocab

    def initial_state(self, kv: np.ndarray) -> np.ndarray:  # uint64 [n] -> uint64 [n]
        return step_kv(kv ^ _MTP_SALT, np.zeros(kv.shape, dtype=np.int64))

    def proposal_logits(self, history: Sequence[int], drafted: Sequence[int]) -> torch.Tensor:  # -> [V]
        state = self.initial_state(history_kv(self.module, [history]))
        for tok in drafted:
            state = step_kv(state, np.array([tok]))
        return self.module.head(state)[0]

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        return self.module.head(self.initial_state(history_kv(self.module, prefixes)))

    def new_batch_cache(self, batch: int, capacity: int) -> "MtpCache":
        return MtpCache(self, batch, capacity)


class MtpCache(_Committed):
    def __init__(self, draft: MtpDraft, batch: int, capacity: int):
        super().__init__(draft.module, batch, capacity)
        self.draft = draft
        self.state = np.zeros(batch, dtype=np.uint64)  # provisional chain state per row

    def propose(self, rows: np.ndarray, k: int, token: np.ndarray) -> torch.Tensor:  # [n], int, [n] -> [n, V]
        if k == 0:
            self.forward(rows, token[:, None])
            self.state[rows] = self.draft.initial_state(self.last_kv(rows))
        else:
            self.state[rows] = step_kv(self.state[rows], token)
        return self.draft.module.head(self.state[rows])


# ------------------------------------------------------------------------------------------------------ n-gram


def ngram_proposal(history: Sequence[int], *, max_ngram: int, num_tokens: int) -> tuple:
    """Prompt lookup: for n = ``max_ngram`` .. 1, the latest earlier occurrence of the history's last n tokens;
    the (up to ``num_tokens``) tokens that followed it. Empty when nothing matches."""
    history = tuple(history)
    size = len(history)
    for n in range(min(max_ngram, size - 1), 0, -1):
        suffix = history[size - n :]
        for start in range(size - n - 1, -1, -1):
            if history[start : start + n] == suffix:
                return history[start + n : start + n + num_tokens]
    return ()


def _point_masses(tokens: np.ndarray, size: int) -> torch.Tensor:  # int [n] (-1: none) -> [n, V] logits
    logits = torch.full((tokens.shape[0], size), float("-inf"), dtype=torch.float64)
    has = np.flatnonzero(tokens >= 0)
    logits[torch.from_numpy(has), torch.from_numpy(tokens[has])] = 0.0
    return logits


@dataclass(frozen=True, eq=False)
class NgramDraft:
    """A deterministic draft (n-gram / prompt lookup over prompt + history): point masses at the tokens that
    followed the latest earlier match of the history's suffix (n from ``max_ngram`` down to 1), at most
    ``max_tokens`` of them; a position without a proposal has logits all -inf (the round drafts fewer)."""

    family: ClassVar[str] = "ngram"
    vocab: object
    max_ngram: int = 3
    max_tokens: int = 8

    def __post_init__(self):
        check(isinstance(self.max_ngram, int) and self.max_ngram >= 1, f"max_ngram={self.max_ngram!r} must be >= 1.")
        check(
            isinstance(self.max_tokens, int) and self.max_tokens >= 1, f"max_tokens={self.max_tokens!r} must be >= 1."
        )

    def proposal_logits(self, history: Sequence[int], drafted: Sequence[int]) -> torch.Tensor:  # -> [V]
        k = len(drafted)
        proposal = ngram_proposal(history, max_ngram=self.max_ngram, num_tokens=self.max_tokens)
        return _point_masses(np.array([proposal[k] if k < len(proposal) else -1]), self.vocab.size)[0]

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        return torch.stack([self.proposal_logits(p, ()) for p in prefixes])

    def new_batch_cache(self, batch: int, capacity: int) -> "NgramCache":
        return NgramCache(self, batch, capacity)


class NgramCache:
    """Stores committed tokens; ``propose(rows, 0, last)`` looks the proposal up in arrays (all rows at once)."""

    def __init__(self, draft: NgramDraft, batch: int, capacity: int):
        self.draft = draft
        self.tokens = np.zeros((batch, capacity), dtype=np.int64)
        self.lengths = np.zeros(batch, dtype=np.int64)
        self.proposal = np.full((batch, draft.max_tokens), -1, dtype=np.int64)

    def forward(self, rows: np.ndarray, tokens: np.ndarray) -> None:  # [n], [n, k]
        cols = self.lengths[rows][:, None] + np.arange(tokens.shape[1])
        check(int(cols.max(initial=0)) < self.tokens.shape[1], "forward() past the cache's capacity.")
        self.tokens[rows[:, None], cols] = tokens
        self.lengths[rows] += tokens.shape[1]

    def crop(self, rows: np.ndarray, lengths: np.ndarray) -> None:
        check(bool(np.all((lengths >= 0) & (lengths <= self.lengths[rows]))), "crop() lengths out of range.")
        self.lengths[rows] = lengths

    def propose(self, rows: np.ndarray, k: int, token: np.ndarray) -> torch.Tensor:  # [n], int, [n] -> [n, V]
        if k == 0:
            self.forward(rows, token[:, None])
            self.proposal[rows] = self._lookup(rows)
        column = self.proposal[rows, k] if k < self.proposal.shape[1] else np.full(rows.size, -1)
        return _point_masses(column, self.draft.vocab.size)

    def _lookup(self, rows: np.ndarray) -> np.ndarray:  # -> int [n, max_tokens], -1 padded
        hist, size = self.tokens[rows], self.lengths[rows]
        n_rows, width = hist.shape
        found = np.full(n_rows, -1, dtype=np.int64)  # where the continuation starts
        idx = np.arange(n_rows)
        for n in range(self.draft.max_ngram, 0, -1):
            for start in range(width - n - 1, -1, -1):
                ok = (found < 0) & (start + n < size)
                for t in range(n):
                    ok &= hist[idx, start + t] == hist[idx, np.maximum(size - n + t, 0)]
                found[ok] = start + n
        out = np.full((n_rows, self.draft.max_tokens), -1, dtype=np.int64)
        for j in range(self.draft.max_tokens):
            col = found + j
            live = (found >= 0) & (col < size)
            out[live, j] = hist[idx[live], col[live]]
        return out


# ------------------------------------------------------------------------------------------------------ tree


@dataclass(frozen=True, eq=False)
class TreeDraft:
    """An AR draft ``base`` that proposes a tree: ``shape[d]`` children per node at depth d (a request's
    ``tree`` overrides it), drawn by ``siblings``: ``iid`` (independent draws from the node's law),
    ``without-replacement`` (each draw from the law renormalised without the tokens drawn before) or ``top-k``
    (the node's ``shape[d]`` most likely tokens, lower index on ties: point masses)."""

    family: ClassVar[str] = "tree"
    base: ToyModel
    shape: tuple = (2, 2, 1)
    siblings: str = "iid"

    def __post_init__(self):
        check(isinstance(self.base, ToyModel), f"base={self.base!r} must be a ToyModel (the AR draft).")
        check(
            len(self.shape) >= 1 and all(isinstance(c, int) and c >= 1 for c in self.shape),
            f"shape={self.shape!r} must be a non-empty tuple of children counts >= 1 per depth.",
        )
        check(self.siblings in SIBLING_RULES, f"siblings={self.siblings!r} must be one of {SIBLING_RULES!r}.")

    @property
    def vocab(self) -> object:
        return self.base.vocab

    def shape_for(self, num_draft_tokens: int, tree: tuple | None = None) -> tuple:
        """The shape a request uses: its own ``tree`` if given, else ``shape`` cut or padded with 1 to γ levels."""
        if tree is not None:
            return tuple(tree)
        return tuple(self.shape[:num_draft_tokens]) + (1,) * max(0, num_draft_tokens - len(self.shape))

    def proposal_logits(self, history: Sequence[int], drafted: Sequence[int]) -> torch.Tensor:  # -> [V]
        return self.base.logits([tuple(history) + tuple(drafted)])[0]

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        return self.base.logits(prefixes)

    def new_batch_cache(self, batch: int, capacity: int) -> BatchCache:
        return self.base.new_batch_cache(batch, capacity)
