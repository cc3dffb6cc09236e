"""The transactional decoder's state rebuilt from scratch: what a round must leave after committing some tokens,
computed from the token list alone (fresh caches fed the tokens, penalty / grammar / stop state recomputed), so
tests and the fuzzer can compare it with the incremental state after every round.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

import numpy as np

from specverify.errors import InvalidArgument, check
from specverify.protocol import Request
from specverify.reference.finish import finish_reason, stop_step
from specverify.reference.history import History, RequestState, Rules
from specverify.reference.paged import BlockPool, PagedCache
from specverify.reference.stops import stop_tables
from specverify.sampling import next_token_probs

__all__ = ["rebuild_state", "history_from_scratch", "finish_from_scratch"]


def rebuild_state(
    decoder, request: Request, committed_tokens: Sequence[int], *, no_token: bool = False
) -> RequestState:
    """The state a round must leave after committing ``committed_tokens``, built from scratch: fresh caches
    in a private pool fed the tokens, penalty / grammar / stop state recomputed from the token list and text.
    ``no_token=True`` claims the request ended with ``no_token``; that is checked against the target."""
    decoder._validate(request, "request")
    tokens = tuple(int(t) for t in committed_tokens)
    decoder.vocab.check_tokens(tokens, "committed_tokens")
    history = history_from_scratch(decoder.vocab, request, tokens)
    if no_token:
        _check_no_token(decoder, request, history)
        history = replace(history, finish_reason="no_token")
    state = RequestState(
        request=request,
        seed=request.seed or 0,
        draws={},
        rules=Rules(decoder.vocab, request.params),
        history=history,
        cursor=len(tokens),
        stream=[tokens] if tokens else [],
        target_cache=None,
        draft_cache=None,
    )
    pool = BlockPool(2 * max(1, state.position), 1)
    state.target_cache, state.draft_cache = PagedCache(pool, decoder.target), PagedCache(pool, decoder.draft)
    if state.position:
        for cache in (state.target_cache, state.draft_cache):
            cache.prefill((request.prompt + tokens)[: state.position])
    return state


def _check_no_token(decoder, request: Request, history: History) -> None:
    check(
        history.finish_reason is None,
        f"no_token=True but the tokens already finished with "
        f"{history.finish_reason!r}: a request ends once. Pass no_token=False.",
    )
    logits = decoder.target.logits([request.prompt + history.generated])
    probs = next_token_probs(
        logits,
        request.params,
        prompt=request.prompt,
        generated=history.generated,
        eos_token_id=decoder.vocab.eos_token_id,
    )
    check(
        float(probs.sum()) <= 0,
        f"no_token=True but the target's next-token law after "
        f"{history.generated!r} has positive mass: no_token only ends a request whose next row is all masked.",
    )


def history_from_scratch(vocab, request: Request, tokens: tuple[int, ...]) -> History:
    params, prompt = request.params, request.prompt
    finish_reason = finish_from_scratch(vocab, params, tokens)  # first: it rejects tokens after a finish
    grammar_state = params.grammar.initial_state if params.grammar is not None else None
    for token in tokens:
        if params.grammar is not None and token != vocab.eos_token_id:
            grammar_state = params.grammar.advance(grammar_state, token)
    stop_state = 0
    if params.stop:  # the longest suffix of the text that begins some stop string
        prefixes = stop_tables(vocab.strings, params.stop).prefixes
        text = vocab.text(tokens)
        stop_state = max((i for i, p in enumerate(prefixes) if text.endswith(p)), key=lambda i: len(prefixes[i]))
    return History(
        generated=tokens,
        seen=frozenset(prompt + tokens),
        counts=tuple(tokens.count(t) for t in range(vocab.size)),
        grammar_state=grammar_state,
        stop_state=stop_state,
        finish_reason=finish_reason,
        prompt=tuple(prompt),
    )


def finish_from_scratch(vocab, params, tokens: tuple[int, ...]) -> Optional[str]:
    """The finish reason after ``tokens``, replaying the finish rule from an empty matcher; tokens after a finishing
    one are invalid."""
    tables = stop_tables(vocab.strings, params.stop) if params.stop else None
    state, reason = np.array(0), None
    for i, token in enumerate(tokens):
        if reason is not None:
            raise InvalidArgument(
                f"committed_tokens={tokens!r} continue after the request finished ({reason!r} at "
                f"index {i - 1}). Pass the tokens up to and including the finishing one."
            )
        hit, state = stop_step(tables, state, np.array(token), i + 1, params)
        reason = finish_reason(token, bool(hit), i + 1, params, vocab.eos_token_id)
    return reason
