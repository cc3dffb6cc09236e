"""The decoders' finish rule and stop matching, in one place (docs/design.md, canonical semantics).

After each committed token: EOS (unless ``ignore_eos``) -> ``eos``; else a stop string completed by the token ->
``stop`` (held back until ``min_tokens`` tokens exist when ``stop_after_min_tokens``); else ``max_tokens`` reached
-> ``length``. Every reference decoder — vectorized, plain, transactional — and every zoo entry uses these
functions with the stop-string DFA of ``stops.py``. The oracle keeps its own naive copy on purpose
(``oracles/law.py``), and protocol validation uses the oracle's, so a bug here cannot hide on both sides.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from specverify.params import SamplingParams
from specverify.reference.stops import StopTables

__all__ = ["REASONS", "EOS", "STOP", "LENGTH", "NO_TOKEN", "finish_codes", "finish_reason", "stop_step"]

REASONS = ("", "eos", "stop", "length", "no_token")  # code -> finish reason ("" = not finished)
EOS, STOP, LENGTH, NO_TOKEN = 1, 2, 3, 4


def stop_step(
    tables: Optional[StopTables],
    states: np.ndarray,
    tokens: np.ndarray,
    num_generated: np.ndarray,
    params: SamplingParams,
) -> tuple[np.ndarray, np.ndarray]:  # int [n], int [n], int [n] -> bool, int
    """Advance the stop matcher by one token per row: (stop completed by the token, next matcher state)."""
    if tables is None:
        return np.zeros(np.shape(tokens), dtype=bool), states
    hit = tables.hit[states, tokens]
    if params.stop_after_min_tokens:
        hit = hit & (np.asarray(num_generated) >= params.min_tokens)
    return hit, tables.next_state[states, tokens]


def finish_codes(
    tokens: np.ndarray, stop_hit: np.ndarray, num_generated: np.ndarray, params: SamplingParams, eos_token_id: int
) -> np.ndarray:  # int [n], bool [n], int [n] -> int [n]
    """The finish code (index into ``REASONS``) after each row's newest token; 0 while unfinished."""
    tokens, stop_hit = np.asarray(tokens), np.asarray(stop_hit, dtype=bool)
    at_cap = np.asarray(num_generated) >= params.max_tokens
    if not at_cap.shape == stop_hit.shape == tokens.shape:  # a scalar count (plain.py): broadcast
        shape = np.broadcast_shapes(tokens.shape, stop_hit.shape, at_cap.shape)
        at_cap, stop_hit, tokens = (np.broadcast_to(a, shape) for a in (at_cap, stop_hit, tokens))
    codes = at_cap.astype(np.int64) * LENGTH
    # each rule written over the ones it beats: EOS over a stop string over the length
    if stop_hit.any():
        np.copyto(codes, STOP, where=stop_hit)
    if not params.ignore_eos:
        np.copyto(codes, EOS, where=tokens == eos_token_id)
    return codes


def finish_reason(
    token: int, stop_hit: bool, num_generated: int, params: SamplingParams, eos_token_id: int
) -> Optional[str]:
    """Scalar form of :func:`finish_codes`: the finish reason after ``token``, or None."""
    code = int(
        finish_codes(np.array([token]), np.array([stop_hit]), np.array([num_generated]), params, eos_token_id)[0]
    )
    return REASONS[code] or None
