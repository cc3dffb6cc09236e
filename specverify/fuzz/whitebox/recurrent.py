"""The recurrent-state replay property (seed: Recurrent state replay) and a strategy of speculative rounds.

A round opens a branch of draft tokens on a ``RecurrentCache``-like object, then commits the first ``accepted`` of
them plus the extra (recovered or bonus) token, or aborts. After every round the committed state must equal the
state recomputed from scratch over the committed tokens -- bitwise, since replay applies the same projected inputs
with the same operations in the same order -- and while a branch is open the committed state must not move.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
from hypothesis import strategies as st

from specverify.errors import check
from specverify.fuzz.properties import PropertyFailure

__all__ = ["RecurrentRound", "recurrent_rounds", "check_recurrent_rounds"]


@dataclass(frozen=True)
class RecurrentRound:
    """Open a branch of ``drafts``; then ``abort`` it, or commit ``accepted`` drafts and the ``extra`` tokens."""

    drafts: tuple[int, ...]
    accepted: int = 0
    extra: tuple[int, ...] = ()
    abort: bool = False


def _rounds_from_seed(vocab_size: int, max_num_draft_tokens: int, count: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    rounds = []
    for _ in range(count):
        drafts = tuple(rng.integers(0, vocab_size, size=int(rng.integers(1, max_num_draft_tokens + 1))).tolist())
        extra = tuple(rng.integers(0, vocab_size, size=int(rng.integers(0, 2))).tolist())
        rounds.append(RecurrentRound(drafts, int(rng.integers(0, len(drafts) + 1)), extra, abort=rng.random() < 0.15))
    return rounds


def recurrent_rounds(vocab_size: int, *, max_num_draft_tokens: int = 4, max_rounds: int = 6) -> st.SearchStrategy:
    """Lists of ``RecurrentRound``: branches of 1..``max_num_draft_tokens`` drafts, any number accepted, an optional
    extra token, sometimes aborted. Hypothesis draws the number of rounds and a seed; numpy draws the rounds from it
    (two choices per example keep examples cheap; shrinking shortens the list and simplifies the seed)."""
    check(isinstance(vocab_size, int) and vocab_size >= 1, f"vocab_size={vocab_size!r} must be an int >= 1.")
    check(
        isinstance(max_num_draft_tokens, int) and max_num_draft_tokens >= 1,
        f"max_num_draft_tokens={max_num_draft_tokens!r} must be an int >= 1.",
    )
    check(isinstance(max_rounds, int) and max_rounds >= 1, f"max_rounds={max_rounds!r} must be an int >= 1.")
    return st.builds(
        partial(_rounds_from_seed, vocab_size, max_num_draft_tokens),
        st.integers(1, max_rounds),
        st.integers(0, 2**32 - 1),
    )


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def check_recurrent_rounds(cache_class, model, prompt, rounds) -> None:
    """Run ``rounds`` on ``cache_class(model, prompt)`` (the ``RecurrentCache`` interface: ``state``, ``tokens``,
    ``extend``, ``commit``, ``abort``); raise ``PropertyFailure("recurrent")`` on the first round after which the
    committed state differs from ``model.state_after(tokens)``, or moved while the branch was open."""
    check(callable(cache_class), f"cache_class={cache_class!r} must be a RecurrentCache-like class.")
    check(
        all(isinstance(r, RecurrentRound) for r in rounds),
        f"rounds={rounds!r} must be RecurrentRound values (recurrent_rounds).",
    )
    cache = cache_class(model, tuple(prompt))
    for i, step in enumerate(rounds):
        before = np.array(cache.state, copy=True)
        cache.extend(list(step.drafts))
        if not _same(cache.state, before):
            raise PropertyFailure(
                "recurrent",
                f"round {i}: opening a branch of {step.drafts!r} moved the committed "
                "state (a provisional input advanced it)",
            )
        if step.abort:
            cache.abort()
        else:
            cache.commit(step.accepted, list(step.extra))
        expected = model.state_after(cache.tokens)
        if not _same(cache.state, expected):
            worst = float(np.max(np.abs(np.asarray(cache.state, dtype=np.float64) - expected)))
            raise PropertyFailure(
                "recurrent",
                f"round {i} ({step!r}): committed state after {cache.tokens!r} differs "
                f"from recompute-from-scratch (max |diff| {worst:.3g})",
            )
