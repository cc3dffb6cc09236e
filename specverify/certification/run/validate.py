"""Protocol checks on what a decoder returned (docs/design.md verdict rule 1): any failure makes the run invalid."""

from __future__ import annotations

import itertools
from operator import attrgetter

from specverify.errors import check
from specverify.oracles.law import first_finish
from specverify.protocol import FINISH_REASONS

__all__ = ["outcome_violation", "completion_violation", "completions_violation"]

_FIELDS = attrgetter("tokens", "finish_reason", "stream", "accepted")
_PARAMS = attrgetter("params")
_GAMMA = attrgetter("num_draft_tokens")


def outcome_violation(tokens, reason, vocab, params) -> str | None:
    """Why ``(tokens, reason)`` breaks the protocol for a request with ``params``, or None."""
    if not isinstance(tokens, tuple) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        return f"tokens={tokens!r} must be a tuple of ints"
    outside = [t for t in tokens if not 0 <= t < vocab.size]
    if outside:
        return f"tokens {outside[:3]!r} outside the vocabulary [0, {vocab.size}) in {tokens!r}"
    if reason not in FINISH_REASONS:
        return f"finish_reason={reason!r} is not one of {FINISH_REASONS!r}"
    if len(tokens) > params.max_tokens:
        return f"{len(tokens)} tokens > max_tokens={params.max_tokens} in {tokens!r}"
    finish = first_finish(vocab, tokens, params)
    if finish is not None and finish[0] < len(tokens) - 1:
        return f"tokens after the finishing token: {tokens!r} finished ({finish[1]}) at index {finish[0]} but goes on"
    expected = None if finish is None else finish[1]
    if reason == "no_token":
        if expected is not None:
            return f"finish_reason='no_token' but {tokens!r} had already finished ({expected})"
    elif reason != expected:
        return f"finish_reason={reason!r} does not match the tokens {tokens!r} (recomputed: {expected or 'unfinished'})"
    return None


def completion_violation(completion, request, vocab, *, known_ok=None) -> str | None:
    """Protocol check of one ``Completion`` (tokens, finish reason, stream, accepted) for ``request``.

    ``known_ok``: an optional set of what was already found valid, to skip re-checking: (tokens, finish_reason,
    params) outcomes and (tokens emitted, accepted, γ) shapes."""
    key = (completion.tokens, completion.finish_reason, request.params)
    if known_ok is None or key not in known_ok:
        problem = outcome_violation(completion.tokens, completion.finish_reason, vocab, request.params)
        if problem:
            return problem
        if known_ok is not None:
            known_ok.add(key)
    if completion.stream is not None:
        joined = tuple(itertools.chain.from_iterable(completion.stream))
        if joined != completion.tokens:
            return f"stream {completion.stream!r} does not concatenate to the tokens {completion.tokens!r}"
    accepted = completion.accepted
    if accepted is not None:
        if any(type(a) is bool for a in accepted):  # True == 1 to Python: caught before the shapes known valid
            return f"accepted={accepted!r} holds a bool: counts of accepted drafts are ints"
        shape = (len(completion.tokens), accepted, request.num_draft_tokens)
        try:
            if known_ok is not None and shape in known_ok:
                return None
        except TypeError:  # an unhashable entry: the checks below name it
            shape = None
        bad = [a for a in accepted if not isinstance(a, int) or not 0 <= a <= request.num_draft_tokens]
        if bad:
            return f"accepted={accepted!r} holds counts outside [0, γ={request.num_draft_tokens}]"
        if sum(accepted) > len(completion.tokens):
            return f"accepted={accepted!r} sums past the {len(completion.tokens)} tokens emitted"
        if known_ok is not None and shape is not None:
            known_ok.add(shape)
    return None


def completions_violation(completions, requests, vocab, *, known_ok=None) -> str | None:
    """The first protocol violation among ``completions`` (one per request, in order), or None.

    Every completion is checked: completions with equal fields for requests with the same ``params`` object and γ
    (all :func:`completion_violation` reads of a request) get the same answer, so each distinct one is checked
    once, in order of first appearance — the first one with a problem is the first completion with it."""
    check(
        len(completions) == len(requests),
        f"len(completions)={len(completions)!r} must equal len(requests)={len(requests)!r} (one per request).",
    )
    if len(completions) <= 2:  # a call of one or two requests: nothing worth the dedup's dict
        pairs = zip(completions, requests)
    else:
        # first one per (object, params, γ): cheap int keys, and a decoder that hands out one object for equal
        # completions (the reference) leaves few; then one per equal fields
        shapes = zip(map(id, completions), map(id, map(_PARAMS, requests)), map(_GAMMA, requests))
        objects = dict(zip(shapes, zip(completions, requests))).values()
        try:
            keys = ((_FIELDS(c), id(r.params), r.num_draft_tokens) for c, r in objects)
            pairs = dict(zip(keys, objects)).values()  # one per key, in first-appearance order
        except TypeError:  # an unhashable field: check completion by completion (the checks name it)
            pairs = objects
    for completion, request in pairs:
        problem = completion_violation(completion, request, vocab, known_ok=known_ok)
        if problem:
            return problem
    return None
