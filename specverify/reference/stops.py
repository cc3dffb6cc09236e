"""Incremental stop-string matching as a DFA over token ids (the decoders' stop-matcher state).

A state is the longest suffix of the generated text that is a prefix of some stop string. ``hit[s, t]`` says the
token ``t`` completes an occurrence of a stop string from state ``s``. (The oracle searches the text naively instead.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["StopTables", "stop_tables"]


@dataclass(frozen=True)
class StopTables:
    next_state: np.ndarray  # int64 [S, V]
    hit: np.ndarray  # bool [S, V]
    prefixes: tuple[str, ...]  # state id -> suffix text


def _step_char(state: str, ch: str, stops: tuple[str, ...], prefixes: frozenset[str]) -> tuple[str, bool]:
    text = state + ch
    hit = any(text.endswith(s) for s in stops)
    while text not in prefixes:
        text = text[1:]
    return text, hit


@lru_cache(maxsize=256)
def stop_tables(strings: tuple[str, ...], stops: tuple[str, ...]) -> StopTables:
    """Tables for the token ``strings`` of a vocabulary and the ``stops`` of a request (cached)."""
    prefix_set = frozenset(s[:i] for s in stops for i in range(len(s) + 1))
    prefixes = tuple(sorted(prefix_set, key=lambda p: (len(p), p)))  # "" is state 0
    index = {p: i for i, p in enumerate(prefixes)}
    nxt = np.zeros((len(prefixes), len(strings)), dtype=np.int64)
    hit = np.zeros((len(prefixes), len(strings)), dtype=bool)
    for sid, state in enumerate(prefixes):
        for tok, text in enumerate(strings):
            cur, any_hit = state, False
            for ch in text:
                cur, h = _step_char(cur, ch, stops, prefix_set)
                any_hit |= h
            nxt[sid, tok] = index[cur]
            hit[sid, tok] = any_hit
    return StopTables(next_state=nxt, hit=hit, prefixes=prefixes)
