"""Checks shared by the quality tests: docs/design.md's protocol rules, greedy agreement, a pooled χ² of a law."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from specverify.oracles import exact_law, first_finish, greedy_outcome
from tests.helpers import pooled_pvalue


def protocol_violations(vocab, request, completion) -> list:
    """docs/design.md rule 1 for one completion (those rules a single completion can break), as messages."""
    tokens, reason, params = completion.tokens, completion.finish_reason, request.params
    problems = []
    if any(not (0 <= t < vocab.size) for t in tokens):
        problems.append("token outside the vocabulary")
    if len(tokens) > params.max_tokens:
        problems.append("more than max_tokens")
    finish = first_finish(vocab, tokens, params)
    if reason == "no_token":
        if finish is not None:
            problems.append(f"no_token after a finishing token at {finish[0]}")
    elif finish is None or finish != (len(tokens) - 1, reason):
        problems.append(f"finish {reason!r} at {len(tokens) - 1} but tokens finish at {finish}")
    if completion.stream is not None and sum(completion.stream, ()) != tokens:
        problems.append("stream does not concatenate to the tokens")
    return problems


def first_violation(decoder, vocab, requests):
    """The first (request, completion, problems) that breaks the protocol, or None."""
    for req, c in zip(requests, decoder(requests)):
        problems = protocol_violations(vocab, req, c)
        if problems:
            return req, c, problems
    return None


def greedy_mismatches(decoder, target, requests, leader_params=None) -> list:
    """Requests whose output differs from plain greedy decoding of the target. With ``leader_params``, each request is
    sent behind one of those parameters (seed 10**9 + i) in a single call, and only the second of each pair is
    compared (a mixed-parameter call, as ``law_check_behind``)."""
    from dataclasses import replace

    if leader_params is None:
        completions = decoder(list(requests))
    else:
        call = [x for i, r in enumerate(requests) for x in (replace(r, seed=10**9 + i, params=leader_params), r)]
        completions = decoder(call)[1::2]
    bad = []
    for req, c in zip(requests, completions):
        if (c.tokens, c.finish_reason) != _greedy(target, req.prompt, req.params):
            bad.append((req, c))
    return bad


@lru_cache(maxsize=None)
def _greedy(target, prompt, params):
    return greedy_outcome(target, prompt, params)


def law_check(decoder, target, request, n):
    """(p-value, df, count of outcomes of exact probability 0) of ``decoder.sample(request, n)``."""
    law = exact_law(target, request.prompt, request.params)
    return pooled_pvalue(decoder.sample(request, n).outcomes, law)


def prompts(count, *, seed=0, vocab_size=5):
    """``count`` random prompts of 1..5 non-EOS tokens."""
    rng = np.random.default_rng(seed)
    return [tuple(int(t) for t in rng.integers(0, vocab_size - 1, size=int(rng.integers(1, 6)))) for _ in range(count)]


def law_check_calls(decoder, target, request, n, per_call):
    """``law_check`` through ``decoder(requests)`` in calls of ``per_call`` seeded copies (seeds request.seed + i)."""
    from collections import Counter
    from dataclasses import replace

    law = exact_law(target, request.prompt, request.params)
    counts = Counter()
    for start in range(0, n, per_call):
        call = [replace(request, seed=request.seed + i) for i in range(start, min(n, start + per_call))]
        counts.update((c.tokens, c.finish_reason) for c in decoder(call))
    return pooled_pvalue(counts, law)


def law_check_behind(decoder, target, request, n, leader_params):
    """``law_check`` of ``request`` (seeds request.seed + i) through calls of two: a request with ``leader_params``
    first, then it. Only the second's outcomes are counted (a mixed-parameter call)."""
    from collections import Counter
    from dataclasses import replace

    law = exact_law(target, request.prompt, request.params)
    counts = Counter()
    per_call = 500
    for start in range(0, n, per_call):
        seeds = range(start, min(n, start + per_call))
        call = []
        for i in seeds:
            call += [replace(request, seed=10**9 + i, params=leader_params), replace(request, seed=request.seed + i)]
        counts.update((c.tokens, c.finish_reason) for c in decoder(call)[1::2])
    return pooled_pvalue(counts, law)
