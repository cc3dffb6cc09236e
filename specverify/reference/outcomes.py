"""Finished rows as protocol objects: group results, completions and outcome counts (shared by the decoders)."""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np

from specverify.protocol import Completion
from specverify.reference.finish import REASONS

__all__ = ["GroupResult", "completions_of", "count_outcomes", "count_accepted", "count_positions", "gc_paused"]


@dataclass
class GroupResult:
    """Outputs of one group: generated tokens [B, max_tokens] (valid up to ``lengths``), reason codes [B] (index
    into ``REASONS``), accepted drafts per round [B, R] and tokens committed per round [B, R] (-1 / 0 padded), and
    optionally the drafts the target judged per round [B, R] (-1 padded)."""

    tokens: np.ndarray
    lengths: np.ndarray
    reasons: np.ndarray
    accepted: np.ndarray
    chunk_sizes: np.ndarray
    verified: Optional[np.ndarray] = None


_SHARE_FROM = 64  # rows per group from which equal rows share one Completion


def completions_of(result: GroupResult) -> list:
    """One ``Completion`` per row (tokens, finish reason, stream chunks per round, accepted drafts per round).

    Rows equal in all of these share one (immutable) ``Completion``, built once: a large call repeats few outcomes
    and round shapes, and a consumer that checks each distinct object once gains too."""
    if result.tokens.shape[0] >= _SHARE_FROM:
        key = _row_keys(result)
        if key is not None:
            distinct, inverse = np.unique(key, return_inverse=True)
            first = np.empty(distinct.size, dtype=np.int64)
            first[inverse.reshape(-1)] = np.arange(key.size)  # one row of each distinct key
            made = _completions(_rows(result, first))
            return list(map(made.__getitem__, inverse.reshape(-1).tolist()))
    return _completions(result)


def _rows(result: GroupResult, rows: np.ndarray) -> GroupResult:
    return GroupResult(
        tokens=result.tokens[rows],
        lengths=result.lengths[rows],
        reasons=result.reasons[rows],
        accepted=result.accepted[rows],
        chunk_sizes=result.chunk_sizes[rows],
    )


def _row_keys(result: GroupResult) -> Optional[np.ndarray]:
    """One int64 per row, equal exactly where every field ``completions_of`` reads is equal (a mixed-radix number
    of the columns), or None where the columns need more than 62 bits."""
    width = result.tokens.shape[1]
    valid = np.arange(width)[None, :] < result.lengths[:, None]
    columns = [result.reasons[:, None], result.lengths[:, None], np.where(valid, result.tokens + 1, 0)]
    columns += [result.chunk_sizes, result.accepted + 1]  # accepted is -1 padded
    table = np.concatenate(columns, axis=1).astype(np.int64, copy=False)  # [n, c], entries >= 0
    if table.size == 0 or int(table.min()) < 0:
        return None
    radix = table.max(axis=0) + 1  # [c]
    if float(np.log2(radix.astype(np.float64)).sum()) >= 62:
        return None
    key = np.zeros(table.shape[0], dtype=np.int64)
    for column, size in zip(table.T, radix.tolist()):
        key = key * size + column
    return key


def _completions(result: GroupResult) -> list:
    out = []
    for tokens, n, reason, sizes, accepted in zip(
        result.tokens.tolist(),
        result.lengths.tolist(),
        result.reasons.tolist(),
        result.chunk_sizes.tolist(),
        result.accepted.tolist(),
    ):
        tokens = tuple(tokens[:n])
        stream, start = [], 0
        for size in sizes:
            if size > 0:
                stream.append(tokens[start : start + size])
                start += size
        out.append(
            Completion(
                tokens=tokens,
                finish_reason=REASONS[reason],
                stream=tuple(stream),
                accepted=tuple(a for a in accepted if a >= 0),
            )
        )
    return out


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector while building many small acyclic objects (outcome tuples): a full
    collection triggered by the allocations walks every object of the process (~0.1 s measured in a certifier
    process), and tuples of ints are never cyclic garbage. Restores the previous state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def count_outcomes(result: GroupResult, vocab_size: int) -> dict:
    """Distinct (tokens, finish_reason) with counts, by encoding each row into one integer key (in key order)."""
    width = result.tokens.shape[1]
    base = vocab_size + 1
    valid = np.arange(width)[None, :] < result.lengths[:, None]
    digits = np.where(valid, result.tokens + 1, 0)
    if width * np.log2(base) + 3 < 62:
        powers = base ** np.arange(width - 1, -1, -1, dtype=np.int64)  # [width]: key = reason, digits in base
        span = base * int(powers[0]) if width else 1
        key = result.reasons.astype(np.int64) * span + digits @ powers
        keys, counts = np.unique(key, return_counts=True)  # no return_index: that sort is ~10x slower
        return _decoded(keys, counts, span, powers, base)
    rows = np.column_stack([result.reasons, digits])
    _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    with gc_paused():
        lengths = result.lengths[first].tolist()
        reasons = [REASONS[r] for r in result.reasons[first].tolist()]
        rows = result.tokens[first].tolist()
        tokens = map(tuple, map(list.__getitem__, rows, map(slice, lengths)))  # row[:n] per distinct row
        return dict(zip(zip(tokens, reasons), counts.tolist()))


def _decoded(keys: np.ndarray, counts: np.ndarray, span: int, powers: np.ndarray, base: int) -> dict:
    """{(tokens, reason): count} from distinct keys: the reason above ``span``, below it one digit per position,
    token + 1 over the row's length and 0 after it."""
    digits = (keys[:, None] % span) // powers % base  # [m, width]
    lengths = (digits > 0).sum(axis=1)  # a row's digits are nonzero up to its length, zero after it
    order = np.argsort(lengths, kind="stable")
    bounds = np.searchsorted(lengths[order], np.arange(digits.shape[1] + 2))
    with gc_paused():
        reasons = [REASONS[r] for r in (keys // span).tolist()]
        by_length = []  # the tuples of the rows of each length in turn, made by C-level maps (no frame per row)
        for length in range(digits.shape[1] + 1):
            rows = order[bounds[length] : bounds[length + 1]]
            by_length.extend(map(tuple, (digits[rows, :length] - 1).tolist()))
        where = np.empty(order.size, dtype=np.int64)
        where[order] = np.arange(order.size)
        tokens = map(by_length.__getitem__, where.tolist())  # back in key order
        return dict(zip(zip(tokens, reasons), counts.tolist()))


def count_accepted(accepted: np.ndarray) -> dict:
    """{accepted drafts: count} over the non-negative entries of ``accepted``."""
    counts = np.bincount(accepted[accepted >= 0].ravel())  # small non-negative counts: no sort
    values = np.flatnonzero(counts)
    return dict(zip(values.tolist(), counts[values].tolist()))


def count_positions(result: GroupResult, num_draft_tokens: int) -> Optional[tuple]:
    """Per draft position k: (rounds whose draft k was verified, rounds whose draft k was accepted), or None when
    the decoder did not record what it verified."""
    if result.verified is None:
        return None

    def above(values: np.ndarray) -> np.ndarray:  # [γ]: how many entries exceed k, for k = 0 .. γ-1
        counts = np.bincount(values[values >= 0].ravel(), minlength=num_draft_tokens + 1)
        return counts[::-1].cumsum()[::-1][1 : num_draft_tokens + 1]

    verified, accepted = above(result.verified), above(result.accepted)
    return tuple((int(v), int(a)) for v, a in zip(verified.tolist(), accepted.tolist()))
