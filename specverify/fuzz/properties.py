"""Black-box properties over single positions and token strings, and the exception every fuzz property raises.

- ``check_one_position_law``: one position of the speculative rule (accept the draft x with
  min(1, target_probs[x] / draft_probs[x]), else draw from the residual) commits exactly the target law.
- ``check_stop_matcher``: an incremental stop-string matcher (default: the decoders' DFA,
  ``specverify.reference.stops``) flags exactly the tokens a naive search of the text flags.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch

from specverify.errors import SpecverifyError, check

__all__ = [
    "PropertyFailure",
    "one_position_law",
    "check_one_position_law",
    "naive_stop_hits",
    "dfa_stop_hits",
    "check_stop_matcher",
]


class PropertyFailure(SpecverifyError, AssertionError):
    """A fuzzed property does not hold; ``prop`` names it (``"law"``, ``"batch"``, ``"one_position"``, ``"stop"``,
    ``"grammar"``, ``"streaming"`` (``specverify.fuzz.streaming``), or one of
    ``specverify.fuzz.whitebox.PROPERTIES``)."""

    def __init__(self, prop: str, message: str):
        super().__init__(f"[{prop}] {message}")
        self.prop = prop


def one_position_law(target_probs, draft_probs, *, residual: Optional[Callable] = None) -> np.ndarray:
    """The law of the token one speculative position commits: the draft x ~ ``draft_probs`` is accepted with
    min(1, target_probs[x] / draft_probs[x]), else a token is drawn from ``residual(target_probs, draft_probs)``
    (default ``sampling.residual_probs``); both are [V] rows, so is the result. The exact rule gives
    ``target_probs``."""
    from specverify.sampling import residual_probs

    target = torch.as_tensor(np.asarray(target_probs, dtype=np.float64))
    draft = torch.as_tensor(np.asarray(draft_probs, dtype=np.float64))
    check(
        target.ndim == 1 and target.shape == draft.shape,
        f"target_probs.shape={tuple(target.shape)!r} and "
        f"draft_probs.shape={tuple(draft.shape)!r} must be one aligned [V] pair.",
    )
    ratio = torch.clamp(target / draft.clamp_min(torch.finfo(draft.dtype).tiny), max=1.0)
    accept = torch.where(draft > 0, draft * ratio, torch.zeros_like(draft))
    rejected = 1.0 - float(accept.sum())
    return (accept + rejected * (residual or residual_probs)(target, draft)).numpy()


def check_one_position_law(
    target_probs, draft_probs, *, residual: Optional[Callable] = None, atol: float = 1e-12
) -> None:
    """Raise ``PropertyFailure("one_position")`` unless ``one_position_law`` equals the target within ``atol``."""
    law = one_position_law(target_probs, draft_probs, residual=residual)
    error = float(np.max(np.abs(law - np.asarray(target_probs, dtype=np.float64))))
    if error > atol:
        raise PropertyFailure(
            "one_position",
            f"accept + reject law differs from the target by {error:.3g} (target "
            f"{np.round(target_probs, 4).tolist()}, draft {np.round(draft_probs, 4).tolist()})",
        )


def naive_stop_hits(strings: Sequence[str], stops: Sequence[str], tokens: Sequence[int]) -> list[bool]:
    """Per token: whether it completes an occurrence of a stop string, searching the whole text naively.

    Kept on purpose beside the decoders' DFA (``specverify.reference.stops``, the one stop matcher that decoders,
    fuzz and zoo use): it shares no code with the DFA, so it is the DFA's independent check
    (``check_stop_matcher``, ``tests/test_stop_semantics.py``). The oracle keeps its own copy too.
    """
    text, hits = "", []
    for token in tokens:
        before, text = text, text + strings[token]
        hits.append(any(text.find(s, max(0, len(before) - len(s) + 1)) != -1 for s in stops))
    return hits


def dfa_stop_hits(strings: Sequence[str], stops: Sequence[str], tokens: Sequence[int]) -> list[bool]:
    """The same, from the incremental matcher the decoders use (``reference.stops.stop_tables``)."""
    from specverify.reference.stops import stop_tables

    tables, state, hits = stop_tables(tuple(strings), tuple(stops)), 0, []
    for token in tokens:
        hits.append(bool(tables.hit[state, token]))
        state = int(tables.next_state[state, token])
    return hits


def check_stop_matcher(
    strings: Sequence[str], stops: Sequence[str], tokens: Sequence[int], *, matcher: Optional[Callable] = None
) -> list[bool]:
    """Raise ``PropertyFailure("stop")`` unless ``matcher`` (default ``dfa_stop_hits``) flags exactly the tokens
    the naive search flags; return the naive flags."""
    check(
        len(stops) > 0 and all(isinstance(s, str) and s for s in stops),
        f"stops={stops!r} must be a non-empty sequence of non-empty strings.",
    )
    check(
        all(isinstance(t, int) and 0 <= t < len(strings) for t in tokens),
        f"tokens={tokens!r} must be ids into strings (0..{len(strings) - 1}).",
    )
    expected = naive_stop_hits(strings, stops, tokens)
    got = list((matcher or dfa_stop_hits)(strings, stops, tokens))
    if got != expected:
        first = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        raise PropertyFailure(
            "stop",
            f"stops {tuple(stops)!r} over {[strings[t] for t in tokens]!r}: token {first} "
            f"flagged {got[first]}, the text says {expected[first]}",
        )
    return expected
