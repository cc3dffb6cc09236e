"""The committed per-row state of one group of the vectorized reference decoder (``vectorized.py``): prompts,
outputs, penalty history, grammar and stop-matcher states, the caches with the prompt stored."""

from __future__ import annotations

import numpy as np
import torch

from specverify.errors import check
from specverify.keyed import _GOLDEN, _MIX1, _mix64
from specverify.reference.stops import stop_tables

__all__ = ["_State", "keyed_stems", "keyed_draws"]

_OFFSET = np.uint64(0x632BE59BD9B4E019)
_UNIT = 1.0 / 9007199254740992.0  # 2**-53


def keyed_stems(seeds: np.ndarray, purpose: int) -> np.ndarray:  # uint64 [b] -> uint64 [b]
    """The first half of ``keyed_uniforms(seeds, positions, purpose)``: the mix of (seed, purpose), which no
    position changes, computed once per group and purpose instead of at every draw."""
    with np.errstate(over="ignore"):
        return _mix64(seeds.astype(np.uint64, copy=False) * _GOLDEN + np.uint64(purpose))


def keyed_draws(stems: np.ndarray, positions: np.ndarray) -> np.ndarray:  # uint64 [n], int [n] -> float64 [n]
    """``keyed_uniforms(seeds, positions, purpose)`` from the seeds' ``keyed_stems``: the same uniforms, bit for bit
    (``tests/reference/test_keyed_stems.py``)."""
    with np.errstate(over="ignore"):
        x = _mix64(stems ^ (positions.astype(np.uint64, copy=False) * _MIX1 + _OFFSET))
    return (x >> np.uint64(11)).astype(np.float64) * _UNIT


def _rows_by_prompt(prompt, b: int) -> dict:
    if prompt and isinstance(prompt[0], (int, np.integer)):
        return {tuple(prompt): np.arange(b)}
    check(len(prompt) == b, f"len(prompts)={len(prompt)!r} must equal the number of rows {b}.")
    groups: dict = {}
    for row, p in enumerate(prompt):
        groups.setdefault(tuple(p), []).append(row)
    return {p: np.asarray(rows, dtype=np.int64) for p, rows in groups.items()}


def _prefill(cache, rows: np.ndarray, tokens: tuple) -> None:
    """Store one prompt in empty rows: once for all rows where the cache can (``fill``)."""
    if hasattr(cache, "fill"):
        cache.fill(rows, np.asarray(tokens, dtype=np.int64))
    else:
        cache.forward(rows, np.tile(np.asarray(tokens, dtype=np.int64), (rows.size, 1)))


class _State:
    """Committed per-row state of a group (arrays), plus the caches."""

    def __init__(self, dec, prompt, params, gamma, seeds):
        vocab = dec.vocab
        b, size = len(seeds), vocab.size
        self.params, self.gamma, self.b = params, gamma, b
        self.seeds = seeds
        groups = _rows_by_prompt(prompt, b)  # {prompt: rows}: one prompt for all rows, or one per row
        self.prompt_len = np.zeros(b, dtype=np.int64)
        self.last = np.zeros(b, dtype=np.int64)
        for p, rows in groups.items():
            self.prompt_len[rows], self.last[rows] = len(p), p[-1]
        self.out = np.zeros((b, params.max_tokens), dtype=np.int64)
        self.n_gen = np.zeros(b, dtype=np.int64)
        self.reason = np.zeros(b, dtype=np.int64)
        # penalty history is only kept when a penalty reads it (it is dead weight otherwise)
        self.penalized = bool(params.repetition_penalty != 1.0 or params.frequency_penalty or params.presence_penalty)
        self.seen = self.counts = None
        if self.penalized:
            self.seen = torch.zeros((b, size), dtype=torch.bool)
            for p, rows in groups.items():
                self.seen[torch.from_numpy(rows)[:, None], torch.tensor(sorted(set(p)))] = True
            self.counts = torch.zeros((b, size), dtype=torch.float64)
        capacity = int(self.prompt_len.max()) + params.max_tokens + gamma + 1
        self.target_cache = dec.target.new_batch_cache(b, capacity)
        self.draft_cache = dec.draft.new_batch_cache(b, capacity)
        for p, rows in groups.items():
            if len(p) > 1:
                _prefill(self.target_cache, rows, p[:-1])
                _prefill(self.draft_cache, rows, p[:-1])
        self.prompts = None  # per row, kept only when a logits processor reads the history
        if params.logits_processors:
            self.prompts = [()] * b
            for p, rows in groups.items():
                for row in rows.tolist():
                    self.prompts[row] = tuple(int(t) for t in p)
        self.gstate = np.zeros(b, dtype=np.int64)
        self.grammar = None
        if params.grammar is not None:
            allowed, nxt = params.grammar.tables(size, vocab.eos_token_id)
            self.grammar = (torch.from_numpy(allowed), nxt)
            self.gstate[:] = params.grammar.initial_state
        self.stops = stop_tables(vocab.strings, params.stop) if params.stop else None
        self.sstate = np.zeros(b, dtype=np.int64)
        self.rounds = 0
        self.accepted = np.full((b, params.max_tokens), -1, dtype=np.int64)
        self.verified = np.full((b, params.max_tokens), -1, dtype=np.int64)  # drafts the target judged per round
        self.chunks = np.zeros((b, params.max_tokens), dtype=np.int64)
        self._stems: dict = {}  # purpose -> keyed_stems(seeds, purpose)

    def stems(self, purpose: int) -> np.ndarray:  # -> uint64 [b]
        """Each row's ``keyed_stems`` for ``purpose`` (made at its first draw)."""
        if purpose not in self._stems:
            self._stems[purpose] = keyed_stems(self.seeds, purpose)
        return self._stems[purpose]
