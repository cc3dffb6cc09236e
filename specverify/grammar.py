"""Grammars behind a small Protocol, and ``ToyGrammar``: a deterministic automaton over token ids.

A grammar state allows a set of non-EOS tokens; EOS is allowed exactly in accepting states (docs/design.md: a grammar
ends generation only through EOS in an accepting state, or ``no_token`` at a dead end).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from specverify.errors import InvalidArgument, check

__all__ = ["Grammar", "ToyGrammar", "text_form"]


@runtime_checkable
class Grammar(Protocol):
    """What the sampling pipeline needs from a grammar. States are opaque hashable values."""

    @property
    def initial_state(self) -> object: ...

    def allowed(self, state) -> frozenset[int]:
        """Non-EOS token ids allowed in ``state``."""

    def advance(self, state: object, token: int) -> object:
        """The state after ``token`` (a token ``allowed`` in ``state``)."""

    def accepting(self, state) -> bool:
        """Whether EOS is allowed in ``state``."""


def text_form(grammar) -> "str | None":
    """The grammar as text (``.pattern``, a regex: ``specverify.grammar_regex.RegexGrammar``) that engines' structured
    outputs take, or None for a token-level automaton (``ToyGrammar``), which needs the ``grammar`` capability."""
    pattern = getattr(grammar, "pattern", None)
    return pattern if isinstance(pattern, str) else None


@dataclass(frozen=True)
class ToyGrammar:
    """A deterministic automaton: ``transitions[s]`` maps allowed token ids to next states.

    States are ints ``0..num_states-1``; state 0 is initial. A state with no transitions that is not accepting is a
    dead end (the request finishes with ``no_token``).

    Examples
    --------
    >>> g = ToyGrammar(transitions=({0: 1, 1: 2}, {2: 0}, {}), accepting=frozenset({1}))
    >>> sorted(g.allowed(0)), g.advance(0, 1), g.accepting(1), g.allowed(2)
    ([0, 1], 2, True, frozenset())
    """

    transitions: tuple[dict, ...]
    accepting_states: frozenset = frozenset()

    def __init__(self, transitions, accepting=frozenset()):
        check(
            isinstance(transitions, (tuple, list)) and len(transitions) > 0,
            f"transitions={transitions!r} must be a non-empty sequence of {{token: next_state}} dicts.",
        )
        n = len(transitions)
        frozen = []
        for s, row in enumerate(transitions):
            check(isinstance(row, dict), f"transitions[{s}]={row!r} must be a dict {{token_id: next_state}}.")
            for tok, nxt in row.items():
                check(
                    isinstance(tok, int) and tok >= 0 and isinstance(nxt, int) and 0 <= nxt < n,
                    f"transitions[{s}] has {tok!r}: {nxt!r}; expected a token id >= 0 mapping to a state in [0, {n}).",
                )
            frozen.append(dict(sorted(row.items())))
        acc = frozenset(accepting)
        check(
            all(isinstance(a, int) and 0 <= a < n for a in acc),
            f"accepting={accepting!r} must hold state ids in [0, {n}).",
        )
        object.__setattr__(self, "transitions", tuple(frozen))
        object.__setattr__(self, "accepting_states", acc)

    def __hash__(self):
        return hash((tuple(tuple(r.items()) for r in self.transitions), self.accepting_states))

    @property
    def initial_state(self) -> int:
        return 0

    @property
    def num_states(self) -> int:
        return len(self.transitions)

    def allowed(self, state) -> frozenset[int]:
        return frozenset(self.transitions[self._state(state)])

    def advance(self, state, token: int) -> int:
        row = self.transitions[self._state(state)]
        if token not in row:
            raise InvalidArgument(
                f"token={token!r} is not allowed in grammar state={state!r} (allowed: "
                f"{sorted(row)}). Mask with allowed() before sampling."
            )
        return row[token]

    def accepting(self, state) -> bool:
        return self._state(state) in self.accepting_states

    def tables(self, vocab_size: int, eos_token_id: int) -> tuple:
        """Arrays for vectorized decoders: ``allowed[S, V]`` (bool, EOS column = accepting) and ``next[S, V]``
        (int64; the state itself where a token is not allowed, so gathers stay in range)."""
        import numpy as np

        allowed = np.zeros((self.num_states, vocab_size), dtype=bool)
        nxt = np.tile(np.arange(self.num_states, dtype=np.int64)[:, None], (1, vocab_size))
        for s, row in enumerate(self.transitions):
            for tok, dst in row.items():
                check(
                    tok < vocab_size and tok != eos_token_id,
                    f"grammar token {tok!r} in state {s} must be a non-EOS id < vocab_size={vocab_size!r}.",
                )
                allowed[s, tok] = True
                nxt[s, tok] = dst
            allowed[s, eos_token_id] = s in self.accepting_states
        return allowed, nxt

    def _state(self, state) -> int:
        if not (isinstance(state, int) and 0 <= state < len(self.transitions)):
            raise InvalidArgument(f"state={state!r} is not a state of this grammar (0..{len(self.transitions) - 1}).")
        return state
