"""Small properties over single positions and token strings: the speculative rule's one-position law, and the
incremental stop-string matcher against a naive search of the text.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch

from specverify.errors import check
from specverify.fuzz.harness import PropertyFailure

__all__ = ["one_position_law", "check_one_position_law", "naive_stop_hits", "dfa_stop_hits", "check_stop_matcher"]


def one_position_law(target_probs, draft_probs, *, residual=None) -> np.ndarray:  # [V], [V] -> [V]
    """The law of the token one speculative position commits: draft x ~ q accepted with min(1, p(x)/q(x)), else a
    draw from ``residual(p, q)`` (default ``sampling.residual_probs``). Exact rule: equals ``target_probs``."""
    from specverify.sampling import residual_probs

    p = torch.as_tensor(np.asarray(target_probs, dtype=np.float64))
    q = torch.as_tensor(np.asarray(draft_probs, dtype=np.float64))
    check(p.ndim == 1 and p.shape == q.shape, f"target_probs.shape={tuple(p.shape)!r} and draft_probs.shape="
          f"{tuple(q.shape)!r} must be one aligned [V] pair.")
    accept = torch.where(q > 0, q * torch.clamp(p / q.clamp_min(torch.finfo(q.dtype).tiny), max=1.0),
                         torch.zeros_like(q))
    rejected = 1.0 - float(accept.sum())
    return (accept + rejected * (residual or residual_probs)(p, q)).numpy()


def check_one_position_law(target_probs, draft_probs, *, residual=None, atol: float = 1e-12) -> None:
    """Raise ``PropertyFailure("one_position")`` unless ``one_position_law`` equals the target within ``atol``."""
    law = one_position_law(target_probs, draft_probs, residual=residual)
    error = float(np.max(np.abs(law - np.asarray(target_probs, dtype=np.float64))))
    if error > atol:
        raise PropertyFailure("one_position", f"accept + reject law differs from the target by {error:.3g} "
                              f"(target {np.round(target_probs, 4).tolist()}, draft {np.round(draft_probs, 4).tolist()})")


def naive_stop_hits(strings: Sequence[str], stops: Sequence[str], tokens: Sequence[int]) -> list:
    """Per token: whether it completes an occurrence of a stop string, searching the whole text naively."""
    text, hits = "", []
    for token in tokens:
        before, text = text, text + strings[token]
        hits.append(any(text.find(s, max(0, len(before) - len(s) + 1)) != -1 for s in stops))
    return hits


def dfa_stop_hits(strings: Sequence[str], stops: Sequence[str], tokens: Sequence[int]) -> list:
    """The same, from the incremental matcher the decoders use (``reference.stops.stop_tables``)."""
    from specverify.reference.stops import stop_tables

    tables, state, hits = stop_tables(tuple(strings), tuple(stops)), 0, []
    for token in tokens:
        hits.append(bool(tables.hit[state, token]))
        state = int(tables.next_state[state, token])
    return hits


def check_stop_matcher(strings, stops, tokens, *, matcher: Optional[Callable] = None) -> list:
    """Raise ``PropertyFailure("stop")`` unless ``matcher`` (default ``dfa_stop_hits``) flags exactly the tokens
    the naive search flags; return the naive flags."""
    check(len(stops) > 0 and all(isinstance(s, str) and s for s in stops),
          f"stops={stops!r} must be a non-empty sequence of non-empty strings.")
    check(all(isinstance(t, int) and 0 <= t < len(strings) for t in tokens),
          f"tokens={tokens!r} must be ids into strings (0..{len(strings) - 1}).")
    expected = naive_stop_hits(strings, stops, tokens)
    got = list((matcher or dfa_stop_hits)(strings, stops, tokens))
    if got != expected:
        first = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        raise PropertyFailure("stop", f"stops {tuple(stops)!r} over {[strings[t] for t in tokens]!r}: token {first} "
                              f"flagged {got[first]}, the text says {expected[first]}")
    return expected
