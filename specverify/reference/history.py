"""The state a transactional round reads and writes: ``History`` (what processors and finishing read), the
per-request ``Rules`` (law of a history, history after a token) and ``RequestState`` (everything between rounds).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional

import numpy as np
import torch

from specverify.protocol import Request
from specverify.reference.finish import finish_reason, stop_step
from specverify.reference.paged import PagedCache
from specverify.reference.stops import stop_tables
from specverify.sampling import grammar_mask, process_logits

__all__ = ["History", "StateView", "Rules", "RequestState"]


@dataclass(frozen=True)
class History:
    """What logit processors and finishing rules read after some generated tokens (committed or provisional)."""

    generated: tuple[int, ...]
    seen: frozenset[int]  # prompt + generated: repetition penalty
    counts: tuple[int, ...]  # occurrences among generated, per token id: frequency / presence penalties
    grammar_state: object
    stop_state: int  # state of the stop-string DFA (stops.stop_tables); 0 without stop strings
    finish_reason: Optional[str] = None
    prompt: tuple[int, ...] = ()  # what logits processors read before ``generated``


@dataclass(frozen=True)
class StateView:
    """The comparable part of a ``RequestState``: KV contents read through block tables, never block ids."""

    generated: tuple[int, ...]
    position: int
    target_kv: tuple[tuple[int, int], ...]
    draft_kv: tuple[tuple[int, int], ...]
    rng_position: int
    seen: frozenset[int]
    counts: tuple[int, ...]
    grammar_state: object
    stop_state: int
    stream_cursor: int
    finish_reason: Optional[str]

    def diff(self, other: "StateView") -> list[str]:
        """Names of the components that differ."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


class Rules:
    """One request's processors and finishing rules: the law of a ``History`` and the ``History`` after a token.

    The law is a pure function of the logits row read from a cache and the ``History``, so it is memoised (per
    decoder call; draws of one request revisit the same prefixes): a stale cache entry changes the logits, hence
    the key, and is never masked by the memo."""

    def __init__(self, vocab, params):
        self.vocab, self.params = vocab, params
        self.stops = stop_tables(vocab.strings, params.stop) if params.stop else None
        self._laws: dict = {}

    def start(self, prompt) -> History:
        grammar = self.params.grammar
        return History(
            generated=(),
            seen=frozenset(prompt),
            counts=(0,) * self.vocab.size,
            grammar_state=grammar.initial_state if grammar is not None else None,
            stop_state=0,
            prompt=tuple(prompt),
        )

    def advance(self, history: History, token: int) -> History:
        params, n = self.params, len(history.generated) + 1
        counts = list(history.counts)
        counts[token] += 1
        grammar_state = history.grammar_state
        if params.grammar is not None and token != self.vocab.eos_token_id:  # EOS ends a grammar request
            grammar_state = params.grammar.advance(grammar_state, token)
        stop_hit, stop_state = stop_step(self.stops, np.array(history.stop_state), np.array(token), n, params)
        reason = finish_reason(token, bool(stop_hit), n, params, self.vocab.eos_token_id)
        return History(
            generated=history.generated + (token,),
            seen=history.seen | {token},
            counts=tuple(counts),
            grammar_state=grammar_state,
            stop_state=int(stop_state),
            finish_reason=reason,
            prompt=history.prompt,
        )

    def law(self, logits, history: History) -> torch.Tensor:  # [1, V] -> [1, V]
        key = (logits.numpy().tobytes(), history)
        if key not in self._laws:
            self._laws[key] = self._process(logits, history)
        return self._laws[key]

    def _process(self, logits, history: History) -> torch.Tensor:  # [1, V] -> [1, V]
        params, size, eos = self.params, self.vocab.size, self.vocab.eos_token_id
        seen = counts = allowed = None  # None where the processor is off: same law, fewer tensors
        if params.repetition_penalty != 1.0:
            seen = torch.zeros((1, size), dtype=torch.bool)
            seen[0, list(history.seen)] = True
        if params.frequency_penalty or params.presence_penalty:
            counts = torch.tensor([history.counts], dtype=torch.float64)
        if params.grammar is not None:
            allowed = grammar_mask(params.grammar, [history.grammar_state], size, eos)
        return process_logits(
            logits,
            params,
            seen=seen,
            counts=counts,
            allowed=allowed,
            eos_token_id=eos,
            num_generated=torch.tensor([len(history.generated)], dtype=torch.int64),
            histories=[history.prompt + history.generated] if params.logits_processors else None,
        )


@dataclass(eq=False)
class RequestState:
    """Everything a request carries between rounds. ``history`` is committed; caches hold the committed tokens
    except the last (``position`` entries); ``stream`` holds the chunks emitted, ``cursor`` how many tokens."""

    request: Request
    seed: int
    draws: dict = field(repr=False)  # purpose -> keyed uniforms float64 [max_tokens + γ], by generated position
    rules: Rules = field(repr=False)
    history: History
    target_cache: PagedCache = field(repr=False)
    draft_cache: PagedCache = field(repr=False)
    stream: list = field(default_factory=list)
    cursor: int = 0
    accepted: list = field(default_factory=list)  # accepted drafts per round
    drafted: list = field(default_factory=list)  # drafts proposed per round

    @property
    def generated(self) -> tuple[int, ...]:
        return self.history.generated

    @property
    def finish_reason(self) -> Optional[str]:
        return self.history.finish_reason

    @property
    def position(self) -> int:
        """Position id of the token fed first next round (the last committed one) = entries each cache holds."""
        return len(self.request.prompt) + len(self.generated) - 1

    @property
    def rng_position(self) -> int:
        """Generated position of the next token's keyed draws: the number of committed tokens."""
        return len(self.generated)

    @property
    def last_token(self) -> int:
        return self.generated[-1] if self.generated else self.request.prompt[-1]

    def view(self) -> StateView:
        h = self.history
        return StateView(
            generated=h.generated,
            position=self.position,
            target_kv=self.target_cache.entries(),
            draft_kv=self.draft_cache.entries(),
            rng_position=self.rng_position,
            seen=h.seen,
            counts=h.counts,
            grammar_state=h.grammar_state,
            stop_state=h.stop_state,
            stream_cursor=self.cursor,
            finish_reason=h.finish_reason,
        )
