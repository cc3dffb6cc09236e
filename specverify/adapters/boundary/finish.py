"""The one finish rule of every engine adapter: where a completion ends, what is cut, what an early stop is.

Built on the decoders' shared rule (``reference/finish.py`` and the stop-string DFA of ``reference/stops.py``), never
on the oracle's ``first_finish``: protocol validation uses the oracle's copy, so a bug here cannot pass on both sides
(docs/design.md, "The oracle stays independent").

An engine is asked to honour some ends (EOS, stop strings, ``max_tokens``); an adapter may implement others itself
and documents which (``cuts``, a subset of ``ENDS``: transformers' adapter matches stop strings, llama-cpp-python's
``generate()`` never stops, so its adapter implements all three). :func:`finish` then:

- cuts after the first finishing token only when that end is one the adapter implements and the engine's own output
  respects the ends it was asked to honour (tokens past an adapter's end are engine output the engine had no reason
  to withhold; cutting them is exact, docs/adapters.md);
- otherwise returns every token the engine emitted, uncut, with the reason of the first finishing token: tokens
  after an EOS, after ``max_tokens`` or after a stop string the *engine* was asked to honour reach the certifier,
  whose protocol validation reports them (``invalid``), never dropped here;
- raises :class:`EngineStoppedEarly` when the tokens end before any end (no EOS, no stop string, fewer than
  ``max_tokens``): the certifier turns the exception into ``invalid`` with its message, the same for every engine.

:func:`clip_accepted` keeps an engine's per-round accepted counts consistent with the tokens returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from specverify.errors import InvalidArgument, ProtocolViolation

__all__ = ["ENDS", "EngineStoppedEarly", "Finished", "Finisher", "finish", "clip_accepted"]

ENDS = frozenset({"eos", "stop", "length"})


class EngineStoppedEarly(ProtocolViolation, RuntimeError):
    """The engine's tokens end without EOS, a stop string or ``max_tokens`` (a protocol violation: ``invalid``)."""


@dataclass(frozen=True)
class Finished:
    """A completion's ``tokens`` and ``finish_reason`` by the finish rule; ``end`` is the index of the first
    finishing token (``len(tokens) - 1`` unless the engine went on past an end it was asked to honour)."""

    tokens: tuple[int, ...]
    finish_reason: str
    end: int

    @property
    def passed_through(self) -> int:
        """Tokens after the first finishing token, returned uncut (0 for a well-formed completion)."""
        return len(self.tokens) - self.end - 1


class Finisher:
    """The finish rule over one request's tokens, one token at a time, for adapters that read a token stream."""

    def __init__(self, vocab, params):
        from specverify.reference.stops import stop_tables

        self.params, self.eos = params, int(vocab.eos_token_id)
        self.tables = stop_tables(tuple(vocab.strings), tuple(params.stop)) if params.stop else None
        self.state = np.zeros(1, dtype=np.int64)
        self.n = 0

    def step(self, token: int) -> tuple[bool, int]:
        """Advance by ``token``: (it completed a stop string, tokens so far)."""
        from specverify.reference.finish import stop_step

        self.n += 1
        hit, self.state = stop_step(self.tables, self.state, np.array([token]), np.array([self.n]), self.params)
        return bool(hit[0]), self.n

    def push(self, token: int) -> str:
        """The finish reason after ``token`` ('' while unfinished)."""
        from specverify.reference.finish import finish_reason

        hit, n = self.step(int(token))
        return finish_reason(int(token), hit, n, self.params, self.eos) or ""


def _codes(vocab, params, tokens: np.ndarray, ends: frozenset) -> np.ndarray:  # int [n] -> int [n]
    """The finish code (``reference.finish.REASONS``) after each token, counting only the ``ends`` named."""
    from specverify.reference.finish import finish_codes

    finisher = Finisher(vocab, params)
    hits = np.array([finisher.step(int(t))[0] for t in tokens], dtype=bool)
    counts = np.arange(1, len(tokens) + 1)
    return finish_codes(
        tokens,
        hits & ("stop" in ends),
        counts if "length" in ends else np.zeros_like(counts),
        params,
        int(vocab.eos_token_id) if "eos" in ends else -1,
    )


def _first(codes: np.ndarray) -> Optional[int]:
    nonzero = np.flatnonzero(codes)
    return int(nonzero[0]) if nonzero.size else None


def finish(
    tokens: Sequence[int], vocab, params, *, engine: str, cuts: frozenset = frozenset(), detail: str = ""
) -> Finished:
    """The completion of an engine's ``tokens`` (module docstring); ``cuts``: the ends the adapter implements itself.

    Raises :class:`EngineStoppedEarly` (its message names ``engine``, the tokens, ``max_tokens`` and ``detail``,
    e.g. the engine's own finish reason) when the tokens end before any end.

    >>> from specverify.oracles.models import make_vocab
    >>> from specverify.params import SamplingParams
    >>> vocab = make_vocab(6)  # a b ab " " ba EOS
    >>> finish((0, 5, 1), vocab, SamplingParams(max_tokens=4), engine="e")  # the engine ran past its EOS
    Finished(tokens=(0, 5, 1), finish_reason='eos', end=1)
    >>> finish((1, 0, 3), vocab, SamplingParams(max_tokens=4, stop=("ba",)), engine="e", cuts={"stop"})
    Finished(tokens=(1, 0), finish_reason='stop', end=1)
    """
    cuts = frozenset(cuts)
    if not cuts <= ENDS:
        raise InvalidArgument(
            f"cuts={set(cuts)!r} holds {sorted(cuts - ENDS)!r}; expected a subset of {sorted(ENDS)!r}."
        )
    from specverify.reference.finish import REASONS

    tokens = tuple(int(t) for t in tokens)
    array = np.array(tokens, dtype=np.int64)
    codes = _codes(vocab, params, array, ENDS)
    end = _first(codes)
    if end is None:
        more = f" ({detail})" if detail else ""
        raise EngineStoppedEarly(
            f"{engine} stopped after {len(tokens)} tokens {tokens!r} without EOS, a stop string or "
            f"max_tokens={params.max_tokens!r}{more}"
        )
    reason = REASONS[int(codes[end])]
    engine_end = _first(_codes(vocab, params, array, ENDS - cuts))
    if end < len(tokens) - 1 and (engine_end is None or engine_end >= len(tokens) - 1):
        return Finished(tokens[: end + 1], reason, end)  # past an end only the adapter knows: exact to cut
    return Finished(tokens, reason, end)  # ends on its finishing token, or ran past an engine end: all reported


def clip_accepted(per_round: Sequence[int], num_tokens: int, *, prefill_tokens: int = 0) -> tuple[int, ...]:
    """An engine's accepted drafts per round, kept consistent with the ``num_tokens`` returned
    (``metrics.acceptance``'s consistency rule): rounds after the returned tokens are dropped, and the last round
    counts only the drafts among them. ``prefill_tokens`` tokens come before the first round.

    Engines may count drafts they accepted past the finishing token, then cut their output (vLLM,
    v1/core/sched/scheduler.py:2118); returned uncut, the tokens keep every draft they hold.

    >>> clip_accepted((3, 3), 4, prefill_tokens=1), clip_accepted((3, 1), 4, prefill_tokens=2)
    ((3,), (2,))
    """
    out, consumed = [], int(prefill_tokens)
    for accepted in per_round:
        if consumed >= num_tokens:
            break
        out.append(min(int(accepted), num_tokens - consumed))
        consumed += int(accepted) + 1
    return tuple(out)
